// Single copy: the DMA helper's copy orders to a job's ranks (segment.h,
// DmaOrder). The node manager posts an order into a rank's slot, the rank
// reads the sender's memory into its own buffer with its own rights, and
// the strobe receiver settles the order: waits for it, takes it back if the
// rank did not take it, or ends a rank that took one and never finished.
#include "job.h"

#include <pthread.h>
#include <sched.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <string>

#include "roles/ports.h"

namespace bcs::nm {

namespace {
// The calling thread keeps off one CPU while it lives (unless that is the
// only one it may use).
class AwayFromCpu {
 public:
  explicit AwayFromCpu(int cpu) {
    if (pthread_getaffinity_np(pthread_self(), sizeof old_, &old_) != 0) return;
    cpu_set_t m = old_;
    CPU_CLR(cpu, &m);
    if (CPU_COUNT(&m) == 0) return;
    set_ = pthread_setaffinity_np(pthread_self(), sizeof m, &m) == 0;
  }
  ~AwayFromCpu() {
    if (set_) pthread_setaffinity_np(pthread_self(), sizeof old_, &old_);
  }
  AwayFromCpu(const AwayFromCpu&) = delete;
  AwayFromCpu& operator=(const AwayFromCpu&) = delete;

 private:
  cpu_set_t old_{};
  bool set_ = false;
};

// How long a posted copy order may wait for its rank to take it before the
// DMA helper takes it back and copies itself: a rank woken from its futex
// runs within microseconds unless the machine is oversubscribed.
constexpr auto kDmaTakeBack = std::chrono::milliseconds(2);
// A rank that took an order and did not finish it within this (plus the
// time the copy needs at a very low rate) is ended: the node's microphase
// waits for it.
constexpr auto kDmaCopyLimit = std::chrono::seconds(5);
constexpr uint64_t kDmaSlowestRate = 50u << 20;  // bytes per second
// Orders from this size on are shared with a sleeping local sender: below
// it, waking the sender (20-50 us here) costs about what its half saves
// (prog_pingpong, alternating runs: 1 MiB 189-260 us shared against
// 184-226 us not, 2 MiB 288-318 against 315-338, 4 MiB 434-507 against
// 513-580).
constexpr uint64_t kDmaShareMin = uint64_t{2} << 20;
// Orders from this size on may be split over the receiving rank's second
// thread (DmaOrder::split), whose wake-up costs what the sender's does
// (two node managers, prog_pingpong, three alternating runs: 512 KiB
// 476-519 us split against 318-420 not; at 1-2 MiB the runs overlap; 4 MiB
// 654-822 against 763-840).
constexpr uint64_t kDmaSplitMin = kDmaShareMin;
}  // namespace

uint32_t NmJob::pid_of(int32_t r) {
  if (!is_local(r)) return 0;
  std::lock_guard lk(copy_mu_);
  return static_cast<uint32_t>(copy_pid(local(r)));
}

int32_t NmJob::copy_by_receiver(int32_t from, int32_t to, uint64_t src, uint64_t dst,
                                size_t len) {
  if (!single_copy_ || !is_local(to)) return LocalRanks::kNotDelegated;
  const uint32_t spid = pid_of(from);  // 0 (gone): the old path says what failed
  if (!spid) return LocalRanks::kNotDelegated;
  return copy_from_process(spid, to, src, dst, len);
}

uint32_t NmJob::offer_pid(int32_t from, uint32_t node) {
  if (!single_copy_ || !host_peer(node)) return 0;
  return pid_of(from);
}

int32_t NmJob::copy_from_process(uint32_t spid, int32_t to, uint64_t src, uint64_t dst,
                                 size_t len) {
  // A pending order: await_copy would settle that one.
  if (!is_local(to) || orders_pending(local(to))) return LocalRanks::kNotDelegated;
  if (!post_copy(spid, to, src, dst, len, CopyHelp::split)) return LocalRanks::kNotDelegated;
  return await_copy(to);
}

bool NmJob::post_copy(uint32_t spid, int32_t to, uint64_t src, uint64_t dst, size_t len,
                      CopyHelp help) {
  if (!single_copy_ || !is_local(to) || spid == 0 || spid > kPidMaxLimit) return false;
  LocalRank& r = local(to);
  size_t slot = 0;
  while (slot < kDmaSlots && r.dma[slot].pending) ++slot;
  if (slot == kDmaSlots) return false;  // every slot pending; await_copy settles them
  const bool any_pending = orders_pending(r);
  LocalRank* sharer = nullptr;
  uint32_t rpid = 0;
  {
    std::lock_guard lk(copy_mu_);
    if (r.dead) return false;
    if (help == CopyHelp::share && share_copies_ && len >= kDmaShareMin &&
        (sharer = sharer_for(spid, r)) != nullptr) {
      const pid_t p = copy_pid(r);
      if (p > 0 && static_cast<uint64_t>(p) <= kPidMaxLimit)
        rpid = static_cast<uint32_t>(p);
      else
        sharer = nullptr;
    }
  }
  RankView v = view(r);
  // Only a rank asleep in MPI is asked: one computing would not look soon.
  // A rank with an earlier order pending looks at its slots again when it
  // has taken that one (its `waiting` may have been cleared by the wake-up
  // for it).
  if (!any_pending && !v.ctl->waiting.load(std::memory_order_seq_cst)) return false;
  if (!sharer) {
    post_order(r, slot, spid, src, dst, len, false,
               help != CopyHelp::none && split_copies_ && len >= kDmaSplitMin);
    return true;
  }
  // The receiver reads the first half, the sender writes the rest: both
  // start at once (the sender sleeps in MPI too), so the halves are even.
  const uint64_t half = (len / 2) & ~uint64_t{4095};
  size_t hs = 0;
  while (hs < kDmaSlots && sharer->dma[hs].pending) ++hs;
  post_order(*sharer, hs, rpid, src + half, dst + half, len - half, true, false);
  post_order(r, slot, spid, src, dst, half, false, false);
  r.dma[slot].sharer = sharer->world_rank;
  r.dma[slot].sharer_slot = hs;
  return true;
}

LocalRank* NmJob::sharer_for(uint32_t spid, const LocalRank& to) {
  for (auto& h : ranks_) {
    if (h.get() == &to || h->dead) continue;
    const pid_t p = copy_pid(*h);
    if (p <= 0 || static_cast<uint32_t>(p) != spid) continue;
    bool free = false, shares = false;
    for (const auto& u : h->dma) {
      if (!u.pending)
        free = true;
      else if (u.share)
        shares = true;
      else
        return nullptr;  // it copies for its own receive: leave it to that
    }
    if (!free) return nullptr;
    // As for the receiver: asleep in MPI, or it looks at its slots again
    // after the share it has.
    if (!shares && !view(*h).ctl->waiting.load(std::memory_order_seq_cst)) return nullptr;
    return h.get();
  }
  return nullptr;
}

void NmJob::post_order(LocalRank& r, size_t slot, uint32_t pid, uint64_t src, uint64_t dst,
                       uint64_t len, bool write, bool split) {
  const bool any_pending = orders_pending(r);
  RankView v = view(r);
  DmaOrder& o = v.ctl->dma[slot];
  o.pid = pid;
  o.src = src;
  o.dst = dst;
  o.len = len;
  o.write = write ? 1 : 0;
  o.split = split ? 1 : 0;
  o.second = 0;
  o.seq = ++r.dma_seq;
  o.error = 0;
  o.nm_waiting.store(0, std::memory_order_relaxed);
  // seq_cst store, then load: a rank that has an earlier order to take or
  // is copying one looks at the slots again after it (rank.cc,
  // take_dma_orders), so either it finds this one or we see that it is
  // done and wake it. A rank busy copying is not woken: it would leave
  // MPI's wait for nothing.
  o.state.store(kDmaPosted, std::memory_order_seq_cst);
  bool copying = false;
  if (any_pending)
    for (size_t i = 0; i < kDmaSlots; ++i) {
      if (i == slot || !r.dma[i].pending) continue;
      const uint32_t st = v.ctl->dma[i].state.load(std::memory_order_seq_cst);
      copying |= st == kDmaTaken || st == kDmaPosted;
    }
  auto& u = r.dma[slot];
  u.pending = true;
  u.seq = r.dma_seq;
  u.posted = std::chrono::steady_clock::now();
  u.len = len;
  u.share = write;
  u.split = split;
  u.sharer = -1;
  if (!copying) rank_wake(v);
}

int32_t NmJob::await_copy(int32_t to) {
  if (!is_local(to)) return LocalRanks::kNotDelegated;
  LocalRank& r = local(to);
  size_t slot = kDmaSlots;
  for (size_t i = 0; i < kDmaSlots; ++i)
    if (r.dma[i].pending && !r.dma[i].share &&
        (slot == kDmaSlots || r.dma[i].seq < r.dma[slot].seq))
      slot = i;
  if (slot == kDmaSlots) return LocalRanks::kNotDelegated;
  // The sender's share first: it started last (woken with the order), so
  // by the time it is done the receiver's half usually is too, and this
  // thread sleeps once.
  int32_t shared = 0;
  uint64_t shared_len = 0;
  if (const int32_t h = std::exchange(r.dma[slot].sharer, -1); h >= 0 && is_local(h)) {
    LocalRank& s = local(h);
    shared_len = s.dma[r.dma[slot].sharer_slot].len;
    shared = settle(s, r.dma[slot].sharer_slot);
  }
  const int32_t own = settle(r, slot);
  // Either half taken back (or refused): the whole order is the caller's.
  if (own == LocalRanks::kNotDelegated || shared == LocalRanks::kNotDelegated)
    return LocalRanks::kNotDelegated;
  if (own) return own;
  if (!shared) shared_bytes_ += shared_len;
  return shared;
}

int32_t NmJob::settle(LocalRank& r, size_t slot) {
  auto& u = r.dma[slot];
  if (!u.pending) return LocalRanks::kNotDelegated;
  u.pending = false;
  u.share = false;
  const bool split = std::exchange(u.split, false);
  const int32_t to = r.world_rank;
  RankView v = view(r);
  DmaOrder& o = v.ctl->dma[slot];
  using clock = std::chrono::steady_clock;
  const auto posted = u.posted;
  auto taken = clock::time_point{};
  const auto limit = kDmaCopyLimit + std::chrono::milliseconds(1000 * u.len / kDmaSlowestRate);
  std::optional<AwayFromCpu> away;
  // The rank takes the next pending order once this one is done: the
  // take-back clock of that one starts then.
  auto settled = [&] {
    for (auto& w : r.dma)
      if (w.pending) w.posted = std::max(w.posted, clock::now());
  };
  for (;;) {
    const uint32_t st = o.state.load(std::memory_order_seq_cst);
    const auto now = clock::now();
    if (st == kDmaDone) {
      o.nm_waiting.store(0, std::memory_order_relaxed);
      int32_t e = o.error;
      const uint64_t second = o.second;
      o.state.store(kDmaIdle, std::memory_order_relaxed);
      settled();
      if (e == kDmaNotPermitted) {
        spdlog::info("job {}: ranks may not read each other's memory (Yama ptrace scope?): the "
                     "DMA helper copies through itself from now on",
                     id());
        single_copy_ = false;
        return LocalRanks::kNotDelegated;
      }
      if (e != 0 && e != bcs_err_peer_gone && e != bcs_err_bad_address) e = bcs_err_internal;
      // What the rank's second thread copied: only counted, but checked.
      if (second > u.len || (second && !split)) {
        end_corrupt(to, "said its second thread copied " + std::to_string(second) + " of " +
                            std::to_string(u.len) + " bytes");
        return bcs_err_internal;
      }
      if (!e) second_bytes_ += second;
      return e;
    }
    if (st == kDmaPosted) {
      if (now - posted > kDmaTakeBack) {
        uint32_t expected = kDmaPosted;
        if (o.state.compare_exchange_strong(expected, kDmaIdle, std::memory_order_acq_rel)) {
          o.nm_waiting.store(0, std::memory_order_relaxed);
          settled();
          return LocalRanks::kNotDelegated;
        }
        continue;  // taken just now
      }
    } else if (st == kDmaTaken) {
      if (taken == clock::time_point{}) taken = now;
      if (now - taken > limit) {
        end_corrupt(to, "took a copy order and did not finish it");
        return bcs_err_peer_gone;
      }
    } else {
      end_corrupt(to, "wrote copy order state " + std::to_string(st));
      return bcs_err_internal;
    }
    {
      std::lock_guard lk(copy_mu_);
      if (r.dead) return bcs_err_peer_gone;  // a party to the copy is gone
    }
    // Asleep on the order: the rank wakes us when it is done (seq_cst:
    // pairs with its store of kDmaDone and load of nm_waiting).
    // Off the rank's CPU meanwhile: woken by the rank, this thread would
    // otherwise be placed on the rank's CPU (a halted vCPU looks preempted
    // to the scheduler, so the idle one is passed over) and, with its short
    // slice, stop the rank copying the next piece, for up to 270 us in a
    // trace of prog_pingpong 16M.
    if (!away && r.cpu >= 0) away.emplace(r.cpu);
    o.nm_waiting.store(1, std::memory_order_seq_cst);
    if (o.state.load(std::memory_order_seq_cst) != st) continue;
    futex_wait(&o.state, st, 1'000'000);
  }
}

}  // namespace bcs::nm
