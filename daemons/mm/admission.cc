#include "admission.h"

#include <set>

namespace bcs::mm {

std::vector<uint64_t> admit(const std::vector<QueuedJob>& queue, Matrix& m, size_t running,
                            bool space_share) {
  std::vector<uint64_t> start;
  std::set<uint32_t> wanted;
  for (const auto& q : queue) {
    if (!space_share && running + start.size() > 0) break;
    if (!m.place(q.id, q.nodes, wanted)) {
      wanted.insert(q.nodes.begin(), q.nodes.end());
      continue;
    }
    start.push_back(q.id);
  }
  return start;
}

}  // namespace bcs::mm
