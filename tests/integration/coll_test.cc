// Integration stories for MPI collectives: the tests/programs/coll_*.c
// programs (each checks every collective result against a serial reference
// computed in the rank) under real `bcs run` jobs on the embedded default,
// with 1, 2 and 4 node managers. Rank counts 1, 2, 3, 4, 7 and 8; cyclic
// placement makes layouts such as -n 3 --nodes 2 and -n 7 --nodes 4 uneven.
//
// Not every program runs at every (ranks, node managers) pair: the grid
// below keeps the file to about 1 minute with a runtime that costs ~1 ms
// per collective (prog_coll_reduce makes ~2800 collective calls at 8 ranks,
// prog_coll_basic ~1200, prog_coll_nonblocking ~140, prog_coll_errors ~90,
// prog_coll_large 6 on megabyte buffers).
//
// After every story no process of ours may survive and no /dev/shm entry
// may appear (the same checks as run_test.cc's Story).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "harness.h"
#include "story.h"

using namespace std::chrono_literals;
using bcs::test::bcs_run;
using bcs::test::prog;
using bcs::test::describe;
using bcs::test::RunResult;
using testing::HasSubstr;

namespace {


// Every story: no process of ours survives the command, no /dev/shm entry appears.
class CollStory : public bcs::test::Story {
 protected:
  // Runs `program args...` on n ranks and `nodes` node managers; it must exit
  // 0, print its success line exactly once, and leave nothing behind.
  RunResult expect_passes(const std::string& program, int n, int nodes,
                          const std::vector<std::string>& args = {},
                          const std::map<std::string, std::string>& env = {}) {
    std::vector<std::string> a{"-n", std::to_string(n), "--nodes", std::to_string(nodes),
                               prog("prog_" + program)};
    a.insert(a.end(), args.begin(), args.end());
    auto r = bcs_run(a, 120s, env);
    EXPECT_EQ(r.status, 0) << describe(r);
    EXPECT_FALSE(r.timed_out) << describe(r);
    EXPECT_EQ(bcs::test::count(r.out, program + " ok"), 1u) << describe(r);
    EXPECT_THAT(r.out, HasSubstr("(" + std::to_string(n) + " ranks")) << describe(r);
    // The programs work around known Open MPI defects only under Open MPI
    // and say so on stderr; under bcs that must never happen.
    EXPECT_THAT(r.err, testing::Not(HasSubstr("Open MPI"))) << describe(r);
    expect_nothing_left_now();
    return r;
  }
};

struct Case {
  const char* program;  // tests/programs/<program>.c, binary prog_<program>
  int ranks;
  int nodes;
  std::vector<std::string> args;
};

std::string case_name(const testing::TestParamInfo<Case>& info) {
  std::string name = info.param.program;
  if (name.rfind("coll_", 0) == 0) name = name.substr(5);  // coll_basic -> basic
  name += "_" + std::to_string(info.param.ranks) + "ranks_" + std::to_string(info.param.nodes) +
          "nm";
  for (auto& a : info.param.args) name += "_" + a;
  return name;
}

class CollGrid : public CollStory, public testing::WithParamInterface<Case> {};

}  // namespace

// Each program at a chosen set of (ranks, node managers): one rank alone,
// every rank on its own node manager, uneven cyclic placements, and the
// largest job packed on fewer node managers.
TEST_P(CollGrid, MatchesTheSerialReference) {
  const Case& c = GetParam();
  expect_passes(c.program, c.ranks, c.nodes, c.args);
}

INSTANTIATE_TEST_SUITE_P(
    Collectives, CollGrid,
    testing::Values(
        // data movement: bcast, gather(v), scatter(v), allgather(v), alltoall(v,w), barrier
        Case{"coll_basic", 1, 1, {}}, Case{"coll_basic", 2, 2, {}},
        Case{"coll_basic", 3, 2, {}}, Case{"coll_basic", 4, 4, {}},
        Case{"coll_basic", 7, 4, {}}, Case{"coll_basic", 8, 2, {}},
        // reductions: every op on every type, user ops, in place, every root
        Case{"coll_reduce", 1, 1, {}}, Case{"coll_reduce", 3, 2, {}},
        Case{"coll_reduce", 4, 1, {}}, Case{"coll_reduce", 7, 4, {}},
        Case{"coll_reduce", 8, 4, {}},
        // megabyte buffers
        Case{"coll_large", 1, 1, {}}, Case{"coll_large", 2, 2, {}},
        Case{"coll_large", 4, 4, {}}, Case{"coll_large", 8, 2, {}},
        // non-blocking, many at once, and not matching point-to-point
        Case{"coll_nonblocking", 1, 1, {}}, Case{"coll_nonblocking", 3, 2, {}},
        Case{"coll_nonblocking", 4, 4, {}}, Case{"coll_nonblocking", 8, 1, {}},
        // ... and progressed by the node managers while the ranks compute
        Case{"coll_nonblocking", 1, 1, {"overlap"}}, Case{"coll_nonblocking", 2, 2, {"overlap"}},
        Case{"coll_nonblocking", 4, 1, {"overlap"}}, Case{"coll_nonblocking", 7, 4, {"overlap"}},
        // erroneous calls return their error class, the job goes on
        Case{"coll_errors", 1, 1, {}}, Case{"coll_errors", 2, 2, {}},
        Case{"coll_errors", 4, 4, {}},
        // Communicators and groups: dup, split, split_type, create, traffic on each.
        Case{"comm_basic", 1, 1, {}}, Case{"comm_basic", 3, 2, {}}, Case{"comm_basic", 8, 4, {}},
        Case{"comm_groups", 2, 1, {}}, Case{"comm_groups", 4, 2, {}},
        // Topologies and neighbourhood collectives: grids (periodic, with
        // duplicate neighbours at sizes 1 and 2), sub-grids, distributed graphs.
        Case{"topo", 1, 1, {}}, Case{"topo", 2, 2, {}}, Case{"topo", 3, 2, {}},
        Case{"topo", 4, 4, {}}, Case{"topo", 8, 4, {}},
        // Derived datatypes in point-to-point: strided, struct, subarray,
        // 24 MiB vectors across chunks, pack/unpack.
        Case{"dtype", 1, 1, {}}, Case{"dtype", 2, 2, {}}, Case{"dtype", 3, 2, {}},
        Case{"dtype", 4, 4, {}},
        // ... and in collectives: v, w and non-blocking forms, in place, every root.
        Case{"coll_holes", 1, 1, {}}, Case{"coll_holes", 2, 2, {}}, Case{"coll_holes", 3, 2, {}},
        Case{"coll_holes", 5, 4, {}},
        // Request families: persistent, Waitsome/Testsome, buffered, ready,
        // Sendrecv_replace.
        Case{"requests", 1, 1, {}}, Case{"requests", 2, 2, {}}, Case{"requests", 3, 2, {}},
        Case{"requests", 4, 4, {}},
        // MPI 4.0's persistent collectives: rounds with new data, started in
        // different orders by different members, a user op, neighbours.
        Case{"coll_persistent", 1, 1, {}}, Case{"coll_persistent", 2, 2, {}},
        Case{"coll_persistent", 4, 2, {}}, Case{"coll_persistent", 5, 4, {}},
        // MPI 4.0's MPI_Isendrecv(_replace): one request for both halves.
        Case{"isendrecv", 1, 1, {}}, Case{"isendrecv", 2, 1, {}}, Case{"isendrecv", 2, 2, {}},
        Case{"isendrecv", 3, 2, {}},
        // 10,000 small sends posted before any receive, then more receives
        // than the request table holds: back-pressure, nothing lost.
        Case{"flood", 2, 1, {}}, Case{"flood", 2, 2, {}}, Case{"flood", 3, 2, {}},
        // Receives of messages that already wait: taken from the unexpected
        // shelf in send order per key, past large and synchronous sends,
        // after a receive still open, truncated, racing a cancel.
        Case{"shelf", 2, 1, {}}, Case{"shelf", 2, 2, {}}, Case{"shelf", 3, 2, {}},
        Case{"shelf", 4, 4, {}},
        // More than 2 GiB in one message (a derived type of INT_MAX chars
        // plus a remainder), every byte checked: cross-memory, and to self.
        Case{"bigmsg", 2, 1, {}}, Case{"bigmsg", 1, 1, {}},
        // Fair chunking: 8 bytes are not held behind another pair's 1 GiB
        // (on one node, and with both senders on one node and the receiver
        // on the other).
        Case{"fair", 3, 1, {}}, Case{"fair", 3, 2, {}},
        // Load without loss: windows of small Isend/Irecv, barriers, an
        // all-to-all by point-to-point over 16 ranks (tests/programs/load.c;
        // with large counts it is the sanitizer load run).
        Case{"load", 2, 2, {"window", "20000"}}, Case{"load", 3, 2, {"window", "5000"}},
        Case{"load", 2, 1, {"barrier", "2000"}}, Case{"load", 16, 2, {"a2a", "100"}},
        // 4 MiB messages between node managers of one host, their receivers
        // waiting (the receiving rank copies) or computing (the node
        // managers copy), and within one node.
        Case{"load", 4, 2, {"a2a", "524288", "3"}}, Case{"load", 4, 1, {"a2a", "524288", "3"}},
        // A message buffer that is not mapped: MPI_ERR_BUFFER on both sides, job goes on.
        Case{"badbuf", 2, 1, {}}, Case{"badbuf", 2, 2, {}},
        // MPI_Cancel of receives and sends (matched or not), generalized requests.
        Case{"cancel", 1, 1, {}}, Case{"cancel", 2, 1, {}}, Case{"cancel", 2, 2, {}},
        Case{"cancel", 5, 4, {}},
        // Matched probes: Mprobe/Improbe/Mrecv/Imrecv.
        Case{"mprobe", 1, 1, {}}, Case{"mprobe", 2, 2, {}}, Case{"mprobe", 5, 2, {}},
        // Intercommunicators: create, point-to-point, merge, dup, split, create.
        Case{"intercomm", 2, 2, {}}, Case{"intercomm", 3, 2, {}}, Case{"intercomm", 5, 2, {}},
        Case{"intercomm", 8, 4, {}},
        // Collectives on intercommunicators, both directions, every
        // root position; merge and dup after a non-zero creation leader.
        Case{"intercoll", 2, 1, {}}, Case{"intercoll", 3, 2, {}}, Case{"intercoll", 5, 2, {}},
        Case{"intercoll", 8, 4, {}},
        // ... and their non-blocking forms (one collective over both groups).
        Case{"intercoll", 2, 2, {"nb"}}, Case{"intercoll", 5, 2, {"nb"}},
        Case{"intercoll", 8, 4, {"nb"}}),
    case_name);

// ---------------------------------------------------------------------------
TEST_F(CollStory, OverlapResultsAppearWithoutAnyMpiCall) {
  // The success line of the overlap mode is printed only if the result of
  // MPI_Iallreduce appeared while the ranks made no MPI call, and the first
  // MPI_Test afterwards completed it.
  auto r = expect_passes("coll_nonblocking", 4, 2, {"overlap"});
  EXPECT_THAT(r.out, HasSubstr("without MPI calls"));
}

TEST_F(CollStory, LargeCollectivesMoveInPerSliceRounds) {
  // A 64 KiB budget cuts each megabyte collective of prog_coll_large into
  // rounds of about 64 KiB per node and slice (the 8 MiB broadcast into
  // 128): the results must be the same as in one round.
  for (auto [n, nodes] : {std::pair{4, 2}, std::pair{3, 1}, std::pair{5, 4}}) {
    auto r = bcs_run({"--chunk", "64KiB", "-n", std::to_string(n), "--nodes", std::to_string(nodes),
                      prog("prog_coll_large")},
                     120s);
    EXPECT_EQ(r.status, 0) << describe(r);
    EXPECT_EQ(bcs::test::count(r.out, "coll_large ok"), 1u) << describe(r);
    expect_nothing_left_now();
  }
}

TEST_F(CollStory, MembersOfOneNodeCopyLargeBlocksThemselves) {
  // With the default budget the megabyte blocks of prog_coll_large that
  // only this node's members need are read by the members themselves
  // (copy orders), all at once, instead of by the node manager; with
  // BCS_COLL_MEMBER_COPY=off the node copies them. The results are the same.
  for (const char* members : {"on", "off"}) {
    auto r = bcs_run({"-n", "3", prog("prog_coll_large")}, 120s,
                     {{"BCS_COLL_MEMBER_COPY", members}});
    EXPECT_EQ(r.status, 0) << members << ": " << describe(r);
    EXPECT_EQ(bcs::test::count(r.out, "coll_large ok"), 1u) << describe(r);
    expect_nothing_left_now();
  }
}

TEST_F(CollStory, NonContiguousDataMovesInChunksThatCutItsBlocks) {
  // prog_dtype's strided, struct and subarray messages (24 MiB vectors
  // among them) move as layouts the node managers follow; a 64 KiB budget
  // (odd to every block size) makes chunks start and end inside blocks, on
  // one node manager, on two, and on two over TCP.
  for (auto [n, nodes, tcp] : {std::tuple{2, 1, false}, std::tuple{4, 2, false},
                               std::tuple{3, 2, true}}) {
    std::map<std::string, std::string> env;
    if (tcp) env["UCX_TLS"] = "tcp";
    auto r = bcs_run({"--chunk", "64KiB", "-n", std::to_string(n), "--nodes", std::to_string(nodes),
                      prog("prog_dtype")},
                     120s, env);
    EXPECT_EQ(r.status, 0) << describe(r);
    EXPECT_EQ(bcs::test::count(r.out, "dtype ok"), 1u) << describe(r);
    expect_nothing_left_now();
  }
}

TEST_F(CollStory, LargeCollectivesCrossTheNetworkPath) {
  // UCX between the node managers forced onto TCP, as between real hosts.
  expect_passes("coll_large", 4, 2, {}, {{"UCX_TLS", "tcp"}});
}
