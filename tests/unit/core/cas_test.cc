// libbcs/core: global variables and compare_and_write.
#include <gtest/gtest.h>

#include <future>
#include <thread>

#include "test_util.h"

namespace bcs::core::test {
namespace {

constexpr VarId kPhase = 3;
constexpr EventId kStrobe = 90;

class CompareAndWrite : public ::testing::Test {
 protected:
  void SetUp() override {
    for (NodeId id : {1, 2, 3}) {
      fs_.push_back(make_fabric(id));
      ASSERT_TRUE(fs_.back());
    }
    connect_all({f(1), f(2), f(3)});
    for (auto& f : fs_) pumps_.push_back(std::make_unique<Pump>(*f));
  }
  Fabric* f(NodeId id) { return fs_.at(id - 1).get(); }

  // Node n publishes `value` with attachment "report n/value" to all nodes.
  void publish(NodeId n, int64_t value) {
    const auto att = bytes("report " + std::to_string(n) + "/" + std::to_string(value));
    ASSERT_EQ(f(n)->var_set(kPhase, value, kAll, att), Status::ok) << f(n)->last_error();
  }

  const NodeSet kAll{1, 2, 3};
  std::vector<std::unique_ptr<Fabric>> fs_;
  std::vector<std::unique_ptr<Pump>> pumps_;  // destroyed before fs_
};

TEST_F(CompareAndWrite, WaitsForEveryNodeThenWritesToAll) {
  publish(1, 5);
  publish(2, 7);
  publish(3, 4);  // node 3 is behind

  // Node 1 sees the replicas once it has progressed; the condition fails on node 3.
  uint64_t retries = 0;
  std::vector<VarReplica> snap;
  EXPECT_EQ(f(1)->compare_and_write(kAll, kPhase, Cmp::ge, 5, kStrobe, bytes("go"), 20ms, &snap,
                                    &retries),
            Status::timeout);
  EXPECT_GT(retries, 0u);
  Message m;
  for (NodeId n : kAll) EXPECT_EQ(f(n)->test_event(kStrobe, &m, 0ns), Status::timeout) << n;

  publish(3, 5);
  retries = 0;
  ASSERT_EQ(f(1)->compare_and_write(kAll, kPhase, Cmp::ge, 5, kStrobe, bytes("go"), kWait, &snap,
                                    &retries),
            Status::ok);
  ASSERT_EQ(snap.size(), 3u);
  const int64_t expect[] = {5, 7, 5};
  for (size_t i = 0; i < 3; ++i) {
    const NodeId n = kAll[i];
    EXPECT_EQ(snap[i].node, n);
    EXPECT_EQ(snap[i].value, expect[i]);
    EXPECT_EQ(snap[i].attachment,
              bytes("report " + std::to_string(n) + "/" + std::to_string(expect[i])));
  }
  for (NodeId n : kAll) {
    ASSERT_EQ(f(n)->test_event(kStrobe, &m, kWait), Status::ok) << n;
    EXPECT_EQ(m.from, 1u);
    EXPECT_EQ(m.data, bytes("go"));
  }
}

TEST_F(CompareAndWrite, BlockedCallIsReleasedByAnotherThreadsVarSet) {
  publish(1, 1);
  publish(2, 1);
  publish(3, 0);
  auto cas = std::async(std::launch::async, [&] {
    uint64_t retries = 0;
    Status st = f(1)->compare_and_write(kAll, kPhase, Cmp::eq, 1, kStrobe, bytes("x"), kWait,
                                        nullptr, &retries);
    return std::make_pair(st, retries);
  });
  publish(3, 1);
  auto [st, retries] = cas.get();
  ASSERT_EQ(st, Status::ok);
  (void)retries;  // may be 0 if the update beat the first evaluation
  Message m;
  ASSERT_EQ(f(3)->test_event(kStrobe, &m, kWait), Status::ok);
}

TEST_F(CompareAndWrite, NoWriteOnlyEvaluates) {
  publish(1, 2);
  publish(2, 2);
  publish(3, 2);
  ASSERT_EQ(f(2)->compare_and_write(kAll, kPhase, Cmp::gt, 1, Fabric::kNoWrite, {}, kWait),
            Status::ok);
  Message m;
  for (NodeId n : kAll) EXPECT_EQ(f(n)->test_event(Fabric::kNoWrite, &m, 0ns), Status::timeout);
  // gt is strict.
  EXPECT_EQ(f(2)->compare_and_write(kAll, kPhase, Cmp::gt, 2, Fabric::kNoWrite, {}, 0ns),
            Status::timeout);
}

TEST_F(CompareAndWrite, ReplicasFollowUpdatesInOrder) {
  for (int64_t v = 0; v < 50; ++v) publish(2, v);
  // The last update wins at every watcher once all 50 have been delivered.
  ASSERT_EQ(f(3)->compare_and_write({2}, kPhase, Cmp::eq, 49, Fabric::kNoWrite, {}, kWait),
            Status::ok);
  VarReplica r = f(3)->var_get(kPhase, 2);
  EXPECT_EQ(r.node, 2u);
  EXPECT_EQ(r.value, 49);
  EXPECT_EQ(r.attachment, bytes("report 2/49"));
  EXPECT_EQ(f(2)->var_get(kPhase, 2).value, 49);  // own value
  EXPECT_EQ(f(3)->var_get(kPhase + 1, 2).value, INT64_MIN);  // never written
  EXPECT_EQ(f(1)->compare_and_write({}, kPhase, Cmp::eq, 0, Fabric::kNoWrite, {}, 0ns),
            Status::invalid);
}

// Variables only grow: an update below the replica's value (a late one
// of a stream its sender gave up and replaced) is dropped, attachment and
// all, so a condition that held keeps holding.
TEST_F(CompareAndWrite, AReplicaNeverMovesBack) {
  publish(2, 7);
  publish(2, 5);
  // A marker on another variable, after both on the same ordered stream:
  // once it is seen at node 3, so are they.
  ASSERT_EQ(f(2)->var_set(kPhase + 1, 1, kAll), Status::ok);
  ASSERT_EQ(f(3)->compare_and_write({2}, kPhase + 1, Cmp::eq, 1, Fabric::kNoWrite, {}, kWait),
            Status::ok);
  VarReplica r = f(3)->var_get(kPhase, 2);
  EXPECT_EQ(r.value, 7);
  EXPECT_EQ(r.attachment, bytes("report 2/7"));
  // The same value again is taken (a report sent twice), and a higher one.
  publish(2, 7);
  publish(2, 8);
  ASSERT_EQ(f(3)->compare_and_write({2}, kPhase, Cmp::eq, 8, Fabric::kNoWrite, {}, kWait),
            Status::ok);
  EXPECT_EQ(f(3)->var_get(kPhase, 2).attachment, bytes("report 2/8"));
}

// One thread waiting for several things (the strobe sender: any running
// job's reports and bells) wakes on a variable change it has not seen.
TEST_F(CompareAndWrite, AWaitWakesOnAReplicaChangeItHasNotSeen) {
  const uint64_t gen = f(1)->var_generation();
  EXPECT_EQ(f(1)->wait_event_or_var(kStrobe, gen, 0ns), Status::timeout);
  auto waited = std::async(std::launch::async,
                           [&] { return f(1)->wait_event_or_var(kStrobe, gen, kWait); });
  publish(2, 9);
  ASSERT_EQ(waited.get(), Status::ok);
  EXPECT_EQ(f(1)->var_get(kPhase, 2).value, 9);
  // Seen now: with the new generation it waits again.
  EXPECT_EQ(f(1)->wait_event_or_var(kStrobe, f(1)->var_generation(), 20ms), Status::timeout);
}

TEST_F(CompareAndWrite, AWaitWakesOnAMessageAndLeavesItQueued) {
  const uint64_t gen = f(1)->var_generation();
  auto waited = std::async(std::launch::async,
                           [&] { return f(1)->wait_event_or_var(kStrobe, gen, kWait); });
  ASSERT_EQ(f(2)->xfer_and_signal(1, kStrobe, bytes("bell")), Status::ok);
  ASSERT_EQ(waited.get(), Status::ok);
  Message m;
  ASSERT_EQ(f(1)->test_event(kStrobe, &m, 0ns), Status::ok);
  EXPECT_EQ(m.from, 2u);
  EXPECT_EQ(m.data, bytes("bell"));
  // Another event's message does not wake it.
  ASSERT_EQ(f(2)->xfer_and_signal(1, kStrobe + 1, bytes("other")), Status::ok);
  ASSERT_EQ(f(1)->test_event(kStrobe + 1, &m, kWait), Status::ok);
  EXPECT_EQ(f(1)->wait_event_or_var(kStrobe, f(1)->var_generation(), 20ms), Status::timeout);
}

TEST_F(CompareAndWrite, AWaitForeverEndsAtClose) {
  std::promise<void> waiting;
  auto waited = std::async(std::launch::async, [&] {
    waiting.set_value();
    return f(3)->wait_event_or_var(kStrobe, f(3)->var_generation(), std::nullopt);
  });
  waiting.get_future().wait();
  f(3)->close();
  EXPECT_EQ(waited.get(), Status::closed);
}

}  // namespace
}  // namespace bcs::core::test
