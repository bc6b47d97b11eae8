#include "harness.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <limits.h>
#include <netinet/in.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <stdexcept>

namespace bcs::test {
namespace {

using Clock = std::chrono::steady_clock;

std::vector<std::string> build_env(const std::map<std::string, std::string>& extra) {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    std::string kv(*e);
    auto k = kv.substr(0, kv.find('='));
    if (extra.count(k) || k == "BCS_TEST_MARKER") continue;
    env.push_back(kv);
  }
  for (auto& [k, v] : extra) env.push_back(k + "=" + v);
  env.push_back("BCS_TEST_MARKER=" + marker());
  return env;
}

// fork+exec with the marker; stdout/stderr to the given fds (or inherited).
pid_t spawn(const std::vector<std::string>& argv, const std::map<std::string, std::string>& extra,
            int out_fd, int err_fd, int ready_fd, const As* as = nullptr) {
  auto env_s = build_env(extra);
  std::vector<char*> envp, args;
  for (auto& e : env_s) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  for (auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) throw std::runtime_error(std::string("fork: ") + strerror(errno));
  if (pid == 0) {
    // If the test binary dies, its children go too.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(1);
    int devnull = open("/dev/null", O_RDONLY);
    dup2(devnull, 0);
    if (out_fd >= 0) dup2(out_fd, 1);
    if (err_fd >= 0) dup2(err_fd, 2);
    if (ready_fd >= 0) dup2(ready_fd, 3);
    if (as) {
      if (setgroups(as->groups.size(), as->groups.data()) != 0 || setgid(as->gid) != 0 ||
          setuid(as->uid) != 0 || chdir(as->cwd.c_str()) != 0)
        _exit(125);
      prctl(PR_SET_PDEATHSIG, SIGKILL);  // the credential change cleared it
      if (getppid() != parent) _exit(1);
    }
    execve(args[0], args.data(), envp.data());
    _exit(127);
  }
  return pid;
}

int decode(int st) { return WIFSIGNALED(st) ? 128 + WTERMSIG(st) : WEXITSTATUS(st); }

// waitpid with a deadline, without sleeping as synchronisation: a pidfd is
// polled, so we wake exactly when the child exits.
int wait_deadline(pid_t pid, Clock::time_point deadline) {
  int pfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  for (;;) {
    int st;
    pid_t r = waitpid(pid, &st, WNOHANG);
    if (r == pid) {
      if (pfd >= 0) close(pfd);
      return decode(st);
    }
    auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      if (pfd >= 0) close(pfd);
      return -1;
    }
    pollfd p{pfd, POLLIN, 0};
    poll(&p, pfd >= 0 ? 1 : 0, static_cast<int>(std::min<long>(left, 100)));
  }
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace

std::string bin(const std::string& name) { return std::string(BCS_BIN_DIR) + "/" + name; }
std::string prog(const std::string& name) { return std::string(BCS_PROG_DIR) + "/" + name; }
std::string it_prog(const std::string& name) {
  return std::string(BCS_BIN_DIR) + "/../tests/integration/" + name;
}

const std::string& marker() {
  static const std::string m = [] {
    timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return "bcs-it-" + std::to_string(getpid()) + "-" + std::to_string(ts.tv_nsec);
  }();
  return m;
}

namespace {
RunResult run_impl(const As* as, const std::vector<std::string>& argv, std::chrono::seconds limit,
                   const std::map<std::string, std::string>& env, OutputHook on_stdout) {
  int out[2], err[2];
  if (pipe2(out, O_CLOEXEC) || pipe2(err, O_CLOEXEC)) throw std::runtime_error("pipe");
  pid_t pid = spawn(argv, env, out[1], err[1], -1, as);
  close(out[1]);
  close(err[1]);
  RunResult r;
  const auto deadline = Clock::now() + limit;
  pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
  int open_fds = 2;
  char buf[65536];
  while (open_fds > 0) {
    auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      r.timed_out = true;
      kill(pid, SIGKILL);  // its daemons and ranks follow (PR_SET_PDEATHSIG)
      break;
    }
    int n = poll(fds, 2, static_cast<int>(left));
    if (n < 0 && errno == EINTR) continue;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      ssize_t k = read(fds[i].fd, buf, sizeof buf);
      if (k > 0) {
        (i == 0 ? r.out : r.err).append(buf, static_cast<size_t>(k));
        if (i == 0 && on_stdout) on_stdout(r.out);
      } else {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  for (auto& f : fds)
    if (f.fd >= 0) close(f.fd);
  r.status = wait_deadline(pid, Clock::now() + std::chrono::seconds(30));
  if (r.status < 0) {
    kill(pid, SIGKILL);
    r.status = wait_deadline(pid, Clock::now() + std::chrono::seconds(30));
    r.timed_out = true;
  }
  return r;
}

}  // namespace

RunResult run(const std::vector<std::string>& argv, std::chrono::seconds limit,
              const std::map<std::string, std::string>& env, OutputHook on_stdout) {
  return run_impl(nullptr, argv, limit, env, std::move(on_stdout));
}

RunResult run_as(const As& who, const std::vector<std::string>& argv, std::chrono::seconds limit,
                 const std::map<std::string, std::string>& env, OutputHook on_stdout) {
  return run_impl(&who, argv, limit, env, std::move(on_stdout));
}

std::string threads_of(const std::vector<pid_t>& pids) {
  std::ostringstream o;
  for (const pid_t pid : pids) {
    const std::string proc = "/proc/" + std::to_string(pid);
    std::string name = read_file(proc + "/comm");
    if (!name.empty() && name.back() == '\n') name.pop_back();
    o << "process " << pid << " (" << name << "):\n";
    DIR* d = opendir((proc + "/task").c_str());
    if (!d) {
      o << "  gone\n";
      continue;
    }
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] == '.') continue;
      const std::string task = proc + "/task/" + e->d_name;
      // stat: "tid (comm) state ..."; after the comm's ')': field 3 on.
      const std::string st = read_file(task + "/stat");
      std::istringstream f(st.substr(std::min(st.size(), st.rfind(')') + 2)));
      std::vector<std::string> v{std::istream_iterator<std::string>(f), {}};
      auto field = [&](size_t n) { return n - 3 < v.size() ? v[n - 3] : std::string("?"); };
      std::string comm = read_file(task + "/comm");
      if (!comm.empty() && comm.back() == '\n') comm.pop_back();
      o << "  " << e->d_name << " " << comm << " state " << field(3) << " policy " << field(41)
        << " rt_prio " << field(40) << " wchan " << read_file(task + "/wchan") << "\n";
    }
    closedir(d);
    // User stacks, where a debugger is installed (CI installs gdb) and may
    // attach (root, or ptrace allowed).
    if (access("/usr/bin/gdb", X_OK) == 0) {
      const RunResult g = run({"/usr/bin/gdb", "-nx", "-batch", "-p", std::to_string(pid), "-ex",
                               "thread apply all bt 25"},
                              std::chrono::seconds(60));
      std::istringstream lines(g.out);
      for (std::string l; std::getline(lines, l);)
        if (l.rfind("Thread ", 0) == 0 || l.rfind("#", 0) == 0) o << "  " << l << "\n";
    }
  }
  return o.str();
}

RunResult bcs_run(const std::vector<std::string>& args, std::chrono::seconds limit,
                  const std::map<std::string, std::string>& env, OutputHook on_stdout) {
  std::vector<std::string> argv{bin("bcs"), "run", "--timeout",
                                std::to_string(limit.count() * 2 / 3) + "s"};
  argv.insert(argv.end(), args.begin(), args.end());
  return run(argv, limit, env, std::move(on_stdout));
}

Background::Background(const std::vector<std::string>& argv,
                       const std::map<std::string, std::string>& env, const As* as) {
  int p[2];
  if (pipe2(p, O_CLOEXEC)) throw std::runtime_error("pipe");
  pid_ = spawn(argv, env, -1, -1, p[1], as);
  close(p[1]);
  ready_fd_ = p[0];
}

Background::~Background() {
  stop();
  if (ready_fd_ >= 0) close(ready_fd_);
}

std::string Background::ready_line(std::chrono::seconds limit) {
  std::string line;
  const auto deadline = Clock::now() + limit;
  char c;
  while (Clock::now() < deadline) {
    pollfd p{ready_fd_, POLLIN, 0};
    auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (poll(&p, 1, static_cast<int>(std::max<long>(left, 1))) <= 0) continue;
    if (read(ready_fd_, &c, 1) != 1) break;
    if (c == '\n') return line;
    line += c;
  }
  return "";
}

int Background::wait(std::chrono::seconds limit) {
  if (pid_ <= 0) return status_;
  int st = wait_deadline(pid_, Clock::now() + limit);
  if (st >= 0) {
    status_ = st;
    pid_ = -1;
  }
  return st;
}

int Background::stop(std::chrono::seconds limit) {
  if (pid_ <= 0) return status_;
  kill(pid_, SIGTERM);
  if (wait(limit) >= 0) return status_;
  kill(pid_, SIGKILL);
  wait(std::chrono::seconds(30));
  return status_;
}

std::vector<pid_t> marked_with(const std::string& key, const std::string& value) {
  std::vector<pid_t> pids;
  const std::string m = "BCS_TEST_MARKER=" + marker();
  const std::string kv = key + "=" + value;
  DIR* d = opendir("/proc");
  if (!d) return pids;
  while (dirent* e = readdir(d)) {
    char* end;
    long pid = strtol(e->d_name, &end, 10);
    if (*end || pid <= 0 || pid == getpid()) continue;
    std::string env = read_file("/proc/" + std::string(e->d_name) + "/environ");
    if (env.empty()) continue;  // zombies and kernel threads have none
    bool has_marker = false, has_kv = key.empty();
    size_t pos = 0;
    while (pos < env.size()) {
      size_t z = env.find('\0', pos);
      if (z == std::string::npos) z = env.size();
      std::string_view item(env.data() + pos, z - pos);
      if (item == m) has_marker = true;
      if (!key.empty() && item == kv) has_kv = true;
      pos = z + 1;
    }
    if (has_marker && has_kv) pids.push_back(static_cast<pid_t>(pid));
  }
  closedir(d);
  return pids;
}

std::vector<pid_t> marked_processes() { return marked_with("", ""); }

std::vector<pid_t> marked_running(const std::string& path) {
  std::vector<pid_t> out;
  char want[PATH_MAX];
  if (!realpath(path.c_str(), want)) return out;
  for (pid_t p : marked_processes()) {
    char exe[PATH_MAX];
    ssize_t n = readlink(("/proc/" + std::to_string(p) + "/exe").c_str(), exe, sizeof exe - 1);
    if (n > 0 && std::string(exe, static_cast<size_t>(n)) == want) out.push_back(p);
  }
  return out;
}

std::vector<Listener> tcp_listeners_of(const std::vector<pid_t>& pids) {
  // Socket inode -> the pid holding it.
  std::map<unsigned long, pid_t> owner;
  for (pid_t p : pids) {
    const std::string dir = "/proc/" + std::to_string(p) + "/fd";
    DIR* d = opendir(dir.c_str());
    if (!d) continue;
    while (dirent* e = readdir(d)) {
      char target[256];
      ssize_t n = readlink((dir + "/" + e->d_name).c_str(), target, sizeof target - 1);
      if (n <= 0) continue;
      target[n] = 0;
      unsigned long ino = 0;
      if (sscanf(target, "socket:[%lu]", &ino) == 1) owner[ino] = p;
    }
    closedir(d);
  }
  std::vector<Listener> out;
  for (const char* file : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream f(file);
    std::string line;
    std::getline(f, line);  // header
    while (std::getline(f, line)) {
      std::istringstream is(line);
      std::string slot, local, remote, state, queues, timer, retr, uid, timeout, inode;
      is >> slot >> local >> remote >> state >> queues >> timer >> retr >> uid >> timeout >> inode;
      if (state != "0A") continue;  // TCP_LISTEN
      auto it = owner.find(std::stoul(inode));
      if (it == owner.end()) continue;
      Listener l;
      l.pid = it->second;
      const std::string hex = local.substr(0, local.find(':'));
      l.port = static_cast<uint16_t>(std::stoul(local.substr(local.find(':') + 1), nullptr, 16));
      // The kernel prints addresses as 32-bit words in host (little-endian) order.
      unsigned char b[16] = {};
      for (size_t w = 0; w < hex.size() / 8; ++w) {
        uint32_t word = static_cast<uint32_t>(std::stoul(hex.substr(w * 8, 8), nullptr, 16));
        std::memcpy(b + w * 4, &word, 4);
      }
      char text[64] = {};
      if (hex.size() == 8) {
        inet_ntop(AF_INET, b, text, sizeof text);
        l.loopback = b[0] == 127;
      } else {
        inet_ntop(AF_INET6, b, text, sizeof text);
        in6_addr a;
        std::memcpy(&a, b, 16);
        l.loopback = IN6_IS_ADDR_LOOPBACK(&a) || (IN6_IS_ADDR_V4MAPPED(&a) && b[12] == 127);
      }
      l.ip = text;
      out.push_back(l);
    }
  }
  return out;
}

std::vector<pid_t> wait_no_marked_processes(std::chrono::seconds limit) {
  // Processes killed a moment ago (e.g. by PR_SET_PDEATHSIG) may still be
  // exiting: wait on their pidfds, which become readable when they exit.
  const auto deadline = Clock::now() + limit;
  for (;;) {
    auto left = marked_processes();
    if (left.empty() || Clock::now() >= deadline) return left;
    std::vector<pollfd> fds;
    for (pid_t p : left) {
      int fd = static_cast<int>(syscall(SYS_pidfd_open, p, 0));
      if (fd >= 0) fds.push_back({fd, POLLIN, 0});
    }
    auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    // Wake at the first exit (then look again) or at the deadline.
    if (!fds.empty()) poll(fds.data(), fds.size(), static_cast<int>(std::max<long>(ms, 1)));
    for (auto& f : fds) close(f.fd);
  }
}

std::vector<std::string> shm_entries() {
  std::vector<std::string> v;
  DIR* d = opendir("/dev/shm");
  if (!d) return v;
  while (dirent* e = readdir(d))
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) v.push_back(e->d_name);
  closedir(d);
  return v;
}

}  // namespace bcs::test

namespace bcs::test {

std::string blocker() { return std::string(BCS_BIN_DIR) + "/../tests/integration/it_block"; }

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + what.size())) ++n;
  return n;
}

bool kill_announced_rank(const std::string& out, int rank, int sig) {
  const std::string key = "rank " + std::to_string(rank) + " pid ";
  size_t p = out.find(key);
  if (p == std::string::npos) return false;
  size_t e = out.find(" blocking", p);
  if (e == std::string::npos) return false;
  pid_t pid = static_cast<pid_t>(std::stol(out.substr(p + key.size(), e - p - key.size())));
  return pid > 0 && ::kill(pid, sig) == 0;
}

}  // namespace bcs::test

// ------------------------------------------------------------ story fixture
#include <sys/inotify.h>

#include "story.h"

namespace bcs::test {
namespace {
struct UniqueFdLite {
  int fd;
  explicit UniqueFdLite(int f) : fd(f) {}
  ~UniqueFdLite() {
    if (fd >= 0) close(fd);
  }
};
}  // namespace

std::string describe(const RunResult& r) {
  return "status " + std::to_string(r.status) + (r.timed_out ? " (TIMED OUT)" : "") +
         "\n--- stdout\n" + r.out.substr(0, 4000) + "\n--- stderr\n" + r.err.substr(0, 4000);
}

void Story::TearDown() {
  auto left = wait_no_marked_processes(std::chrono::seconds(10));
  EXPECT_TRUE(left.empty()) << left.size() << " process(es) left behind, first pid "
                            << (left.empty() ? 0 : left[0]);
  for (pid_t p : left) kill(p, SIGKILL);
  std::set<std::string> before(shm_before_.begin(), shm_before_.end());
  // Every process of ours is gone, so nothing of ours can still remove an
  // entry: one that stays is a leak. But /dev/shm is the whole host's, and
  // any UCX process (another test run on a shared machine) creates
  // ucx_shm_posix_* entries and unlinks them a moment later. Such an entry
  // is given a bounded grace, waiting for its deletion event (inotify), not
  // sleeping; a real leak is still there when the grace ends.
  UniqueFdLite in(inotify_init1(IN_CLOEXEC | IN_NONBLOCK));
  if (in.fd >= 0) inotify_add_watch(in.fd, "/dev/shm", IN_DELETE | IN_MOVED_FROM);
  auto suspects = [&] {
    std::set<std::string> s;
    for (auto& e : shm_entries())
      if (!before.count(e)) s.insert(e);
    return s;
  };
  auto left_shm = suspects();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (!left_shm.empty() && in.fd >= 0) {
    bool foreign_only = true;
    for (auto& e : left_shm) foreign_only &= e.rfind("ucx_shm_posix_", 0) == 0;
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                        deadline - std::chrono::steady_clock::now())
                        .count();
    if (!foreign_only || ms <= 0) break;
    pollfd p{in.fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(ms)) == 1) {
      char buf[4096];
      while (read(in.fd, buf, sizeof buf) > 0) {
      }
    }
    left_shm = suspects();
  }
  for (auto& e : left_shm) ADD_FAILURE() << "leaked /dev/shm/" << e;
}

void Story::expect_nothing_left_now() {
  auto left = marked_processes();
  EXPECT_TRUE(left.empty()) << left.size() << " process(es) still alive when bcs returned";
}

std::optional<uint64_t> csv_column_sum(const std::string& path, const std::string& col) {
  std::ifstream in(path);
  std::string line;
  if (!std::getline(in, line)) return std::nullopt;
  size_t idx = 0;
  for (size_t p = 0;; ++idx) {
    const size_t q = line.find(',', p);
    if (line.substr(p, q == std::string::npos ? std::string::npos : q - p) == col) break;
    if (q == std::string::npos) return std::nullopt;
    p = q + 1;
  }
  uint64_t sum = 0;
  while (std::getline(in, line)) {
    size_t p = 0;
    for (size_t i = 0; i < idx; ++i) p = line.find(',', p) + 1;
    sum += std::stoull(line.substr(p, line.find(',', p) - p));
  }
  return sum;
}

TempDir::TempDir(const char* prefix) {
  std::string t = std::string("/tmp/") + prefix + "-XXXXXX";
  if (::mkdtemp(t.data())) path = t;
}

TempDir::~TempDir() {
  std::error_code ec;
  if (!path.empty()) std::filesystem::remove_all(path, ec);
}

}  // namespace bcs::test
