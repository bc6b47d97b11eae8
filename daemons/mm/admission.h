// Which queued jobs start now (the strobe sender's admission, pure so that
// it is tested without a fabric: tests/unit/mm/admission_test.cc).
#pragma once

#include <cstddef>
#include <cstdint>
#include <set>
#include <vector>

namespace bcs::mm {

struct QueuedJob {
  uint64_t id = 0;
  std::vector<uint32_t> nodes;  // its node managers (fabric ids)
};

// First come, first served with backfilling: in queue order, a job starts
// when none of its nodes is `held` (by a running job, or one started by
// this call) or wanted by a job before it in the queue that could not
// start. So no job is ever overtaken on one of its nodes (none starves),
// and a later job runs beside the others on nodes nobody ahead of it
// wants. `space_share` false: at most one job at a time on the cluster
// (`running`: how many run now).
std::vector<uint64_t> admit(const std::vector<QueuedJob>& queue, std::set<uint32_t> held,
                            size_t running, bool space_share);

}  // namespace bcs::mm
