// A job's cpu cgroup on this node (buffered coscheduling's background
// policy, `bcs-mm --policy bcs`): the job's ranks join it between fork and
// exec, and a switch of the gang matrix sets its `cpu.idle` instead of
// stopping them. A group at idle priority gets only the CPU time that the
// other groups leave: here two busy loops on one CPU share it 64 % to
// 0.3 % when one of them is in a group with cpu.idle=1. The kernel sees a
// rank of the active row block and wake at once, which the daemons see
// only once per slice, so the background job fills exactly the gaps of the
// active one. See docs/architecture.md, "Buffered coscheduling's policy".
//
// The group lives in the cgroup v1 `cpu` hierarchy, below the node
// manager's own group there (so under Slurm or a container it nests in
// what the node manager was given), named bcs-nm-<node manager pid>-job-<id>.
// A rank cannot leave it: cgroup.procs is root's. v2 is not used: a group
// of ranks below the node manager's own would need the node manager out of
// that group first (the "no internal processes" rule).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "fd.h"

namespace bcs::nm {

class CpuGroup {
 public:
  CpuGroup() = default;
  // Makes the group for job `job_id`. Not valid() on failure, with the
  // reason in *why (no v1 cpu hierarchy with cpu.idle, not root, ...).
  static CpuGroup make(uint64_t job_id, std::string* why);
  CpuGroup(CpuGroup&&) noexcept;
  CpuGroup& operator=(CpuGroup&&) noexcept;
  CpuGroup(const CpuGroup&) = delete;
  CpuGroup& operator=(const CpuGroup&) = delete;
  // Moves what is left in it to the parent group and removes it.
  ~CpuGroup();

  bool valid() const { return static_cast<bool>(idle_); }
  const std::string& path() const { return path_; }
  // For a forked child: joins the calling process to the group (one
  // write(2) of "0": async-signal-safe). False if it could not.
  bool join_self() const;
  // Sets cpu.idle: "" or what failed.
  std::string set_idle(bool idle) const;

  // Removes the groups of node managers that are gone (a node manager
  // killed with SIGKILL leaves its groups behind). Empty groups only: the
  // kernel refuses the others.
  static void remove_stale();

 private:
  void release();
  std::string path_;
  UniqueFd procs_;  // cgroup.procs, open for writing
  UniqueFd idle_;   // cpu.idle, open for writing
};

// Where this process's cpu group is in the file system (the v1 `cpu`
// hierarchy's mount point joined with its path there, from
// /proc/self/mountinfo and /proc/self/cgroup); "" if there is none.
std::string cpu_group_dir();

}  // namespace bcs::nm
