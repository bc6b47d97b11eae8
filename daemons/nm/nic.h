// The node manager's "NIC": the paper's NIC threads, as role objects
// (roles/) driven by one strobe-receiver thread.
//
// Why one thread: microphases are globally sequential (a microphase starts
// only when every node finished the previous one), so at any moment exactly
// one role of a node has work. Handing the token between six sleeping
// threads would cost a wake-up (2-20 us here) per microphase per node, a
// large part of a 250-500 us slice on a 2-core machine, for no parallelism.
// The roles keep the paper's names and boundaries and talk to the rest only
// through roles/ports.h, so one can move to a thread of its own when a
// measurement says so (e.g. a DMA helper overlapping big copies with the
// next slice's DEM).
//
//   StrobeReceiver   (this class) waits for (micro)strobes, runs the role of
//                    the microphase, reports completion (kVarPhase) to the MM
//   BufferSender     DEM  roles/buffer_sender.h
//   BufferReceiver   MSM  roles/buffer_receiver.h
//   DmaHelper        P2P  roles/dma_helper.h (also serves remote reads)
//   CollectiveHelper BBM  roles/collective_helper.h + roles/collectives.h
//   ReduceHelper     RM   the same exchange, reduction kinds
#pragma once

#include <cstdint>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "bcs/core.h"
#include "bcs/emds.h"
#include "doorbell.h"
#include "held_states.h"
#include "sched_hint.h"
#include "job.h"
#include "roles/buffer_receiver.h"
#include "roles/buffer_sender.h"
#include "roles/collective_helper.h"
#include "roles/collectives.h"
#include "roles/dma_helper.h"
#include "roles/ports.h"
#include "wire.h"

namespace bcs::nm {

// The job's forked ranks as the roles see them (cross-memory attach, the
// segment's request tables). Every rank-supplied index is checked.
class JobRanks : public LocalRanks {
 public:
  explicit JobRanks(std::shared_ptr<NmJob> j);
  uint64_t job_id() const override { return job_->id(); }
  uint32_t nranks() const override { return job_->spec().nranks; }
  uint32_t nnodes() const override { return nnodes_; }
  uint32_t node_of(int32_t r) const override { return job_->node_of(r); }
  bool is_local(int32_t r) const override { return job_->is_local(r); }
  std::span<const int32_t> local_ranks() const override { return local_; }
  RankView view_of(int32_t r) override { return job_->view_of(r); }
  int32_t read(int32_t r, uint64_t addr, void* dst, size_t len) override;
  int32_t write(int32_t r, uint64_t addr, const void* src, size_t len) override;
  int32_t read_layout(int32_t r, uint64_t base, const Layout& l, uint64_t off, void* dst,
                      size_t len) override;
  int32_t write_layout(int32_t r, uint64_t base, const Layout& l, uint64_t off, const void* src,
                       size_t len) override;
  void complete(int32_t r, uint32_t request, int32_t error) override;
  bool land(int32_t r, uint32_t request, const void* src, size_t len) override;
  void complete_status(int32_t r, uint32_t request, int32_t error, int32_t source, int32_t tag,
                       uint64_t bytes, uint32_t found, uint64_t seq = 0) override;
  const std::shared_ptr<NmJob>& job() const { return job_; }
  ReadGrants& read_grants() override { return job_->read_grants(); }
  void rank_corrupted(int32_t r, const std::string& why) override { job_->end_corrupt(r, why); }
  void ring_seen(int32_t r, uint64_t head) override {
    if (job_->is_local(r)) job_->ring_seen(r, head);
  }
  void held_sends(int32_t r, bool held) override {
    if (job_->is_local(r)) job_->set_held_sends(r, held);
  }
  void note_drain(int32_t r, uint64_t count) override {
    if (job_->is_local(r)) job_->note_drain(r, count);
  }
  int32_t copy_by_receiver(int32_t from, int32_t to, uint64_t src, uint64_t dst,
                           size_t len) override {
    return job_->copy_by_receiver(from, to, src, dst, len);
  }
  uint32_t offer_pid(int32_t from, uint32_t node) override { return job_->offer_pid(from, node); }
  bool copy_orders_pending(int32_t to) override { return job_->copy_orders_pending(to); }
  bool host_peer(uint32_t node) const override { return job_->host_peer(node); }
  int32_t copy_from_process(uint32_t pid, int32_t to, uint64_t src, uint64_t dst,
                            size_t len) override {
    return job_->copy_from_process(pid, to, src, dst, len);
  }
  bool post_copy(uint32_t pid, int32_t to, uint64_t src, uint64_t dst, size_t len,
                 CopyHelp help) override {
    return job_->post_copy(pid, to, src, dst, len, help);
  }
  int32_t await_copy(int32_t to) override { return job_->await_copy(to); }
  uint32_t pid_of(int32_t r) override { return job_->pid_of(r); }

 private:
  std::shared_ptr<NmJob> job_;
  uint32_t nnodes_ = 0;
  std::vector<int32_t> local_;
};

// The roles' state for one job this node holds (kept while another job's
// slices run: held_states.h).
struct NodeJobState {
  NodeJobState(std::shared_ptr<NmJob> j, uint32_t self, std::chrono::nanoseconds liveness)
      : ranks(j),
        bs(self),
        br(self, j->spec().chunk_bytes, max_unexpected(*j)),
        dh(self),
        coll(self, j->spec().rank_node, j->spec().chunk_bytes) {
    bs.set_hold_limit(liveness, max_unexpected(*j));
    // BCS_COPY_AHEAD=off in the node manager's environment: every chunk is
    // copied in its own P2P only (for measuring what copies ahead gain).
    if (const char* e = std::getenv("BCS_COPY_AHEAD"); e && std::string_view(e) == "off")
      dh.set_copy_ahead(false);
    // BCS_COLL_MEMBER_COPY=off: the node copies every piece of a collective.
    if (const char* e = std::getenv("BCS_COLL_MEMBER_COPY"); e && std::string_view(e) == "off")
      coll.set_member_copies(false);
  }
  static uint64_t max_unexpected(const NmJob& j) {
    return j.spec().max_unexpected ? j.spec().max_unexpected : BufferReceiver::kMaxUnexpected;
  }
  JobRanks ranks;
  BufferSender bs;
  BufferReceiver br;
  DmaHelper dh;
  Collectives coll;  // the collective and reduce helpers' state
  // Fused slices (one-node jobs): collectives released so far, per context,
  // which the strobe sender tracks otherwise.
  std::map<int32_t, uint64_t> released;
};

class Nic : private Net {
 public:
  // `liveness`: how long a microphase waits for a peer's data before it
  // fails (a stopped or slow peer only delays the job until then).
  // `realtime`: the doorbell and UCX's async thread run at SCHED_FIFO
  // when the kernel permits, and the strobe receiver while a rank
  // computes (sched_hint.h, pick_priority).
  Nic(core::Fabric& fabric, uint32_t self,
      std::chrono::nanoseconds liveness = std::chrono::seconds(60), bool realtime = true);
  ~Nic();
  // From the control thread. A node manager holds the jobs the manager
  // placed on it (several when it co-schedules them) and runs the
  // microphases of whichever job a strobe names; the doorbell watches the
  // job whose slice began last (one bell futex at a time, doorbell.h).
  // hold_job: `job` is held from now (its ranks just started).
  void hold_job(std::shared_ptr<NmJob> job);
  // release_job: the job is over here; its roles' state goes at the next
  // slice boundary or idle moment, and its sends and waits give up.
  void release_job(uint64_t id);
  // As before jobs were held side by side: `job` held, or (nullptr) every
  // job released.
  void set_job(std::shared_ptr<NmJob> job);
  // The strobe receiver's loop; returns when the fabric is closed.
  void run();
  // The local EMDS (Table 5.2): what this node did per slice, for a
  // flusher thread to send to the manager off the strobe path.
  monitor::LocalRecorder& local() { return local_; }
  // A microphase report the fabric could not take to the manager (see
  // report()): `reconnect` opens a fresh endpoint to it (false if it
  // cannot), `lost` tells the manager on the control stream (job, why).
  // Set before run().
  void on_report_failure(std::function<bool()> reconnect,
                         std::function<void(uint64_t, const std::string&)> lost) {
    reconnect_manager_ = std::move(reconnect);
    report_lost_ = std::move(lost);
  }
  // From the control thread: the manager asks what job `job`'s local
  // ranks wait for (DescribeJob). The strobe receiver answers between two
  // strobes, or within 200 ms when none come, through `described` (job,
  // text; empty when it does not run that job). Set before run().
  void describe(uint64_t job) { describe_job_.store(job, std::memory_order_relaxed); }
  void on_describe(std::function<void(uint64_t, const std::string&)> described) {
    described_ = std::move(described);
  }

 private:
  // Net over the fabric.
  core::Status send(uint32_t node, core::EventId ev, std::span<const uint8_t> bytes) override;
  core::Status wait(core::EventId ev, core::Message* m, std::chrono::nanoseconds limit) override;
  // A send for `job` waits for a stalled peer up to the liveness timeout,
  // and gives up once the manager has ended `job` (nullptr: never).
  core::Status send_for(const NmJob* job, uint32_t node, core::EventId ev,
                        std::span<const uint8_t> bytes);
  // That limit, for any send of `job` (the reports too).
  core::SendLimit limit_for(const NmJob* job);
  // The strobe receiver's job (its thread only).
  const NmJob* running_job() const;
  // `job` is no longer held here (any thread).
  bool job_ended(const NmJob* job);

  // Runs the microphase's roles and notes what it did in local_.
  wire::Report on_strobe(const wire::Strobe& s);
  wire::Report run_roles(const wire::Strobe& s);
  wire::FusedReport run_fused(const wire::Strobe& s);
  // Runs one slice of a fused strobe into `f`; false on a failed microphase.
  bool run_fused_slice(wire::Strobe m, std::chrono::steady_clock::time_point t0,
                       wire::FusedReport& f);
  // Within a lease: sleeps on the job's bell until every local rank is
  // blocked (true) or `deadline` passes (false).
  bool wait_all_blocked(std::chrono::steady_clock::time_point deadline);
  // Both that and, within a lease between slices (run_fused, `posts`),
  // whether the next slice may start: sleeps on the job's bell until every
  // rank is blocked (*all) or, with `posts`, since the last DEM a send to a
  // rank that waits was posted or a collective's last local post came
  // (kNmBellOnPost); false at `deadline`.
  // With `rung`: also false, *rung true, after a ring that starts nothing.
  // With `poll` (the first wait after a slice of a lease): looks for the
  // next slice's start for up to kPollAfterSliceNs before it sleeps,
  // pausing between looks beside a rank that waits and yielding to one
  // that runs (poll_after_slice).
  bool wait_on_bell(std::chrono::steady_clock::time_point deadline, bool posts, bool* all,
                    bool* rung = nullptr, bool poll = false);
  // Whether the strobe receiver polls after a slice of a lease: at normal
  // priority (a real-time thread that yields keeps its CPU), and only while
  // the job's ranks are bound, one to a CPU (a rank then waits on a CPU of
  // its own, which the look takes nothing from). BCS_NM_POLL=off in the
  // environment never polls (for comparisons).
  bool poll_after_slice();
  const bool poll_enabled_ = switched_on("BCS_NM_POLL");
  static constexpr std::chrono::nanoseconds kPollAfterSliceNs{20'000};
  // kNmBellOnWork up (true if the node may sleep through the periods) or down.
  bool set_bell_on_work(bool on);
  // BCS_IDLE_SLEEP=off in the environment keeps the period (for comparisons).
  const bool idle_sleep_ = switched_on("BCS_IDLE_SLEEP");
  // False when the environment variable `name` says "off".
  static bool switched_on(const char* name);
  // Within a lease: nothing posted, nothing in flight, no collective in its
  // rounds; the next slice would have nothing to do.
  bool node_idle();
  // Within a lease, between slices: of `posted` (NmJob::scan_posted, sorted
  // here), some collective's local members have all posted it, the last
  // since the DEM read the rings (kNmBellOnPost).
  bool coll_posted_locally(std::vector<NmJob::PostedColl>& posted);
  // scan_posted's, kept only for their capacity: each look clears them
  // first, so nothing in them outlives a wait and they need not be per job.
  std::vector<NmJob::PostedColl> posted_colls_;
  std::vector<int32_t> posted_by_;
  // The last microstrobe of a slice (Strobe::hold_ns): waits for the ranks
  // to block before `rep` goes, with the doorbell stepped aside.
  void hold_report(const wire::Strobe& s, wire::Report& rep);
  // Strobe::next_dem: runs the next slice's DEM into `f` after the hold.
  void run_next_dem(const wire::Strobe& s, wire::FusedReport& f);
  // At a DEM strobe of `job`: drops the states of jobs no longer held and
  // makes `job`'s current (made at its first slice here); a switch from
  // another job resets what is per node (switch_to). Without a strobe
  // (job 0), only the drop.
  void sync_job(uint64_t job);
  // The strobe receiver goes from `from`'s slices to `to`'s (a slice
  // boundary: nothing of `from` is in flight on this node).
  void switch_to(NodeJobState* from, NodeJobState* to);
  // Sends a microphase's report (kVarPhase = `done`) to the manager.
  void report(const wire::Strobe& s, int64_t done, std::span<const uint8_t> enc);
  std::function<bool()> reconnect_manager_;
  std::function<void(uint64_t, const std::string&)> report_lost_;
  std::function<void(uint64_t, const std::string&)> described_;
  std::atomic<uint64_t> describe_job_{0};
  void answer_describe();
  // Test-only (BCS_TEST_FAULT in the node manager's environment):
  // "report-endpoint-lost" drops the endpoint to the manager before the
  // job's fifth report, once, as a send the fabric gave up on does;
  // "report-lost" does so and never connects again; "report-ahead" sends
  // the fifth report as the answer of a slice 1000 later (as another job's
  // report on the job's variable once did).
  enum class ReportFault { none, endpoint_lost, lost, ahead } report_fault_ = report_fault();
  static ReportFault report_fault();
  uint64_t reports_ = 0;
  // The strobe receiver's scheduling: see nic.cc.
  void pick_priority();

  // DEM: with nothing to do on this node, arm the doorbell for posts.
  void park_if_idle(uint64_t slice, wire::Report& rep);
  void unpark();

  core::Fabric& fabric_;
  const uint32_t self_;
  const std::chrono::nanoseconds liveness_;
  bool realtime_;  // may go real time (false once the kernel refused)
  RealtimeGate gate_;  // the strobe receiver's priority (pick_priority)
  // A job of bound ranks starts (set_job): set_job puts the strobe
  // receiver at real time at once, and the receiver applies its gate's
  // decision itself at its next pick_priority, with the job as computing.
  const bool may_realtime_;
  std::atomic<pid_t> sr_tid_{0};
  std::atomic<bool> job_starting_{false};
  // How long a rank must have computed (NmJob::a_rank_computes) before
  // the strobe receiver goes real time: ranks that only pass between two
  // MPI calls (a ping-pong's) never do.
  static constexpr uint64_t kComputingNs = 50'000;
  std::mutex job_mu_;
  std::map<uint64_t, std::shared_ptr<NmJob>> jobs_;  // held, by id; guarded by job_mu_
  uint64_t active_ = 0;  // the job the doorbell watches (0: none); guarded by job_mu_
  // Every held job's roles, and the one the current strobe is for
  // (strobe receiver thread only).
  HeldStates<NodeJobState> states_;
  NodeJobState* cur_ = nullptr;
  // Written by the strobe receiver, read by the doorbell. Per node, not
  // per job: the doorbell watches one job at a time (the active one), and
  // a switch (switch_to) resets what names a job:
  //  - the epoch a bell carries is the job's own (NmJob::finished): the
  //    rows of the gang matrix number their slices apart, so a node's
  //    last microphase of another job could have told the manager that
  //    this one's ranks blocked after a slice they never saw;
  //  - parked_ names the DEM at which the active job parked, and that
  //    job's kNmParked flag is up: the job left is unparked (its ranks
  //    stop ringing; the manager strobes a job it switches in);
  //  - leasing_ is 1 only within one strobe (a lease, a held report), so
  //    it is 0 at every slice boundary where a switch can happen.
  std::atomic<uint64_t> parked_{0};  // phase_value() of the DEM that parked, 0: not parked
  std::atomic<uint32_t> leasing_{0};  // 1 while run_fused runs a lease or a report is held
  monitor::LocalRecorder local_;
  bool local_emds_ = true;  // BCS_EMDS=off: nothing noted
  // A held report said "all blocked", so the doorbell was left asleep on
  // leasing_ (a bell would only repeat the report); strobe receiver only.
  // Cleared, and the doorbell woken, at a switch: it is then to watch
  // another job's ranks.
  bool doorbell_dozing_ = false;
  Doorbell doorbell_;                // last: its thread reads the members above
};

}  // namespace bcs::nm
