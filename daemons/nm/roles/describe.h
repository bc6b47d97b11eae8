// What a hung job's local ranks wait for, in words: the manager asks
// (DescribeJob) when a job is killed, and puts the answer into the kill's
// report, so that a deadlocked program says which receive of which rank
// nobody sends to. Read from the buffer receiver's matching state and the
// ranks' `waiting` flags (a rank's word, read as a yes or no only).
#pragma once

#include <string>

#include "bcs/matcher.h"
#include "collectives.h"
#include "ports.h"

namespace bcs::nm {

// A part per local rank, "; "-separated: whether it waited in MPI, its
// first unmatched receives or probes (source, tag, context, the slice it
// was posted in), how many more, the collectives it waits in (and which
// local members have not posted them), and how many messages for it no
// receive took. At most `max_bytes` (cut with " ...").
std::string describe_waits(LocalRanks& ranks, const Matcher& matcher, const Collectives& coll,
                           size_t max_bytes = 1024);

}  // namespace bcs::nm
