#include "bcs/emds.h"

#include <algorithm>

namespace bcs::monitor {

void EmdsRecorder::record(const SliceRecord& r) {
  std::lock_guard lk(mu_);
  ring_.push_back(r);
  if (ring_.size() > cap_) ring_.pop_front();
  ++total_;
}

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
