// The job's cpu cgroup (cpu_group.h).
#include "cpu_group.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

#include <spdlog/spdlog.h>

namespace bcs::nm {

namespace {

bool has_token(const std::string& list, const std::string& tok) {
  std::stringstream ss(list);
  for (std::string t; std::getline(ss, t, ',');)
    if (t == tok) return true;
  return false;
}

// The v1 hierarchy holding the cpu controller: its mount point and the
// path in the hierarchy that mount shows at that point (a container's
// mount may show only a subtree). From /proc/self/mountinfo:
//   id parent maj:min root mountpoint opts ... - fstype source superopts
bool cpu_mount(std::string* point, std::string* root) {
  std::ifstream in("/proc/self/mountinfo");
  for (std::string line; std::getline(in, line);) {
    const auto dash = line.find(" - ");
    if (dash == std::string::npos) continue;
    std::stringstream tail(line.substr(dash + 3));
    std::string fstype, source, super;
    tail >> fstype >> source >> super;
    if (fstype != "cgroup" || !has_token(super, "cpu")) continue;
    std::stringstream head(line.substr(0, dash));
    std::string id, parent, dev;
    head >> id >> parent >> dev >> *root >> *point;
    return true;
  }
  return false;
}

// This process's path in the v1 hierarchy with the cpu controller.
std::string own_cpu_path() {
  std::ifstream in("/proc/self/cgroup");
  for (std::string line; std::getline(in, line);) {
    const auto a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    if (has_token(line.substr(a + 1, b - a - 1), "cpu")) return line.substr(b + 1);
  }
  return "";
}

std::string errno_text(const std::string& what) { return what + ": " + std::strerror(errno); }

}  // namespace

std::string cpu_group_dir() {
  std::string point, root;
  if (!cpu_mount(&point, &root)) return "";
  std::string own = own_cpu_path();
  if (own.empty()) return "";
  // The part of our path below what the mount shows.
  if (root != "/" && own.rfind(root, 0) == 0) own = own.substr(root.size());
  if (own == "/") own.clear();
  return point + own;
}

CpuGroup CpuGroup::make(uint64_t job_id, std::string* why) {
  CpuGroup g;
  const std::string dir = cpu_group_dir();
  if (dir.empty()) {
    *why = "no cgroup v1 cpu hierarchy";
    return g;
  }
  const std::string path =
      dir + "/bcs-nm-" + std::to_string(::getpid()) + "-job-" + std::to_string(job_id);
  if (::mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) {
    *why = errno_text("mkdir " + path);
    return g;
  }
  g.path_ = path;  // from here on the destructor removes it
  g.procs_.reset(::open((path + "/cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC));
  if (!g.procs_) {
    *why = errno_text(path + "/cgroup.procs");
    return g;
  }
  UniqueFd idle(::open((path + "/cpu.idle").c_str(), O_WRONLY | O_CLOEXEC));
  if (!idle) {
    *why = errno_text(path + "/cpu.idle");  // a kernel before 5.15
    return g;
  }
  g.idle_ = std::move(idle);
  // Foreground until the manager says otherwise.
  if (std::string e = g.set_idle(false); !e.empty()) {
    *why = e;
    g.idle_.reset();
  }
  return g;
}

CpuGroup::CpuGroup(CpuGroup&& o) noexcept
    : path_(std::exchange(o.path_, {})), procs_(std::move(o.procs_)), idle_(std::move(o.idle_)) {}

CpuGroup& CpuGroup::operator=(CpuGroup&& o) noexcept {
  if (this != &o) {
    release();
    path_ = std::exchange(o.path_, {});
    procs_ = std::move(o.procs_);
    idle_ = std::move(o.idle_);
  }
  return *this;
}

CpuGroup::~CpuGroup() { release(); }

bool CpuGroup::join_self() const {
  return procs_ && ::write(procs_.get(), "0", 1) == 1;
}

std::string CpuGroup::set_idle(bool idle) const {
  if (!idle_) return "no cpu group";
  if (::pwrite(idle_.get(), idle ? "1" : "0", 1, 0) != 1) return errno_text(path_ + "/cpu.idle");
  return "";
}

void CpuGroup::release() {
  procs_.reset();
  idle_.reset();
  if (path_.empty()) return;
  const std::string path = std::exchange(path_, {});
  if (::rmdir(path.c_str()) == 0 || errno == ENOENT) return;
  // Processes the job left (a rank's child that escaped its process group
  // and outlived the kill): they belong to no job any more, so they go to
  // the group the node manager is in, and the job's group goes away.
  {
    std::ifstream in(path + "/cgroup.procs");
    UniqueFd up(::open((path + "/../cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC));
    for (std::string pid; up && std::getline(in, pid);)
      if (::write(up.get(), pid.data(), pid.size()) < 0) break;
  }
  if (::rmdir(path.c_str()) != 0 && errno != ENOENT)
    spdlog::warn("{}: {}", path, std::strerror(errno));
}

void CpuGroup::remove_stale() {
  const std::string dir = cpu_group_dir();
  if (dir.empty()) return;
  DIR* d = ::opendir(dir.c_str());
  if (!d) return;
  std::vector<std::string> gone;
  while (dirent* e = ::readdir(d)) {
    unsigned long pid = 0;
    unsigned long long job = 0;
    int used = 0;
    if (std::sscanf(e->d_name, "bcs-nm-%lu-job-%llu%n", &pid, &job, &used) != 2 ||
        e->d_name[used] != '\0')
      continue;
    // Its node manager is alive: not ours to touch. (A pid reused by
    // another program keeps the group until it ends: harmless, it is empty.)
    if (static_cast<pid_t>(pid) == ::getpid() ||
        ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM)
      continue;
    gone.push_back(dir + "/" + e->d_name);
  }
  ::closedir(d);
  for (const auto& g : gone)
    if (::rmdir(g.c_str()) == 0) spdlog::info("removed {}, left by a node manager that is gone", g);
}

}  // namespace bcs::nm
