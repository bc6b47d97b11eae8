#include "node_writer.h"

#include <pthread.h>
#include <spdlog/spdlog.h>

namespace bcs::mm {

namespace {
// What a queued message is counted for beyond its encoded size: the objects
// that hold it (the message, its sub-message, the deque's slot). Without it
// a stream of empty messages would cost nothing and grow unbounded.
constexpr size_t kMessageOverhead = 128;

size_t cost(const v1::ManagerMsg& m) { return m.ByteSizeLong() + kMessageOverhead; }
}  // namespace

NodeWriter::NodeWriter(std::string name, Sink sink, Cancel cancel, size_t max_bytes)
    : name_(std::move(name)), sink_(std::move(sink)), cancel_(std::move(cancel)),
      max_bytes_(max_bytes) {
  thread_ = std::thread([this] { run(); });
}

NodeWriter::~NodeWriter() { stop(); }

bool NodeWriter::push(v1::ManagerMsg m) {
  const size_t c = cost(m);
  {
    std::lock_guard lk(mu_);
    if (stopping_ || failed_) return false;
    if (queued_bytes_ + c > max_bytes_) {
      // The node has not read for a long while (its window is full, and
      // more than max_bytes_ wait behind it): cut it off, loudly, instead
      // of holding more or dropping a message it would miss. Cancelled even
      // if no write is in progress, so that its session ends and the node
      // is lost (node_lost) rather than kept with a writer that is gone.
      spdlog::error(
          "{}: {} bytes of control messages it has not read, more than the {} bytes held for a "
          "node manager: closing its control stream; it counts as lost",
          name_, queued_bytes_ + c, max_bytes_);
      failed_ = true;
      queue_.clear();
      queued_bytes_ = 0;
      if (cancel_) cancel_();
      cv_.notify_one();
      idle_cv_.notify_all();
      return false;
    }
    queue_.emplace_back(std::move(m), c);
    queued_bytes_ += c;
  }
  cv_.notify_one();
  return true;
}

bool NodeWriter::drain() {
  std::unique_lock lk(mu_);
  idle_cv_.wait(lk, [&] { return stopping_ || failed_ || (queue_.empty() && !writing_); });
  return !stopping_ && !failed_;
}

void NodeWriter::stop() {
  {
    std::lock_guard lk(mu_);
    if (!stopping_) {
      stopping_ = true;
      // Messages for a node whose session ends can reach nobody.
      queue_.clear();
      queued_bytes_ = 0;
      // A write blocked on a node that does not read would hold the join
      // (and the session's return) until its keepalive gives up, or for
      // ever if the node only stopped sending; cancelling ends it now. Not
      // when idle: a node that left cleanly keeps its clean status.
      if (writing_ && cancel_) cancel_();
    }
  }
  cv_.notify_one();
  idle_cv_.notify_all();
  // The write in progress, if any, returns before the thread ends: after
  // this the sink is never called again.
  if (thread_.joinable()) thread_.join();
}

bool NodeWriter::failed() const {
  std::lock_guard lk(mu_);
  return failed_;
}

void NodeWriter::run() {
  pthread_setname_np(pthread_self(), "bcs-node-write");
  std::unique_lock lk(mu_);
  for (;;) {
    // Sleeps until there is something to write: an idle node costs nothing.
    cv_.wait(lk, [&] { return stopping_ || failed_ || !queue_.empty(); });
    if (stopping_ || failed_) break;
    v1::ManagerMsg m = std::move(queue_.front().first);
    queued_bytes_ -= queue_.front().second;
    queue_.pop_front();
    writing_ = true;
    // The write happens without the lock: pushes go on meanwhile, and only
    // this node's messages wait for it.
    lk.unlock();
    const bool ok = sink_(m);
    lk.lock();
    writing_ = false;
    if (!ok) {
      // The stream is broken: nothing more can be written to it, and the
      // session's read loop sees that too and loses the node. What is left
      // is dropped (as for a lost node).
      if (!stopping_ && !failed_)
        spdlog::info("{}: a write to its control stream failed; {} message(s) dropped", name_,
                     queue_.size() + 1);
      failed_ = true;
      break;
    }
    if (queue_.empty()) idle_cv_.notify_all();
  }
  queue_.clear();
  queued_bytes_ = 0;
  idle_cv_.notify_all();
}

}  // namespace bcs::mm
