// Stories of issue 7 and issue 11: who a job runs as. A standing cluster
// serves users created for the test (useradd; removed afterwards): each job
// runs as its submitter, on one host through the unix socket and from
// another host by munge; daemons run as root or as a dedicated user with
// capabilities; nobody reaches another user's job, and neither side of the
// daemons trusts a manager or node manager of another user.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <set>
#include <thread>

#include "harness.h"
#include "standing.h"
#include "story.h"
#include "two_hosts.h"

using namespace std::chrono_literals;
using bcs::test::bcs_run;
using bcs::test::bin;
using bcs::test::describe;
using bcs::test::it_prog;
using bcs::test::Standing;
using bcs::test::Story;
using testing::HasSubstr;

// --------------------------------------------------------------- identity
// A root-run standing cluster serving an unprivileged user created for the
// test (useradd; removed afterwards).
namespace {

bool sh(const std::vector<std::string>& argv) { return bcs::test::run(argv, 60s).status == 0; }

class TestUser {
 public:
  // `suffix` tells apart two users of one test.
  explicit TestUser(const std::string& suffix = "") {
    if (geteuid() != 0) {
      why_ = "creating a user needs root";
      return;
    }
    const std::string tag = std::to_string(getpid()) + suffix;
    name_ = "bcsit" + tag;
    group_ = "bcsitg" + tag;
    if (!sh({"/usr/sbin/groupadd", group_})) {
      why_ = "groupadd failed";
      return;
    }
    made_group_ = true;
    if (!sh({"/usr/sbin/useradd", "--no-create-home", "--shell", "/usr/sbin/nologin",
             "--user-group", "--groups", group_, name_})) {
      why_ = "useradd failed";
      return;
    }
    made_user_ = true;
    passwd* pw = getpwnam(name_.c_str());
    group* gr = getgrnam(group_.c_str());
    if (!pw || !gr) {
      why_ = "the new user is not in the user database";
      return;
    }
    as_.uid = pw->pw_uid;
    as_.gid = pw->pw_gid;
    extra_gid_ = gr->gr_gid;
    as_.groups = {as_.gid, extra_gid_};
    as_.cwd = "/tmp";
    // The user must be able to run what the test built.
    if (bcs::test::run_as(as_, {bin("bcs"), "--version"}, 30s).status != 0)
      why_ = "the build directory is not reachable by an unprivileged user";
  }
  ~TestUser() {
    if (made_user_) sh({"/usr/sbin/userdel", name_});
    if (made_user_ && getgrnam(name_.c_str())) sh({"/usr/sbin/groupdel", name_});
    if (made_group_) sh({"/usr/sbin/groupdel", group_});
  }
  bool ok() const { return why_.empty(); }
  const std::string& why() const { return why_; }
  const bcs::test::As& as() const { return as_; }
  const std::string& name() const { return name_; }
  gid_t extra_gid() const { return extra_gid_; }

 private:
  std::string name_, group_, why_;
  bool made_user_ = false, made_group_ = false;
  bcs::test::As as_;
  gid_t extra_gid_ = 0;
};

// A directory for sockets and files that is removed at the end.
class TempDir {
 public:
  explicit TempDir(mode_t mode) {
    path_ = (std::filesystem::temp_directory_path() / ("bcs-it-" + std::to_string(getpid()) + "-" +
                                                        std::to_string(n_++)))
                .string();
    std::filesystem::create_directories(path_);
    chmod(path_.c_str(), mode);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string operator/(const std::string& f) const { return path_ + "/" + f; }
  const std::string& path() const { return path_; }

 private:
  static inline int n_ = 0;
  std::string path_;
};

}  // namespace

TEST_F(Story, AJobRunsAsTheUserWhoSubmittedIt) {
  TestUser u;
  if (!u.ok()) GTEST_SKIP() << u.why();
  TempDir dir(0755);
  const std::string secret = dir / "secret";
  {
    int fd = open(secret.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ASSERT_GE(fd, 0);
    const std::string text = "root-only-" + bcs::test::marker() + "\n";
    ASSERT_EQ(write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
    close(fd);
  }
  Standing c(2, {}, {}, dir / "mm.sock");
  ASSERT_TRUE(c.up());
  auto bcs_as_user = [&](std::vector<std::string> args) {
    std::vector<std::string> argv{bin("bcs"), "run", "--timeout", "60s"};
    argv.insert(argv.end(), args.begin(), args.end());
    return bcs::test::run_as(u.as(), argv, 90s);
  };

  // Both ranks, on both node managers, run with the user's uid, gid and groups.
  auto id = bcs_as_user({"--manager", c.unix_addr, "-n", "2", "--nodes", "2", "-l", "/bin/sh",
                         "-c", "echo uid $(id -u) gid $(id -g) groups $(id -G)"});
  ASSERT_EQ(id.status, 0) << describe(id);
  const std::string want = "uid " + std::to_string(u.as().uid) + " gid " +
                           std::to_string(u.as().gid) + " groups ";
  EXPECT_THAT(id.out, HasSubstr("[0] " + want));
  EXPECT_THAT(id.out, HasSubstr("[1] " + want));
  // The supplementary group (initgroups' list) is among the groups of both.
  size_t with_group = 0;
  std::istringstream lines(id.out);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream groups(line.substr(line.find("groups ") + 7));
    for (std::string g; groups >> g;) with_group += g == std::to_string(u.extra_gid());
  }
  EXPECT_EQ(with_group, 2u) << id.out;

  // A root-only file stays closed to the user's job.
  auto cat = bcs_as_user({"--manager", c.unix_addr, "-n", "1", "/bin/cat", secret});
  EXPECT_EQ(cat.status, 1) << describe(cat);
  EXPECT_THAT(cat.err, HasSubstr("Permission denied"));
  EXPECT_THAT(cat.out, testing::Not(HasSubstr("root-only")));

  // Over TCP the user cannot submit at all (only the daemons' user may).
  auto tcp = bcs_as_user({"--manager", c.addr, "-n", "1", "/usr/bin/id"});
  EXPECT_EQ(tcp.status, 1) << describe(tcp);
  EXPECT_THAT(tcp.err, HasSubstr("PERMISSION_DENIED"));
  EXPECT_THAT(tcp.err, HasSubstr("unix:" + (dir / "mm.sock")));

  // Root's own jobs still run as root, over either way in.
  for (const auto& via : {c.unix_addr, c.addr}) {
    auto root = bcs_run({"--manager", via, "-n", "1", "/usr/bin/id", "-u"});
    EXPECT_EQ(root.status, 0) << describe(root);
    EXPECT_EQ(root.out, "0\n");
  }
  c.expect_alive_then_stop();
}

// The shipped systemd units run both daemons as a dedicated unprivileged
// user; the node manager holds only CAP_SETUID and CAP_SETGID (to run a job
// as its submitter), CAP_KILL (to end ranks) and CAP_SYS_PTRACE (to copy
// between ranks' memories), as ambient capabilities. setpriv stands in for
// systemd's User= and AmbientCapabilities= here.
TEST_F(Story, AnUnprivilegedNodeManagerWithCapabilitiesRunsEachJobAsItsSubmitter) {
  TestUser svc("d"), u;
  if (!svc.ok()) GTEST_SKIP() << svc.why();
  if (!u.ok()) GTEST_SKIP() << u.why();
  if (access("/usr/bin/setpriv", X_OK) != 0) GTEST_SKIP() << "setpriv (util-linux) not installed";
  TempDir dir(0755);
  ASSERT_EQ(chown((dir / "").c_str(), svc.as().uid, svc.as().gid), 0);  // the socket's directory
  const std::vector<std::string> as_svc{"/usr/bin/setpriv",
                                        "--reuid=" + std::to_string(svc.as().uid),
                                        "--regid=" + std::to_string(svc.as().gid),
                                        "--clear-groups"};
  std::vector<std::string> nm_wrap = as_svc;
  const std::string caps = "+setuid,+setgid,+kill,+sys_ptrace";
  nm_wrap.insert(nm_wrap.end(), {"--inh-caps=" + caps, "--ambient-caps=" + caps, "--"});
  std::vector<std::string> mm_wrap = as_svc;  // as in bcs-mm.service: no capability
  mm_wrap.push_back("--");
  Standing c(2, {}, {}, dir / "mm.sock", mm_wrap, nm_wrap);
  ASSERT_TRUE(c.up());
  auto bcs_as = [&](const TestUser& who, std::vector<std::string> args) {
    std::vector<std::string> argv{bin("bcs"), "run", "--timeout", "60s", "--manager",
                                  c.unix_addr};
    argv.insert(argv.end(), args.begin(), args.end());
    return bcs::test::run_as(who.as(), argv, 90s);
  };

  // Ranks on both node managers: the submitter's uid, and no capability
  // left from the node manager (permitted, effective, ambient all zero).
  auto id = bcs_as(u, {"-n", "2", "--nodes", "2", "-l", "/bin/sh", "-c",
                       "echo uid $(id -u) $(grep -E '^Cap(Prm|Eff|Amb)' /proc/self/status | "
                       "tr -s '\\t\\n' '  ')"});
  ASSERT_EQ(id.status, 0) << describe(id);
  const std::string none = "CapPrm: 0000000000000000 CapEff: 0000000000000000 "
                           "CapAmb: 0000000000000000";
  for (const char* r : {"[0] ", "[1] "})
    EXPECT_THAT(id.out, HasSubstr(r + ("uid " + std::to_string(u.as().uid) + " " + none))) << id.out;
  for (pid_t p : c.pids()) {  // the daemons ran it as the service user (real and effective uid)
    std::ifstream status("/proc/" + std::to_string(p) + "/status");
    std::string line;
    while (std::getline(status, line) && line.rfind("Uid:", 0) != 0) {
    }
    std::istringstream uids(line.substr(4));
    uid_t real = 0, eff = 0;
    uids >> real >> eff;
    EXPECT_EQ(real, svc.as().uid) << line;
    EXPECT_EQ(eff, svc.as().uid) << line;
  }

  // Data between the user's ranks, on one node (the DMA helper and single
  // copy reach into ranks that are not the node manager's user) and across two.
  for (const char* nodes : {"1", "2"}) {
    auto pp = bcs_as(u, {"-n", "2", "--nodes", nodes, bin("prog_pingpong"), "8", "64k", "1m"});
    EXPECT_EQ(pp.status, 0) << describe(pp);
    EXPECT_THAT(pp.out, HasSubstr("pingpong ok"));
  }
  // The service user's own job keeps its uid and drops the capabilities too.
  auto own = bcs_as(svc, {"-n", "1", "/bin/sh", "-c",
                          "echo uid $(id -u) $(grep -E '^CapEff' /proc/self/status | tr -s '\\t' ' ')"});
  EXPECT_EQ(own.status, 0) << describe(own);
  EXPECT_EQ(own.out, "uid " + std::to_string(svc.as().uid) + " CapEff: 0000000000000000\n");
  // Root's job is refused: only a root node manager runs a job as root.
  auto root = bcs_run({"--manager", c.unix_addr, "-n", "1", "/usr/bin/id"});
  EXPECT_NE(root.status, 0) << describe(root);
  EXPECT_THAT(root.err, HasSubstr("runs no job as root")) << describe(root);
  EXPECT_EQ(root.out, "");
  c.expect_alive_then_stop();
}

// Users on another host (issue 11): a root cluster over two namespaced
// hosts whose manager accepts munge credentials (--munge). A user on host B,
// who has no token, submits as themselves with BCS_AUTH=munge; their ranks
// run as them on both hosts; another user can neither see nor kill the job;
// no credential, or one from a munged with another key, is refused.
namespace {

// A munged of its own (key, socket, state in `dir`). munged returns only
// once its daemon serves the socket (it waits for its child's start), and
// `munged --stop` ends the one daemon bound to that socket and waits for it.
class Munged {
 public:
  Munged(const std::string& dir, const std::string& name) : sock_(dir + "/" + name + ".sock") {
    const std::string key = dir + "/" + name + ".key";
    up_ = bcs::test::run({"/bin/sh", "-c",
                          "head -c 1024 /dev/urandom > " + key + " && chmod 400 " + key},
                         30s).status == 0 &&
          bcs::test::run({"/usr/sbin/munged", "--force", "--key-file", key, "--socket", sock_,
                          "--pid-file", dir + "/" + name + ".pid", "--seed-file",
                          dir + "/" + name + ".seed", "--log-file", dir + "/" + name + ".log"},
                         30s).status == 0;
  }
  ~Munged() {
    if (up_) bcs::test::run({"/usr/sbin/munged", "--stop", "--socket", sock_}, 30s);
  }
  bool up() const { return up_; }
  const std::string& socket() const { return sock_; }

 private:
  std::string sock_;
  bool up_ = false;
};

}  // namespace

TEST_F(Story, AUserOnAnotherHostRunsAsThemselvesByMunge) {
  if (access("/usr/sbin/munged", X_OK) != 0 || access("/usr/bin/munge", X_OK) != 0)
    GTEST_SKIP() << "munge not installed (BCS_WITH_DEPLOY=1 deploy/install-deps.sh)";
  TestUser u("a"), v("b");
  if (!u.ok()) GTEST_SKIP() << u.why();
  if (!v.ok()) GTEST_SKIP() << v.why();
  bcs::test::TwoHosts hosts;
  ASSERT_TRUE(hosts.ok()) << "could not create the test network namespaces";
  TempDir dir(0711);  // users reach the munged sockets, not the keys
  Munged realm(dir / "", "realm"), stranger(dir / "", "stranger");
  ASSERT_TRUE(realm.up());
  ASSERT_TRUE(stranger.up());

  const std::map<std::string, std::string> net{{"UCX_TLS", "tcp"}, {"UCX_NET_DEVICES", "bcs0"}};
  std::map<std::string, std::string> daemons = net;
  daemons["BCS_TOKEN"] = "it-" + bcs::test::marker();
  bcs::test::Background mm(hosts.on(true, {bin("bcs-mm"), "--listen", hosts.addr_a() + ":0",
                                           "--ready-fd", "3", "--munge", "--munge-socket",
                                           realm.socket()}),
                           daemons);
  const std::string port = mm.ready_line(30s);
  ASSERT_FALSE(port.empty()) << "bcs-mm did not come up";
  const std::string addr = hosts.addr_a() + ":" + port;
  bcs::test::Background nma(hosts.on(true, {bin("bcs-nm"), "--manager", addr, "--name", "hostA"}),
                            daemons);
  bcs::test::Background nmb(hosts.on(false, {bin("bcs-nm"), "--manager", addr, "--name", "hostB"}),
                            daemons);

  // `bcs ARGS` as `who` on host B (setpriv drops root inside the namespace),
  // with munge from `m` (nullptr: no BCS_AUTH) and no token.
  auto on_b_run = [&](const TestUser& who, const Munged* m, std::vector<std::string> cmd,
                      bcs::test::OutputHook hook = {}) {
    std::vector<std::string> argv{"/usr/bin/setpriv",
                                  "--reuid=" + std::to_string(who.as().uid),
                                  "--regid=" + std::to_string(who.as().gid),
                                  "--clear-groups", "--", "/usr/bin/env", "-C", "/tmp"};
    argv.insert(argv.end(), cmd.begin(), cmd.end());
    auto env = net;
    if (m) {
      env["BCS_AUTH"] = "munge";
      env["BCS_MUNGE_SOCKET"] = m->socket();
    }
    return bcs::test::run(hosts.on(false, argv), 90s, env, std::move(hook));
  };
  auto on_b = [&](const TestUser& who, const Munged* m, std::vector<std::string> args,
                  bcs::test::OutputHook hook = {}) {
    args.insert(args.begin(), bin("bcs"));
    return on_b_run(who, m, std::move(args), std::move(hook));
  };

  // Ranks on both hosts run as the submitter.
  auto id = on_b(u, &realm, {"run", "--manager", addr, "--timeout", "60s", "-n", "2", "--nodes",
                             "2", "-l", "/bin/sh", "-c", "echo uid $(id -u) on $BCS_NODE"});
  ASSERT_EQ(id.status, 0) << describe(id);
  const std::string uid = "uid " + std::to_string(u.as().uid) + " on ";
  EXPECT_THAT(id.out, HasSubstr(uid + "hostA")) << id.out;
  EXPECT_THAT(id.out, HasSubstr(uid + "hostB")) << id.out;
  auto ring = on_b(u, &realm, {"run", "--manager", addr, "--timeout", "60s", "-n", "4", "--nodes",
                               "2", bin("prog_ring")});
  EXPECT_EQ(ring.status, 0) << describe(ring);
  EXPECT_THAT(ring.out, HasSubstr("ring ok"));

  // Without a credential, or with one of another munge realm: refused.
  auto none = on_b(u, nullptr, {"run", "--manager", addr, "-n", "1", "/bin/true"});
  EXPECT_EQ(none.status, 1) << describe(none);
  EXPECT_THAT(none.err, HasSubstr("UNAUTHENTICATED"));
  EXPECT_THAT(none.err, HasSubstr("BCS_AUTH=munge"));
  auto foreign = on_b(u, &stranger, {"run", "--manager", addr, "-n", "1", "/bin/true"});
  EXPECT_EQ(foreign.status, 1) << describe(foreign);
  EXPECT_THAT(foreign.err, HasSubstr("munge credential refused"));

  // u's job blocks; v (also by munge, from host B) neither sees nor kills it.
  bcs::test::RunResult jobs_v, kill_v, attach_v, jobs_u;
  bool done = false;
  auto blocked = on_b(u, &realm, {"run", "--manager", addr, "--timeout", "60s", "-n", "1",
                                  bcs::test::blocker()},
                      [&](const std::string& out) {
                        if (done || out.find("blocking") == std::string::npos) return;
                        done = true;
                        jobs_u = on_b(u, &realm, {"jobs", "--manager", addr});
                        // The job's id: the first word of its line.
                        std::string job = "0";
                        std::istringstream lines(jobs_u.out);
                        for (std::string line; std::getline(lines, line);)
                          if (line.find("it_block") != std::string::npos)
                            std::istringstream(line) >> job;
                        jobs_v = on_b(v, &realm, {"jobs", "--manager", addr});
                        kill_v = on_b(v, &realm, {"kill", job, "--manager", addr});
                        attach_v = on_b_run(v, &realm, {it_prog("it_attach"), addr, job});
                        on_b(u, &realm, {"kill", job, "--manager", addr});
                      });
  ASSERT_TRUE(done) << describe(blocked);
  EXPECT_EQ(blocked.status, 143) << describe(blocked);  // its owner killed it
  EXPECT_EQ(jobs_u.status, 0) << describe(jobs_u);
  EXPECT_THAT(jobs_u.out, HasSubstr("it_block"));
  EXPECT_EQ(jobs_v.status, 0) << describe(jobs_v);
  EXPECT_THAT(jobs_v.out, testing::Not(HasSubstr("it_block")));
  EXPECT_EQ(kill_v.status, 1) << describe(kill_v);
  EXPECT_THAT(kill_v.err, HasSubstr("belongs to " + u.name()));
  EXPECT_EQ(attach_v.status, 1) << describe(attach_v);  // nor reads its output
  EXPECT_THAT(attach_v.out, HasSubstr("belongs to " + u.name()));
  EXPECT_THAT(attach_v.out, testing::Not(HasSubstr("output:")));

  EXPECT_EQ(nma.stop(), 0);
  EXPECT_EQ(nmb.stop(), 0);
  EXPECT_EQ(mm.stop(), 0);
}

TEST_F(Story, AnotherUserCannotListKillOrWatchAJob) {
  TestUser u;
  if (!u.ok()) GTEST_SKIP() << u.why();
  TempDir dir(0755);
  Standing c(1, {}, {}, dir / "mm.sock");
  ASSERT_TRUE(c.up());
  auto as_user = [&](std::vector<std::string> argv) { return bcs::test::run_as(u.as(), argv, 60s); };
  bcs::test::RunResult jobs_user, kill_user, kill_user_tcp, attach_user, jobs_root, kill_root;
  bool done = false;
  // Root's job blocks; meanwhile the user tries everything on it (job 1).
  auto r = c.run({"-n", "1", bcs::test::blocker()}, [&](const std::string& out) {
    if (done || out.find("blocking") == std::string::npos) return;
    done = true;
    jobs_user = as_user({bin("bcs"), "jobs", "--manager", c.unix_addr});
    kill_user = as_user({bin("bcs"), "kill", "1", "--manager", c.unix_addr});
    kill_user_tcp = as_user({bin("bcs"), "kill", "1", "--manager", c.addr});
    attach_user = as_user({it_prog("it_attach"), c.unix_addr, "1"});
    jobs_root = bcs::test::run({bin("bcs"), "jobs", "--manager", c.unix_addr}, 60s);
    kill_root = bcs::test::run({bin("bcs"), "kill", "1", "--manager", c.unix_addr}, 60s);
  });
  ASSERT_TRUE(done) << describe(r);
  // Root could kill it; the user could not.
  EXPECT_EQ(r.status, 143) << describe(r);
  EXPECT_EQ(kill_root.status, 0) << describe(kill_root);
  EXPECT_EQ(jobs_root.status, 0) << describe(jobs_root);
  EXPECT_THAT(jobs_root.out, HasSubstr("it_block"));
  EXPECT_EQ(jobs_user.status, 0) << describe(jobs_user);
  EXPECT_THAT(jobs_user.out, testing::Not(HasSubstr("it_block")));
  for (auto* k : {&kill_user, &kill_user_tcp}) {
    EXPECT_EQ(k->status, 1) << describe(*k);
    EXPECT_THAT(k->err, HasSubstr("PERMISSION_DENIED"));
    EXPECT_THAT(k->err, HasSubstr("belongs to root"));
  }
  EXPECT_EQ(attach_user.status, 1) << describe(attach_user);
  EXPECT_THAT(attach_user.out, HasSubstr("status 7: job 1 belongs to root"));
  EXPECT_THAT(attach_user.out, testing::Not(HasSubstr("output:")));
  c.expect_alive_then_stop();
}

TEST_F(Story, ARogueManagerGetsNothingFromARootNodeManager) {
  TestUser u;
  if (!u.ok()) GTEST_SKIP() << u.why();
  TempDir dir(0777);
  // The user starts a manager of their own and waits for root's node manager.
  bcs::test::Background rogue({bin("bcs-mm"), "--listen", "127.0.0.1:0", "--ready-fd", "3",
                               "--socket", dir / "rogue.sock"},
                              {}, &u.as());
  const std::string port = rogue.ready_line(30s);
  ASSERT_FALSE(port.empty()) << "the user's bcs-mm did not come up";
  // A root node manager pointed at it refuses it, by the socket and by TCP.
  auto by_socket = bcs::test::run(
      {bin("bcs-nm"), "--manager", "unix:" + (dir / "rogue.sock"), "--name", "victim"}, 60s);
  EXPECT_EQ(by_socket.status, 1) << describe(by_socket);
  EXPECT_THAT(by_socket.err, HasSubstr("refusing the machine manager"));
  EXPECT_THAT(by_socket.err, HasSubstr("runs as " + u.name()));
  auto by_tcp =
      bcs::test::run({bin("bcs-nm"), "--manager", "127.0.0.1:" + port, "--name", "victim"}, 60s);
  EXPECT_EQ(by_tcp.status, 1) << describe(by_tcp);
  EXPECT_THAT(by_tcp.err, testing::AnyOf(HasSubstr("refusing the machine manager"),
                                         HasSubstr("must run as " + u.name())));
  EXPECT_EQ(rogue.stop(), 0);
}

TEST_F(Story, RootsPrivateClusterIsNotAnotherUsersToUse) {
  TestUser u;
  if (!u.ok()) GTEST_SKIP() << u.why();
  // Root's embedded cluster listens on a loopback port anyone can see (ss).
  bcs::test::RunResult jobs_user, kill_user, launch_user;
  bool done = false;
  auto r = bcs_run({"-n", "1", bcs::test::blocker()}, 90s, {}, [&](const std::string& out) {
    if (done || out.find("blocking") == std::string::npos) return;
    done = true;
    auto mm = bcs::test::marked_running(bin("bcs-mm"));
    auto ls = bcs::test::tcp_listeners_of(mm);
    auto as_user = [&](std::vector<std::string> argv) {
      return bcs::test::run_as(u.as(), argv, 60s);
    };
    // The user does not know which listener is gRPC's: try them all.
    for (auto& l : ls) {
      const std::string a = "127.0.0.1:" + std::to_string(l.port);
      auto j = as_user({bin("bcs"), "jobs", "--manager", a});
      if (j.out.find("JOB") != std::string::npos) jobs_user = j;  // gRPC answered
      auto k = as_user({bin("bcs"), "kill", "1", "--manager", a});
      if (k.err.find("PERMISSION_DENIED") != std::string::npos || k.status == 0) kill_user = k;
      auto l2 = as_user({bin("bcs"), "run", "--timeout", "30s", "--manager", a, "-n", "1",
                         "/usr/bin/id"});
      if (l2.err.find("PERMISSION_DENIED") != std::string::npos || l2.status == 0)
        launch_user = l2;
    }
    // Let the job end.
    bcs::test::kill_announced_rank(out, 0, SIGKILL);
  });
  ASSERT_TRUE(done) << describe(r);
  EXPECT_EQ(r.status, 128 + SIGKILL) << describe(r);
  EXPECT_THAT(jobs_user.out, HasSubstr("JOB")) << describe(jobs_user);
  EXPECT_THAT(jobs_user.out, testing::Not(HasSubstr("it_block")));
  EXPECT_EQ(kill_user.status, 1) << describe(kill_user);
  EXPECT_THAT(kill_user.err, HasSubstr("belongs to root"));
  EXPECT_EQ(launch_user.status, 1) << describe(launch_user);
  EXPECT_THAT(launch_user.err, HasSubstr("PERMISSION_DENIED"));
}

// ------------------------------------------------- a fake manager (issue 42)
// A local user starts a manager of their own where root's node managers and
// clients look for the real one (while it is down or restarting). The real
// one holds the cluster's token; the fake one cannot prove it does, so it
// gets no job started, and the token never reaches it: daemons and clients
// prove the token without sending it (daemons/common/proof.h).
namespace {

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// The cluster's token, in a file only root reads.
struct TokenFile {
  TempDir dir{0700};
  std::string token = "it-secret-" + bcs::test::marker();
  std::string path = dir / "token";
  TokenFile() {
    std::ofstream(path) << token << "\n";
    chmod(path.c_str(), 0600);
  }
};

// `argv` as `who` (setpriv drops root, e.g. inside a network namespace).
std::vector<std::string> as_user(const TestUser& who, std::vector<std::string> argv) {
  std::vector<std::string> v{"/usr/bin/setpriv", "--reuid=" + std::to_string(who.as().uid),
                             "--regid=" + std::to_string(who.as().gid), "--clear-groups", "--"};
  v.insert(v.end(), argv.begin(), argv.end());
  return v;
}

// What the fake manager logged holds no secret and shows nothing past the
// proof: no session of a node manager, no job.
void expect_fake_got_nothing(const std::string& log, const TokenFile& t,
                             const std::string& marker) {
  EXPECT_THAT(log, testing::Not(HasSubstr(t.token))) << log;
  EXPECT_THAT(log, testing::Not(HasSubstr("bcs-token"))) << log;
  EXPECT_THAT(log, testing::Not(HasSubstr("bcs-proof"))) << log;
  EXPECT_THAT(log, testing::Not(HasSubstr("NodeControl.Session"))) << log;
  EXPECT_THAT(log, testing::Not(HasSubstr("Jobs.Launch"))) << log;
  EXPECT_FALSE(std::filesystem::exists(marker)) << "the fake manager's job ran";
}

}  // namespace

TEST_F(Story, AFakeManagerOnLoopbackGetsNoJobAndNeverSeesTheToken) {
  TestUser u;
  if (!u.ok()) GTEST_SKIP() << u.why();
  TempDir dir(0777);
  TokenFile t;
  const std::string log = dir / "fake.log", marker = dir / "pwned";
  bcs::test::Background fake({it_prog("it_fake_manager"), "--listen", "127.0.0.1:0", "--log", log,
                              "--marker", marker},
                             {}, &u.as());
  const std::string port = fake.ready_line(30s);
  ASSERT_FALSE(port.empty()) << "the fake manager did not come up";
  const std::string addr = "127.0.0.1:" + port;

  // Root's node manager sees who accepted its connection before it sends a
  // byte, and root's client asks for the proof of the token.
  auto nm = bcs::test::run(
      {bin("bcs-nm"), "--manager", addr, "--name", "victim", "--token-file", t.path}, 60s);
  EXPECT_EQ(nm.status, 1) << describe(nm);
  EXPECT_THAT(nm.err, HasSubstr("refusing the machine manager"));
  EXPECT_THAT(nm.err, HasSubstr("runs as " + u.name()));
  auto client = bcs::test::run({bin("bcs"), "run", "--manager", addr, "--token-file", t.path,
                                "--timeout", "30s", "-n", "1", "/usr/bin/id"},
                               60s);
  EXPECT_EQ(client.status, 1) << describe(client);
  EXPECT_THAT(client.err, HasSubstr("does not prove that it holds the cluster's token"));
  EXPECT_EQ(fake.stop(), 0);
  const std::string got = slurp(log);
  EXPECT_THAT(got, HasSubstr("Auth.Prove"));  // it was asked, and could not answer
  expect_fake_got_nothing(got, t, marker);

  // The real manager on the same address afterwards works.
  bcs::test::Background mm(
      {bin("bcs-mm"), "--listen", addr, "--ready-fd", "3", "--token-file", t.path});
  ASSERT_EQ(mm.ready_line(30s), port);
  bcs::test::Background n1(
      {bin("bcs-nm"), "--manager", addr, "--name", "n1", "--token-file", t.path});
  auto ok = bcs_run({"--manager", addr, "--token-file", t.path, "-n", "2",
                     bcs::test::prog("prog_ring")});
  EXPECT_EQ(ok.status, 0) << describe(ok);
  EXPECT_THAT(ok.out, HasSubstr("ring ok"));
  EXPECT_EQ(n1.stop(), 0);
  EXPECT_EQ(mm.stop(), 0);
}

TEST_F(Story, AFakeManagerOnAHostsAddressGetsNoJobAndNeverSeesTheToken) {
  TestUser u;
  if (!u.ok()) GTEST_SKIP() << u.why();
  bcs::test::TwoHosts hosts;
  ASSERT_TRUE(hosts.ok()) << "could not create the test network namespaces";
  TempDir dir(0777);
  TokenFile t;
  const std::map<std::string, std::string> net{{"UCX_TLS", "tcp"}, {"UCX_NET_DEVICES", "bcs0"}};
  const std::string log = dir / "fake.log", marker = dir / "pwned";
  // On host A's own address, as deploy/README.md's walk-through names the
  // manager on every host.
  bcs::test::Background fake(
      hosts.on(true, as_user(u, {it_prog("it_fake_manager"), "--listen", hosts.addr_a() + ":0",
                                 "--log", log, "--marker", marker})),
      net);
  const std::string port = fake.ready_line(30s);
  ASSERT_FALSE(port.empty()) << "the fake manager did not come up";
  const std::string addr = hosts.addr_a() + ":" + port;

  // Root's node managers on both hosts ask for the proof of the token and
  // get none.
  for (bool host_a : {true, false}) {
    auto nm = bcs::test::run(hosts.on(host_a, {bin("bcs-nm"), "--manager", addr, "--name",
                                               "victim", "--token-file", t.path}),
                             60s, net);
    EXPECT_EQ(nm.status, 1) << describe(nm);
    EXPECT_THAT(nm.err, HasSubstr("refusing the machine manager"));
    EXPECT_THAT(nm.err, HasSubstr("does not prove that it holds the cluster's token"));
  }
  // Without a token nothing could prove the manager: refused before any
  // connection, saying what to configure.
  auto bare = bcs::test::run(
      hosts.on(false, {bin("bcs-nm"), "--manager", addr, "--name", "victim"}), 60s, net);
  EXPECT_EQ(bare.status, 1) << describe(bare);
  EXPECT_THAT(bare.err, HasSubstr("--token-file"));
  EXPECT_THAT(bare.err, HasSubstr("--tls-ca"));
  // Root's client on host B: the same.
  auto client = bcs::test::run(hosts.on(false, {bin("bcs"), "run", "--manager", addr,
                                                "--token-file", t.path, "--timeout", "30s", "-n",
                                                "1", "/usr/bin/id"}),
                               60s, net);
  EXPECT_EQ(client.status, 1) << describe(client);
  EXPECT_THAT(client.err, HasSubstr("does not prove that it holds the cluster's token"));
  EXPECT_EQ(fake.stop(), 0);
  const std::string got = slurp(log);
  EXPECT_THAT(got, HasSubstr("Auth.Prove"));
  expect_fake_got_nothing(got, t, marker);

  // The real manager on that address afterwards: a job across both hosts.
  bcs::test::Background mm(hosts.on(true, {bin("bcs-mm"), "--listen", addr, "--ready-fd", "3",
                                           "--token-file", t.path}),
                           net);
  ASSERT_EQ(mm.ready_line(30s), port);
  bcs::test::Background nma(
      hosts.on(true, {bin("bcs-nm"), "--manager", addr, "--name", "hostA", "--token-file", t.path}),
      net);
  bcs::test::Background nmb(hosts.on(false, {bin("bcs-nm"), "--manager", addr, "--name", "hostB",
                                             "--token-file", t.path}),
                            net);
  auto ok = bcs::test::run(
      hosts.on(false, {bin("bcs"), "run", "--manager", addr, "--token-file", t.path, "--timeout",
                       "60s", "-n", "2", "--nodes", "2", "-l", "/bin/sh", "-c",
                       "echo on $BCS_NODE"}),
      90s, net);
  EXPECT_EQ(ok.status, 0) << describe(ok);
  EXPECT_THAT(ok.out, HasSubstr("on hostA"));
  EXPECT_THAT(ok.out, HasSubstr("on hostB"));
  EXPECT_EQ(nma.stop(), 0);
  EXPECT_EQ(nmb.stop(), 0);
  EXPECT_EQ(mm.stop(), 0);
}

// Issue 43's security story: two users' jobs gang-scheduled on one node
// manager (--mpl 2) stay apart. While both hold, each user tries from
// outside every way into the other's rank (it_probe): no signal (not even
// SIGCONT to a stopped rank), no ptrace, no memory, no segment; nothing of
// either job is in /dev/shm (the segment is a memfd); neither can kill the
// other's job, and each sees the other's job in the matrix only as taken
// ('#'). Both complete with their data checked.
TEST_F(Story, TwoUsersJobsSharingANodeManagerStayApart) {
  TestUser ua("a"), ub("b");
  if (!ua.ok()) GTEST_SKIP() << ua.why();
  if (!ub.ok()) GTEST_SKIP() << ub.why();
  TempDir dir(0755);
  TempDir files(0777);  // the jobs' pid and hold files, both users'
  Standing c(1, {"--mpl", "2", "--quantum", "200ms"}, {}, dir / "mm.sock");
  ASSERT_TRUE(c.up());
  auto as = [&](const TestUser& u, std::vector<std::string> argv) {
    return bcs::test::run_as(u.as(), argv, 60s);
  };
  struct Job {
    const TestUser* user;
    std::string name;
    uint64_t id = 0;
    bcs::test::RunResult result;
    std::thread follower;
  };
  Job a, b;
  a.user = &ua;
  a.name = "A";
  b.user = &ub;
  b.name = "B";
  for (Job* j : {&a, &b}) {
    auto r = as(*j->user, {bin("bcs"), "run", "--detach", "--manager", c.unix_addr, "--host", "n1:1",
                           it_prog("it_meet"), files.path(), j->name, "lines", "10", "hold"});
    ASSERT_EQ(r.status, 0) << describe(r);
    j->id = std::stoull(r.out);
    j->follower = std::thread([j, &as, &c] {
      j->result = as(*j->user, {bin("bcs"), "attach", std::to_string(j->id), "--manager", c.unix_addr});
    });
  }
  auto release_all = [&] {
    for (Job* j : {&a, &b}) std::ofstream(files / (j->name + ".release")) << "go\n";
    for (Job* j : {&a, &b})
      if (j->follower.joinable()) j->follower.join();
  };
  auto holding = [&] {
    return std::filesystem::exists(files / "A.holding") && std::filesystem::exists(files / "B.holding");
  };
  for (auto until = std::chrono::steady_clock::now() + 30s;
       !holding() && std::chrono::steady_clock::now() < until;)
    std::this_thread::sleep_for(2ms);
  if (!holding()) {
    release_all();
    FAIL() << "both jobs did not hold: " << describe(a.result) << describe(b.result);
  }
  auto pid_of = [&](const Job& j) {
    std::ifstream f(files / (j.name + ".rank0.pid"));
    long pid = 0;
    f >> pid;
    return std::to_string(pid);
  };
  const std::string shut_out =
      "signal0 EPERM\nsigcont EPERM\nptrace EPERM\nmem EACCES\nvm_readv EPERM\nsegment EACCES\n";
  for (auto [who, whom] : {std::pair{&a, &b}, std::pair{&b, &a}}) {
    const auto probe = as(*who->user, {it_prog("it_probe"), pid_of(*whom)});
    EXPECT_EQ(probe.status, 0) << describe(probe);
    EXPECT_EQ(probe.out, shut_out) << who->name << " on " << whom->name << "'s rank 0";
    const auto kill = as(*who->user, {bin("bcs"), "kill", std::to_string(whom->id), "--manager",
                                      c.unix_addr});
    EXPECT_EQ(kill.status, 1) << describe(kill);
    EXPECT_THAT(kill.err, HasSubstr("PERMISSION_DENIED"));
    // The matrix: its own job, and the other's as '#'.
    const auto m = as(*who->user, {bin("bcs"), "jobs", "--matrix", "--manager", c.unix_addr});
    EXPECT_EQ(m.status, 0) << describe(m);
    std::istringstream lines(m.out);
    std::string line;
    std::getline(lines, line);  // the header
    std::set<std::string> cells;
    while (std::getline(lines, line)) {
      std::istringstream f(line.substr(1));
      std::string row, cell;
      f >> row;
      while (f >> cell) cells.insert(cell);
    }
    EXPECT_EQ(cells, (std::set<std::string>{std::to_string(who->id), "#"})) << m.out;
  }
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/dev/shm", ec))
    EXPECT_EQ(e.path().filename().string().find("bcs-job"), std::string::npos) << e.path();
  release_all();
  for (Job* j : {&a, &b}) {
    EXPECT_EQ(j->result.status, 0) << describe(j->result);
    EXPECT_THAT(j->result.out, HasSubstr(j->name + " ok: 1 ranks"));
  }
  c.expect_alive_then_stop();
}
