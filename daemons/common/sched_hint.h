// Scheduling hints for the daemons' helper threads.
#pragma once

#include <chrono>

namespace bcs {

// Asks the kernel to give the calling thread a short time slice (EEVDF's
// custom slice, Linux 6.12 and later: sched_setattr's sched_runtime for
// SCHED_OTHER). A thread with a shorter slice gets an earlier deadline, so
// when it wakes it preempts a rank that has been computing instead of
// queueing behind it, and when it runs long it yields sooner. No real-time
// priority and no spinning (NOTES.md: RT throttling). The node manager's
// threads that answer strobes and bells ask for it: their wake-up is on the
// path of every slice. False if the kernel refused (an older kernel ignores
// the field and says yes: then nothing changes).
bool sched_prefer_short_slice(std::chrono::nanoseconds slice);
// What the node manager's strobe receiver and doorbell ask for: the
// shortest slice the kernel grants (it clamps to 0.1-100 ms).
inline constexpr std::chrono::nanoseconds kHelperSlice{100'000};

}  // namespace bcs
