// An in-process stand-in for the node manager, for testing the rank-side BCS
// API (api.cc) without daemons: it creates the job segment exactly as bcs-nm
// does (memfd, header, RankControl), hands it to bcs_init through the same
// environment, and plays the NM's part on the rings: drain, match, copy,
// complete, wake. Rank and "NM" share one address space, so the DMA helper's
// process_vm_readv/writev becomes memcpy.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "bcs/segment.h"

namespace bcs::apitest {

// RAII memfd segment with the header and rank controls filled as the NM does.
class FakeSegment {
 public:
  FakeSegment(uint32_t world_size, uint32_t nlocal, uint32_t ring_slots, uint32_t request_slots)
      : layout_{nlocal, ring_slots, request_slots}, bytes_(layout_.total_bytes()) {
    fd_ = memfd_create("bcs-api-test", MFD_CLOEXEC);
    if (fd_ < 0) throw std::runtime_error("memfd_create");
    if (ftruncate(fd_, static_cast<off_t>(bytes_)) != 0) throw std::runtime_error("ftruncate");
    base_ = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
    if (base_ == MAP_FAILED) throw std::runtime_error("mmap");
    auto* h = header();
    h->magic = kSegmentMagic;
    h->version = kSegmentVersion;
    h->job_id = 42;
    h->world_size = world_size;
    h->nlocal = nlocal;
    h->ring_slots = ring_slots;
    h->request_slots = request_slots;
    h->rank_area_bytes = layout_.rank_area_bytes();
    h->slice_ns = 500'000;
    h->total_bytes = bytes_;
    for (uint32_t i = 0; i < nlocal; ++i) view(i).ctl->world_rank = static_cast<int32_t>(i);
  }
  ~FakeSegment() {
    munmap(base_, bytes_);
    close(fd_);
  }
  FakeSegment(const FakeSegment&) = delete;
  FakeSegment& operator=(const FakeSegment&) = delete;

  SegmentHeader* header() { return static_cast<SegmentHeader*>(base_); }
  RankView view(uint32_t i) { return segment_rank_view(base_, i); }

  // The environment bcs-nm gives a rank. bcs_init closes the fd it is
  // given, so the rank gets a dup (as a forked child gets its own copy).
  void export_env(uint32_t local_index, int32_t world_rank) {
    const int dup_fd = dup(fd_);
    if (dup_fd < 0) throw std::runtime_error("dup");
    setenv("BCS_SEGMENT_FD", std::to_string(dup_fd).c_str(), 1);
    setenv("BCS_LOCAL_INDEX", std::to_string(local_index).c_str(), 1);
    setenv("BCS_RANK", std::to_string(world_rank).c_str(), 1);
    setenv("BCS_SIZE", std::to_string(header()->world_size).c_str(), 1);
    setenv("BCS_JOB", "42", 1);
  }

 private:
  SegmentLayout layout_;
  size_t bytes_;
  int fd_ = -1;
  void* base_ = nullptr;
};

inline void clear_env() {
  for (const char* v : {"BCS_SEGMENT_FD", "BCS_LOCAL_INDEX", "BCS_RANK", "BCS_SIZE", "BCS_JOB",
                        "BCS_MAX_REQUESTS"})
    unsetenv(v);
}

// The NM's side for one local rank that is rank `me` of the world. step() is
// one "slice": drain the ring, then match (sends first, as the MSM matches
// the slice's sends before answering its probes), copy, complete and wake.
// It can run from the test thread (deterministic) or from a strobe thread.
class FakeNm {
 public:
  FakeNm(RankView v, int32_t me) : v_(v), me_(me) {}
  ~FakeNm() { stop(); }
  FakeNm(const FakeNm&) = delete;
  FakeNm& operator=(const FakeNm&) = delete;

  // Every descriptor drained so far, in ring order.
  std::vector<Descriptor> seen() {
    std::lock_guard lk(mu_);
    return seen_;
  }

  size_t step() {
    std::lock_guard lk(mu_);
    std::vector<Descriptor> batch;
    const size_t n = ring_drain(v_, [&](const Descriptor& d, const RingSpan& span) {
      batch.push_back(d);
      if (span.data) spans_[d.seq].assign(span.data, span.data + span.len);
    });
    seen_.insert(seen_.end(), batch.begin(), batch.end());
    for (const auto& d : batch)
      if (d.kind == DescKind::send) unexpected_.push_back(d);
    for (const auto& d : batch) {
      switch (d.kind) {
        case DescKind::recv: posted_.push_back(d); break;
        case DescKind::probe: probes_.push_back(d); break;
        case DescKind::iprobe: answer_iprobe(d); break;
        case DescKind::coll:  // every other member is already there (barriers only)
          if (!(d.flags & kDescNoComplete))
            request_complete(v_, d.request, bcs_err_none, me_, 0, 0);
          break;
        default: break;
      }
    }
    match();
    rank_wake(v_);  // ring space was freed
    return n;
  }

  // Runs step() every `period` on a thread, but only while gate() holds
  // (e.g. "the rank is asleep"), like the strobe of a real NM.
  void start(std::function<bool()> gate = [] { return true; },
             std::chrono::microseconds period = std::chrono::microseconds(200)) {
    stop_ = false;
    thread_ = std::thread([this, gate, period] {
      std::unique_lock lk(stop_mu_);
      while (!stop_) {
        lk.unlock();
        if (gate()) step();
        lk.lock();
        stop_cv_.wait_for(lk, period, [this] { return stop_; });
      }
    });
  }

  void stop() {
    {
      std::lock_guard lk(stop_mu_);
      stop_ = true;
    }
    stop_cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

 private:
  // Every send comes from this same rank (`me_`): the test posts to itself.
  bool accepts(const Descriptor& r, const Descriptor& s) const {
    return r.context == s.context && (r.peer == kAnySource || r.peer == me_) &&
           (r.tag == kAnyTag || r.tag == s.tag);
  }

  void answer_iprobe(const Descriptor& p) {
    for (const auto& s : unexpected_)
      if (accepts(p, s)) {
        request_complete(v_, p.request, bcs_err_none, me_, s.tag, s.len, 1);
        return;
      }
    request_complete(v_, p.request, bcs_err_none, 0, 0, 0, 0);
  }

  void match() {
    for (auto p = probes_.begin(); p != probes_.end();) {
      auto s = std::find_if(unexpected_.begin(), unexpected_.end(),
                            [&](const Descriptor& x) { return accepts(*p, x); });
      if (s == unexpected_.end()) {
        ++p;
        continue;
      }
      request_complete(v_, p->request, bcs_err_none, me_, s->tag, s->len, 1);
      p = probes_.erase(p);
    }
    for (auto r = posted_.begin(); r != posted_.end();) {
      auto s = std::find_if(unexpected_.begin(), unexpected_.end(),
                            [&](const Descriptor& x) { return accepts(*r, x); });
      if (s == unexpected_.end()) {
        ++r;
        continue;
      }
      const uint64_t bytes = std::min(s->len, r->len);
      const auto span = spans_.find(s->seq);
      const void* src = span != spans_.end()        ? static_cast<const void*>(span->second.data())
                        : (s->flags & kDescInline) ? static_cast<const void*>(s->payload)
                                                   : reinterpret_cast<const void*>(s->addr);
      if (bytes) std::memcpy(reinterpret_cast<void*>(r->addr), src, bytes);
      const int32_t err = s->len > r->len ? bcs_err_truncate : bcs_err_none;
      if (!(s->flags & kDescInline)) request_complete(v_, s->request, bcs_err_none, me_, s->tag, bytes);
      request_complete(v_, r->request, err, me_, s->tag, bytes);
      if (span != spans_.end()) spans_.erase(span);
      unexpected_.erase(s);
      r = posted_.erase(r);
    }
  }

  RankView v_;
  int32_t me_;
  std::map<uint64_t, std::vector<uint8_t>> spans_;  // eager sends' bytes, by post number
  std::mutex mu_;
  std::vector<Descriptor> seen_;
  std::deque<Descriptor> unexpected_, posted_, probes_;

  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace bcs::apitest
