// A job is a process tree the node manager owns.
//
// Ranks are children of the NM, each leading its own process group. But a
// rank can fork, and a child can leave the group (setsid) and outlive its
// parent. So the NM is a *child subreaper* (PR_SET_CHILD_SUBREAPER): every
// process a rank starts, however it detaches, stays below the NM, and when
// its parent dies it becomes the NM's child rather than init's. The NM
// reaps such orphans as they die.
//
// Which job a process belongs to. A node manager may hold several jobs
// (gang scheduling, StartJob.coscheduled), so killing one must spare the
// others' processes. The kernel forgets a process's original parent when
// it reparents it, and nothing a job's processes inherit is both readable
// here and beyond their reach (no cgroup is writable in the containers bcs
// runs in, pid namespaces need privileges, an environment or an fd can be
// dropped). So the NM keeps the ancestry itself, from /proc:
//
//  - a process below a live rank, by its ppid chain, is that rank's job;
//  - each look at /proc (on every SIGCHLD, before a rank is reaped, at
//    every kill) remembers the job of every process it finds below a job's
//    rank or orphan (pid and start time, against reuse), so a process keeps
//    its job when its parent dies later;
//  - a process that becomes the NM's child (an orphan) takes the job it
//    was remembered with; else the job of the NM's direct children that
//    are dead but not reaped yet (whose death just reparented it: a dead
//    child stays a zombie until the NM reaps it, which it does only after
//    this look);
//  - ranks of a co-scheduled job are child subreapers themselves (set
//    before exec), so an orphan below a live rank stays below it, and a
//    process reaches the NM only through the death of one of the NM's own
//    children, whose zombie names the job. The cost: such a rank is handed
//    the orphans of its descendants, as a process under a subreaper init
//    (tini, systemd --user) is, and zombies of those it never waits for
//    stay until it exits. So only co-scheduled jobs pay it; a job alone
//    on its node needs no attribution (everything below the NM is its).
//
// What cannot be placed (two jobs' processes died in one instant, or a
// process whose parent was not the NM's child died before any look saw
// it) is held for every job live when it was found, and killed when the
// last of them ends: never with another job still running, never later
// than every job that could own it. With one job held, that is the job.
//
// A cgroup would also survive the NM's own death; if the NM is SIGKILLed,
// ranks still die (PR_SET_PDEATHSIG), but a detached grandchild is
// inherited by the next subreaper up.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>

namespace bcs::nm {

// Makes this process a child subreaper. Call once at start, before any
// thread or child exists. False if the kernel refused (logged by the caller).
bool become_subreaper();

// Forks with the registry lock held and records the child as a rank of
// `job`, so that reap_orphans() never takes a rank's exit status from its
// owner and the rank's descendants are the job's. The job is live from its
// first rank until kill_job. Returns what fork() returned; in the child,
// `child` runs and must not return (exec or _exit).
pid_t fork_rank(uint64_t job, const std::function<void()>& child);
// Before a rank's owner reaps it (waitpid): places the orphans its death
// handed to the NM while its zombie still names the job (see above).
void place_orphans();
// The rank `pid` has been reaped by its owner: forget it.
void forget_rank(pid_t pid);

// Places new orphans, kills those no live job can own, and reaps every
// child of this process that is not a rank and has exited. Non-blocking.
// Call on SIGCHLD.
void reap_orphans();

// The job is over here: SIGKILLs its ranks still alive, every process
// below them, every orphan that is the job's and every orphan that only
// jobs already over could own, repeating until none is left alive or a
// bound is reached (a process may fork while we kill). Processes of other
// live jobs are not touched. Returns how many processes were signalled.
int kill_job_tree(uint64_t job);

// What the NM holds below it, for tests and logs: how many live processes
// are the job's (ranks, below them, orphans placed as the job's).
int count_job_processes(uint64_t job);

// Whether `pid` is a live process below `ancestor` (its child, grandchild,
// ... at most 64 generations down) that runs wholly as uid:gid (real,
// effective, saved and filesystem ids) and is dumpable (its /proc entries
// belong to it, not to root): a process the job's user could read and
// write with ptrace itself. The node manager copies a rank's messages from
// and into such a process when the rank names it (RankControl::mpi_pid).
// Else false, and *why says what failed.
bool process_runs_below(pid_t pid, pid_t ancestor, uid_t uid, gid_t gid, std::string* why);

}  // namespace bcs::nm
