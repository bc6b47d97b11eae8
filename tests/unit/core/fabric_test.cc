// libbcs/core: xfer_and_signal / test_event / handlers between fabrics of one process.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <future>
#include <set>
#include <thread>

#include "test_util.h"

namespace bcs::core::test {
namespace {

TEST(CoreStatus, EveryValueHasADistinctString) {
  std::set<std::string> seen;
  for (Status s : {Status::ok, Status::timeout, Status::no_such_node, Status::closed,
                   Status::io_error, Status::invalid}) {
    std::string str = status_str(s);
    EXPECT_FALSE(str.empty());
    EXPECT_TRUE(seen.insert(str).second) << str;
  }
}

TEST(CoreFabric, CreateReportsSelfAndAddress) {
  auto f = make_fabric(42);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->self(), 42u);
  EXPECT_FALSE(f->address().empty());
  EXPECT_FALSE(f->connected(1));
}

// The daemons raise UCX's async thread, which each message from the
// network wakes first (sched_hint.h). It must be found: a UCX that named
// it otherwise would leave it at normal priority without a word.
TEST(CoreFabric, FindsUcxsAsyncThreadThatCarriesItsWakeUps) {
  auto a = make_fabric(1), b = make_fabric(2);
  connect_all({a.get(), b.get()});
  const auto tids = a->ucx_async_threads();
  ASSERT_EQ(tids.size(), 1u) << "UCX runs one async thread per process";
  EXPECT_NE(tids[0], static_cast<int>(gettid()));
  EXPECT_EQ(b->ucx_async_threads(), tids) << "one thread for every worker of the process";
}

TEST(CoreFabric, XferToOneNode) {
  auto a = make_fabric(1), b = make_fabric(2);
  ASSERT_TRUE(a && b);
  connect_all({a.get(), b.get()});
  Pump pb(*b);
  EXPECT_TRUE(a->connected(2));
  const auto data = bytes("hello, node 2");
  ASSERT_EQ(a->xfer_and_signal(2, 5, data), Status::ok);
  Message m;
  ASSERT_EQ(b->test_event(5, &m, kWait), Status::ok);
  EXPECT_EQ(m.from, 1u);
  EXPECT_EQ(m.data, data);
  // Nothing else was signalled, on this event or another.
  EXPECT_EQ(b->test_event(5, &m, 0ns), Status::timeout);
  EXPECT_EQ(b->pending(6), 0u);
}

TEST(CoreFabric, XferToSetOfThreeIncludingSelf) {
  auto f1 = make_fabric(1), f2 = make_fabric(2), f3 = make_fabric(3);
  ASSERT_TRUE(f1 && f2 && f3);
  connect_all({f1.get(), f2.get(), f3.get()});
  Pump p1(*f1), p2(*f2), p3(*f3);
  const auto data = pattern(1000, 9);
  ASSERT_EQ(f1->xfer_and_signal(NodeSet{1, 2, 3}, 11, data), Status::ok);
  for (Fabric* f : {f1.get(), f2.get(), f3.get()}) {
    Message m;
    ASSERT_EQ(f->test_event(11, &m, kWait), Status::ok) << "node " << f->self();
    EXPECT_EQ(m.from, 1u);
    EXPECT_EQ(m.data, data);
  }
  // Each node sends to the two others; senders are told apart by Message::from.
  for (Fabric* f : {f2.get(), f3.get()}) {
    std::vector<uint8_t> id{static_cast<uint8_t>(f->self())};
    ASSERT_EQ(f->xfer_and_signal(NodeSet{1}, 12, id), Status::ok);
  }
  std::set<NodeId> from;
  for (int i = 0; i < 2; ++i) {
    Message m;
    ASSERT_EQ(f1->test_event(12, &m, kWait), Status::ok);
    ASSERT_EQ(m.data.size(), 1u);
    EXPECT_EQ(m.data[0], m.from);
    from.insert(m.from);
  }
  EXPECT_EQ(from, (std::set<NodeId>{2, 3}));
}

TEST(CoreFabric, XferRejectsUnknownDestinationAndSendsToNone) {
  auto a = make_fabric(1), b = make_fabric(2);
  ASSERT_TRUE(a && b);
  connect_all({a.get(), b.get()});
  EXPECT_EQ(a->xfer_and_signal(NodeSet{2, 7}, 3, bytes("x")), Status::no_such_node);
  Message m;
  EXPECT_EQ(b->test_event(3, &m, 0ns), Status::timeout);
  EXPECT_EQ(a->test_event(3, nullptr, 0ns), Status::invalid);
}

// Sizes from empty to rendezvous, with small messages right behind big ones:
// they must arrive intact and in send order.
std::vector<size_t> mixed_sizes() {
  return {4u << 20, 10, 0, 1, 64u << 10, 4u << 20, 1, 10, 64u << 10, 0, 4u << 20, 10};
}

void check_in_order(Fabric& from, Fabric& to, EventId ev) {
  const auto sizes = mixed_sizes();
  // The receiver must progress while a rendezvous send waits for completion.
  auto rx = std::async(std::launch::async, [&] {
    std::vector<Message> got;
    for (size_t i = 0; i < sizes.size(); ++i) {
      Message m;
      if (to.test_event(ev, &m, kWait) != Status::ok) break;
      got.push_back(std::move(m));
    }
    return got;
  });
  for (size_t i = 0; i < sizes.size(); ++i)
    ASSERT_EQ(from.xfer_and_signal(to.self(), ev, pattern(sizes[i], i)), Status::ok) << i;
  auto got = rx.get();
  ASSERT_EQ(got.size(), sizes.size());
  for (size_t i = 0; i < sizes.size(); ++i) {
    EXPECT_EQ(got[i].from, from.self());
    ASSERT_EQ(got[i].data.size(), sizes[i]) << "message " << i << " out of order";
    EXPECT_TRUE(got[i].data == pattern(sizes[i], i)) << "message " << i << " corrupted";
  }
}

TEST(CoreFabric, MixedSizesArriveIntactAndInOrder) {
  auto a = make_fabric(1), b = make_fabric(2);
  ASSERT_TRUE(a && b);
  connect_all({a.get(), b.get()});
  check_in_order(*a, *b, 21);
}

TEST(CoreFabric, MixedSizesToSelfArriveInOrder) {
  auto a = make_fabric(1);
  ASSERT_TRUE(a);
  connect_all({a.get()});
  check_in_order(*a, *a, 22);
}

TEST(CoreFabric, TestEventTimesOut) {
  auto a = make_fabric(1);
  ASSERT_TRUE(a);
  Message m;
  EXPECT_EQ(a->test_event(1, &m, 0ns), Status::timeout);
  EXPECT_EQ(a->test_event(1, &m, 1ms), Status::timeout);
}

TEST(CoreFabric, BlockedWaiterReleasedByMessageFromAnotherThread) {
  auto a = make_fabric(1), b = make_fabric(2);
  ASSERT_TRUE(a && b);
  connect_all({a.get(), b.get()});
  auto waiter = std::async(std::launch::async, [&] {
    Message m;
    Status st = b->test_event(30, &m, kWait);
    return std::make_pair(st, m);
  });
  ASSERT_EQ(a->xfer_and_signal(2, 30, bytes("wake")), Status::ok);
  auto [st, m] = waiter.get();
  ASSERT_EQ(st, Status::ok);
  EXPECT_EQ(m.data, bytes("wake"));
}

// How another thread of the process interrupts a test_event (the machine
// manager's shutdown waking the strobe sender): no peer, no connection.
TEST(CoreFabric, ALocalSignalReleasesAWaiterWithoutAnyPeer) {
  auto a = make_fabric(1);
  ASSERT_TRUE(a);
  auto waiter = std::async(std::launch::async, [&] {
    Message m;
    Status st = a->test_event(31, &m, kWait);
    return std::make_pair(st, m);
  });
  a->signal_local(31, bytes("look"));
  auto [st, m] = waiter.get();
  ASSERT_EQ(st, Status::ok);
  EXPECT_EQ(m.from, 1u);
  EXPECT_EQ(m.data, bytes("look"));
  // Queued when nobody waits: the next test_event takes it.
  a->signal_local(31, {});
  EXPECT_EQ(a->test_event(31, &m, 0ns), Status::ok);
  EXPECT_TRUE(m.data.empty());
  EXPECT_EQ(a->test_event(31, &m, 0ns), Status::timeout);
}

// A waiter reads its event fd only after a kick (Waiter::kicked), and a
// pooled waiter serves the next wait. Many waits, each released by a signal
// from another thread at a different moment (before the wait, during its
// registration, while it sleeps), must each get their message: a kick lost
// between the write and the flag would leave a wait asleep to its timeout.
TEST(CoreFabric, ManyWaitsEachReleasedByASignalFromAnotherThread) {
  auto a = make_fabric(1);
  ASSERT_TRUE(a);
  constexpr int kRounds = 20000;
  std::atomic<int> taken{0};
  std::thread signaller([&] {
    for (int i = 0; i < kRounds; ++i) {
      // Let the waiter get at most one message ahead, so signals meet it in
      // every state of its wait.
      while (taken.load() < i) std::this_thread::yield();
      for (int k = 0; k < i % 7; ++k) std::this_thread::yield();
      // Now and then long enough for the waiter to go to sleep first.
      if (i % 16 == 0) {
        const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(i % 100);
        while (std::chrono::steady_clock::now() < until) {
        }
      }
      const uint8_t b[4] = {uint8_t(i), uint8_t(i >> 8), uint8_t(i >> 16), uint8_t(i >> 24)};
      a->signal_local(33, b);
    }
  });
  int late = 0, wrong = 0;
  for (int i = 0; i < kRounds; ++i) {
    Message m;
    // Far longer than any wake-up; a lost kick shows as a timeout.
    if (a->test_event(33, &m, std::chrono::seconds(2)) != Status::ok) {
      ++late;
      break;
    }
    int v = 0;
    if (m.data.size() == 4) v = m.data[0] | m.data[1] << 8 | m.data[2] << 16 | m.data[3] << 24;
    wrong += v != i;
    taken.store(i + 1);
  }
  taken.store(kRounds);
  signaller.join();
  EXPECT_EQ(late, 0);
  EXPECT_EQ(wrong, 0);
}

// A wait with nothing to take sleeps: its event fd, kicked and read many
// times before (a pooled waiter), does not stay readable and turn the wait
// into a loop. Counted in the waiting thread's CPU time, which a busy
// machine does not inflate: a loop would use most of the 300 ms.
TEST(CoreFabric, AWaitWithNothingToTakeSleeps) {
  auto a = make_fabric(1);
  ASSERT_TRUE(a);
  Message m;
  // Signals that come while the wait is registered kick its waiter (one
  // that comes first is simply taken).
  std::atomic<int> taken{0};
  std::thread signaller([&] {
    for (int i = 0; i < 50; ++i) {
      while (taken.load() < i) std::this_thread::yield();
      const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(1);
      while (std::chrono::steady_clock::now() < until) {
      }
      a->signal_local(34, bytes("x"));
    }
  });
  for (int i = 0; i < 50; ++i) {
    EXPECT_EQ(a->test_event(34, &m, kWait), Status::ok);
    taken.store(i + 1);
  }
  signaller.join();
  auto cpu_ns = [] {
    timespec t{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return int64_t{t.tv_sec} * 1'000'000'000 + t.tv_nsec;
  };
  const int64_t before = cpu_ns();
  EXPECT_EQ(a->test_event(34, &m, std::chrono::milliseconds(300)), Status::timeout);
  EXPECT_LT(cpu_ns() - before, 100'000'000);
}

// Whether a thread is at real time is asked of the kernel once per policy
// change the process announces, not at every wait.
TEST(CoreSched, ThreadIsRealtimeAsksTheKernelAgainOnlyAfterAnAnnouncedChange) {
  std::thread t([] {
    sched_policy_changed();
    EXPECT_FALSE(thread_is_realtime());
    sched_param p{};
    p.sched_priority = 1;
    if (sched_setscheduler(0, SCHED_FIFO, &p) != 0) {
      GTEST_SKIP() << "no right to SCHED_FIFO here";
    }
    EXPECT_FALSE(thread_is_realtime()) << "cached: not announced yet";
    sched_policy_changed();
    EXPECT_TRUE(thread_is_realtime());
    p.sched_priority = 0;
    ASSERT_EQ(sched_setscheduler(0, SCHED_OTHER, &p), 0);
    sched_policy_changed();
    EXPECT_FALSE(thread_is_realtime());
  });
  t.join();
}

// Two threads block on different events of one fabric; whichever of them
// progresses the worker, each must get its own message.
TEST(CoreFabric, TwoWaitersOnOneFabricEachGetTheirEvent) {
  auto a = make_fabric(1), b = make_fabric(2);
  ASSERT_TRUE(a && b);
  connect_all({a.get(), b.get()});
  auto wait_on = [&](EventId ev) {
    return std::async(std::launch::async, [&b, ev] {
      Message m;
      Status st = b->test_event(ev, &m, kWait);
      return std::make_pair(st, m.data);
    });
  };
  auto w1 = wait_on(31), w2 = wait_on(32);
  ASSERT_EQ(a->xfer_and_signal(2, 31, bytes("one")), Status::ok);
  auto r1 = w1.get();
  EXPECT_EQ(r1.first, Status::ok);
  EXPECT_EQ(r1.second, bytes("one"));
  ASSERT_EQ(a->xfer_and_signal(2, 32, bytes("two")), Status::ok);
  auto r2 = w2.get();
  EXPECT_EQ(r2.first, Status::ok);
  EXPECT_EQ(r2.second, bytes("two"));
}

TEST(CoreFabric, CloseReleasesBlockedWaiters) {
  auto a = make_fabric(1);
  ASSERT_TRUE(a);
  connect_all({a.get()});
  a->var_set(1, 0, {});
  auto ev_waiter = std::async(std::launch::async, [&] {
    Message m;
    return a->test_event(40, &m, std::nullopt);  // forever, until close()
  });
  auto cas_waiter = std::async(std::launch::async, [&] {
    return a->compare_and_write({1}, 1, Cmp::ge, 5, Fabric::kNoWrite, {}, std::nullopt);
  });
  a->close();
  ASSERT_EQ(ev_waiter.wait_for(kWait), std::future_status::ready);
  ASSERT_EQ(cas_waiter.wait_for(kWait), std::future_status::ready);
  EXPECT_EQ(ev_waiter.get(), Status::closed);
  EXPECT_EQ(cas_waiter.get(), Status::closed);
  Message m;
  EXPECT_EQ(a->test_event(40, &m, kWait), Status::closed);
  EXPECT_EQ(a->xfer_and_signal(1, 40, bytes("x")), Status::closed);
}

// A send waiting for a peer that does not take it (nobody progresses b,
// and 64 MiB needs the receiver's rendezvous) under a long limit ends when
// the fabric is closed, not at its limit: a node manager's report to a
// lost manager must not hold its shutdown. The send's own give_up poll
// says when it is waiting, so close() comes during the wait.
TEST(CoreFabric, CloseEndsASendThatWaitsForItsPeer) {
  auto a = make_fabric(1), b = make_fabric(2);
  ASSERT_TRUE(a && b);
  connect_all({a.get(), b.get()});
  std::promise<void> waiting;
  std::atomic<bool> told{false};
  SendLimit limit{std::chrono::seconds(600), [&] {
                    if (!told.exchange(true)) waiting.set_value();
                    return false;  // the caller still wants the send
                  }};
  const auto big = pattern(64u << 20, 3);
  auto send = std::async(std::launch::async,
                         [&] { return a->xfer_and_signal(2, 45, big, limit); });
  ASSERT_EQ(waiting.get_future().wait_for(kWait), std::future_status::ready);
  a->close();
  ASSERT_EQ(send.wait_for(kWait), std::future_status::ready);
  EXPECT_EQ(send.get(), Status::closed);
}

// Request/reply as the DMA helper does it: the server's handler runs inside
// progress and answers with xfer_and_signal, including a rendezvous-sized reply.
TEST(CoreFabric, HandlerServesRequestsAndReplies) {
  constexpr EventId kReq = 50, kReply = 51, kStop = 52;
  auto client = make_fabric(1), server = make_fabric(2);
  ASSERT_TRUE(client && server);
  connect_all({client.get(), server.get()});
  std::atomic<int> served{0};
  server->set_handler(kReq, [&](Message&& m) {
    // Request: 4 bytes of size; reply: that many pattern bytes.
    uint32_t n = 0;
    std::memcpy(&n, m.data.data(), sizeof n);
    ++served;
    EXPECT_EQ(server->xfer_and_signal(m.from, kReply, pattern(n, n)), Status::ok);
  });
  // Someone must progress the server: a thread blocked on an unrelated event.
  auto progress_thread = std::async(std::launch::async, [&] {
    Message m;
    return server->test_event(kStop, &m, kWait);
  });
  for (uint32_t n : {8u, 4096u, 2u << 20, 16u}) {
    std::vector<uint8_t> req(sizeof n);
    std::memcpy(req.data(), &n, sizeof n);
    ASSERT_EQ(client->xfer_and_signal(2, kReq, req), Status::ok);
    Message m;
    ASSERT_EQ(client->test_event(kReply, &m, kWait), Status::ok) << n;
    EXPECT_EQ(m.from, 2u);
    EXPECT_TRUE(m.data == pattern(n, n)) << n;
  }
  EXPECT_EQ(served.load(), 4);
  EXPECT_EQ(server->pending(kReq), 0u);  // handled, never queued
  ASSERT_EQ(client->xfer_and_signal(2, kStop, {}), Status::ok);
  EXPECT_EQ(progress_thread.get(), Status::ok);
}

TEST(CoreFabric, HandlerInstalledLateGetsQueuedMessagesInOrder) {
  auto a = make_fabric(1);
  ASSERT_TRUE(a);
  connect_all({a.get()});
  for (uint8_t i = 0; i < 3; ++i) ASSERT_EQ(a->xfer_and_signal(1, 60, std::vector<uint8_t>{i}), Status::ok);
  EXPECT_EQ(a->pending(60), 3u);
  std::vector<uint8_t> seen;
  a->set_handler(60, [&](Message&& m) { seen.push_back(m.data.at(0)); });
  a->progress();
  EXPECT_EQ(seen, (std::vector<uint8_t>{0, 1, 2}));
  // Removing the handler queues again.
  a->set_handler(60, nullptr);
  ASSERT_EQ(a->xfer_and_signal(1, 60, std::vector<uint8_t>{9}), Status::ok);
  Message m;
  ASSERT_EQ(a->test_event(60, &m, kWait), Status::ok);
  EXPECT_EQ(m.data, std::vector<uint8_t>{9});
}

TEST(CoreFabric, SendToDestroyedPeerFailsWithoutHanging) {
  auto a = make_fabric(1), b = make_fabric(2);
  ASSERT_TRUE(a && b);
  connect_all({a.get(), b.get()});
  auto pb = std::make_unique<Pump>(*b);
  ASSERT_EQ(a->xfer_and_signal(2, 70, bytes("alive")), Status::ok);
  Message m;
  ASSERT_EQ(b->test_event(70, &m, kWait), Status::ok);
  pb.reset();
  b.reset();
  // Small messages may still be buffered by a shared-memory transport that
  // cannot see its peer go; a rendezvous send needs the peer and fails within
  // the fabric's internal send timeout.
  const auto big = pattern(4u << 20, 1);
  Status st = Status::ok;
  for (int i = 0; i < 8 && st == Status::ok; ++i) st = a->xfer_and_signal(2, 70, big);
  EXPECT_NE(st, Status::ok);
  EXPECT_THAT(st, testing::AnyOf(Status::io_error, Status::no_such_node));
  EXPECT_FALSE(a->connected(2));
  EXPECT_EQ(a->xfer_and_signal(2, 70, bytes("x")), Status::no_such_node);
  // The fabric itself still works.
  ASSERT_EQ(a->xfer_and_signal(1, 71, bytes("self")), Status::ok);
  ASSERT_EQ(a->test_event(71, &m, kWait), Status::ok);
}

TEST(CoreFabric, ReconnectStartsAFreshStream) {
  auto a = make_fabric(1), b = make_fabric(2);
  ASSERT_TRUE(a && b);
  connect_all({a.get(), b.get()});
  Pump pb(*b);
  ASSERT_EQ(a->xfer_and_signal(2, 80, bytes("first")), Status::ok);
  ASSERT_EQ(a->connect(2, b->address()), Status::ok);  // replace the endpoint
  ASSERT_EQ(a->xfer_and_signal(2, 80, bytes("second")), Status::ok);
  std::multiset<std::string> got;
  for (int i = 0; i < 2; ++i) {
    Message m;
    ASSERT_EQ(b->test_event(80, &m, kWait), Status::ok);
    got.emplace(m.data.begin(), m.data.end());
  }
  EXPECT_EQ(got, (std::multiset<std::string>{"first", "second"}));
  a->disconnect(2);
  EXPECT_FALSE(a->connected(2));
  EXPECT_EQ(a->xfer_and_signal(2, 80, bytes("x")), Status::no_such_node);
}

}  // namespace
}  // namespace bcs::core::test
