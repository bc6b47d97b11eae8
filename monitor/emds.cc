#include "bcs/emds.h"

#include <algorithm>

namespace bcs::monitor {

void EmdsRecorder::record(const SliceRecord& r) {
  {
    std::lock_guard lk(mu_);
    ring_.push_back(r);
    if (ring_.size() > cap_) ring_.pop_front();
    ++total_;
    // The job's own window: another job's slices never push these out.
    auto [it, fresh] = jobs_.try_emplace(r.job);
    JobWindow& w = it->second;
    if (fresh) {
      w.lru = lru_.insert(lru_.end(), r.job);
    } else if (std::next(w.lru) != lru_.end()) {
      lru_.splice(lru_.end(), lru_, w.lru);  // the most recently recorded now
    }
    w.ring.push_back(r);
    ++w.total;
    ++job_records_;
    if (w.ring.size() > cap_) {
      w.ring.pop_front();
      --job_records_;
    }
    if (fresh || job_records_ > job_records_cap_) bound_jobs_locked();
  }
  // Followers copy what they need under the lock and send outside it: the
  // strobe sender never waits for a client.
  grown_.notify_all();
}

void EmdsRecorder::bound_jobs_locked() {
  while ((jobs_.size() > kept_jobs_ || job_records_ > job_records_cap_) && lru_.size() > 1) {
    auto it = jobs_.find(lru_.front());
    job_records_ -= it->second.ring.size();
    jobs_.erase(it);
    lru_.pop_front();
  }
}

namespace {

// Records numbered first..last of `ring`, which need not be sorted by
// slice: kept is its lowest and highest number.
bool range_in(const std::deque<SliceRecord>& ring, uint64_t first, uint64_t last,
              std::vector<SliceRecord>* out, std::pair<uint64_t, uint64_t>* kept) {
  *kept = {0, 0};
  if (ring.empty()) return false;
  *kept = {UINT64_MAX, 0};
  for (const auto& r : ring) {
    kept->first = std::min(kept->first, r.slice);
    kept->second = std::max(kept->second, r.slice);
  }
  if (first < kept->first || last > kept->second) return false;
  for (const auto& r : ring)
    if (r.slice >= first && r.slice <= last) out->push_back(r);
  return true;
}

std::vector<SliceRecord> last_in(const std::deque<SliceRecord>& ring, size_t n) {
  n = std::min(n, ring.size());
  return {ring.end() - static_cast<std::ptrdiff_t>(n), ring.end()};
}

// The strobe's own precision: slices started by the period, not early or
// after a park.
PeriodSummary periods_in(const std::deque<SliceRecord>& ring) {
  std::vector<uint64_t> p;
  for (const auto& r : ring)
    if (r.period_ns && !r.early && !r.skipped) p.push_back(r.period_ns);
  return summarize_periods(std::move(p));
}

}  // namespace

bool EmdsRecorder::range(uint64_t first, uint64_t last, std::vector<SliceRecord>* out,
                         std::pair<uint64_t, uint64_t>* kept) const {
  std::lock_guard lk(mu_);
  return range_in(ring_, first, last, out, kept);
}

bool EmdsRecorder::range_of(uint64_t job, uint64_t first, uint64_t last, std::vector<SliceRecord>* out,
                            std::pair<uint64_t, uint64_t>* kept) const {
  std::lock_guard lk(mu_);
  auto it = jobs_.find(job);
  if (it == jobs_.end()) {
    *kept = {0, 0};
    return false;
  }
  return range_in(it->second.ring, first, last, out, kept);
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
  return last_in(ring_, n);
}

std::vector<SliceRecord> EmdsRecorder::last_of(uint64_t job, size_t n) const {
  std::lock_guard lk(mu_);
  auto it = jobs_.find(job);
  if (it == jobs_.end()) return {};
  return last_in(it->second.ring, n);
}

uint64_t EmdsRecorder::total() const {
  std::lock_guard lk(mu_);
  return total_;
}

uint64_t EmdsRecorder::total_of(uint64_t job) const {
  std::lock_guard lk(mu_);
  auto it = jobs_.find(job);
  return it == jobs_.end() ? 0 : it->second.total;
}

PeriodSummary EmdsRecorder::periods(uint64_t job) const {
  std::lock_guard lk(mu_);
  auto it = jobs_.find(job);
  return it == jobs_.end() ? PeriodSummary{} : periods_in(it->second.ring);
}

std::map<uint64_t, PeriodSummary> EmdsRecorder::periods_by_job() const {
  std::lock_guard lk(mu_);
  std::map<uint64_t, PeriodSummary> out;
  for (const auto& [job, w] : jobs_)
    if (PeriodSummary s = periods_in(w.ring); s.count) out[job] = s;
  return out;
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

void LocalRecorder::note(uint64_t slice, int phase, uint64_t at_ns, uint64_t ns,
                         const LocalSliceRecord& a) {
  {
    std::lock_guard lk(mu_);
    ++noted_;
    if (have_cur_ && (cur_.slice != slice || cur_.job != a.job)) {
      done_.push_back(cur_);
      if (done_.size() > cap_) done_.pop_front();
      have_cur_ = false;
    }
    if (!have_cur_) {
      cur_ = LocalSliceRecord{};
      cur_.slice = slice;
      cur_.job = a.job;
      cur_.start_ns = at_ns;
      have_cur_ = true;
    }
    if (phase >= 0 && phase < 5) {
      // A microphase run twice in one slice (a DEM ahead and its own) keeps
      // its first start.
      if (!cur_.phase_ns[phase] && at_ns >= cur_.start_ns) cur_.phase_at_ns[phase] = at_ns - cur_.start_ns;
      cur_.phase_ns[phase] += ns;
    }
    cur_.descriptors += a.descriptors;
    cur_.coll_descriptors += a.coll_descriptors;
    cur_.matches += a.matches;
    cur_.chunks += a.chunks;
    cur_.bytes += a.bytes;
    cur_.sender_bytes += a.sender_bytes;
    cur_.second_thread_bytes += a.second_thread_bytes;
    cur_.collectives += a.collectives;
    cur_.blocked = a.blocked;  // the last microphase's view wins
    cur_.nlocal = a.nlocal;
    // Wake the flusher only when it sleeps for want of data: a wake-up per
    // microphase would cost the ranks' cores a context switch each.
    if (!flusher_idle_) return;
    flusher_idle_ = false;
  }
  cv_.notify_one();
}

std::vector<LocalSliceRecord> LocalRecorder::take(std::chrono::milliseconds batch) {
  std::unique_lock lk(mu_);
  // Untimed: an idle node (no slices) never wakes this thread.
  flusher_idle_ = true;
  cv_.wait(lk, [&] { return stop_ || !done_.empty() || have_cur_; });
  flusher_idle_ = false;
  if (stop_) return {};
  const uint64_t seen = noted_;
  cv_.wait_for(lk, batch, [&] { return stop_; });
  return drain_locked(noted_ == seen);  // nothing noted for a while: the slice is over
}

std::vector<LocalSliceRecord> LocalRecorder::take_now() {
  std::lock_guard lk(mu_);
  return drain_locked(true);
}

std::vector<LocalSliceRecord> LocalRecorder::drain_locked(bool close_current) {
  if (close_current && have_cur_) {
    done_.push_back(cur_);
    if (done_.size() > cap_) done_.pop_front();
    have_cur_ = false;
  }
  std::vector<LocalSliceRecord> out(done_.begin(), done_.end());
  done_.clear();
  return out;
}

void LocalRecorder::stop() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
}

bool LocalRecorder::stopped() const {
  std::lock_guard lk(mu_);
  return stop_;
}

void NodeSeries::record(const std::string& node, const std::vector<LocalSliceRecord>& recs) {
  std::lock_guard lk(mu_);
  auto& q = nodes_[node];
  for (const auto& r : recs) {
    // Batches may arrive out of order (a job's end sends its last slices
    // ahead of a batch being sent): keep the window sorted, once each. By
    // (slice, job): jobs gang-scheduled on one node number their slices
    // each on its own, so one number may be two jobs' slices.
    auto key = [](const LocalSliceRecord& x) { return std::pair{x.slice, x.job}; };
    if (q.empty() || key(r) > key(q.back())) {
      q.push_back(r);
    } else {
      auto at = std::lower_bound(q.begin(), q.end(), key(r),
                                 [&](const LocalSliceRecord& a, const std::pair<uint64_t, uint64_t>& k) {
                                   return key(a) < k;
                                 });
      if (at != q.end() && key(*at) == key(r)) continue;
      q.insert(at, r);
    }
    if (q.size() > cap_) q.pop_front();
  }
}

bool NodeSeries::known(const std::string& node) const {
  std::lock_guard lk(mu_);
  return nodes_.count(node) != 0;
}

std::vector<LocalSliceRecord> NodeSeries::last(const std::string& node, size_t n) const {
  std::lock_guard lk(mu_);
  auto it = nodes_.find(node);
  if (it == nodes_.end()) return {};
  n = std::min(n, it->second.size());
  return {it->second.end() - static_cast<std::ptrdiff_t>(n), it->second.end()};
}

bool NodeSeries::range(const std::string& node, uint64_t first, uint64_t last,
                       std::vector<LocalSliceRecord>* out, std::pair<uint64_t, uint64_t>* kept) const {
  std::lock_guard lk(mu_);
  auto it = nodes_.find(node);
  *kept = {0, 0};
  if (it == nodes_.end() || it->second.empty()) return false;
  *kept = {it->second.front().slice, it->second.back().slice};
  if (first < kept->first || last > kept->second) return false;
  for (const auto& r : it->second)
    if (r.slice >= first && r.slice <= last) out->push_back(r);
  return true;
}

}  // namespace bcs::monitor
