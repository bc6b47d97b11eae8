#include "matrix.h"

#include <algorithm>

namespace bcs::mm {

std::optional<uint32_t> Matrix::place(uint64_t job, const std::vector<uint32_t>& nodes,
                                      const std::set<uint32_t>& reserved) {
  if (row_of(job)) return row_of(job);
  for (uint32_t k = 0; k < rows(); ++k) {
    const uint32_t r = (active_ + k) % rows();
    Row& row = rows_[r];
    const bool free = std::none_of(nodes.begin(), nodes.end(), [&](uint32_t n) {
      return row.held.count(n) || reserved.count(n);
    });
    if (!free) continue;
    row.jobs[job] = nodes;
    for (uint32_t n : nodes) row.held[n] = job;
    return r;
  }
  return std::nullopt;
}

bool Matrix::remove(uint64_t job) {
  for (Row& row : rows_) {
    auto it = row.jobs.find(job);
    if (it == row.jobs.end()) continue;
    for (uint32_t n : it->second) row.held.erase(n);
    row.jobs.erase(it);
    return true;
  }
  return false;
}

std::optional<uint32_t> Matrix::row_of(uint64_t job) const {
  for (uint32_t r = 0; r < rows(); ++r)
    if (rows_[r].jobs.count(job)) return r;
  return std::nullopt;
}

bool Matrix::rotate() {
  for (uint32_t k = 1; k <= rows(); ++k) {
    const uint32_t r = (active_ + k) % rows();
    if (rows_[r].jobs.empty()) continue;
    const bool changed = r != active_;
    active_ = r;
    return changed;
  }
  return false;  // no job anywhere
}

std::vector<uint64_t> Matrix::runnable() const {
  std::vector<uint64_t> out;
  std::set<uint32_t> used;
  for (uint32_t k = 0; k < rows(); ++k) {
    const Row& row = rows_[(active_ + k) % rows()];
    for (const auto& [job, nodes] : row.jobs) {
      // The active row's jobs are disjoint by construction; another row's
      // job runs only on nodes nobody chosen before uses.
      if (std::any_of(nodes.begin(), nodes.end(), [&](uint32_t n) { return used.count(n); }))
        continue;
      out.push_back(job);
      used.insert(nodes.begin(), nodes.end());
    }
  }
  return out;
}

uint64_t Matrix::at(uint32_t row, uint32_t node) const {
  const auto& h = rows_.at(row).held;
  const auto it = h.find(node);
  return it == h.end() ? 0 : it->second;
}

bool Matrix::empty() const {
  return std::all_of(rows_.begin(), rows_.end(), [](const Row& r) { return r.jobs.empty(); });
}

}  // namespace bcs::mm
