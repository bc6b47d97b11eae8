// The node manager's doorbell: one thread that sleeps on the job segment's
// futex word (SegmentHeader::bell) and tells the machine manager, between
// slices, what only the ranks know:
//
//   blocked  every local rank is asleep in a blocking call: nothing on this
//            node will post until the runtime completes something, so the
//            strobe sender may start the next slice at once instead of
//            waiting for the period (the work-conserving strobe);
//   work     a rank posted while the node was parked: the strobe sender,
//            which stopped strobing because no node had anything to do,
//            starts a slice.
//
// Ranks ring only when the NM asked for it (SegmentHeader::nm_flags, like
// io_uring's need-wakeup flag), so an idle node costs nothing and a busy one
// pays no system call per post. The doorbell trusts nothing a rank writes:
// a ring only makes it look at the rings and the ranks' `waiting` flags
// itself, and it sends at most one bell of each kind per microphase, so a
// rank ringing in a loop costs its own job a few slices, nothing more.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>

#include "bcs/core.h"
#include "job.h"

namespace bcs::nm {

class Doorbell {
 public:
  // The epoch of a bell is the job's last microphase finished here
  // (NmJob::finished).
  // `parked`: the DEM phase value at which the node parked, 0 if it is not.
  // `leasing`: 1 while the strobe receiver runs a lease (Strobe::lease_ns)
  // and watches the bell itself; the doorbell then sleeps on this word
  // instead, and the strobe receiver wakes it when the lease ends.
  // Both are written by the strobe receiver.
  // `realtime`: as the strobe receiver (Nic), SCHED_FIFO when permitted.
  Doorbell(core::Fabric& fabric, const std::atomic<uint64_t>& parked,
           std::atomic<uint32_t>& leasing, bool realtime);
  ~Doorbell();
  Doorbell(const Doorbell&) = delete;
  Doorbell& operator=(const Doorbell&) = delete;

  void set_job(std::shared_ptr<NmJob> job);

 private:
  void run();
  void check(NmJob& job);
  void send(const NmJob& job, uint64_t epoch, uint8_t kind);

  core::Fabric& fabric_;
  const std::atomic<uint64_t>& parked_;
  std::atomic<uint32_t>& leasing_;
  const bool realtime_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::shared_ptr<NmJob> job_;  // guarded by mu_
  bool stop_ = false;           // guarded by mu_
  // What was last sent, for which job (doorbell thread only).
  struct Sent {
    uint64_t job = 0, epoch = 0;
    bool operator==(const Sent&) const = default;
  };
  Sent blocked_sent_, work_sent_;
  std::thread thread_;
};

}  // namespace bcs::nm
