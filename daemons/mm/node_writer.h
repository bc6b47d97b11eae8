// One node manager's control messages, written to its stream in order by a
// thread of its own (issue 43, docs/plans/issue-43-space-sharing.md §2.6).
//
// Why: a gRPC Write blocks while the node manager does not read (it was
// SIGSTOPped, it hangs, its HTTP/2 window is full of a job's stdin). With
// one writer for every node, as before, such a node held up every other
// node's messages: other jobs' StartJob, KillJob and EndJob, and the strobe
// sender, which hands messages over when a job starts and ends. Here only
// the writer of that node waits; everyone else only queues.
//
// What bounds the queue. Unwritten messages stay here, in the manager's
// memory, for as long as the node does not read, which is at most until its
// keepalive declares it lost (Config::liveness, 60 s by default):
// - RankInput: Jobs.Input sends rank 0's node at most kInputWindow (1 MiB)
//   of stdin the node has not taken, per job; but a chunk without data
//   counts nothing there, so their number is not bounded by it.
// - StartJob: one per job started on the node, its environment and
//   arguments bounded by the launch limits (launch.h).
// - Welcome and Goodbye: once per session.
// - Peers: one per membership change, each the size of the whole table.
// - KillJob, EndJob, DescribeJob, PauseOutput: one per client call, job
//   event or output pause.
// The last two, and empty input chunks, are bounded by nothing but their
// rate.
// So the queue can grow without bound. It is bounded here by bytes
// (kNodeQueueMaxBytes, each message counted with a fixed overhead, so that
// empty ones count too): a node manager that leaves more unread is cut off
// with an error saying so (its stream is cancelled and it counts as lost, as
// if its keepalive had expired), rather than having messages dropped
// silently or the manager's memory grow.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "bcs.pb.h"

namespace bcs::mm {

// Far above what a node manager that reads at all leaves queued (its
// stdin window, a job's StartJob, a few peers tables), yet bounded.
inline constexpr size_t kNodeQueueMaxBytes = size_t{64} << 20;

class NodeWriter {
 public:
  // Writes one message to the node, blocking while it does not read; false:
  // the stream is broken (gRPC's Write). Called by the writer thread only.
  using Sink = std::function<bool(const v1::ManagerMsg&)>;
  // Ends the node's stream (ServerContext::TryCancel): a write in progress
  // then returns, and the session's read loop ends. Called with the
  // writer's lock held, so that it never runs once stop() has returned
  // (the stream and its context may be gone then): it must not block, nor
  // call into the writer. May be empty.
  using Cancel = std::function<void()>;

  // `name` names the node in log lines. The thread starts at once.
  NodeWriter(std::string name, Sink sink, Cancel cancel = {},
             size_t max_bytes = kNodeQueueMaxBytes);
  // stop(): the thread is joined.
  ~NodeWriter();
  NodeWriter(const NodeWriter&) = delete;
  NodeWriter& operator=(const NodeWriter&) = delete;

  // Queues `m` behind the messages pushed before it and wakes the thread;
  // never waits for a write. False: `m` is dropped, because the writer was
  // stopped, a write failed (the node is being lost), or the node has more
  // than max_bytes unwritten (then it is cancelled, see above).
  bool push(v1::ManagerMsg m);
  // Waits until every message pushed so far was written (true), or the
  // writer ended (false: stopped, failed, cut off). Not with a lock the
  // sink may need.
  bool drain();
  // Drops what is queued; if a write is in progress, cancels the stream
  // and waits for the write to return. The sink is not called after that.
  // Idempotent; the node's session calls it before it returns.
  void stop();
  // A write failed or the bound was passed.
  bool failed() const;

 private:
  void run();

  const std::string name_;
  const Sink sink_;
  const Cancel cancel_;
  const size_t max_bytes_;
  mutable std::mutex mu_;
  std::condition_variable cv_;       // for the thread: a message, or stopping
  std::condition_variable idle_cv_;  // for drain(): all written, or ended
  std::deque<std::pair<v1::ManagerMsg, size_t>> queue_;  // with its cost
  size_t queued_bytes_ = 0;
  bool writing_ = false;  // the thread is in sink_
  bool stopping_ = false;
  bool failed_ = false;
  std::thread thread_;  // started in the constructor, once the above exist
};

}  // namespace bcs::mm
