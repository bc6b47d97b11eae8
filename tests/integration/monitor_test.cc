// The Monitor service story (issue 9): an operator follows a standing
// cluster's slices live while a job runs, reads a range of them back, is
// told plainly when the range is outside the window the manager keeps, and
// stopping the manager ends a follower's stream instead of hanging.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <signal.h>
#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "bcs.grpc.pb.h"
#include "harness.h"
#include "standing.h"
#include "story.h"

using namespace std::chrono_literals;
using bcs::test::describe;
using bcs::test::RunResult;
using bcs::test::prog;
using bcs::test::Standing;
namespace pb = bcs::v1;

namespace {

using MonitorStory = bcs::test::Story;

using bcs::test::TempDir;

std::unique_ptr<pb::Monitor::Stub> monitor_of(const Standing& c) {
  return pb::Monitor::NewStub(grpc::CreateChannel(c.addr, grpc::InsecureChannelCredentials()));
}

TEST_F(MonitorStory, FollowRangeAndWindow) {
  Standing c(1, {"--emds-window", "40"});
  ASSERT_TRUE(c.up());
  auto stub = monitor_of(c);

  // A follower, started before the job: it sees the job's slices as they
  // are recorded, in order.
  std::vector<uint64_t> seen;
  uint64_t missed = 0;
  grpc::ClientContext fctx;
  fctx.set_deadline(std::chrono::system_clock::now() + 60s);
  auto reader = stub->Follow(&fctx, pb::FollowRequest{});
  std::thread follower([&] {
    pb::FollowEvent ev;
    while (seen.size() < 30 && reader->Read(&ev)) {
      missed += ev.missed();
      for (const auto& s : ev.slices()) seen.push_back(s.slice());
    }
  });
  // prog_mds: a few hundred slices of send/receive and barriers.
  auto r = c.run({"-n", "2", prog("prog_mds"), "60"});
  EXPECT_EQ(r.status, 0) << describe(r);
  follower.join();
  fctx.TryCancel();
  reader->Finish();
  ASSERT_GE(seen.size(), 30u) << "the follower saw " << seen.size() << " slices";
  for (size_t i = 1; i < seen.size(); ++i) EXPECT_GT(seen[i], seen[i - 1]);

  // The window keeps the last 40 slices.
  pb::SlicesReply all;
  {
    grpc::ClientContext ctx;
    pb::SlicesRequest req;
    req.set_last(1000);
    ASSERT_TRUE(stub->Slices(&ctx, req, &all).ok());
  }
  ASSERT_EQ(all.slices_size(), 40);
  EXPECT_GT(all.total_slices(), 40u);
  const uint64_t lo = all.slices(0).slice(), hi = all.slices(39).slice();
  // A range inside the window: exactly its slices.
  {
    grpc::ClientContext ctx;
    pb::SlicesRequest req;
    req.set_range(true);
    req.set_first_slice(all.slices(10).slice());
    req.set_last_slice(all.slices(20).slice());
    pb::SlicesReply rep;
    ASSERT_TRUE(stub->Slices(&ctx, req, &rep).ok());
    ASSERT_EQ(rep.slices_size(), 11);
    for (int i = 0; i < 11; ++i) EXPECT_EQ(rep.slices(i).slice(), all.slices(10 + i).slice());
  }
  // Outside it: OUT_OF_RANGE, saying what is kept.
  {
    grpc::ClientContext ctx;
    pb::SlicesRequest req;
    req.set_range(true);
    req.set_first_slice(lo > 0 ? lo - 1 : 0);
    req.set_last_slice(hi);
    pb::SlicesReply rep;
    const auto st = stub->Slices(&ctx, req, &rep);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::OUT_OF_RANGE);
    EXPECT_NE(st.error_message().find("the window holds slices " + std::to_string(lo) + ".." +
                                      std::to_string(hi)),
              std::string::npos)
        << st.error_message();
  }
  {
    grpc::ClientContext ctx;
    pb::SlicesRequest req;
    req.set_range(true);
    req.set_first_slice(9);
    req.set_last_slice(3);
    pb::SlicesReply rep;
    EXPECT_EQ(stub->Slices(&ctx, req, &rep).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  }
  // The CLI says it plainly, with a failing status.
  auto cli = bcs::test::run({bcs::test::bin("bcs"), "stats", "--manager", c.addr, "--from", "0",
                             "--to", std::to_string(hi)},
                            30s);
  EXPECT_EQ(cli.status, 1) << describe(cli);
  EXPECT_NE(cli.err.find("OUT_OF_RANGE"), std::string::npos) << cli.err;

  // A follower attached while the manager stops: its stream ends, and the
  // manager exits cleanly within the harness's bound.
  grpc::ClientContext gctx;
  gctx.set_deadline(std::chrono::system_clock::now() + 60s);
  auto late = stub->Follow(&gctx, pb::FollowRequest{});
  std::atomic<bool> ended{false};
  std::thread waiter([&] {
    pb::FollowEvent ev;
    while (late->Read(&ev)) {
    }
    ended = true;
  });
  c.expect_alive_then_stop();
  waiter.join();
  EXPECT_TRUE(ended.load());
  late->Finish();
  expect_nothing_left_now();
}

// The node managers read each rank's MMDS counters from the segment when
// it exits, and the manager serves them per job: `bcs stats JOB` prints the
// same table as `bcs stats DIR` of the files the ranks wrote themselves,
// and a rank that never reached MPI_Finalize (it killed itself) is there
// too, though it wrote no file.
TEST_F(MonitorStory, JobStatsFromTheNodeManagers) {
  Standing c(2);
  ASSERT_TRUE(c.up());
  TempDir tmp("bcs-monitor-test");
  ASSERT_FALSE(tmp.path.empty());
  const std::string tmpl = tmp.path;
  const std::string dir = tmpl + "/job";
  auto r = bcs::test::bcs_run({"--manager", c.addr, "-n", "3", "--nodes", "2", "--job-dir", dir,
                               prog("prog_mds"), "20"},
                              90s, {{"BCS_MDS", "summary"}});
  ASSERT_EQ(r.status, 0) << describe(r);
  auto by_dir = bcs::test::run({bcs::test::bin("bcs"), "stats", dir}, 30s);
  ASSERT_EQ(by_dir.status, 0) << describe(by_dir);
  auto by_job = bcs::test::run({bcs::test::bin("bcs"), "stats", "--manager", c.addr, "1"}, 30s);
  ASSERT_EQ(by_job.status, 0) << describe(by_job);
  EXPECT_EQ(by_job.out, by_dir.out);
  EXPECT_NE(by_job.out.find("MPI_Barrier"), std::string::npos) << by_job.out;

  // Rank 1 kills itself after MPI_Init; rank 0 is ended by bcs.
  r = bcs::test::bcs_run({"--manager", c.addr, "-n", "2", "--nodes", "2", "--job-dir",
                          tmpl + "/killed", prog("prog_kill")},
                         90s, {{"BCS_MDS", "summary"}});
  EXPECT_EQ(r.status, 128 + SIGKILL) << describe(r);
  {
    auto stub = monitor_of(c);
    grpc::ClientContext ctx;
    pb::JobStatsRequest req;
    req.set_job_id(2);
    pb::JobStatsReply rep;
    ASSERT_TRUE(stub->JobStats(&ctx, req, &rep).ok());
    EXPECT_EQ(rep.nranks(), 2u);
    // Rank 1's exit ended the job, so its summary is there (rank 0's, killed
    // by bcs afterwards, may still be on its way).
    const pb::MmdsSummary* killed = nullptr;
    for (const auto& m : rep.ranks())
      if (m.rank() == 1) killed = &m;
    ASSERT_NE(killed, nullptr);
    EXPECT_EQ(killed->run_ns(), 0u);  // never reached MPI_Finalize
    // It wrote no report itself; bcs put the manager's summary (counters
    // only, run time 0) into the job directory in its place.
    std::ifstream f(tmpl + "/killed/mmds.rank1.json");
    ASSERT_TRUE(f.good());
    const std::string text((std::istreambuf_iterator<char>(f)), {});
    EXPECT_NE(text.find("\"run_ns\":0"), std::string::npos) << text;
  }
  // Without BCS_MDS there is nothing to show; an unknown job is NOT_FOUND.
  r = c.run({"-n", "2", prog("prog_ring")});
  ASSERT_EQ(r.status, 0) << describe(r);
  auto none = bcs::test::run({bcs::test::bin("bcs"), "stats", "--manager", c.addr, "3"}, 30s);
  EXPECT_EQ(none.status, 1);
  EXPECT_NE(none.err.find("no MMDS summaries"), std::string::npos) << none.err;
  auto unknown = bcs::test::run({bcs::test::bin("bcs"), "stats", "--manager", c.addr, "77"}, 30s);
  EXPECT_EQ(unknown.status, 1);
  EXPECT_NE(unknown.err.find("NOT_FOUND: no job 77"), std::string::npos) << unknown.err;
  c.expect_alive_then_stop();
  expect_nothing_left_now();
}

// Distributions and events live over gRPC, not only in files: a job run
// with BCS_MDS=all on a standing cluster reads the same from the manager
// (bcs stats JOB, bcs trace JOB) as from its job directory. The trace
// holds every message of the ring as a flow from its send to its receive,
// and each node's microphases on a track of its own.
TEST_F(MonitorStory, DistributionsAndTracesFromTheManagerMatchTheJobDirectory) {
  Standing c(2);
  ASSERT_TRUE(c.up());
  TempDir tmp("bcs-monitor-detail");
  ASSERT_FALSE(tmp.path.empty());
  const std::string dir = tmp.path + "/job";
  auto r = bcs::test::bcs_run({"--manager", c.addr, "-n", "3", "--nodes", "2", "--job-dir", dir,
                               prog("prog_ring")},
                              90s, {{"BCS_MDS", "all"}});
  ASSERT_EQ(r.status, 0) << describe(r);
  // Straight from the service: distributions when asked, events only when asked.
  auto stub = monitor_of(c);
  auto stats = [&](bool detail, bool events, std::vector<uint32_t> ranks) {
    grpc::ClientContext ctx;
    pb::JobStatsRequest req;
    req.set_job_id(1);
    req.set_detail(detail);
    req.set_events(events);
    for (uint32_t k : ranks) req.add_ranks(k);
    pb::JobStatsReply rep;
    EXPECT_TRUE(stub->JobStats(&ctx, req, &rep).ok());
    return rep;
  };
  const auto plain = stats(false, false, {});
  ASSERT_EQ(plain.ranks_size(), 3);
  for (const auto& m : plain.ranks()) {
    EXPECT_TRUE(m.has_report());
    EXPECT_EQ(m.granularity_hist().bins_size(), 0);
    EXPECT_EQ(m.events_size(), 0);
  }
  const auto detail = stats(true, false, {});
  ASSERT_EQ(detail.ranks_size(), 3);
  for (const auto& m : detail.ranks()) {
    uint64_t n = 0;
    for (uint64_t b : m.overhead_hist().bins()) n += b;
    EXPECT_EQ(n, m.overhead().count());  // every blocking call in the distribution
    EXPECT_EQ(m.events_size(), 0);
  }
  const auto one = stats(true, true, {1});
  ASSERT_EQ(one.ranks_size(), 1);
  EXPECT_EQ(one.ranks(0).rank(), 1u);
  EXPECT_GT(one.ranks(0).events_size(), 0);
  // 10 laps: rank 1 receives 10 messages and sends 10.
  EXPECT_EQ(one.ranks(0).messages_size(), 20 * 5);

  // The CLI: the same statistics (distributions included) either way.
  auto by_dir = bcs::test::run({bcs::test::bin("bcs"), "stats", dir, "--json"}, 30s);
  ASSERT_EQ(by_dir.status, 0) << describe(by_dir);
  auto by_job = bcs::test::run({bcs::test::bin("bcs"), "stats", "--manager", c.addr, "1", "--json"}, 30s);
  ASSERT_EQ(by_job.status, 0) << describe(by_job);
  EXPECT_EQ(by_job.out, by_dir.out);
  EXPECT_NE(by_job.out.find("hist_ns"), std::string::npos);

  // And the same messages and nodes in both traces.
  auto trace_of = [&](const std::vector<std::string>& args, const std::string& out) {
    std::vector<std::string> cmd{bcs::test::bin("bcs"), "trace"};
    cmd.insert(cmd.end(), args.begin(), args.end());
    cmd.insert(cmd.end(), {"-o", out});
    auto t = bcs::test::run(cmd, 30s);
    EXPECT_EQ(t.status, 0) << describe(t);
    std::ifstream in(out, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  auto count = [](const std::string& text, const std::string& what) {
    size_t n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
  };
  const std::string from_dir = trace_of({dir}, tmp.path + "/dir.json");
  const std::string from_job = trace_of({"--manager", c.addr, "1"}, tmp.path + "/job.json");
  EXPECT_EQ(count(from_dir, "\"ph\":\"s\""), 30u);  // 3 ranks x 10 laps, each paired
  EXPECT_EQ(count(from_dir, "\"ph\":\"f\""), 30u);
  EXPECT_EQ(count(from_job, "\"ph\":\"s\""), 30u);
  EXPECT_EQ(count(from_job, "\"ph\":\"f\""), 30u);
  for (const std::string* t : {&from_dir, &from_job}) {
    EXPECT_NE(t->find("\"node n1\""), std::string::npos);
    EXPECT_NE(t->find("\"node n2\""), std::string::npos);
  }
  c.expect_alive_then_stop();
  expect_nothing_left_now();
}

// Table 5.2: each node manager measures its own part of every slice and
// sends it in batches off the strobe path; the manager serves it per node.
// What the nodes drained adds up, exactly, to the descriptors the global
// series counted, and each node reports its own number of ranks.
TEST_F(MonitorStory, EveryNodeReportsItsOwnSeries) {
  Standing c(2);
  ASSERT_TRUE(c.up());
  auto r = c.run({"-n", "3", "--nodes", "2", prog("prog_mds"), "20"});
  ASSERT_EQ(r.status, 0) << describe(r);
  auto stub = monitor_of(c);
  pb::SlicesReply global;
  {
    grpc::ClientContext ctx;
    pb::SlicesRequest req;
    req.set_last(100000);
    ASSERT_TRUE(stub->Slices(&ctx, req, &global).ok());
  }
  uint64_t want = 0;
  for (const auto& s : global.slices()) want += s.descriptors();
  ASSERT_GT(want, 0u);
  auto local_sum = [&](const std::string& node, std::vector<uint32_t>* nlocal) {
    grpc::ClientContext ctx;
    pb::NodeSlicesRequest req;
    req.set_node(node);
    req.set_last(100000);
    pb::NodeSlicesReply rep;
    if (!stub->NodeSlices(&ctx, req, &rep).ok()) return uint64_t{0};
    uint64_t n = 0;
    for (const auto& s : rep.slices()) {
      n += s.descriptors();
      EXPECT_EQ(s.phase_ns_size(), 5);
      EXPECT_LE(s.blocked(), s.nlocal());
      if (nlocal) nlocal->push_back(s.nlocal());
    }
    return n;
  };
  // No waiting: a node manager sends its local records ahead of its last
  // rank's exit on the same stream, so the manager had them all when the
  // job ended.
  EXPECT_EQ(local_sum("n1", nullptr) + local_sum("n2", nullptr), want);
  std::vector<uint32_t> n1, n2;
  local_sum("n1", &n1);
  local_sum("n2", &n2);
  ASSERT_FALSE(n1.empty());
  ASSERT_FALSE(n2.empty());
  // Cyclic placement: ranks 0 and 2 on one node, rank 1 on the other.
  std::vector<uint32_t> per_node{*std::max_element(n1.begin(), n1.end()),
                                 *std::max_element(n2.begin(), n2.end())};
  std::sort(per_node.begin(), per_node.end());
  EXPECT_EQ(per_node, (std::vector<uint32_t>{1, 2}));
  {
    grpc::ClientContext ctx;
    pb::NodeSlicesRequest req;
    req.set_node("nowhere");
    pb::NodeSlicesReply rep;
    EXPECT_EQ(stub->NodeSlices(&ctx, req, &rep).error_code(), grpc::StatusCode::NOT_FOUND);
  }
  c.expect_alive_then_stop();
  expect_nothing_left_now();
}

// Following one job: only its slices, and the stream ends with the job.
TEST_F(MonitorStory, FollowingAJobEndsWithIt) {
  Standing c(1);
  ASSERT_TRUE(c.up());
  auto stub = monitor_of(c);
  auto jobs = pb::Jobs::NewStub(grpc::CreateChannel(c.addr, grpc::InsecureChannelCredentials()));
  // Job 1 runs while job 2 is followed from its start.
  RunResult second;
  std::thread runner([&] {
    auto r1 = c.run({"-n", "2", prog("prog_ring")});
    EXPECT_EQ(r1.status, 0) << describe(r1);
    // A second of barriers between computations: long enough for the
    // follower below to attach while it runs.
    second = c.run({"-n", "2", prog("prog_periodic"), "20000", "50"});
  });
  // Wait (bounded) until the manager knows job 2.
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  bool known = false;
  while (!known && std::chrono::steady_clock::now() < deadline) {
    grpc::ClientContext ctx;
    pb::ListReply rep;
    if (jobs->List(&ctx, pb::ListRequest{}, &rep).ok())
      for (const auto& j : rep.jobs()) known = known || j.job_id() == 2;
    if (!known) std::this_thread::sleep_for(5ms);
  }
  ASSERT_TRUE(known);
  grpc::ClientContext fctx;
  fctx.set_deadline(std::chrono::system_clock::now() + 90s);
  pb::FollowRequest req;
  req.set_job_id(2);
  auto reader = stub->Follow(&fctx, req);
  pb::FollowEvent ev;
  uint64_t n = 0;
  while (reader->Read(&ev))  // ends by itself when job 2 has ended
    for (const auto& s : ev.slices()) {
      EXPECT_EQ(s.job_id(), 2u);
      ++n;
    }
  EXPECT_TRUE(reader->Finish().ok());
  runner.join();
  EXPECT_EQ(second.status, 0) << describe(second);
  EXPECT_GT(n, 0u);
  {
    grpc::ClientContext ctx;
    pb::FollowRequest q;
    q.set_job_id(99);
    auto r = stub->Follow(&ctx, q);
    while (r->Read(&ev)) {
    }
    EXPECT_EQ(r->Finish().error_code(), grpc::StatusCode::NOT_FOUND);
  }
  // Its plot and trace come from the manager's window as well.
  {
    TempDir tmp("bcs-monitor-plot");
    ASSERT_FALSE(tmp.path.empty());
    const std::string d = tmp.path;
    auto plot = bcs::test::run(
        {bcs::test::bin("bcs"), "plot", "--manager", c.addr, "2", "--metric", "GETTS", "-o", d + "/p.svg"}, 30s);
    EXPECT_EQ(plot.status, 0) << describe(plot);
    EXPECT_TRUE(std::filesystem::file_size(d + "/p.svg") > 0);
    auto trace = bcs::test::run({bcs::test::bin("bcs"), "trace", "--manager", c.addr, "2", "-o", d + "/t.json"}, 30s);
    EXPECT_EQ(trace.status, 0) << describe(trace);
    auto none = bcs::test::run({bcs::test::bin("bcs"), "plot", "--manager", c.addr, "99", "-o", d + "/n.svg"}, 30s);
    // The manager's own answer: it does not know the job (issue 42: the
    // CLI stops at the manager's refusal, before reading any slice).
    EXPECT_EQ(none.status, 1);
    EXPECT_NE(none.err.find("NOT_FOUND: no job 99"), std::string::npos) << none.err;
  }
  // The CLI: a finished job's table ends at once; an unknown job is an error.
  auto done = bcs::test::run({bcs::test::bin("bcs"), "monitor", "--manager", c.addr, "2"}, 30s);
  EXPECT_EQ(done.status, 0) << describe(done);
  auto unknown = bcs::test::run({bcs::test::bin("bcs"), "monitor", "--manager", c.addr, "99"}, 30s);
  EXPECT_EQ(unknown.status, 1) << describe(unknown);
  EXPECT_NE(unknown.err.find("NOT_FOUND: no job 99"), std::string::npos) << unknown.err;
  c.expect_alive_then_stop();
  expect_nothing_left_now();
}

}  // namespace
