#include "bcs/emds.h"

#include <algorithm>

namespace bcs::monitor {

void EmdsRecorder::record(const SliceRecord& r) {
  {
    std::lock_guard lk(mu_);
    ring_.push_back(r);
    if (ring_.size() > cap_) ring_.pop_front();
    ++total_;
  }
  // Followers copy what they need under the lock and send outside it: the
  // strobe sender never waits for a client.
  grown_.notify_all();
}

bool EmdsRecorder::range(uint64_t first, uint64_t last, std::vector<SliceRecord>* out,
                         std::pair<uint64_t, uint64_t>* kept) const {
  std::lock_guard lk(mu_);
  *kept = ring_.empty() ? std::pair<uint64_t, uint64_t>{0, 0}
                        : std::pair<uint64_t, uint64_t>{ring_.front().slice, ring_.back().slice};
  if (ring_.empty() || first < kept->first || last > kept->second) return false;
  for (const auto& r : ring_)
    if (r.slice >= first && r.slice <= last) out->push_back(r);
  return true;
}

uint64_t EmdsRecorder::wait_after(uint64_t seq, std::chrono::milliseconds timeout,
                                  std::vector<SliceRecord>* out, uint64_t* missed) const {
  std::unique_lock lk(mu_);
  grown_.wait_for(lk, timeout, [&] { return total_ > seq; });
  *missed = 0;
  if (total_ <= seq) return seq;
  // ring_ holds records total_-size+1 .. total_.
  const uint64_t oldest = total_ - ring_.size() + 1;
  if (seq + 1 < oldest) {
    *missed = oldest - (seq + 1);
    seq = oldest - 1;
  }
  for (auto it = ring_.begin() + static_cast<std::ptrdiff_t>(seq + 1 - oldest); it != ring_.end(); ++it)
    out->push_back(*it);
  return total_;
}

void EmdsRecorder::wake_all() const { grown_.notify_all(); }

std::vector<SliceRecord> EmdsRecorder::last(size_t n) const {
  std::lock_guard lk(mu_);
  n = std::min(n, ring_.size());
  return {ring_.end() - static_cast<std::ptrdiff_t>(n), ring_.end()};
}

uint64_t EmdsRecorder::total() const {
  std::lock_guard lk(mu_);
  return total_;
}

PeriodSummary EmdsRecorder::periods() const {
  std::vector<uint64_t> p;
  {
    std::lock_guard lk(mu_);
    // The strobe's own precision: slices started by the period, not early
    // or after a park.
    for (const auto& r : ring_)
      if (r.period_ns && !r.early && !r.skipped) p.push_back(r.period_ns);
  }
  return summarize_periods(std::move(p));
}

PeriodSummary summarize_periods(std::vector<uint64_t> p) {
  PeriodSummary s;
  if (p.empty()) return s;
  std::sort(p.begin(), p.end());
  auto at = [&](double q) {
    return p[std::min(p.size() - 1,
                      static_cast<size_t>(q * static_cast<double>(p.size() - 1) + 0.5))];
  };
  s.count = p.size();
  s.p50_ns = at(0.50);
  s.p99_ns = at(0.99);
  s.max_ns = p.back();
  return s;
}

}  // namespace bcs::monitor
