// One job's footprint on a node: its shared segment and its local ranks.
//
// The NM is the parent of every local rank, which is what lets its DMA
// helper read and write the ranks' memory with cross-memory attach
// (process_vm_readv/writev) without their help.
#pragma once

#include "binding.h"
#include <sys/types.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "bcs/layout.h"
#include "bcs/segment.h"
#include "cpu_group.h"
#include "fd.h"
#include "roles/ports.h"
#include "roles/read_grants.h"
#include "sched_hint.h"

namespace bcs::nm {

struct JobSpec {
  uint64_t id = 0;
  std::string program;
  std::vector<std::string> args;
  std::vector<std::string> env;
  std::string cwd;
  uint32_t nranks = 0;
  std::vector<uint32_t> rank_node;  // world rank -> fabric node id
  // Node managers on this host (same host name): their ranks and ours can
  // read each other's memory, so large chunks between them take one copy.
  std::vector<uint32_t> host_peers;
  uint64_t slice_ns = 0;
  uint64_t chunk_bytes = 0;
  // Sends that may wait unmatched for one receiver before its senders are
  // held back (0: the node manager's default).
  uint64_t max_unexpected = 0;
  // The paper's fixed strobe: ranks are not asked to ring the doorbell when
  // they block, and the node never parks.
  bool fixed_strobe = false;
  // Held beside other jobs (StartJob.coscheduled): its ranks are child
  // subreapers, so that its processes can be told from theirs
  // (process_tree.h).
  bool coscheduled = false;
  // Its ranks in a cpu cgroup of their own (StartJob.cpu_group): a
  // suspension may then leave them at idle priority (cpu_group.h).
  bool cpu_group = false;
  // Where the ranks run (binding.h), and where among this host's allowed
  // CPUs the job's ranks on the host begin (StartJob::host_slot_base): the
  // manager keeps the ranges of jobs running at once on a host apart.
  Binding bind = Binding::by_default;
  uint32_t host_slot_base = 0;
  // Rank 0's stdin is a pipe the node feeds with RankInput (LocalRank::in);
  // else every rank's stdin is /dev/null.
  bool stdin_rank0 = false;
  // The credentials the ranks run with (the submitter's). When
  // `change_creds` is false the ranks keep the NM's own.
  bool change_creds = false;
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;  // supplementary groups
};

// Fills spec->change_creds and spec->groups for a job the manager says runs
// as `uid`:`gid`. Empty, or why this node manager refuses: a node manager
// that is neither root nor holds CAP_SETUID and CAP_SETGID runs jobs only as
// its own user (it could not switch); one that holds them (the systemd
// unit's dedicated user) runs a job as any user but root. So only a root
// node manager - authenticated to a root manager - ever runs a job as root.
std::string job_credentials(uid_t uid, gid_t gid, JobSpec* spec);

// Whether this node manager can run a job as another user than its own
// (Register::any_user).
bool can_run_as_any_user();

// The fd limit ranks start with: the one the NM itself was started with,
// before it raised its own (see main).
void set_rank_fd_limit(uint64_t soft, uint64_t hard);

// The kernel's largest possible pid (PID_MAX_LIMIT on 64-bit): a pid a peer
// names past it is not one.
constexpr uint32_t kPidMaxLimit = 4u << 20;

struct LocalRank {
  int32_t world_rank = 0;
  uint32_t local_index = 0;
  pid_t pid = -1;
  int cpu = -1;  // the CPU it is bound to, -1: none
  UniqueFd out, err, pidfd;
  // Rank 0 of a job with stdin_rank0: the write end of its stdin pipe
  // (non-blocking; the I/O thread writes RankInput into it).
  UniqueFd in;
  // Set (under NmJob::copy_mu) before the rank is reaped: after that its pid
  // may be reused, so nobody may touch it any more.
  bool dead = false;
  // CPU time (user and system) it and the children it waited for used, from
  // wait4 when it was reaped.
  uint64_t cpu_ns = 0;
  // The process that runs MPI (NmJob::copy_pid), under NmJob::copy_mu: 0 not
  // known yet, -1 the one the rank named was refused (`pid` is used). When it
  // is not `pid`, `mpi_pidfd` holds it, so its exit is seen before its pid
  // could be reused.
  pid_t mpi_pid = 0;
  UniqueFd mpi_pidfd;
  // Copy orders posted (NmJob::post_copy) and not yet settled (await_copy),
  // one per slot of RankControl::dma. Strobe receiver only.
  struct DmaUse {
    bool pending = false;
    uint64_t seq = 0;  // post order: await_copy settles the lowest first
    std::chrono::steady_clock::time_point posted;  // or when the rank could start it
    uint64_t len = 0;
    // This rank is the sender of another rank's order and writes its rest
    // (DmaOrder::write): settled with that order, never on its own.
    bool share = false;
    // The rank may split it over a second thread (DmaOrder::split).
    bool split = false;
    // This order's rest is written by its sender: that local rank (world
    // rank) and the slot holding its share; -1: none.
    int32_t sharer = -1;
    size_t sharer_slot = 0;
  };
  std::array<DmaUse, kDmaSlots> dma{};
  uint64_t dma_seq = 0;
  std::atomic<bool> killed_by_bcs{false};
  std::string corrupted;  // why the NM ended it (under NmJob::copy_mu), "" if it did not
  // The ring head the buffer sender last read (what it held back included);
  // written by the strobe receiver, read by the doorbell.
  std::atomic<uint64_t> seen_head{0};
  // Whether it computes (NmJob::a_rank_computes). Strobe receiver only.
  ComputeWatch computing;
  // What RankControl::held_sends says (set_held_sends). Strobe receiver only.
  bool held_sends = false;
  // Drain notes written for it (segment.h, DrainNote): the NM's own count,
  // never read back from the segment. Strobe receiver only.
  uint64_t drain_head = 0;
};

class NmJob {
 public:
  // Creates the segment and forks the local ranks (those whose rank_node is
  // `self`). On failure returns nullptr and sets *error; nothing is left.
  static std::shared_ptr<NmJob> start(const JobSpec& spec, uint32_t self,
                                      const std::string& node_name, std::string* error);
  ~NmJob();

  const JobSpec& spec() const { return spec_; }
  // What peer nodes may read of this job's local ranks (roles/read_grants.h).
  ReadGrants& read_grants() { return read_grants_; }
  uint64_t id() const { return spec_.id; }
  uint32_t node_of(int32_t world_rank) const { return spec_.rank_node.at(world_rank); }
  bool is_local(int32_t world_rank) const { return local_of_world_.count(world_rank) != 0; }
  LocalRank& local(int32_t world_rank) { return *ranks_[local_of_world_.at(world_rank)]; }
  std::vector<std::unique_ptr<LocalRank>>& ranks() { return ranks_; }
  RankView view(const LocalRank& r) { return segment_rank_view(seg_.get(), r.local_index, layout_); }
  // The rank wrote garbage into its part of the segment: it is ended (its
  // process group SIGKILLed) and its exit report says why.
  void end_corrupt(int32_t world_rank, const std::string& why);
  RankView view_of(int32_t world_rank) { return view(local(world_rank)); }

  // The doorbell (segment.h, SegmentHeader::bell and nm_flags). The header
  // is rank-writable: the NM keeps what it asked for in `flags_` and only
  // ever stores that, and reads nothing back but the futex word.
  std::atomic<uint32_t>* bell() { return &header()->bell; }
  // phase_value() of the last microphase of this job the node finished
  // (the doorbell's epoch). Per job: the rows of the gang matrix number
  // their slices apart, so a node's last microphase of any job says
  // nothing about this one's. Written by the strobe receiver.
  void set_finished(uint64_t phase_value) { finished_.store(phase_value, std::memory_order_seq_cst); }
  uint64_t finished() const { return finished_.load(std::memory_order_seq_cst); }
  // False when raising kNmParked or kNmBellOnPost could not be followed by
  // the membarrier kNmAsymmetricFence promises: a rank posting now may miss
  // the flag, so the caller must not rely on being rung (not park).
  bool set_nm_flag(uint32_t flag, bool on);
  bool nm_flag(uint32_t flag) const { return (flags_.load() & flag) != 0; }
  // Every local rank asleep in a blocking call or done with MPI (the
  // private layout, not the header's).
  bool all_blocked() { return segment_all_blocked(seg_.get(), layout_); }
  // A local rank has been out of MPI, posting nothing, for at least
  // `min_ns` by the looks at `now_ns` and before (ComputeWatch): the
  // strobe receiver then needs real-time priority to get a CPU when it
  // wakes (Nic::pick_priority). Never while the ranks are not bound, one
  // to a CPU (more ranks than CPUs, or --bind-to none). Strobe receiver
  // only.
  bool a_rank_computes(uint64_t now_ns, uint64_t min_ns);
  // Every local rank is bound to a CPU of its own (binding.h: ranks that do
  // not outnumber the host's CPUs).
  bool ranks_bound() const;
  // The rank bound to `cpu` waits in MPI (or no rank is bound there): a
  // thread running on that CPU takes nothing from a rank.
  bool cpu_waits(int cpu);
  uint32_t blocked_count() { return segment_blocked_count(seg_.get(), layout_); }
  uint32_t nlocal_ranks() const { return layout_.nlocal; }
  // No local rank posted a descriptor since the buffer sender last read
  // its ring (sends it holds back are not news).
  bool rings_empty();
  // What local ranks posted since the buffer sender last read the rings:
  // true as soon as one is a send to a local rank that sleeps in MPI
  // (which it may complete); else the collectives among them, (world rank,
  // context, number) each, appended to `colls`. Only a peek at
  // rank-written descriptors, bounded; the DEM reads and checks them
  // properly, and the numbers here are a hint.
  struct PostedColl {
    int32_t world;
    int32_t context;
    uint64_t seq;
  };
  bool scan_posted(std::vector<PostedColl>* colls);
  void ring_seen(int32_t world_rank, uint64_t head) {
    local(world_rank).seen_head.store(head, std::memory_order_relaxed);
  }
  // The buffer receiver holds sends to the rank that no receive took (or
  // no longer does): published in RankControl::held_sends when it changes.
  // Strobe receiver only.
  void set_held_sends(int32_t world_rank, bool held);

  // The job's slices as its ranks see them (SegmentHeader::job_slice): the
  // DEM of global slice `global` begins. Publishes the job slice and wakes
  // the ranks that asked to be woken by now (RankControl::wake_at_slice).
  // Strobe receiver only.
  void begin_slice(uint64_t global);
  // 0 before the first slice; requests completed are stamped with it.
  uint64_t job_slice() const { return job_slice_.load(std::memory_order_relaxed); }
  // The buffer sender took `count` descriptors from the rank's ring this
  // slice: a drain note, if the rank asked for them (it records).
  void note_drain(int32_t world_rank, uint64_t count);
  // Single copy (segment.h, DmaOrder; roles/ports.h): rank `to`, if it is
  // asleep in MPI, reads `len` bytes at `src` of rank `from` into its own
  // `dst`. LocalRanks::kNotDelegated when it did not (the caller copies),
  // else 0 or a bcs_err_*. Strobe receiver only.
  int32_t copy_by_receiver(int32_t from, int32_t to, uint64_t src, uint64_t dst, size_t len);
  // The same with the sender named by its process: a rank of a node manager
  // on this host (`spid` came from that node manager; any value is safe to
  // try, the rank reads with its own rights).
  int32_t copy_from_process(uint32_t spid, int32_t to, uint64_t src, uint64_t dst, size_t len);
  // The process of local rank `from`, if `node` runs on this host and may
  // have its ranks read ours directly; else 0.
  uint32_t offer_pid(int32_t from, uint32_t node);
  // The two halves of copy_from_process: the order is posted (false: it was
  // not: single copy off, the rank awake or gone, every slot pending),
  // then settled, oldest first: waited for, or taken back if the rank has
  // not taken it within kDmaTakeBack of being able to (kNotDelegated), as
  // copy_from_process returns. Between them the rank copies while the node
  // does other work (the DMA helper's copies ahead); copy_from_process
  // itself delegates only when no order is pending. The process of local
  // rank `r`, 0 if gone.
  //
  // When the caller allows it (`share`: the sender has no copy of its own
  // to make now) and the sender is a rank of this node that sleeps in MPI
  // too, it gets
  // a share of the order: it writes the second half into the receiver while
  // the receiver reads the first (segment.h). The pair is posted and
  // settled as one order; if either half was taken back, the whole order
  // is kNotDelegated.
  bool post_copy(uint32_t spid, int32_t to, uint64_t src, uint64_t dst, size_t len,
                 CopyHelp help);
  int32_t await_copy(int32_t to);
  bool copy_orders_pending(int32_t to) { return is_local(to) && orders_pending(local(to)); }
  // Bytes of settled orders that their senders wrote (shares), since the
  // job began: the local EMDS's per-slice `sender_bytes`. Strobe receiver only.
  uint64_t shared_bytes() const { return shared_bytes_; }
  // Bytes of settled orders that their receivers' second threads copied
  // (DmaOrder::second), since the job began: `second_thread_bytes`.
  uint64_t second_bytes() const { return second_bytes_; }
  uint32_t pid_of(int32_t r);
  bool host_peer(uint32_t node) const {
    return std::find(spec_.host_peers.begin(), spec_.host_peers.end(), node) !=
           spec_.host_peers.end();
  }

  // Cross-memory copies into/out of a local rank. Return 0 or a bcs_err_*.
  int32_t read(int32_t world_rank, uint64_t addr, void* dst, size_t len);
  int32_t write(int32_t world_rank, uint64_t addr, const void* src, size_t len);
  // Packed bytes [off, off + len) of a non-contiguous buffer: one
  // cross-memory call per IOV_MAX pieces.
  int32_t cma_layout(int32_t world_rank, uint64_t base, const Layout& l, uint64_t off, void* buf,
                     size_t len, bool to_rank);

  // Reap a rank whose pidfd became readable. Returns its wait status.
  int reap(LocalRank& r);
  // SIGKILL every rank still alive (its whole process group) and every
  // other process below the NM that is this job's (process_tree.h): the
  // job is over here. Other jobs held on this node keep theirs.
  void kill_all();
  // SIGKILL the process groups of the ranks still alive.
  void kill_ranks();
  // Gang scheduling (SuspendJob): SIGSTOP (and wait until stopped) or
  // SIGCONT every live rank's process group; with `background` and a cpu
  // group, set the group's cpu.idle instead (*background then says so).
  // Returns what failed ("" if nothing), and in *cost_ns how long it took
  // (job_suspend.cc).
  std::string suspend(bool stop, bool background, uint64_t* cost_ns, bool* backgrounded);
  // While suspended (stopped): ranks found running (continued by their
  // user with SIGCONT, which the kernel allows) are counted and, with
  // `restop`, stopped again; the kMaxContinued-th time a rank of the job
  // is found so, it is ended (end_corrupt, naming it). Returns how many
  // were found running. Called as the job is resumed, and for the other
  // jobs of the node at each switch.
  int check_suspended(bool restop = true);
  static constexpr int kMaxContinued = 3;
  // Every local rank has been reaped.
  bool all_dead();
  // Some local rank was reaped or killed: the job is ending (or this rank
  // finished early). A node on its lease then reports at once instead of
  // at its period's end; the bell is rung to wake it.
  bool rank_gone() const { return rank_gone_.load(std::memory_order_acquire); }
  // Waits until the I/O thread has reaped every rank, or `limit` passes.
  bool wait_all_dead(std::chrono::milliseconds limit);

 private:
  SegmentHeader* header() { return static_cast<SegmentHeader*>(seg_.get()); }
  SegmentLayout layout_;  // private copy: the header is rank-writable
  std::atomic<uint32_t> flags_{0};  // what nm_flags should say
  std::atomic<uint64_t> finished_{0};
  std::atomic<bool> rank_gone_{false};
  void note_rank_gone();
  uint64_t first_slice_ = 0;        // the global slice that was job slice 1
  // Single copy is tried until the kernel refuses it once (Yama's ptrace
  // scope forbids reading a sibling); BCS_SINGLE_COPY=off in the NM's
  // environment never tries.
  bool single_copy_ = true;
  // Orders of kDmaShareMin (job_copy.cc) bytes or more are shared with a
  // sleeping local sender, or else may be split by the receiving rank over
  // a second thread; BCS_COPY_SHARE=off / BCS_COPY_SPLIT=off in the NM's
  // environment never do.
  bool share_copies_ = true;
  bool split_copies_ = true;
  uint64_t shared_bytes_ = 0;
  uint64_t second_bytes_ = 0;
  static bool orders_pending(const LocalRank& r) {
    return std::any_of(r.dma.begin(), r.dma.end(), [](const auto& u) { return u.pending; });
  }
  // Writes order `slot` of rank `r` and wakes the rank unless it is copying
  // an earlier one (it looks at its slots again after that).
  void post_order(LocalRank& r, size_t slot, uint32_t pid, uint64_t src, uint64_t dst,
                  uint64_t len, bool write, bool split);
  // The local rank, other than `to`, whose process is `spid` and which may
  // take a share now (asleep in MPI or taking shares already, a slot free,
  // no order of its own pending); null if none. Under copy_mu_.
  LocalRank* sharer_for(uint32_t spid, const LocalRank& to);
  // Waits for order `slot` of `r` (or takes it back): await_copy's result
  // for that one order.
  int32_t settle(LocalRank& r, size_t slot);
  std::atomic<uint64_t> job_slice_{0};
  ReadGrants read_grants_;
  NmJob() = default;
  JobSpec spec_;
  // Declared before the ranks: destroyed after them, once they are reaped.
  CpuGroup cpu_group_;
  // How the last suspension held the ranks: stopped, or at idle priority.
  bool stopped_ = false, idle_ = false;
  int continued_ = 0;  // ranks found running while stopped (check_suspended)
  UniqueFd memfd_;
  Mapping seg_;
  std::vector<std::unique_ptr<LocalRank>> ranks_;
  std::unordered_map<int32_t, uint32_t> local_of_world_;
  // Held across every process_vm_* call and across reaping, so a pid is never
  // used after it could have been recycled.
  std::mutex copy_mu_;
  std::condition_variable reaped_;  // notified (after copy_mu_) by reap()

  int32_t cma(int32_t world_rank, uint64_t addr, void* buf, size_t len, bool to_rank);
  // The process whose memory holds rank r's buffers: the one the rank says
  // runs MPI (RankControl::mpi_pid), once checked (process_runs_below), else
  // the one the NM forked. 0: it is gone. Under copy_mu_.
  pid_t copy_pid(LocalRank& r);
};

}  // namespace bcs::nm
