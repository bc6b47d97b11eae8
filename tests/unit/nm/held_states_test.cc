// Several jobs held by one node manager (held_states.h): each keeps its own
// roles' state while another job's slices run, every strobe picks the
// state of the job it names, and a remote read is served by the job it
// names. The roles run over the fakes (fakes.h), a cluster of two node
// managers per job, as the roles' tests drive them.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <set>

#include "fakes.h"
#include "held_states.h"

namespace bcs::nm {
namespace {

using namespace fakes;

// One job's roles on both node managers (what each node keeps per job in
// NodeJobState), ranks 0 and 2 on node 0, rank 1 on node 1.
struct JobRoles : TwoNodeCluster {
  explicit JobRoles(uint64_t id) {
    for (auto& n : nodes) n->ranks.job_ = id;
  }
};

class TwoJobsHeld : public testing::Test {
 protected:
  // A DEM strobe of `job`: the state its slice runs with.
  JobRoles* begin_slice(uint64_t job) {
    return held_.begin_slice(
        job, jobs_.count(job) > 0, [&](uint64_t id, const JobRoles&) { return jobs_.count(id) > 0; },
        [&] { return std::make_unique<JobRoles>(job); });
  }
  std::set<uint64_t> jobs_{1, 2};
  HeldStates<JobRoles> held_;
};

TEST_F(TwoJobsHeld, AnUnexpectedMessageOfOneJobSurvivesTheOthersSlicesAndIsMatchedInItsNext) {
  std::vector<uint8_t> big(5000, 5), big_in(5000, 0);
  // Job 1's slice: rank 0 sends to rank 1, which has no receive yet.
  JobRoles* a = begin_slice(1);
  ASSERT_NE(a, nullptr);
  a->nodes[0]->ranks.allow(0, big.data(), big.size());
  a->nodes[1]->ranks.allow(1, big_in.data(), big_in.size());
  a->nodes[0]->ranks.post(0, send_desc(1, 7, big.data(), big.size(), 0));
  a->slice();
  EXPECT_EQ(a->nodes[1]->br.unexpected_moving(), 1u);
  // Job 2's slices: a message of its own, posted, matched and moved.
  char msg[8] = "from-b", in[8] = {};
  for (int k = 0; k < 3; ++k) {
    JobRoles* b = begin_slice(2);
    ASSERT_NE(b, nullptr);
    ASSERT_NE(b, a);
    EXPECT_EQ(held_.current(), b);
    EXPECT_EQ(b->nodes[1]->br.unexpected_moving(), 0u) << "job 1's message is not job 2's";
    if (k == 0) {
      b->nodes[0]->ranks.allow(0, msg, sizeof msg);
      b->nodes[1]->ranks.allow(1, in, sizeof in);
      b->nodes[0]->ranks.post(0, send_desc(1, 7, msg, sizeof msg, 0));
      b->nodes[1]->ranks.post(1, recv_desc(0, 7, in, sizeof in, 1));
    }
    b->slice();
  }
  EXPECT_STREQ(in, "from-b");
  EXPECT_EQ(held_.size(), 2u);
  // Job 1's next slice: the same state, its message still waiting; the
  // receive posted now takes it.
  ASSERT_EQ(begin_slice(1), a);
  EXPECT_EQ(a->nodes[1]->br.unexpected_moving(), 1u);
  a->nodes[1]->ranks.post(1, recv_desc(0, 7, big_in.data(), big_in.size(), 3));
  a->slice();
  ASSERT_TRUE(a->nodes[1]->ranks.done(1, 3));
  EXPECT_EQ(big_in, big);
  EXPECT_TRUE(a->nodes[0]->ranks.done(0, 0));
}

TEST_F(TwoJobsHeld, AReleasedJobLosesItsStateAtTheNextSliceBoundaryAndTheOtherKeepsIts) {
  JobRoles* a = begin_slice(1);
  JobRoles* b = begin_slice(2);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(held_.within_slice(2), b) << "a later microstrobe of job 2's slice";
  jobs_.erase(2);
  EXPECT_EQ(held_.within_slice(2), b) << "kept to the end of the slice it is released in";
  EXPECT_EQ(begin_slice(1), a);
  EXPECT_EQ(held_.size(), 1u);
  EXPECT_EQ(held_.find(2), nullptr);
  EXPECT_EQ(begin_slice(2), nullptr) << "a strobe of a job not held runs nothing here";
  EXPECT_EQ(held_.current(), nullptr);
  EXPECT_EQ(held_.find(1), a);
}

// A remote read names its job: served by that job's ranks and grants,
// whichever job the node runs now; a job not held refuses it.
TEST_F(TwoJobsHeld, ARemoteReadIsServedByTheJobItNames) {
  JobRoles* a = begin_slice(1);
  JobRoles* b = begin_slice(2);
  ASSERT_TRUE(a && b);
  begin_slice(1);  // job 1 runs now
  static int sent[16];
  for (int i = 0; i < 16; ++i) sent[i] = i * 3;
  const auto addr = reinterpret_cast<uint64_t>(sent);
  b->nodes[0]->ranks.allow(0, sent, sizeof sent);
  b->nodes[0]->ranks.grants_.grant(0, 3, 1, addr, sizeof sent);  // job 2's send, forwarded to node 1
  std::map<uint64_t, FakeRanks*> node0{{1, &a->nodes[0]->ranks}, {2, &b->nodes[0]->ranks}};
  auto ask = [&](uint64_t job, bool by_name) {
    wire::DmaGet g;
    g.job = job;
    g.token = 9;
    g.src_rank = 0;
    g.src_request = 3;
    g.addr = addr;
    g.len = 32;
    core::Message m;
    m.from = 1;
    m.data = wire::encode(g);
    auto it = node0.find(dma_get_job(m));
    // By name: the job the read names (Nic's handler). Else the job the
    // node runs now, as when a node held one job.
    LocalRanks* ranks = by_name ? (it == node0.end() ? nullptr : it->second) : node0[1];
    auto& q = b->nodes[1]->net.inbox[wire::kEvDmaData];
    q.clear();
    DmaHelper::serve(m, ranks, b->nodes[0]->net);
    EXPECT_EQ(q.size(), 1u);
    wire::DmaDataHeader h;
    std::memcpy(&h, q.front().data.data(), sizeof h);
    return std::pair{h.error, q.front().data.size() - sizeof h};
  };
  EXPECT_EQ(ask(2, false).first, bcs_err_peer_gone) << "job 1's ranks refuse job 2's read";
  EXPECT_EQ(ask(2, true), (std::pair<int32_t, size_t>{0, 32}));
  EXPECT_EQ(ask(3, true).first, bcs_err_peer_gone) << "a job not held";
}

}  // namespace
}  // namespace bcs::nm
