#include "host_slots.h"

#include <algorithm>

namespace bcs::mm {

uint32_t host_slot_base(uint32_t cpus, const std::vector<SlotRange>& held, uint32_t ranks) {
  if (ranks == 0) return 0;  // binds nothing: any base will do
  if (ranks > cpus) return cpus;
  // Held slots as [begin, end) within [0, cpus), by begin. 64 bits: a
  // base + count near 2^32 must not wrap onto slot 0.
  std::vector<std::pair<uint64_t, uint64_t>> taken;
  taken.reserve(held.size());
  for (const SlotRange& h : held) {
    const uint64_t begin = h.base, end = std::min<uint64_t>(uint64_t{h.base} + h.count, cpus);
    if (begin < end) taken.emplace_back(begin, end);
  }
  std::sort(taken.begin(), taken.end());
  // First fit: the lowest gap wide enough, so a job alone on the host (or
  // the first of several) starts at slot 0, as before jobs shared hosts.
  uint64_t base = 0;
  for (const auto& [begin, end] : taken) {
    if (base + ranks <= begin) break;
    base = std::max(base, end);
  }
  return base + ranks <= cpus ? static_cast<uint32_t>(base) : cpus;
}

}  // namespace bcs::mm
