// Where on a host a job's ranks go among the host's CPUs, when several jobs
// run at once on node managers of one host (issue 43). Every node manager
// of a host binds its share of a job's host ranks counting from the same
// base (StartJob::host_slot_base, binding.h), so the manager only has to
// give jobs running at once on a host disjoint ranges of slots: slot k is
// the host's k-th allowed CPU. A pure function, unit-tested without a
// cluster (tests/unit/mm/host_slots_test.cc).
#pragma once

#include <cstdint>
#include <vector>

namespace bcs::mm {

// A running job's ranks on one host: slots [base, base + count).
struct SlotRange {
  uint32_t base = 0;   // the StartJob::host_slot_base it was given for the host
  uint32_t count = 0;  // its ranks on the host (over every node manager there)
};

// The base for a new job that puts `ranks` ranks on a host of `cpus` CPUs
// (the least Register::cpus over the node managers of that host name) while
// the jobs in `held` run there (any order; they may touch): the lowest base
// of `ranks` contiguous slots within [0, cpus) that no held range covers.
// `cpus` itself when no such range exists: with the default binding the
// job then runs unbound (base + ranks > cpus), as when ranks outnumber CPUs.
//
// Only the part of a held range within [0, cpus) holds slots, so a job
// recorded with the base this returned can be passed as it is: one given
// `cpus` (unbound) holds nothing. A job with no rank on the host (ranks 0)
// gets 0; so does every job when the CPUs are unknown (cpus 0: a node
// manager that did not say), which is the binding of a job alone.
uint32_t host_slot_base(uint32_t cpus, const std::vector<SlotRange>& held, uint32_t ranks);

}  // namespace bcs::mm
