// A job is a process tree the node manager owns.
//
// Ranks are children of the NM, each leading its own process group. But a
// rank can fork, and a child can leave the group (setsid) and outlive its
// parent. So the NM is a *child subreaper* (PR_SET_CHILD_SUBREAPER): every
// process a rank starts, however it detaches, stays below the NM, and when
// its parent dies it becomes the NM's child rather than init's. At job end
// the NM kills every process below it (it runs one job at a time, so that
// is exactly the job), and it reaps the orphans as they die.
//
// A cgroup would also survive the NM's own death; it is not used because
// the daemons must run in containers where no cgroup is writable (see
// docs/architecture.md). If the NM is SIGKILLed, ranks still die
// (PR_SET_PDEATHSIG), but a detached grandchild is inherited by the next
// subreaper up.
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>

namespace bcs::nm {

// Makes this process a child subreaper. Call once at start, before any
// thread or child exists. False if the kernel refused (logged by the caller).
bool become_subreaper();

// Forks with the registry lock held and records the child as a rank, so
// that reap_orphans() never takes a rank's exit status from its owner.
// Returns what fork() returned; in the child, `child` runs and must not
// return (exec or _exit).
pid_t fork_rank(const std::function<void()>& child);
// The rank `pid` has been reaped by its owner: forget it.
void forget_rank(pid_t pid);

// Reaps every child of this process that is not a rank (orphans inherited
// as subreaper) and has exited. Non-blocking. Call on SIGCHLD.
void reap_orphans();

// SIGKILLs every process below this one (ranks, their children and any
// orphans inherited as subreaper), repeating until none is left alive or
// a bound is reached (a process may fork while we kill). Returns how many
// processes were signalled.
int kill_descendants();

// Whether `pid` is a live process below `ancestor` (its child, grandchild,
// ... at most 64 generations down) that runs wholly as uid:gid (real,
// effective, saved and filesystem ids) and is dumpable (its /proc entries
// belong to it, not to root): a process the job's user could read and
// write with ptrace itself. The node manager copies a rank's messages from
// and into such a process when the rank names it (RankControl::mpi_pid).
// Else false, and *why says what failed.
bool process_runs_below(pid_t pid, pid_t ancestor, uid_t uid, gid_t gid, std::string* why);

}  // namespace bcs::nm
