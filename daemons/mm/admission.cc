#include "admission.h"

#include <algorithm>

namespace bcs::mm {

std::vector<uint64_t> admit(const std::vector<QueuedJob>& queue, std::set<uint32_t> held,
                            size_t running, bool space_share) {
  std::vector<uint64_t> start;
  std::set<uint32_t> wanted;
  for (const auto& q : queue) {
    if (!space_share && running + start.size() > 0) break;
    const bool free = std::none_of(q.nodes.begin(), q.nodes.end(), [&](uint32_t n) {
      return held.count(n) || wanted.count(n);
    });
    if (!free) {
      wanted.insert(q.nodes.begin(), q.nodes.end());
      continue;
    }
    start.push_back(q.id);
    held.insert(q.nodes.begin(), q.nodes.end());
  }
  return start;
}

}  // namespace bcs::mm
