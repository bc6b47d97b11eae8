// Which queued jobs start now (the strobe sender's admission, pure so that
// it is tested without a fabric: tests/unit/mm/admission_test.cc).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "matrix.h"

namespace bcs::mm {

struct QueuedJob {
  uint64_t id = 0;
  std::vector<uint32_t> nodes;  // its node managers (fabric ids)
};

// First come, first served with backfilling into the gang matrix: in
// queue order, each job goes into the first row (from the active one on)
// where its nodes are free and not wanted by a job before it in the queue
// that found no row. So no job is ever overtaken on one of its nodes
// (none starves), and a later job takes free slots nobody ahead of it
// wants. The jobs placed (in `m`) are returned. `space_share` false: at
// most one job at a time on the whole cluster (`running`: how many run).
std::vector<uint64_t> admit(const std::vector<QueuedJob>& queue, Matrix& m, size_t running,
                            bool space_share);

}  // namespace bcs::mm
