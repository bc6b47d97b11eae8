// One writer per node manager (daemons/mm/node_writer.h): a node that does
// not read holds up only its own messages, each node's order is kept, and
// stopping a writer waits for the write in progress. The sinks are fakes
// the test blocks and releases; nothing here waits for a time.
#include "node_writer.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <iostream>
#include <latch>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bcs.grpc.pb.h"

namespace bcs::mm {
namespace {

// A message told apart by a number (Welcome's node id).
v1::ManagerMsg msg(uint32_t n) {
  v1::ManagerMsg m;
  m.mutable_welcome()->set_node_id(n);
  return m;
}

// A sink that records what it was given and can be made to block on a
// chosen message until released, or to fail it.
struct FakeStream {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<uint32_t> got;
  uint32_t block_on = UINT32_MAX;  // this message's write waits for release()
  uint32_t fail_on = UINT32_MAX;   // this message's write returns false
  bool entered = false;            // the blocking write has begun
  bool released = false;
  bool release_result = true;      // what the blocked write returns
  std::atomic<bool> returned{false};  // the blocked write has returned

  NodeWriter::Sink sink() {
    return [this](const v1::ManagerMsg& m) {
      const uint32_t n = m.welcome().node_id();
      std::unique_lock lk(mu);
      got.push_back(n);
      cv.notify_all();
      if (n == fail_on) return false;
      if (n != block_on) return true;
      entered = true;
      cv.notify_all();
      cv.wait(lk, [&] { return released; });
      returned = true;
      return release_result;
    };
  }
  void wait_entered() {
    std::unique_lock lk(mu);
    cv.wait(lk, [&] { return entered; });
  }
  void wait_count(size_t k) {
    std::unique_lock lk(mu);
    cv.wait(lk, [&] { return got.size() >= k; });
  }
  void release(bool result = true) {
    std::lock_guard lk(mu);
    released = true;
    release_result = result;
    cv.notify_all();
  }
  std::vector<uint32_t> seen() {
    std::lock_guard lk(mu);
    return got;
  }
};

TEST(NodeWriter, ABlockedNodeDoesNotHoldAnotherNodesMessages) {
  FakeStream slow, fast;
  slow.block_on = 1;
  NodeWriter a("slow", slow.sink());
  NodeWriter b("fast", fast.sink());
  ASSERT_TRUE(a.push(msg(1)));
  ASSERT_TRUE(a.push(msg(2)));
  slow.wait_entered();  // a's writer is stuck in its first write
  for (uint32_t i = 10; i < 20; ++i) ASSERT_TRUE(b.push(msg(i)));
  // If b waited behind a, this would never return (and the test times out).
  EXPECT_TRUE(b.drain());
  EXPECT_EQ(fast.seen().size(), 10u);
  // a still holds its second message behind the blocked write.
  EXPECT_EQ(slow.seen(), std::vector<uint32_t>{1});
  slow.release();
  EXPECT_TRUE(a.drain());
  EXPECT_EQ(slow.seen(), (std::vector<uint32_t>{1, 2}));
}

TEST(NodeWriter, KeepsEachNodesOrder) {
  FakeStream s1, s2;
  s1.block_on = 0;  // the rest queue up behind a blocked write, then go at once
  NodeWriter w1("n1", s1.sink());
  NodeWriter w2("n2", s2.sink());
  std::vector<uint32_t> want;
  // Pushed from two threads at once, as flush() is called from many.
  std::latch go(2);
  std::thread t1([&] {
    go.arrive_and_wait();
    for (uint32_t i = 0; i < 1000; ++i) ASSERT_TRUE(w1.push(msg(i)));
  });
  std::thread t2([&] {
    go.arrive_and_wait();
    for (uint32_t i = 0; i < 1000; ++i) ASSERT_TRUE(w2.push(msg(i)));
  });
  t1.join();
  t2.join();
  s1.release();
  EXPECT_TRUE(w1.drain());
  EXPECT_TRUE(w2.drain());
  for (uint32_t i = 0; i < 1000; ++i) want.push_back(i);
  EXPECT_EQ(s1.seen(), want);
  EXPECT_EQ(s2.seen(), want);
}

TEST(NodeWriter, StopWaitsForTheWriteInProgressAndDropsTheRest) {
  FakeStream s;
  s.block_on = 1;
  std::latch cancelled(1);
  // Cancel only says that stop() asked; the write returns when the test
  // releases it, so stop() must still be waiting then.
  NodeWriter w("n", s.sink(), [&] { cancelled.count_down(); });
  ASSERT_TRUE(w.push(msg(1)));
  ASSERT_TRUE(w.push(msg(2)));
  ASSERT_TRUE(w.push(msg(3)));
  s.wait_entered();
  std::atomic<bool> stopped{false};
  bool write_had_returned = false;
  std::thread stopper([&] {
    w.stop();
    write_had_returned = s.returned;
    stopped = true;
  });
  cancelled.wait();  // stop() has begun: it cancels because a write is in progress
  EXPECT_FALSE(stopped);  // and cannot have returned: the write is still blocked
  EXPECT_FALSE(w.push(msg(4)));  // a stopped writer takes nothing more
  s.release(false);  // as a cancelled gRPC write does
  stopper.join();
  EXPECT_TRUE(write_had_returned);
  // Messages queued behind the blocked write were dropped, never written.
  EXPECT_EQ(s.seen(), std::vector<uint32_t>{1});
  w.stop();  // idempotent
}

TEST(NodeWriter, StopOfAnIdleWriterDoesNotCancel) {
  FakeStream s;
  int cancels = 0;
  NodeWriter w("n", s.sink(), [&] { ++cancels; });
  ASSERT_TRUE(w.push(msg(1)));
  ASSERT_TRUE(w.drain());
  w.stop();
  EXPECT_EQ(cancels, 0);
  EXPECT_FALSE(w.failed());
}

TEST(NodeWriter, AFailedWriteEndsTheWriter) {
  FakeStream s;
  s.block_on = 1;
  s.fail_on = 2;
  NodeWriter w("n", s.sink());
  ASSERT_TRUE(w.push(msg(1)));
  s.wait_entered();
  ASSERT_TRUE(w.push(msg(2)));
  ASSERT_TRUE(w.push(msg(3)));  // queued behind the write that will fail
  s.release();
  EXPECT_FALSE(w.drain());  // returns once the writer ended, false: not all written
  EXPECT_TRUE(w.failed());
  EXPECT_FALSE(w.push(msg(4)));
  EXPECT_EQ(s.seen(), (std::vector<uint32_t>{1, 2}));
}

TEST(NodeWriter, ANodeThatDoesNotReadIsCutOffAtTheBound) {
  FakeStream s;
  s.block_on = 0;
  int cancels = 0;
  const size_t one = msg(1).ByteSizeLong();
  // Room for a few queued messages (each counted with an overhead) behind
  // the one being written.
  NodeWriter w("n", s.sink(), [&] { ++cancels; }, 4 * (one + 128));
  ASSERT_TRUE(w.push(msg(0)));
  s.wait_entered();
  uint32_t accepted = 0;
  while (w.push(msg(1 + accepted))) ASSERT_LT(++accepted, 100u);
  EXPECT_EQ(accepted, 4u);
  EXPECT_EQ(cancels, 1);  // the stream is cancelled: the session ends, the node is lost
  EXPECT_TRUE(w.failed());
  EXPECT_FALSE(w.push(msg(99)));
  EXPECT_EQ(cancels, 1);  // once
  s.release(false);
  w.stop();
  EXPECT_EQ(s.seen(), std::vector<uint32_t>{0});
}

// The same over real gRPC streams, as node_session uses them: a node
// manager whose process reads nothing (stopped) fills its stream's windows
// and its writer waits in Write; another node's stream is not held, and
// the stuck session ends once its writer's stop() cancels the call.
class Sessions final : public v1::NodeControl::Service {
 public:
  grpc::Status Session(grpc::ServerContext* ctx,
                       grpc::ServerReaderWriter<v1::ManagerMsg, v1::NodeMsg>* stream) override {
    v1::NodeMsg msg;
    if (!stream->Read(&msg)) return grpc::Status::OK;
    const std::string name = msg.register_().name();
    auto w = std::make_shared<NodeWriter>(
        name,
        [this, name, stream](const v1::ManagerMsg& m) {
          const bool ok = stream->Write(m);
          std::lock_guard lk(mu_);
          if (ok) ++written_[name];
          return ok;
        },
        [ctx] { ctx->TryCancel(); }, size_t{1} << 30);
    {
      std::lock_guard lk(mu_);
      writers_[name] = w;
    }
    cv_.notify_all();
    while (stream->Read(&msg)) {
    }
    w->stop();  // as node_session does before it returns
    {
      std::lock_guard lk(mu_);
      ended_[name] = true;
    }
    cv_.notify_all();
    return grpc::Status::OK;
  }
  std::shared_ptr<NodeWriter> writer(const std::string& name) {
    std::unique_lock lk(mu_);
    cv_.wait(lk, [&] { return writers_.count(name) > 0; });
    return writers_[name];
  }
  void wait_ended(const std::string& name) {
    std::unique_lock lk(mu_);
    cv_.wait(lk, [&] { return ended_[name]; });
  }
  size_t written(const std::string& name) {
    std::lock_guard lk(mu_);
    return written_[name];
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::shared_ptr<NodeWriter>> writers_;
  std::map<std::string, bool> ended_;
  std::map<std::string, size_t> written_;
};

TEST(NodeWriter, OverGrpcAStreamNobodyReadsHoldsOnlyItsOwnWriterAndStopCancelsIt) {
  Sessions svc;
  int port = 0;
  grpc::ServerBuilder b;
  b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  b.RegisterService(&svc);
  auto server = b.BuildAndStart();
  ASSERT_TRUE(server);
  ASSERT_NE(port, 0);
  // One connection each, as two node managers have.
  auto connect = [&] {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    return v1::NodeControl::NewStub(grpc::CreateCustomChannel(
        "127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials(), args));
  };
  auto slow_stub = connect(), fast_stub = connect();
  grpc::ClientContext slow_ctx, fast_ctx;
  auto slow = slow_stub->Session(&slow_ctx);
  auto fast = fast_stub->Session(&fast_ctx);
  v1::NodeMsg reg;
  reg.mutable_register_()->set_name("slow");
  ASSERT_TRUE(slow->Write(reg));
  reg.mutable_register_()->set_name("fast");
  ASSERT_TRUE(fast->Write(reg));
  auto ws = svc.writer("slow"), wf = svc.writer("fast");
  // 64 MiB of stdin chunks to the one that never reads: far more than its
  // windows and socket buffers take (about 4 MiB on loopback).
  v1::ManagerMsg chunk;
  chunk.mutable_input()->set_data(std::string(size_t{64} << 10, 'x'));
  constexpr int kChunks = 1024;
  for (int i = 0; i < kChunks; ++i) ASSERT_TRUE(ws->push(chunk));
  for (uint32_t i = 0; i < 100; ++i) ASSERT_TRUE(wf->push(msg(i)));
  v1::ManagerMsg got;
  for (uint32_t i = 0; i < 100; ++i) {
    ASSERT_TRUE(fast->Read(&got));
    EXPECT_EQ(got.welcome().node_id(), i);
  }
  // How far the slow stream got before its writer blocked, for the log.
  std::cout << "the unread stream took " << svc.written("slow") << " of " << kChunks
            << " chunks\n";
  // Its session's read side ends while its writer is (very likely) in
  // Write: stop() cancels the call and the session returns.
  slow->WritesDone();
  svc.wait_ended("slow");
  // It did block: what the transport took is a fraction of what was sent.
  EXPECT_LT(svc.written("slow"), static_cast<size_t>(kChunks));
  slow_ctx.TryCancel();
  slow->Finish();
  // A session that ends with its writer idle is not cancelled (its last
  // write may still be returning when the client has read it: drain()).
  EXPECT_TRUE(wf->drain());
  fast->WritesDone();
  while (fast->Read(&got)) {
  }
  const grpc::Status st = fast->Finish();
  EXPECT_TRUE(st.ok()) << st.error_code() << ": " << st.error_message();
  svc.wait_ended("fast");
  EXPECT_FALSE(wf->failed());
  server->Shutdown();
}

}  // namespace
}  // namespace bcs::mm
