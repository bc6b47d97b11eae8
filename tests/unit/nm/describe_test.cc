// describe_waits: what a hung job's ranks wait for, as each node manager
// tells the manager for a kill's report, on two node managers with fakes
// for the network and the ranks (fakes.h). Collectives::waiting, which it
// also reads, is tested in collectives_rules_test.cc.
#include <gtest/gtest.h>

#include "describe.h"
#include "fakes.h"

namespace bcs::nm {
namespace {

using namespace fakes;

class DescribeWaits : public testing::Test, public TwoNodeCluster {};

// What a hung job's report says of each node's ranks (describe_waits):
// rank 0 sent tag 7 to rank 1 and waits for tag 8 from it, rank 1 waits
// for tag 9 from rank 0, rank 2 posted nothing. Each node names its own
// ranks' unmatched receives, and node 1 the message no receive took.
TEST_F(DescribeWaits, EachNodeSaysWhatItsRanksWait) {
  int x = 1, y = 0, z = 0;
  nodes[0]->ranks.post_eager(0, send_desc(1, 7, &x, sizeof x, 1), &x);
  nodes[0]->ranks.post(0, recv_desc(1, 8, &y, sizeof y, 2));
  nodes[1]->ranks.post(1, recv_desc(0, 9, &z, sizeof z, 1));
  nodes[1]->ranks.view_of(1).ctl->waiting.store(1);  // asleep in MPI
  slice();
  const std::string n0 = describe_waits(nodes[0]->ranks, nodes[0]->br.matcher(), nodes[0]->coll);
  const std::string n1 = describe_waits(nodes[1]->ranks, nodes[1]->br.matcher(), nodes[1]->coll);
  EXPECT_EQ(n0,
            "rank 0 was not in an MPI wait, unmatched: a receive from rank 1 tag 8 (MPI_COMM_WORLD, "
            "posted in slice 0); rank 2 was not in an MPI wait");
  EXPECT_EQ(n1,
            "rank 1 waited in MPI, unmatched: a receive from rank 0 tag 9 (MPI_COMM_WORLD, posted in "
            "slice 0), 1 message(s) for it no receive took");
  EXPECT_EQ(describe_waits(nodes[0]->ranks, nodes[0]->br.matcher(), nodes[0]->coll, 20),
            "rank 0 was not in an ...")
      << "cut at max_bytes";
}

}  // namespace
}  // namespace bcs::nm
