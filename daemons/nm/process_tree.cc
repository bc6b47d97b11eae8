#include "process_tree.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "fd.h"

namespace bcs::nm {
namespace {

// Held across fork_rank's fork and while reap_orphans looks at children:
// a rank is in `g_ranks` before anybody could see it exit.
std::mutex g_mu;
std::set<pid_t> g_ranks;

struct Proc {
  pid_t pid = 0, ppid = 0;
  char state = '?';
};

// pid, ppid and state from /proc/PID/stat ("pid (comm) S ppid ..."; comm
// may hold spaces and parentheses, so parse after the last ')').
bool read_stat(pid_t pid, Proc* out) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
  UniqueFd fd(::open(path, O_RDONLY | O_CLOEXEC));
  if (!fd) return false;
  char buf[1024];
  ssize_t n = ::read(fd.get(), buf, sizeof buf - 1);
  if (n <= 0) return false;
  buf[n] = 0;
  const char* rp = std::strrchr(buf, ')');
  int ppid = 0;
  char st = '?';
  if (!rp || std::sscanf(rp + 1, " %c %d", &st, &ppid) != 2) return false;
  out->pid = pid;
  out->ppid = ppid;
  out->state = st;
  return true;
}

std::vector<Proc> scan() {
  std::vector<Proc> v;
  DIR* d = ::opendir("/proc");
  if (!d) return v;
  while (dirent* e = ::readdir(d)) {
    char* end = nullptr;
    long pid = std::strtol(e->d_name, &end, 10);
    if (*end || pid <= 0) continue;
    Proc p;
    if (read_stat(static_cast<pid_t>(pid), &p)) v.push_back(p);
  }
  ::closedir(d);
  return v;
}

}  // namespace

bool become_subreaper() { return ::prctl(PR_SET_CHILD_SUBREAPER, 1) == 0; }

pid_t fork_rank(const std::function<void()>& child) {
  std::lock_guard lk(g_mu);
  const pid_t pid = ::fork();
  if (pid == 0) {
    child();
    ::_exit(127);
  }
  if (pid > 0) g_ranks.insert(pid);
  return pid;
}

void forget_rank(pid_t pid) {
  std::lock_guard lk(g_mu);
  g_ranks.erase(pid);
}

void reap_orphans() {
  const pid_t self = ::getpid();
  std::lock_guard lk(g_mu);
  for (const Proc& p : scan()) {
    if (p.ppid != self || g_ranks.count(p.pid)) continue;
    // Our child (only we can reap it, so the pid cannot be recycled
    // under us); WNOHANG: one that is still running is left alone.
    ::waitpid(p.pid, nullptr, WNOHANG);
  }
}

int kill_descendants() {
  const pid_t self = ::getpid();
  std::unordered_set<pid_t> signalled;
  // Each round kills what the previous scan found; a process forked just
  // before its parent was killed shows up in the next one. A SIGKILLed
  // process cannot fork any more, so the rounds end.
  for (int round = 0; round < 64; ++round) {
    const auto procs = scan();
    std::unordered_map<pid_t, std::vector<pid_t>> kids;
    std::unordered_map<pid_t, char> state;
    for (const Proc& p : procs) {
      kids[p.ppid].push_back(p.pid);
      state[p.pid] = p.state;
    }
    std::unordered_set<pid_t> below;
    std::vector<pid_t> todo{self};
    while (!todo.empty()) {
      pid_t p = todo.back();
      todo.pop_back();
      for (pid_t c : kids[p])
        if (below.insert(c).second) todo.push_back(c);
    }
    int fresh = 0;
    for (pid_t p : below) {
      if (signalled.count(p) || state[p] == 'Z' || state[p] == 'X') continue;
      // Pin the process, then check it is still below us: between the scan
      // and now its pid may have been recycled by an unrelated process.
      UniqueFd pfd(static_cast<int>(::syscall(SYS_pidfd_open, p, 0)));
      Proc now;
      if (!read_stat(p, &now) || (now.ppid != self && !below.count(now.ppid))) continue;
      int rc = pfd ? static_cast<int>(::syscall(SYS_pidfd_send_signal, pfd.get(), SIGKILL,
                                                nullptr, 0))
                   : ::kill(p, SIGKILL);
      if (rc == 0) {
        signalled.insert(p);
        ++fresh;
      }
    }
    if (fresh == 0) break;
  }
  return static_cast<int>(signalled.size());
}

bool process_runs_below(pid_t pid, pid_t ancestor, uid_t uid, gid_t gid, std::string* why) {
  Proc p;
  if (pid <= 1 || !read_stat(pid, &p) || p.state == 'Z' || p.state == 'X') {
    *why = "no such live process";
    return false;
  }
  for (int depth = 0;; ++depth) {
    if (p.ppid == ancestor) break;
    if (depth == 64 || p.ppid <= 1 || !read_stat(p.ppid, &p)) {
      *why = "not a process below pid " + std::to_string(ancestor);
      return false;
    }
  }
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/status", static_cast<int>(pid));
  UniqueFd fd(::open(path, O_RDONLY | O_CLOEXEC));
  char buf[4096];
  const ssize_t n = fd ? ::read(fd.get(), buf, sizeof buf - 1) : -1;
  if (n <= 0) {
    *why = "its status cannot be read";
    return false;
  }
  buf[n] = 0;
  // "Uid:\tREAL\tEFFECTIVE\tSAVED\tFS" and the same for Gid.
  const auto all_are = [&](const char* key, unsigned want) {
    const char* at = std::strstr(buf, key);
    unsigned v[4];
    return at &&
           std::sscanf(at + std::strlen(key), " %u %u %u %u", &v[0], &v[1], &v[2], &v[3]) == 4 &&
           v[0] == want && v[1] == want && v[2] == want && v[3] == want;
  };
  if (!all_are("\nUid:", uid) || !all_are("\nGid:", gid)) {
    *why = "it does not run wholly as " + std::to_string(uid) + ":" + std::to_string(gid);
    return false;
  }
  // A process that is not dumpable (it was setuid, or asked so with
  // PR_SET_DUMPABLE) has its /proc files owned by root (not its /proc
  // directory, which keeps the effective ids for tools like ps).
  struct stat st {};
  std::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
  if (::stat(path, &st) != 0 || st.st_uid != uid || st.st_gid != gid) {
    *why = "it is not dumpable";
    return false;
  }
  return true;
}

}  // namespace bcs::nm
