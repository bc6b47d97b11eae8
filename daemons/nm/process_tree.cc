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
#include <algorithm>
#include <cstring>
#include <iterator>
#include <map>
#include <mutex>
#include <set>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "fd.h"

namespace bcs::nm {
namespace {

struct Proc {
  pid_t pid = 0, ppid = 0;
  char state = '?';
  unsigned long long start = 0;  // start time (clock ticks after boot): tells a reused pid
};

// pid, ppid, state and start time from /proc/PID/stat ("pid (comm) S ppid
// ..."; comm may hold spaces and parentheses, so parse after the last ')').
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
  unsigned long long start = 0;
  // Fields 3 and 4, then 22 (starttime) after 17 skipped.
  if (!rp || std::sscanf(rp + 1,
                         " %c %d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d "
                         "%*d %llu",
                         &st, &ppid, &start) != 3)
    return false;
  out->pid = pid;
  out->ppid = ppid;
  out->state = st;
  out->start = start;
  return true;
}

bool dead(const Proc& p) { return p.state == 'Z' || p.state == 'X'; }

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

// The registry, under g_mu. Held across fork_rank's fork and while
// children are looked at and reaped: a rank is in `g_ranks` before anybody
// could see it exit, and a child of the NM (rank or orphan) is reaped only
// under it, so its pid cannot be recycled while a look holds it.
std::mutex g_mu;
std::map<pid_t, uint64_t> g_ranks;  // rank pid -> job
std::set<uint64_t> g_live;          // jobs with ranks forked and not yet killed
// Orphans inherited as subreaper (children of the NM that are not ranks),
// not reaped yet: the jobs that may own each (one when it was placed).
std::map<pid_t, std::set<uint64_t>> g_orphans;
// Every process the last look found below a job's rank or placed orphan:
// pid -> (start time, job). What an orphan is placed by when its parent
// died after that look.
std::map<pid_t, std::pair<unsigned long long, uint64_t>> g_seen;

// One look at what is below the NM (under g_mu): places new orphans and
// renews g_seen. Returns the processes found, by pid.
std::map<pid_t, Proc> look() {
  const pid_t self = ::getpid();
  std::map<pid_t, Proc> procs;
  for (const Proc& p : scan()) procs[p.pid] = p;
  // Orphans already reaped elsewhere (never: only reap_orphans reaps them,
  // under g_mu) or whose pid is another process now are dropped.
  for (auto it = g_orphans.begin(); it != g_orphans.end();) {
    auto p = procs.find(it->first);
    it = p == procs.end() || p->second.ppid != self ? g_orphans.erase(it) : std::next(it);
  }
  // The owner of `pid` by its ppid chain up to a rank or a placed orphan:
  // 0 when there is none (or several may own it).
  auto owner = [&](pid_t pid) -> uint64_t {
    for (int depth = 0; depth < 256; ++depth) {
      if (auto r = g_ranks.find(pid); r != g_ranks.end()) return r->second;
      if (auto o = g_orphans.find(pid); o != g_orphans.end())
        return o->second.size() == 1 ? *o->second.begin() : 0;
      auto p = procs.find(pid);
      if (p == procs.end() || p->second.ppid == self || p->second.ppid <= 1) return 0;
      pid = p->second.ppid;
    }
    return 0;
  };
  // Jobs whose direct children of the NM died and are not reaped yet: the
  // deaths that can have handed the NM its new orphans. Their state is read
  // again now, after the scan: a death that reparented a child the scan
  // saw as ours happened before it, so its zombie shows here.
  std::set<uint64_t> dying;
  auto note_dying = [&](pid_t pid, const std::set<uint64_t>& jobs) {
    Proc now;
    if (read_stat(pid, &now) && now.ppid == self && dead(now)) dying.insert(jobs.begin(), jobs.end());
  };
  for (const auto& [pid, job] : g_ranks) note_dying(pid, {job});
  for (const auto& [pid, jobs] : g_orphans) note_dying(pid, jobs);
  for (const auto& [pid, p] : procs) {
    if (p.ppid != self || g_ranks.count(pid) || g_orphans.count(pid)) continue;
    std::set<uint64_t> jobs;
    if (auto s = g_seen.find(pid); s != g_seen.end() && s->second.first == p.start)
      jobs = {s->second.second};  // remembered from before its parent died
    else if (!dying.empty())
      jobs = dying;
    else
      jobs = g_live;  // cannot be placed: held for every live job
    g_orphans[pid] = std::move(jobs);
  }
  std::map<pid_t, std::pair<unsigned long long, uint64_t>> seen;
  for (const auto& [pid, p] : procs)
    if (uint64_t j = owner(pid)) seen[pid] = {p.start, j};
  g_seen = std::move(seen);
  return procs;
}

// Kills, in rounds, the ranks of jobs no longer live, every orphan that no
// live job may own, and everything below them (under g_mu). Returns how
// many processes were signalled.
int kill_unowned() {
  const pid_t self = ::getpid();
  std::unordered_set<pid_t> signalled;
  // Each round kills what the previous look found; a process forked just
  // before its parent was killed shows up in the next one (below a rank
  // or orphan that is dying, or as an orphan placed by its zombie). A
  // SIGKILLed process cannot fork any more, so the rounds end.
  for (int round = 0; round < 64; ++round) {
    const auto procs = look();
    std::vector<pid_t> roots;
    for (const auto& [pid, job] : g_ranks)
      if (!g_live.count(job)) roots.push_back(pid);
    for (const auto& [pid, jobs] : g_orphans)
      if (std::none_of(jobs.begin(), jobs.end(), [](uint64_t j) { return g_live.count(j) > 0; }))
        roots.push_back(pid);
    std::unordered_map<pid_t, std::vector<pid_t>> kids;
    for (const auto& [pid, p] : procs) kids[p.ppid].push_back(pid);
    std::unordered_set<pid_t> doomed(roots.begin(), roots.end());
    std::vector<pid_t> todo = roots;
    while (!todo.empty()) {
      const pid_t p = todo.back();
      todo.pop_back();
      for (pid_t c : kids[p])
        if (c != self && doomed.insert(c).second) todo.push_back(c);
    }
    int fresh = 0;
    for (pid_t p : doomed) {
      auto it = procs.find(p);
      if (signalled.count(p) || it == procs.end() || dead(it->second)) continue;
      // Pin the process, then check it is still what the look found (its
      // start time) below what we kill: between the look and now its pid
      // may have been recycled by an unrelated process. The NM's own
      // children (the roots) cannot be: only we reap them, under g_mu.
      UniqueFd pfd(static_cast<int>(::syscall(SYS_pidfd_open, p, 0)));
      Proc now;
      if (!read_stat(p, &now) || now.start != it->second.start ||
          (now.ppid != self && !doomed.count(now.ppid)))
        continue;
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

}  // namespace

bool become_subreaper() { return ::prctl(PR_SET_CHILD_SUBREAPER, 1) == 0; }

pid_t fork_rank(uint64_t job, const std::function<void()>& child) {
  std::lock_guard lk(g_mu);
  const pid_t pid = ::fork();
  if (pid == 0) {
    child();
    ::_exit(127);
  }
  if (pid > 0) {
    g_ranks[pid] = job;
    g_live.insert(job);
  }
  return pid;
}

void place_orphans() {
  std::lock_guard lk(g_mu);
  look();
}

void forget_rank(pid_t pid) {
  std::lock_guard lk(g_mu);
  g_ranks.erase(pid);
}

void reap_orphans() {
  std::lock_guard lk(g_mu);
  // Placed before any is reaped: a dead orphan's zombie places its
  // children. Those only jobs already over could own go now.
  kill_unowned();
  for (auto it = g_orphans.begin(); it != g_orphans.end();) {
    // Our child (only we can reap it, so the pid cannot be recycled
    // under us); WNOHANG: one that is still running is left alone.
    it = ::waitpid(it->first, nullptr, WNOHANG) == it->first ? g_orphans.erase(it) : std::next(it);
  }
}

int kill_job_tree(uint64_t job) {
  std::lock_guard lk(g_mu);
  g_live.erase(job);
  return kill_unowned();
}

int count_job_processes(uint64_t job) {
  std::lock_guard lk(g_mu);
  const auto procs = look();
  int n = 0;
  for (const auto& [pid, p] : procs) {
    if (dead(p)) continue;
    auto s = g_seen.find(pid);
    if (s != g_seen.end() && s->second.second == job) ++n;
  }
  return n;
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
