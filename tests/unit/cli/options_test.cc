// Argument parsing of `bcs` (daemons/cli/options.h).
#include "options.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

namespace bcs::cli {
namespace {

struct Parsed {
  ParseResult result;
  std::string out, err;
};

Parsed parse(std::vector<std::string> args) {
  args.insert(args.begin(), "bcs");
  std::vector<const char*> argv;
  for (auto& a : args) argv.push_back(a.c_str());
  std::ostringstream out, err;
  Parsed p{parse_args(static_cast<int>(argv.size()), argv.data(), out, err), "", ""};
  p.out = out.str();
  p.err = err.str();
  return p;
}

RunOptions run_of(const Parsed& p) {
  const Command* c = std::get_if<Command>(&p.result);
  EXPECT_NE(c, nullptr) << p.err;
  if (!c || !std::holds_alternative<RunOptions>(*c)) return {};
  return std::get<RunOptions>(*c);
}

int code_of(const Parsed& p) {
  const int* c = std::get_if<int>(&p.result);
  return c ? *c : -1;
}

TEST(CliOptions, ProgramArgumentsAreNotOurs) {
  auto p = parse({"run", "-n", "2", "prog", "-l", "--foo", "-n", "7"});
  RunOptions r = run_of(p);
  EXPECT_EQ(r.nranks, 2u);
  EXPECT_EQ(r.program, "prog");
  EXPECT_EQ(r.args, (std::vector<std::string>{"-l", "--foo", "-n", "7"}));
  EXPECT_FALSE(r.label);
}

// mpiexec's spelling `-np N` (and -np=N) is bcs's --np, among bcs's options;
// after PROGRAM it is the program's.
TEST(CliOptions, MpiexecsNpSpelling) {
  RunOptions r = run_of(parse({"run", "-np", "3", "prog"}));
  EXPECT_EQ(r.nranks, 3u);
  EXPECT_EQ(r.program, "prog");
  r = run_of(parse({"run", "-l", "--timeout", "10s", "-np=4", "prog", "-np", "9"}));
  EXPECT_EQ(r.nranks, 4u);
  EXPECT_TRUE(r.label);
  EXPECT_EQ(r.program, "prog");
  EXPECT_EQ(r.args, (std::vector<std::string>{"-np", "9"}));
  r = run_of(parse({"run", "-n", "2", "prog", "-np", "9"}));
  EXPECT_EQ(r.nranks, 2u);
  EXPECT_EQ(r.args, (std::vector<std::string>{"-np", "9"}));
}

// --slurm: Slurm's allocation gives the ranks and their places.
TEST(CliOptions, SlurmNeedsNoRankCountAndTakesNoPlacement) {
  RunOptions r = run_of(parse({"run", "--slurm", "-l", "prog", "--slurm"}));
  EXPECT_TRUE(r.slurm);
  EXPECT_TRUE(r.label);
  EXPECT_EQ(r.program, "prog");
  EXPECT_EQ(r.args, (std::vector<std::string>{"--slurm"}));  // the program's own
  for (auto args : std::vector<std::vector<std::string>>{{"run", "--slurm", "--host", "a:2", "p"},
                                                         {"run", "--slurm", "--nodes", "2", "p"},
                                                         {"run", "--slurm", "--ppn", "2", "p"},
                                                         {"run", "--slurm", "--manager", "h:1", "p"}}) {
    auto p = parse(args);
    EXPECT_EQ(code_of(p), 2) << testing::PrintToString(args);
    EXPECT_NE(p.err.find("as Slurm allocated"), std::string::npos) << p.err;
  }
}

TEST(CliOptions, AllRunOptions) {
  auto p = parse({"run", "-n", "8", "--nodes", "2", "--slice", "2ms", "--chunk", "64KiB", "-l",
                  "--timeout", "1.5s", "--manager", "h:1", "--token-file", "t", "--verbose", "./a.out"});
  RunOptions r = run_of(p);
  EXPECT_EQ(r.nranks, 8u);
  ASSERT_TRUE(r.nodes);
  EXPECT_EQ(*r.nodes, 2u);
  EXPECT_EQ(r.slice_ns, 2'000'000u);
  EXPECT_EQ(r.slice, "2ms");
  EXPECT_EQ(r.chunk_bytes, 65536u);
  EXPECT_TRUE(r.label);
  EXPECT_EQ(r.timeout_ns, 1'500'000'000u);
  EXPECT_EQ(r.timeout, "1.5s");
  ASSERT_TRUE(r.manager);
  EXPECT_EQ(*r.manager, "h:1");
  EXPECT_EQ(r.token_file, "t");
  EXPECT_TRUE(r.verbose);
  EXPECT_EQ(r.program, "./a.out");
  EXPECT_TRUE(r.args.empty());
}

TEST(CliOptions, RanksPerNodeChoosesBlockPlacement) {
  EXPECT_EQ(run_of(parse({"run", "-n", "4", "--nodes", "2", "--ppn", "3", "./a"})).ppn, 3u);
  EXPECT_EQ(run_of(parse({"run", "-n", "4", "./a"})).ppn, 0u) << "cyclic by default";
  EXPECT_EQ(code_of(parse({"run", "-n", "4", "--ppn", "0", "./a"})), 2);
}

TEST(CliOptions, DoubleDashStartsTheProgram) {
  RunOptions r = run_of(parse({"run", "-n", "1", "--", "prog", "--label"}));
  EXPECT_EQ(r.program, "prog");
  EXPECT_EQ(r.args, (std::vector<std::string>{"--label"}));
  EXPECT_FALSE(r.label);
}

TEST(CliOptions, DoubleDashAfterTheProgramIsTheProgramsOwn) {
  RunOptions r = run_of(parse({"run", "-n", "1", "prog", "-x", "--", "-l", "--"}));
  EXPECT_EQ(r.program, "prog");
  EXPECT_EQ(r.args, (std::vector<std::string>{"-x", "--", "-l", "--"}));
  EXPECT_FALSE(r.label);
  EXPECT_EQ(code_of(parse({"run", "-n", "1", "--"})), 2);
}

TEST(CliOptions, ProgramNamedLikeASubcommand) {
  RunOptions r = run_of(parse({"run", "-n", "1", "kill", "3"}));
  EXPECT_EQ(r.program, "kill");
  EXPECT_EQ(r.args, (std::vector<std::string>{"3"}));
}

TEST(CliOptions, EffectiveNodes) {
  RunOptions r = run_of(parse({"run", "-n", "4", "p"}));
  EXPECT_EQ(r.effective_nodes(), 1u);  // embedded default
  r = run_of(parse({"run", "-n", "2", "--nodes", "5", "p"}));
  EXPECT_EQ(r.effective_nodes(), 2u);  // never more nodes than ranks
  r = run_of(parse({"run", "-n", "4", "--manager", "h:1", "p"}));
  EXPECT_EQ(r.effective_nodes(), 0u);  // every registered node
  r = run_of(parse({"run", "-n", "4", "--manager", "h:1", "--nodes", "3", "p"}));
  EXPECT_EQ(r.effective_nodes(), 3u);
}

TEST(CliOptions, BadArgumentsExitTwoWithAMessage) {
  for (auto args : std::vector<std::vector<std::string>>{
           {"run", "-n", "0", "p"},
           {"run", "p"},
           {"run", "-n", "2"},
           {"run", "-n", "2", "--bogus", "p"},
           {"run", "-n", "2", "--nodes", "0", "p"},
           {"run", "-n", "2", "--slice", "3xs", "p"},
           {"run", "-n", "2", "--chunk", "lots", "p"},
           {"run", "-n", "x", "p"},
           {"kill"},
           {"kill", "notanumber"},
           {"frobnicate"},
           {}}) {
    auto p = parse(args);
    EXPECT_EQ(code_of(p), 2) << "args: " << testing::PrintToString(args);
    EXPECT_FALSE(p.err.empty()) << testing::PrintToString(args);
  }
  EXPECT_NE(parse({"run", "-n", "0", "p"}).err.find("at least 1"), std::string::npos);
  EXPECT_NE(parse({"run", "--slice", "3xs", "-n", "1", "p"}).err.find("not a duration"),
            std::string::npos);
}

TEST(CliOptions, ASliceNeedsAUnitAndASaneLength) {
  // "500" would otherwise be 500 seconds: refuse it rather than guess.
  EXPECT_NE(parse({"run", "-n", "1", "--slice", "500", "p"}).err.find("needs a unit"), std::string::npos);
  EXPECT_EQ(code_of(parse({"run", "-n", "1", "--slice", "5us", "p"})), 2);
  EXPECT_EQ(code_of(parse({"run", "-n", "1", "--slice", "11s", "p"})), 2);
  auto ok = parse({"run", "-n", "1", "--slice", "250us", "p"});
  EXPECT_TRUE(ok.err.empty()) << ok.err;
}

TEST(CliOptions, HelpAndVersionExitZero) {
  auto p = parse({"--version"});
  EXPECT_EQ(code_of(p), 0);
  EXPECT_NE(p.out.find("bcs "), std::string::npos);
  p = parse({"--help"});
  EXPECT_EQ(code_of(p), 0);
  EXPECT_NE(p.out.find("run"), std::string::npos);
  p = parse({"run", "--help"});
  EXPECT_EQ(code_of(p), 0);
  EXPECT_NE(p.out.find("PROGRAM [ARGS...]"), std::string::npos);
}

TEST(CliOptions, ManagerCommands) {
  auto p = parse({"jobs"});
  auto& jobs = std::get<JobsOptions>(std::get<Command>(p.result));
  EXPECT_EQ(jobs.manager, kDefaultManager);
  p = parse({"kill", "42", "--manager", "h:9", "--token-file", "s"});
  auto& k = std::get<KillOptions>(std::get<Command>(p.result));
  EXPECT_EQ(k.job_id, 42u);
  EXPECT_EQ(k.manager, "h:9");
  EXPECT_EQ(k.token_file, "s");
  p = parse({"stats", "--last", "5"});
  EXPECT_EQ(std::get<StatsOptions>(std::get<Command>(p.result)).last, 5u);
}

TEST(CliOptions, ATokenOnTheCommandLineIsRefusedWithTheReason) {
  // Every user of the host can read a command line (ps): tokens come from a
  // file or the environment.
  for (auto args : std::vector<std::vector<std::string>>{{"run", "--token", "s3cret", "-n", "1", "p"},
                                                         {"jobs", "--token", "s3cret"},
                                                         {"kill", "1", "--token", "s3cret"},
                                                         {"stats", "--token", "s3cret"}}) {
    auto p = parse(args);
    ASSERT_TRUE(std::holds_alternative<int>(p.result)) << args[0];
    EXPECT_EQ(std::get<int>(p.result), 2);
    EXPECT_NE(p.err.find("--token-file"), std::string::npos) << p.err;
  }
}

}  // namespace
}  // namespace bcs::cli

namespace bcs::cli {
namespace {

TEST(CliOptions, EnvironmentForTheRanks) {
  ::setenv("BCS_TEST_EXPORTED", "from here", 1);
  const RunOptions r =
      run_of(parse({"run", "-n", "2", "--env", "A=1", "-x", "BCS_TEST_EXPORTED", "--env", "B=x=y",
                    "-x", "C=set by -x", "--env", "A=2", "prog", "-x", "Z", "--env", "Q=1"}));
  // -x first (NAME takes its value here), then --env, each in order.
  EXPECT_EQ(r.env_set, (std::vector<std::string>{"BCS_TEST_EXPORTED=from here", "C=set by -x",
                                                 "A=1", "B=x=y", "A=2"}));
  EXPECT_EQ(r.program, "prog");  // -x takes one NAME; the program's own -x is its own
  EXPECT_EQ(r.args, (std::vector<std::string>{"-x", "Z", "--env", "Q=1"}));
  EXPECT_EQ(run_of(parse({"run", "-n", "1", "--env", "E=", "p"})).env_set,
            (std::vector<std::string>{"E="}))
      << "an empty value is a value";
}

// --detach needs a standing cluster, and what only a waiting bcs run does
// (--timeout, --job-dir) cannot come with it: refused, saying why.
TEST(CliOptions, DetachIsForAStandingClusterOnly) {
  RunOptions r = run_of(parse({"run", "--manager", "unix:/run/bcs/mm.sock", "--detach", "-n", "2", "prog"}));
  EXPECT_TRUE(r.detach);
  EXPECT_FALSE(run_of(parse({"run", "--manager", "h:1", "-n", "2", "prog"})).detach);
  struct Bad {
    std::vector<std::string> args;
    const char* says;
  };
  for (const Bad& b : {Bad{{"run", "--detach", "-n", "2", "prog"}, "a detached job needs a standing cluster"},
                       Bad{{"run", "--manager", "h:1", "--detach", "--timeout", "5s", "-n", "1", "p"}, "--timeout"},
                       Bad{{"run", "--manager", "h:1", "--detach", "--job-dir", "d", "-n", "1", "p"}, "--job-dir"}}) {
    auto p = parse(b.args);
    EXPECT_EQ(code_of(p), 2) << b.says;
    EXPECT_NE(p.err.find(b.says), std::string::npos) << p.err;
  }
  // Said in --help.
  auto h = parse({"run", "--help"});
  EXPECT_EQ(code_of(h), 0);
  EXPECT_NE(h.out.find("--detach"), std::string::npos);
  EXPECT_NE(h.out.find("bcs attach JOB"), std::string::npos) << h.out;
}

TEST(CliOptions, AttachTakesAJobAndAManager) {
  auto p = parse({"attach", "12", "--manager", "unix:/run/bcs/mm.sock", "-l"});
  const Command* c = std::get_if<Command>(&p.result);
  ASSERT_NE(c, nullptr) << p.err;
  ASSERT_TRUE(std::holds_alternative<AttachOptions>(*c));
  const auto& a = std::get<AttachOptions>(*c);
  EXPECT_EQ(a.job_id, 12u);
  EXPECT_EQ(a.manager, "unix:/run/bcs/mm.sock");
  EXPECT_TRUE(a.label);
  EXPECT_EQ(code_of(parse({"attach"})), 2);
}

TEST(CliOptions, BadEnvironmentOptionsAreRefused) {
  ::unsetenv("BCS_TEST_UNSET");
  auto p = parse({"run", "-n", "1", "-x", "BCS_TEST_UNSET", "prog"});
  EXPECT_EQ(code_of(p), 2);
  EXPECT_NE(p.err.find("is not set"), std::string::npos) << p.err;
  for (const char* bad : {"NOEQUALS", "9X=1", "=1", "A-B=1", "A B=1", ""}) {
    p = parse({"run", "-n", "1", "--env", bad, "prog"});
    EXPECT_EQ(code_of(p), 2) << bad;
    EXPECT_NE(p.err.find("NAME=VALUE"), std::string::npos) << p.err;
  }
  for (const char* bad : {"9X", "A-B", "1=2", "=x"}) {
    EXPECT_EQ(code_of(parse({"run", "-n", "1", "-x", bad, "prog"})), 2) << bad;
  }
  // The runtime's own per-rank variables cannot be set or passed.
  for (auto args : std::vector<std::vector<std::string>>{
           {"--env", "BCS_RANK=3"}, {"-x", "BCS_SEGMENT_FD=1"}, {"-x", "BCS_NODE"}}) {
    ::setenv("BCS_NODE", "here", 1);
    args.insert(args.begin(), {"run", "-n", "1"});
    args.push_back("prog");
    p = parse(args);
    EXPECT_EQ(code_of(p), 2) << testing::PrintToString(args);
    EXPECT_NE(p.err.find("set by bcs itself"), std::string::npos) << p.err;
    ::unsetenv("BCS_NODE");
  }
  p = parse({"run", "-n", "1", "--env", "BIG=" + std::string(200 * 1024, 'x'), "prog"});
  EXPECT_EQ(code_of(p), 2);
  EXPECT_NE(p.err.find("longer than 128 KiB"), std::string::npos) << p.err.substr(0, 200);
}

}  // namespace
}  // namespace bcs::cli
