// The MMDS story (issue 9): a user runs a program with BCS_MDS set and gets
// per-rank statistics of every MPI call in a job directory, a Table 5.3
// summary from `bcs run` and from `bcs stats DIR`, and computation
// granularity + communication overhead that add up to each rank's own run
// time (the paper's §5.4 check).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bcs/export.h"
#include "bcs/mmds.h"
#include "harness.h"
#include "story.h"

using bcs::test::bcs_run;
using bcs::test::bin;
using bcs::test::describe;
using bcs::test::prog;
using testing::HasSubstr;
namespace fs = std::filesystem;
namespace mon = bcs::monitor;

namespace {

class MdsStory : public bcs::test::Story {
 protected:
  void SetUp() override {
    Story::SetUp();
    ASSERT_FALSE(tmp_dir_.path.empty());
  }
  bcs::test::TempDir tmp_dir_{"bcs-mds-test"};
  const std::string& tmp_ = tmp_dir_.path;
};

const mon::CallReport* find_call(const mon::RankReport& r, const std::string& name) {
  for (const auto& c : r.calls)
    if (c.name == name) return &c;
  return nullptr;
}

// "mds rank R run_ns T" lines: each rank's own measure of its run time.
std::map<int, double> own_run_times(const std::string& out) {
  std::map<int, double> t;
  const std::regex line(R"(mds rank (\d+) run_ns (\d+))");
  for (std::sregex_iterator it(out.begin(), out.end(), line), end; it != end; ++it)
    t[std::stoi((*it)[1])] = std::stod((*it)[2]);
  return t;
}

// The sum of column `col` of a CSV file the job directory holds.
// Three ping-pong round trips of 16 MiB moved `bytes`; a helper of the
// receiving rank (the sender, a second thread) copied `part` of them: some
// but not all when it was on, none when off.
void expect_part(bool on, uint64_t part, uint64_t bytes) {
  EXPECT_GE(bytes, uint64_t{3} * 2 * (16 << 20)) << "three round trips of 16 MiB";
  if (on) {
    EXPECT_GT(part, 0u);
    EXPECT_LT(part, bytes) << "the receiving ranks copied their part";
  } else {
    EXPECT_EQ(part, 0u);
  }
}

// Yama's ptrace scope (0 when absent): above 0, ranks may not touch each
// other's memory, and the node manager copies everything itself.
int yama_scope() {
  std::ifstream yama("/proc/sys/kernel/yama/ptrace_scope");
  int scope = 0;
  return yama && yama >> scope ? scope : 0;
}

uint64_t column_sum(const std::string& path, const std::string& col) {
  const auto sum = bcs::test::csv_column_sum(path, col);
  EXPECT_TRUE(sum) << col << " in " << path;
  return sum.value_or(0);
}

TEST_F(MdsStory, EveryCallIsCountedAndTheDistributionsAddUpToTheRunTime) {
  const int iters = 40;
  for (int nodes : {1, 2}) {
    const std::string dir = tmp_ + "/job" + std::to_string(nodes);
    auto r = bcs_run({"-n", "3", "--nodes", std::to_string(nodes), "--job-dir", dir,
                      prog("prog_mds"), std::to_string(iters)},
                     std::chrono::seconds(90), {{"BCS_MDS", "all"}});
    ASSERT_EQ(r.status, 0) << describe(r);
    EXPECT_THAT(r.out, HasSubstr("mds ok (3 ranks, 40 steps)"));
    EXPECT_THAT(r.err, HasSubstr("MMDS statistics of 3 ranks in " + dir));
    const auto own = own_run_times(r.out);
    ASSERT_EQ(own.size(), 3u) << describe(r);

    const auto ranks = mon::mmds_read_dir(dir);
    ASSERT_EQ(ranks.size(), 3u);
    for (const auto& rep : ranks) {
      SCOPED_TRACE("rank " + std::to_string(rep.rank) + ", " + std::to_string(nodes) + " NM");
      EXPECT_EQ(rep.size, 3);
      // What the program called, no more, no less.
      for (const auto& [name, n] : std::vector<std::pair<std::string, uint64_t>>{
               {"MPI_Sendrecv", iters}, {"MPI_Irecv", 2 * iters}, {"MPI_Isend", 2 * iters},
               {"MPI_Waitall", iters}, {"MPI_Barrier", iters}}) {
        const auto* c = find_call(rep, name);
        ASSERT_NE(c, nullptr) << name;
        EXPECT_EQ(c->stats.count, n) << name;
        EXPECT_LE(c->stats.min_ns, c->stats.max_ns) << name;
        EXPECT_GE(c->stats.total_ns, c->stats.max_ns) << name;
        ASSERT_TRUE(c->has_histograms) << name;
        EXPECT_EQ(c->latency.count(), n) << name;
      }
      EXPECT_EQ(rep.calls.size(), 5u);  // nothing else was called
      EXPECT_EQ(find_call(rep, "MPI_Sendrecv")->stats.bytes, uint64_t(iters) * 32);
      EXPECT_EQ(find_call(rep, "MPI_Isend")->size.count(), uint64_t(2 * iters));
      EXPECT_FALSE(find_call(rep, "MPI_Isend")->blocking);
      EXPECT_TRUE(find_call(rep, "MPI_Waitall")->blocking);
      EXPECT_FALSE(find_call(rep, "MPI_Waitall")->sized);
      EXPECT_TRUE(find_call(rep, "MPI_Sendrecv")->sized);
      // Blocking calls: Sendrecv, Waitall, Barrier per step; granularity has
      // one interval more (before MPI_Finalize).
      EXPECT_EQ(rep.overhead.count, uint64_t(3 * iters));
      EXPECT_EQ(rep.granularity.count, uint64_t(3 * iters + 1));
      EXPECT_EQ(rep.overhead_hist.count(), rep.overhead.count);
      // §5.4: the two distributions tile the MMDS's run time (MPI_Init's
      // return to MPI_Finalize's entry) exactly, and that window holds the
      // one the rank measured itself (between the two calls). How much
      // wider it is depends on preemption at its edges, so no bound on that.
      const uint64_t sum = rep.granularity.total_ns + rep.overhead.total_ns;
      EXPECT_EQ(sum, rep.run_ns);
      EXPECT_GE(rep.run_ns, static_cast<uint64_t>(own.at(rep.rank))) << "own " << own.at(rep.rank);
    }

    // Each node's own series (Table 5.2) is there too, and what the nodes
    // drained adds up to the descriptors of the global series.
    {
      uint64_t local = 0;
      for (int n = 1; n <= nodes; ++n) {
        const std::string f = dir + "/node-node" + std::to_string(n) + ".csv";
        ASSERT_TRUE(fs::exists(f)) << f;
        local += column_sum(f, "descriptors");
      }
      EXPECT_EQ(local, column_sum(dir + "/slices.csv", "descriptors"));
      EXPECT_GT(local, 0u);
    }
    // The summary, as bcs run left it and as bcs stats prints it.
    auto st = bcs::test::run({bin("bcs"), "stats", dir}, std::chrono::seconds(30));
    ASSERT_EQ(st.status, 0) << describe(st);
    EXPECT_THAT(st.out, HasSubstr("MMDS summary: 3 ranks"));
    EXPECT_TRUE(std::regex_search(st.out, std::regex(R"(\nMPI_Barrier +[0-9.]+ +[0-9.]+ +[0-9.]+ +120 )")))
        << st.out;
    EXPECT_THAT(st.out, HasSubstr("Comp Granularity"));
    EXPECT_THAT(st.out, HasSubstr("Comm Overhead"));
    EXPECT_TRUE(fs::exists(dir + "/summary.txt"));
    // The trace: the slices, and every call of every rank on its track
    // (BCS_MDS=all keeps each call's interval), in order.
    auto tr = bcs::test::run({bin("bcs"), "trace", dir, "-o", dir + "/trace.json"}, std::chrono::seconds(30));
    ASSERT_EQ(tr.status, 0) << describe(tr);
    {
      std::ifstream tin(dir + "/trace.json");
      const auto t = nlohmann::json::parse(tin);
      std::map<int, int> barriers;  // per rank track
      std::map<int, double> last_ts;
      int slices = 0;
      for (const auto& e : t.at("traceEvents")) {
        if (e.at("ph") != "X") continue;
        if (e.at("pid") == 1 && e.at("tid") == 1) ++slices;
        if (e.at("pid") != 2) continue;
        const int tid = e.at("tid");
        const double ts = e.at("ts");
        EXPECT_GE(ts, last_ts[tid]);
        last_ts[tid] = ts;
        barriers[tid] += e.at("name") == "MPI_Barrier";
      }
      EXPECT_GT(slices, 0);
      EXPECT_EQ(barriers, (std::map<int, int>{{1, iters}, {2, iters}, {3, iters}}));
    }
    auto js = bcs::test::run({bin("bcs"), "stats", "--json", dir}, std::chrono::seconds(30));
    ASSERT_EQ(js.status, 0) << describe(js);
    EXPECT_THAT(js.out, HasSubstr("\"MPI_Waitall\""));
    expect_nothing_left_now();
  }
}

TEST_F(MdsStory, SelectionsByRankAndCallAndNothingWhenOff) {
  // Only rank 1, histograms only for MPI_Barrier, a coarser resolution.
  const std::string dir = tmp_ + "/sel";
  auto r = bcs_run({"-n", "3", "--job-dir", dir, prog("prog_mds"), "5"}, std::chrono::seconds(90),
                   {{"BCS_MDS", "all"}, {"BCS_MDS_RANKS", "1"}, {"BCS_MDS_CALLS", "MPI_Barrier"},
                    {"BCS_MDS_RES", "2"}});
  ASSERT_EQ(r.status, 0) << describe(r);
  const auto ranks = mon::mmds_read_dir(dir);
  ASSERT_EQ(ranks.size(), 1u);
  EXPECT_EQ(ranks[0].rank, 1);
  EXPECT_EQ(ranks[0].res, 2u);
  for (const auto& c : ranks[0].calls) EXPECT_EQ(c.has_histograms, c.name == "MPI_Barrier") << c.name;

  // summary: counts without histograms.
  const std::string dir2 = tmp_ + "/summary";
  r = bcs_run({"-n", "2", "--job-dir", dir2, prog("prog_mds"), "5"}, std::chrono::seconds(90),
              {{"BCS_MDS", "summary"}});
  ASSERT_EQ(r.status, 0) << describe(r);
  const auto two = mon::mmds_read_dir(dir2);
  ASSERT_EQ(two.size(), 2u);
  for (const auto& c : two[0].calls) EXPECT_FALSE(c.has_histograms) << c.name;

  // Off: the run leaves no directory behind.
  const bcs::test::As here{0, 0, {}, tmp_};
  r = bcs::test::run_as(here, {bin("bcs"), "run", "--timeout", "60s", "-n", "2", prog("prog_mds"), "3"},
                        std::chrono::seconds(90), {{"BCS_MDS", "off"}});
  ASSERT_EQ(r.status, 0) << describe(r);
  for (const auto& e : fs::directory_iterator(tmp_))
    EXPECT_EQ(e.path().filename().string().rfind("bcs-job-", 0), std::string::npos) << e.path();

  // On with no --job-dir: a new directory here, named on stderr.
  r = bcs::test::run_as(here, {bin("bcs"), "run", "--timeout", "60s", "-n", "2", prog("prog_mds"), "3"},
                        std::chrono::seconds(90), {{"BCS_MDS", "summary"}});
  ASSERT_EQ(r.status, 0) << describe(r);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.err, m, std::regex("MMDS statistics of 2 ranks in (\\S+)"))) << r.err;
  EXPECT_EQ(fs::path(m[1].str()).parent_path(), fs::path(tmp_));
  EXPECT_EQ(mon::mmds_read_dir(m[1].str()).size(), 2u);

  // A bad setting is refused before anything runs, naming the variable.
  r = bcs_run({"-n", "2", prog("prog_mds"), "3"}, std::chrono::seconds(60), {{"BCS_MDS", "everything"}});
  EXPECT_EQ(r.status, 2) << describe(r);
  EXPECT_THAT(r.err, HasSubstr("BCS_MDS='everything'"));
  // A directory with another run's reports is refused too (they would mix).
  r = bcs_run({"-n", "2", "--job-dir", dir2, prog("prog_mds"), "3"}, std::chrono::seconds(60),
              {{"BCS_MDS", "summary"}});
  EXPECT_EQ(r.status, 2) << describe(r);
  EXPECT_THAT(r.err, HasSubstr("holds another run's reports"));
  expect_nothing_left_now();
}

// The paper's §5.3: a program that calls MPI_Barrier after every 20 ms of
// computation, on a fixed 1 ms strobe. The slice series the job directory
// holds (read from the manager's Monitor service at the job's end) shows
// the slices completing each barrier (one, or two adjacent ones when a
// barrier's rounds end a slice apart on two node managers), plus
// MPI_Finalize's, in order, with slices that schedule nothing between them.
TEST_F(MdsStory, TheSliceSeriesShowsACollectiveEveryPeriodOfComputation) {
  const int barriers = 6;
  for (int nodes : {1, 2}) {
    SCOPED_TRACE(std::to_string(nodes) + " NM");
    const std::string dir = tmp_ + "/periodic" + std::to_string(nodes);
    auto r = bcs_run({"-n", "2", "--nodes", std::to_string(nodes), "--strobe", "fixed", "--slice",
                      "1ms", "--job-dir", dir, prog("prog_periodic"), "20000",
                      std::to_string(barriers)});
    ASSERT_EQ(r.status, 0) << describe(r);
    EXPECT_THAT(r.err, HasSubstr("no MMDS reports: BCS_MDS is off"));
    std::ifstream in(dir + "/slices.csv");
    std::stringstream ss;
    ss << in.rdbuf();
    const auto slices = mon::slices_from_csv(ss.str());
    ASSERT_FALSE(slices.empty());
    // Slices that completed a collective; a barrier across two node
    // managers may finish on one node a slice before the other (its rounds
    // need the BBM again), so a run of adjacent such slices is one barrier.
    std::vector<uint64_t> coll;
    uint64_t last_coll = 0;
    for (size_t i = 0; i < slices.size(); ++i) {
      if (i) {
        EXPECT_GT(slices[i].slice, slices[i - 1].slice);
      }
      if (!slices[i].collectives) continue;
      if (coll.empty() || slices[i].slice != last_coll + 1) coll.push_back(slices[i].slice);
      last_coll = slices[i].slice;
    }
    // MPI_Finalize's barrier follows the last one at once: adjacent to it
    // (one run) or not.
    ASSERT_GE(coll.size(), size_t(barriers)) << ss.str().substr(0, 2000);
    ASSERT_LE(coll.size(), size_t(barriers + 1)) << ss.str().substr(0, 2000);
    // Between two barriers, 20 ms of computation: slices with no collective.
    for (int i = 1; i < barriers; ++i) EXPECT_GE(coll[i] - coll[i - 1], 2u) << i;
    // And the plot and trace of that series.
    auto plot = bcs::test::run({bin("bcs"), "plot", dir, "--metric", "collectives", "-o", dir + "/c.svg"},
                               std::chrono::seconds(30));
    ASSERT_EQ(plot.status, 0) << describe(plot);
    EXPECT_TRUE(fs::file_size(dir + "/c.svg") > 0);
    auto trace = bcs::test::run({bin("bcs"), "trace", dir, "-o", dir + "/t.json"}, std::chrono::seconds(30));
    ASSERT_EQ(trace.status, 0) << describe(trace);
    expect_nothing_left_now();
  }
}

// Large messages between two ranks of one node manager: the receiving
// rank reads part of each chunk and the sending rank, asleep in its
// blocking send, writes the rest (shared copy orders), so two CPUs copy at
// once. The node's own series says how many bytes the senders wrote; with
// BCS_COPY_SHARE=off in the node manager's environment the receivers read
// everything. The data arrives whole either way (prog_pingpong checks).
TEST_F(MdsStory, ASleepingSenderWritesPartOfItsLargeMessages) {
  if (const int scope = yama_scope()) GTEST_SKIP() << "Yama ptrace_scope " << scope;
  for (const char* share : {"on", "off"}) {
    SCOPED_TRACE(std::string("BCS_COPY_SHARE=") + share);
    const std::string dir = tmp_ + "/share-" + share;
    // --chunk: orders big enough to share, whatever copy rate the node
    // manager measured at its start.
    auto r = bcs_run({"-n", "2", "--chunk", "4MiB", "--job-dir", dir, prog("prog_pingpong"), "16M"},
                     std::chrono::seconds(90), {{"BCS_COPY_SHARE", share}});
    ASSERT_EQ(r.status, 0) << describe(r);
    EXPECT_THAT(r.out, HasSubstr("pingpong ok"));
    const std::string f = dir + "/node-node1.csv";
    ASSERT_TRUE(fs::exists(f)) << f;
    const uint64_t bytes = column_sum(f, "bytes"), by_sender = column_sum(f, "sender_bytes");
    expect_part(std::string(share) == "on", by_sender, bytes);
  }
}

// Two node managers on one host, one rank each: the receiving rank reads
// each chunk of a large message from the sender itself, and with no other
// rank of its node awake it has a CPU to spare, so a second thread of its
// own copies half of each order (DmaOrder::split). The nodes' series say
// how many bytes second threads copied; with BCS_COPY_SPLIT=off in the
// node managers' environment none did. The data arrives whole either way.
TEST_F(MdsStory, AReceiverWithACpuToSpareCopiesOnASecondThread) {
  if (const int scope = yama_scope()) GTEST_SKIP() << "Yama ptrace_scope " << scope;
  if (sysconf(_SC_NPROCESSORS_ONLN) < 2) GTEST_SKIP() << "one CPU: never a second thread";
  for (const char* split : {"on", "off"}) {
    SCOPED_TRACE(std::string("BCS_COPY_SPLIT=") + split);
    const std::string dir = tmp_ + "/split-" + split;
    auto r = bcs_run({"-n", "2", "--nodes", "2", "--chunk", "4MiB", "--job-dir", dir,
                      prog("prog_pingpong"), "16M"},
                     std::chrono::seconds(90), {{"BCS_COPY_SPLIT", split}});
    ASSERT_EQ(r.status, 0) << describe(r);
    EXPECT_THAT(r.out, HasSubstr("pingpong ok"));
    uint64_t bytes = 0, by_second = 0;
    for (const char* node : {"node1", "node2"}) {
      const std::string f = dir + "/node-" + node + ".csv";
      ASSERT_TRUE(fs::exists(f)) << f;
      bytes += column_sum(f, "bytes");
      by_second += column_sum(f, "second_thread_bytes");
    }
    expect_part(std::string(split) == "on", by_second, bytes);
  }
}

}  // namespace
