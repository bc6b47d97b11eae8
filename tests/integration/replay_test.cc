// The record-and-replay story (issue 10): a user has an MPI program whose
// output changes from run to run (a master/worker with MPI_ANY_SOURCE, a
// Testsome/Testany/Waitany polling loop, an Iprobe loop). They record one
// run with `bcs run --record DIR`, and every `bcs replay DIR` prints what
// the recorded run printed, also with another slice length and another
// number of node managers. When they change the program's input and replay
// anyway, bcs stops the job and says where it went another way. A damaged
// recording is refused naming the file and the byte.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "harness.h"
#include "story.h"

using bcs::test::bcs_run;
using bcs::test::bin;
using bcs::test::describe;
using bcs::test::prog;
using testing::HasSubstr;
namespace fs = std::filesystem;

namespace {

class ReplayStory : public bcs::test::Story, public testing::WithParamInterface<const char*> {
 protected:
  void SetUp() override {
    Story::SetUp();
    ASSERT_FALSE(tmp_dir_.path.empty());
  }
  // The line the program prints: "nondet MODE hash H".
  static std::string hash_line(const bcs::test::RunResult& r) {
    const auto at = r.out.find("nondet ");
    return at == std::string::npos ? "" : r.out.substr(at, r.out.find('\n', at) - at);
  }
  bcs::test::TempDir tmp_dir_{"bcs-replay-test"};
  const std::string& tmp_ = tmp_dir_.path;
};

constexpr auto kLimit = std::chrono::seconds(60);

TEST_P(ReplayStory, PlainRunsDifferAndEveryReplayPrintsTheRecordedOutput) {
  const std::string mode = GetParam();
  const std::vector<std::string> program = {prog("prog_nondet"), mode, "4"};
  auto with = [&](std::vector<std::string> head) {
    head.insert(head.end(), program.begin(), program.end());
    return head;
  };
  // Without a recording the output changes from run to run (it is the
  // arrival order): a few runs show two different ones.
  std::set<std::string> seen;
  for (int i = 0; i < 12 && seen.size() < 2; ++i) {
    auto r = bcs_run(with({"-n", "3"}), kLimit);
    ASSERT_EQ(r.status, 0) << describe(r);
    seen.insert(hash_line(r));
  }
  EXPECT_EQ(seen.size(), 2u) << "twelve plain runs printed the same: " << *seen.begin();

  const std::string dir = tmp_ + "/rec";
  auto recorded = bcs_run(with({"--record", dir, "-n", "3"}), kLimit);
  ASSERT_EQ(recorded.status, 0) << describe(recorded);
  const std::string want = hash_line(recorded);
  ASSERT_THAT(want, HasSubstr("nondet " + mode + " hash "));
  for (int i = 0; i < 20; ++i) {
    auto r = bcs::test::run({bin("bcs"), "replay", dir, "--timeout", "50s"}, kLimit);
    ASSERT_EQ(r.status, 0) << "replay " << i << ": " << describe(r);
    EXPECT_EQ(hash_line(r), want) << "replay " << i;
  }
  // Another slice length, another number of node managers: the same.
  auto other = bcs::test::run({bin("bcs"), "replay", dir, "--nodes", "2", "--slice", "2ms", "--timeout", "50s"},
                              kLimit);
  ASSERT_EQ(other.status, 0) << describe(other);
  EXPECT_EQ(hash_line(other), want);
  auto three = bcs::test::run({bin("bcs"), "replay", dir, "--nodes", "3", "--slice", "200us", "--timeout", "50s"},
                              kLimit);
  ASSERT_EQ(three.status, 0) << describe(three);
  EXPECT_EQ(hash_line(three), want);
  expect_nothing_left_now();
}

TEST_P(ReplayStory, AChangedInputStopsTheReplayNamingWhere) {
  const std::string mode = GetParam();
  const std::string dir = tmp_ + "/rec";
  auto recorded = bcs_run({"--record", dir, "-n", "3", prog("prog_nondet"), mode, "3"}, kLimit);
  ASSERT_EQ(recorded.status, 0) << describe(recorded);
  // One more message per worker than recorded.
  auto r = bcs_run({"--replay", dir, "-n", "3", prog("prog_nondet"), mode, "4"}, kLimit);
  EXPECT_FALSE(r.timed_out);
  EXPECT_NE(r.status, 0) << describe(r);
  EXPECT_NE(r.status, 124) << describe(r);  // stopped by the replay, not by the timeout
  EXPECT_THAT(r.err, HasSubstr("rank 0: replay diverged in MPI_")) << describe(r);
  EXPECT_THAT(r.err, HasSubstr("the recording has")) << describe(r);
  expect_nothing_left_now();
}

INSTANTIATE_TEST_SUITE_P(Programs, ReplayStory, testing::Values("master", "poll", "iprobe"));

class RecordingStory : public ReplayStory {};

// bcs run --record-wtime: the clock's readings are replayed as well, so a
// program that prints (or decides by) MPI_Wtime does the same again.
TEST_F(RecordingStory, ClockReadingsReplayWhenRecorded) {
  const std::string dir = tmp_ + "/rec";
  auto recorded = bcs_run({"--record", dir, "--record-wtime", "-n", "3", prog("prog_nondet"), "wtime", "3"}, kLimit);
  ASSERT_EQ(recorded.status, 0) << describe(recorded);
  const std::string want = hash_line(recorded);
  ASSERT_THAT(want, HasSubstr("nondet wtime hash "));
  for (int i = 0; i < 3; ++i) {
    auto r = bcs::test::run({bin("bcs"), "replay", dir, "--nodes", std::to_string(1 + i), "--timeout", "50s"}, kLimit);
    ASSERT_EQ(r.status, 0) << describe(r);
    EXPECT_EQ(hash_line(r), want);
  }
  auto info = bcs::test::run({bin("bcs"), "replay", dir, "--info"}, kLimit);
  EXPECT_THAT(info.out, HasSubstr("MPI_Wtime 6"));  // one reading per arrival
  // Without --record-wtime the readings are the replay's own.
  const std::string plain = tmp_ + "/plain";
  auto rec2 = bcs_run({"--record", plain, "-n", "3", prog("prog_nondet"), "wtime", "3"}, kLimit);
  ASSERT_EQ(rec2.status, 0) << describe(rec2);
  auto again = bcs::test::run({bin("bcs"), "replay", plain, "--timeout", "50s"}, kLimit);
  ASSERT_EQ(again.status, 0) << describe(again);
  EXPECT_NE(hash_line(again), hash_line(rec2));
  expect_nothing_left_now();
}

// bcs replay --stop-rank R: rank R waits in MPI_Init, asleep, saying its pid
// and how to attach gdb; the job goes on when it gets SIGCONT (what gdb's
// `signal SIGCONT` sends), and the output is the recorded one.
TEST_F(RecordingStory, AStoppedRankWaitsForTheDebugger) {
  const std::string dir = tmp_ + "/rec";
  auto recorded = bcs_run({"--record", dir, "-n", "3", prog("prog_nondet"), "master", "3"}, kLimit);
  ASSERT_EQ(recorded.status, 0) << describe(recorded);
  bool released = false;
  char state = '?';
  const std::string cmd = bin("bcs") + " replay " + dir + " --stop-rank 1 --timeout 50s 2>&1";
  auto r = bcs::test::run({"/bin/sh", "-c", cmd}, kLimit, {}, [&](const std::string& out) {
    const auto at = out.find("rank 1 waits in MPI_Init for a debugger: pid ");
    if (released || at == std::string::npos || out.find('\n', at) == std::string::npos) return;
    const pid_t pid = static_cast<pid_t>(std::stol(out.substr(at + 45)));
    // Asleep in MPI_Init (not running, not a zombie), and nothing printed
    // yet. The rank prints the line just before it goes to sleep, so on a
    // busy machine it may still be running it: look until it sleeps, or
    // for 10 s.
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    do {
      std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
      std::string line;
      std::getline(stat, line);
      const auto close = line.rfind(')');
      state = close != std::string::npos && close + 2 < line.size() ? line[close + 2] : '?';
      if (state != 'R') break;
      std::this_thread::yield();
    } while (std::chrono::steady_clock::now() < until);
    EXPECT_EQ(out.find("nondet master hash"), std::string::npos);
    released = ::kill(pid, SIGCONT) == 0;
  });
  EXPECT_TRUE(released) << describe(r);
  EXPECT_EQ(state, 'S');
  ASSERT_EQ(r.status, 0) << describe(r);
  EXPECT_THAT(r.out, HasSubstr("`gdb -p "));
  EXPECT_THAT(r.out, HasSubstr(hash_line(recorded)));
  expect_nothing_left_now();
}

// bcs replay --until-slice S: the job runs up to job slice S, then every
// rank pauses in its first MPI call from there on, asleep, saying the slice
// and how to attach gdb; SIGCONT lets each run on, and the job ends as it
// did when recorded. (100 barriers take at least 100 slices, so every rank
// is still inside the loop at slice 10.)
TEST_F(RecordingStory, UntilSlicePausesEveryRankThere) {
  const std::string dir = tmp_ + "/rec";
  auto recorded = bcs_run({"--record", dir, "-n", "3", prog("prog_barrier"), "100"}, kLimit);
  ASSERT_EQ(recorded.status, 0) << describe(recorded);
  // The slice schedule was recorded: each rank's ring gave descriptors.
  auto info = bcs::test::run({bin("bcs"), "replay", dir, "--info"}, kLimit);
  ASSERT_EQ(info.status, 0) << describe(info);
  size_t schedules = 0;
  for (auto at = info.out.find("its ring gave "); at != std::string::npos;
       at = info.out.find("its ring gave ", at + 1)) {
    EXPECT_GE(std::stoull(info.out.substr(at + 14)), 100u) << info.out;  // a barrier each
    ++schedules;
  }
  EXPECT_EQ(schedules, 3u) << info.out;

  std::map<int, std::pair<unsigned long long, char>> paused;  // rank -> slice, process state
  bool released = false;
  const std::string cmd = bin("bcs") + " replay " + dir + " --until-slice 10 --timeout 50s 2>&1";
  const std::string key = " paused in slice ";
  auto r = bcs::test::run({"/bin/sh", "-c", cmd}, kLimit, {}, [&](const std::string& out) {
    if (released) return;
    std::vector<std::string> lines;
    for (auto at = out.find(key); at != std::string::npos; at = out.find(key, at + 1)) {
      const auto start = out.rfind('\n', at) == std::string::npos ? 0 : out.rfind('\n', at) + 1;
      const auto end = out.find('\n', at);
      if (end == std::string::npos) return;  // not all of it yet
      lines.push_back(out.substr(start, end - start));
    }
    if (lines.size() < 3) return;
    EXPECT_EQ(out.find("barrier ok"), std::string::npos);
    std::vector<pid_t> pids;
    for (const auto& line : lines) {
      const int rank = std::stoi(line.substr(line.find("rank ") + 5));
      const unsigned long long slice = std::stoull(line.substr(line.find(key) + key.size()));
      const pid_t pid = static_cast<pid_t>(std::stol(line.substr(line.find(": pid ") + 6)));
      // The rank prints its line, then sleeps (sigsuspend): on a loaded
      // machine its line can arrive here first. So look until it sleeps;
      // one that spins stays 'R' to the deadline and fails below.
      auto state = [pid] {
        std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
        std::string st;
        std::getline(stat, st);
        const auto close = st.rfind(')');
        return close != std::string::npos && close + 2 < st.size() ? st[close + 2] : '?';
      };
      char now = state();
      for (const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
           now == 'R' && std::chrono::steady_clock::now() < until; now = state())
        std::this_thread::yield();
      paused[rank] = {slice, now};
      pids.push_back(pid);
    }
    for (pid_t pid : pids) EXPECT_EQ(::kill(pid, SIGCONT), 0);
    released = true;
  });
  ASSERT_TRUE(released) << describe(r);
  ASSERT_EQ(paused.size(), 3u) << describe(r);
  for (const auto& [rank, at] : paused) {
    EXPECT_GE(at.first, 10u) << "rank " << rank;
    EXPECT_EQ(at.second, 'S') << "rank " << rank;  // asleep, not spinning
  }
  ASSERT_EQ(r.status, 0) << describe(r);
  EXPECT_THAT(r.out, HasSubstr("barrier ok"));
  EXPECT_THAT(r.out, HasSubstr("(--until-slice 10) and waits for a debugger"));
  expect_nothing_left_now();
}

// A program that may call MPI from several threads is told at the start
// that the recording follows its calls in process order, recording and
// replaying; the replay of a single-threaded run of it still matches.
TEST_F(RecordingStory, ThreadsAreNamedAsNotCoveredAtTheStart) {
  const std::string dir = tmp_ + "/rec";
  auto recorded = bcs_run({"--record", dir, "-n", "3", prog("prog_nondet"), "master", "3", "serialized"}, kLimit);
  ASSERT_EQ(recorded.status, 0) << describe(recorded);
  EXPECT_THAT(recorded.err, HasSubstr("rank 0: MPI_THREAD_SERIALIZED: what each thread observes is not recorded"));
  auto r = bcs::test::run({bin("bcs"), "replay", dir, "--timeout", "50s"}, kLimit);
  ASSERT_EQ(r.status, 0) << describe(r);
  EXPECT_THAT(r.err, HasSubstr("rank 2: MPI_THREAD_SERIALIZED: what each thread observes is not replayed"));
  EXPECT_EQ(hash_line(r), hash_line(recorded));
  expect_nothing_left_now();
}

TEST_F(RecordingStory, InfoAndDamagedRecordings) {
  const std::string dir = tmp_ + "/rec";
  auto recorded = bcs_run({"--record", dir, "-n", "3", prog("prog_nondet"), "master", "3"}, kLimit);
  ASSERT_EQ(recorded.status, 0) << describe(recorded);
  auto info = bcs::test::run({bin("bcs"), "replay", dir, "--info"}, kLimit);
  ASSERT_EQ(info.status, 0) << describe(info);
  EXPECT_THAT(info.out, HasSubstr("ranks    3"));
  EXPECT_THAT(info.out, HasSubstr("rank 0: 6 events (wildcard receive 6)"));
  EXPECT_THAT(info.out, HasSubstr("rank 1: 0 events"));
  // A recording is never overwritten.
  auto again = bcs_run({"--record", dir, "-n", "3", prog("prog_nondet"), "master", "3"}, kLimit);
  EXPECT_EQ(again.status, 2);
  EXPECT_THAT(again.err, HasSubstr("exists and is not empty"));
  // Rank 0's file cut short: the replay says which file and where.
  const std::string rank0 = dir + "/rank0.rec";
  const auto size = fs::file_size(rank0);
  fs::resize_file(rank0, size - 2);
  auto cut = bcs::test::run({bin("bcs"), "replay", dir, "--timeout", "50s"}, kLimit);
  EXPECT_NE(cut.status, 0);
  EXPECT_THAT(cut.err, HasSubstr("cannot replay: " + rank0 + ": offset")) << describe(cut);
  // Not a recording at all.
  {
    std::ofstream(dir + "/header.rec", std::ios::trunc) << "#!/bin/sh\necho hello\n";
  }
  auto foreign = bcs::test::run({bin("bcs"), "replay", dir}, kLimit);
  EXPECT_EQ(foreign.status, 1);
  EXPECT_THAT(foreign.err, HasSubstr(dir + "/header.rec: offset 0")) << describe(foreign);
  expect_nothing_left_now();
}

}  // namespace
