// --host / --hostfile of `bcs run` (daemons/cli/hosts.h, options.h) and the
// rank placement by slots they lead to (daemons/common/launch.h).
#include "hosts.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "launch.h"
#include "options.h"

namespace bcs::cli {
namespace {

struct Parsed {
  ParseResult result;
  std::string err;
};

Parsed parse(std::vector<std::string> args) {
  args.insert(args.begin(), "bcs");
  std::vector<const char*> argv;
  for (auto& a : args) argv.push_back(a.c_str());
  std::ostringstream out, err;
  Parsed p{parse_args(static_cast<int>(argv.size()), argv.data(), out, err), ""};
  p.err = err.str();
  return p;
}

const RunOptions* run_of(const Parsed& p) {
  const Command* c = std::get_if<Command>(&p.result);
  return c ? std::get_if<RunOptions>(c) : nullptr;
}

int code_of(const Parsed& p) {
  const int* c = std::get_if<int>(&p.result);
  return c ? *c : -1;
}

// A host file in the test's scratch directory, removed at the end.
class HostFile {
 public:
  explicit HostFile(const std::string& text) {
    path_ = ::testing::TempDir() + "bcs_hosts_" + std::to_string(::getpid()) + "_" +
            std::to_string(counter_++);
    std::ofstream(path_) << text;
  }
  ~HostFile() { ::unlink(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  static inline int counter_ = 0;
  std::string path_;
};

std::vector<Host> list(const std::string& s) {
  std::vector<Host> h;
  add_host_list(s, &h);
  return h;
}

TEST(CliHosts, HostListsGiveNamesAndSlots) {
  EXPECT_EQ(list("a,b:2,c"), (std::vector<Host>{{"a", 1}, {"b", 2}, {"c", 1}}));
  EXPECT_EQ(list("node-1.example.org:4"), (std::vector<Host>{{"node-1.example.org", 4}}));
  // A name given again adds its slots, keeping its first position.
  EXPECT_EQ(list("a,b,a:3"), (std::vector<Host>{{"a", 4}, {"b", 1}}));
  EXPECT_EQ(list(" a , b "), (std::vector<Host>{{"a", 1}, {"b", 1}}));
}

TEST(CliHosts, BadHostListsAreRefusedWithAReason) {
  struct Case {
    const char* list;
    const char* says;
  };
  for (const Case& c : std::vector<Case>{{"", "empty host list"},
                                         {"a,,b", "empty host name"},
                                         {"a:0", "1 to"},
                                         {"a:x", "not a number of slots"},
                                         {"a:-1", "not a number of slots"},
                                         {"a:99999999999", "not a number of slots"},
                                         {"a b", "not a host name"},
                                         {"-a", "not a host name"},
                                         {"a/b", "not a host name"},
                                         {":2", "not a host name"}}) {
    std::vector<Host> h;
    try {
      add_host_list(c.list, &h);
      ADD_FAILURE() << "accepted '" << c.list << "'";
    } catch (const HostError& e) {
      EXPECT_NE(std::string(e.what()).find(c.says), std::string::npos)
          << "'" << c.list << "': " << e.what();
    }
  }
}

TEST(CliHosts, HostFilesInOpenMpiAndMpichFormats) {
  HostFile f(
      "# the cluster\n"
      "a slots=2\n"
      "\n"
      "b:3   # MPICH style\n"
      "  c slots=1 max_slots=8\n"
      "d\n"
      "a\n");
  std::vector<Host> h;
  add_host_file(f.path(), &h);
  EXPECT_EQ(h, (std::vector<Host>{{"a", 3}, {"b", 3}, {"c", 1}, {"d", 1}}));
}

TEST(CliHosts, BadHostFilesNameTheFileAndLine) {
  struct Case {
    const char* text;
    const char* says;
  };
  for (const Case& c : std::vector<Case>{{"a\nb slots=x\n", ":2: 'x' is not a number of slots"},
                                         {"a cpus=2\n", ":1: unknown word 'cpus=2'"},
                                         {"a:2 slots=3\n", ":1: slots given twice"},
                                         {"a\n\nb?c\n", ":3: 'b?c' is not a host name"},
                                         {"# nothing\n\n", "names no host"},
                                         {"", "names no host"}}) {
    HostFile f(c.text);
    std::vector<Host> h;
    try {
      add_host_file(f.path(), &h);
      ADD_FAILURE() << "accepted '" << c.text << "'";
    } catch (const HostError& e) {
      EXPECT_NE(std::string(e.what()).find(c.says), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(f.path()), std::string::npos) << e.what();
    }
  }
  std::vector<Host> h;
  EXPECT_THROW(add_host_file("/nonexistent/bcs/hosts", &h), HostError);
}

TEST(CliHosts, UsedHostsAreThoseTheRanksReach) {
  const std::vector<Host> h{{"a", 2}, {"b", 1}, {"c", 3}};
  EXPECT_EQ(used_hosts(h, 1), (std::vector<std::string>{"a"}));
  EXPECT_EQ(used_hosts(h, 2), (std::vector<std::string>{"a"}));
  EXPECT_EQ(used_hosts(h, 3), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(used_hosts(h, 4), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(used_hosts(h, 100), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(total_slots(h), 6u);
}

TEST(CliHosts, RanksFillTheSlotsInOrderAndWrapAround) {
  EXPECT_EQ(place_by_slots(4, {2, 2}), (std::vector<uint32_t>{0, 0, 1, 1}));
  EXPECT_EQ(place_by_slots(3, {2, 1}), (std::vector<uint32_t>{0, 0, 1}));
  EXPECT_EQ(place_by_slots(7, {2, 1}), (std::vector<uint32_t>{0, 0, 1, 0, 0, 1, 0}));
  EXPECT_EQ(place_by_slots(3, {1, 1, 1, 1}), (std::vector<uint32_t>{0, 1, 2}));
  EXPECT_TRUE(place_by_slots(3, {}).empty());
  EXPECT_TRUE(place_by_slots(3, {1, 0}).empty());
}

TEST(CliHosts, RunOptionsTakeHostsAndDefaultTheRankCount) {
  auto p = parse({"run", "--host", "a:2,b", "--host", "c", "prog", "--host", "x"});
  const RunOptions* r = run_of(p);
  ASSERT_NE(r, nullptr) << p.err;
  EXPECT_EQ(r->hosts, (std::vector<Host>{{"a", 2}, {"b", 1}, {"c", 1}}));
  EXPECT_EQ(r->nranks, 4u) << "-n defaults to the sum of the slots";
  EXPECT_EQ(r->args, (std::vector<std::string>{"--host", "x"}));

  HostFile f("a slots=3\nb slots=3\n");
  p = parse({"run", "-n", "2", "--hostfile", f.path(), "prog"});
  r = run_of(p);
  ASSERT_NE(r, nullptr) << p.err;
  EXPECT_EQ(r->nranks, 2u);
  EXPECT_EQ(r->hosts, (std::vector<Host>{{"a", 3}, {"b", 3}}));
}

TEST(CliHosts, RunRefusesBadOrConflictingHostOptions) {
  HostFile f("a\n");
  struct Case {
    std::vector<std::string> args;
    const char* says;
  };
  for (const Case& c : std::vector<Case>{
           {{"run", "--host", "a", "--hostfile", f.path(), "p"}, "not both"},
           {{"run", "--host", "a,b", "--nodes", "2", "p"}, "no --nodes or --ppn"},
           {{"run", "--host", "a:2", "--ppn", "2", "p"}, "no --nodes or --ppn"},
           {{"run", "--host", "a:0", "p"}, "1 to"},
           {{"run", "--host", "a;b", "p"}, "not a host name"},
           {{"run", "--hostfile", "/nonexistent/hosts", "p"}, "cannot read host file"},
           {{"run", "p"}, "-n"}}) {
    auto p = parse(c.args);
    EXPECT_EQ(code_of(p), 2) << testing::PrintToString(c.args);
    EXPECT_NE(p.err.find(c.says), std::string::npos) << p.err;
  }
}

}  // namespace
}  // namespace bcs::cli
