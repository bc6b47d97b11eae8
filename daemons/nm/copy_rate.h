// How fast this host copies memory, measured once when the node manager
// starts: the manager derives a job's per-slice chunk budget from it and
// the slice length (mm/slice_plan.h, chunk_budget), unless --chunk names one.
#pragma once

#include <cstdint>

namespace bcs::nm {

// Bytes per second of a memcpy between two private 8 MiB buffers (past the
// L2 cache of the machines we run on, so closer to what a chunk copy
// costs than a cache-resident copy), the best of a few rounds. A few
// milliseconds; never 0.
uint64_t measure_copy_rate();

}  // namespace bcs::nm
