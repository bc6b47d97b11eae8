#include "job.h"

#include <climits>
#include "peer.h"
#include "process_tree.h"
#include "roles/ports.h"

#include "launch.h"

#include <fcntl.h>
#include <poll.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <linux/capability.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <new>

namespace bcs::nm {
namespace {

// The fd a rank finds its segment on (BCS_SEGMENT_FD).
constexpr int kRankSegmentFd = 3;

// set_rank_fd_limit(); RLIM_INFINITY soft = leave the inherited one.
rlimit g_rank_nofile{RLIM_INFINITY, RLIM_INFINITY};

std::string env_get(const std::vector<std::string>& env, const std::string& key) {
  for (const auto& kv : env)
    if (kv.size() > key.size() && kv.compare(0, key.size(), key) == 0 && kv[key.size()] == '=')
      return kv.substr(key.size() + 1);
  return {};
}

std::string join_path(const std::string& dir, const std::string& name) {
  if (dir.empty()) return name;
  return dir.back() == '/' ? dir + name : dir + "/" + name;
}

// Resolves the program the way a shell would, but with the *job's* PATH and
// cwd, so that the error is reported once, clearly, instead of by every rank.
bool resolve_program(const JobSpec& s, std::string* path, std::string* error) {
  auto executable = [](const std::string& p) {
    struct stat st {};
    return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), X_OK) == 0;
  };
  if (s.program.find('/') != std::string::npos) {
    std::string p = s.program[0] == '/' ? s.program : join_path(s.cwd, s.program);
    if (!executable(p)) {
      *error = "cannot execute '" + s.program + "': " +
               (::access(p.c_str(), F_OK) == 0 ? "Permission denied or not a regular file"
                                               : "No such file or directory");
      return false;
    }
    *path = p;
    return true;
  }
  std::string search = env_get(s.env, "PATH");
  if (search.empty()) search = "/usr/local/bin:/usr/bin:/bin";
  size_t pos = 0;
  while (pos <= search.size()) {
    size_t end = search.find(':', pos);
    if (end == std::string::npos) end = search.size();
    std::string dir = search.substr(pos, end - pos);
    if (dir.empty()) dir = ".";
    if (dir[0] != '/') dir = join_path(s.cwd, dir);
    std::string p = join_path(dir, s.program);
    if (executable(p)) {
      *path = p;
      return true;
    }
    pos = end + 1;
  }
  *error = "program '" + s.program + "' not found in PATH";
  return false;
}

void write_all_raw(int fd, const char* msg) {
  size_t n = std::strlen(msg);
  while (n > 0) {
    ssize_t w = ::write(fd, msg, n);
    if (w <= 0) return;
    msg += w;
    n -= static_cast<size_t>(w);
  }
}

}  // namespace

void set_rank_fd_limit(uint64_t soft, uint64_t hard) {
  g_rank_nofile.rlim_cur = soft;
  g_rank_nofile.rlim_max = hard;
}

namespace {

// May this process set any uid and gid (CAP_SETUID and CAP_SETGID in its
// effective set)? Root has them; so does a node manager run as a dedicated
// user with those capabilities (deploy/systemd/bcs-nm.service).
bool can_change_credentials() {
  __user_cap_header_struct h{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct d[2]{};
  if (::syscall(SYS_capget, &h, d) != 0) return false;
  auto has = [&](int cap) { return (d[cap / 32].effective >> (cap % 32)) & 1u; };
  return has(CAP_SETUID) && has(CAP_SETGID);
}

}  // namespace

bool can_run_as_any_user() { return ::geteuid() == 0 || can_change_credentials(); }

std::string job_credentials(uid_t uid, gid_t gid, JobSpec* spec) {
  const uid_t me = ::geteuid();
  spec->uid = uid;
  spec->gid = gid;
  spec->groups.clear();
  if (me != 0 && !can_change_credentials()) {
    if (uid != me)
      return "this node manager runs as " + user_name(me) + " and cannot run a job as " +
             user_name(uid);
    spec->change_creds = false;  // our own user: the ranks run exactly as we do
    return {};
  }
  if (me != 0 && uid == 0)
    return "this node manager runs as " + user_name(me) + " and runs no job as root";
  spec->change_creds = !(uid == me && gid == ::getegid());
  if (!spec->change_creds) return {};
  // initgroups() is not async-signal-safe: the list is made here, before
  // fork, and only set in the child.
  passwd pw{}, *res = nullptr;
  std::vector<char> buf(16384);
  if (::getpwuid_r(uid, &pw, buf.data(), buf.size(), &res) == 0 && res) {
    int n = 64;
    std::vector<gid_t> g(static_cast<size_t>(n));
    while (::getgrouplist(pw.pw_name, gid, g.data(), &n) < 0) g.resize(static_cast<size_t>(n));
    g.resize(static_cast<size_t>(n));
    spec->groups = std::move(g);
  } else {
    spec->groups = {gid};  // a uid without a passwd entry: its own group only
  }
  return {};
}

namespace {
// Backs the header and each rank's hot part (SegmentLayout::hot_bytes)
// with memory.
bool populate_hot(void* base, const SegmentLayout& l) {
  auto* b = static_cast<uint8_t*>(base);
  if (!segment_populate(b, l.header_bytes())) return false;
  for (uint32_t i = 0; i < l.nlocal; ++i)
    if (!segment_populate(b + l.header_bytes() + size_t{i} * l.rank_area_bytes(), l.hot_bytes()))
      return false;
  return true;
}
}  // namespace

std::shared_ptr<NmJob> NmJob::start(const JobSpec& spec, uint32_t self,
                                    const std::string& node_name, std::string* error) {
  std::shared_ptr<NmJob> job(new (std::nothrow) NmJob());  // private ctor: no make_shared
  if (!job) {
    *error = "out of memory";
    return nullptr;
  }
  job->spec_ = spec;
  for (uint32_t r = 0; r < spec.nranks; ++r) {
    if (spec.rank_node.at(r) != self) continue;
    auto lr = std::make_unique<LocalRank>();
    lr->world_rank = static_cast<int32_t>(r);
    lr->local_index = static_cast<uint32_t>(job->ranks_.size());
    job->local_of_world_[static_cast<int32_t>(r)] = lr->local_index;
    job->ranks_.push_back(std::move(lr));
  }

  std::string path;
  if (!resolve_program(spec, &path, error)) return nullptr;

  // The segment: a memfd, so that it has no name to leak.
  SegmentLayout layout;
  layout.nlocal = static_cast<uint32_t>(job->ranks_.size());
  std::string seg_name = "bcs-job" + std::to_string(spec.id);
  job->memfd_.reset(static_cast<int>(::syscall(SYS_memfd_create, seg_name.c_str(), MFD_CLOEXEC)));
  if (!job->memfd_ || ::fchmod(job->memfd_.get(), 0600) != 0 ||
      ::ftruncate(job->memfd_.get(), static_cast<off_t>(layout.total_bytes())) != 0) {
    *error = std::string("cannot create the job segment: ") + std::strerror(errno);
    return nullptr;
  }
  void* base = ::mmap(nullptr, layout.total_bytes(), PROT_READ | PROT_WRITE, MAP_SHARED,
                      job->memfd_.get(), 0);
  if (base == MAP_FAILED) {
    *error = std::string("cannot map the job segment: ") + std::strerror(errno);
    return nullptr;
  }
  // The pages are allocated and mapped here, at the job's start, not one
  // minor fault at a time as the slices first touch each ring page,
  // request slot and landing (a fault costs several microseconds on a
  // virtual machine, in the middle of a slice). The ranks populate their
  // own areas the same way (bcs_init). Only each rank's hot part
  // (SegmentLayout::hot_bytes): the rest of its request table is address
  // space until the rank hands those slots out, so MAP_POPULATE, which
  // would back all of it, is not used.
  if (!populate_hot(base, layout)) {
    *error = std::string("cannot allocate the job segment: ") + std::strerror(errno);
    return nullptr;
  }
  job->seg_ = Mapping(base, layout.total_bytes());
  job->layout_ = layout;
  if (const char* sc = std::getenv("BCS_SINGLE_COPY"); sc && std::string(sc) == "off")
    job->single_copy_ = false;
  if (const char* sh = std::getenv("BCS_COPY_SHARE"); sh && std::string(sh) == "off")
    job->share_copies_ = false;
  if (const char* sp = std::getenv("BCS_COPY_SPLIT"); sp && std::string(sp) == "off")
    job->split_copies_ = false;
  // The memfd is zero-filled: every atomic starts at 0 (free requests, empty rings).
  auto* h = static_cast<SegmentHeader*>(base);
  h->magic = kSegmentMagic;
  h->version = kSegmentVersion;
  h->job_id = spec.id;
  h->world_size = spec.nranks;
  h->nlocal = layout.nlocal;
  h->ring_slots = layout.ring_slots;
  h->request_slots = layout.request_slots;
  h->rank_area_bytes = layout.rank_area_bytes();
  h->slice_ns = spec.slice_ns;
  h->total_bytes = layout.total_bytes();
  for (auto& r : job->ranks_) job->view(*r).ctl->world_rank = r->world_rank;
  if (!spec.fixed_strobe) job->set_nm_flag(kNmBellOnBlock, true);
  // Before the ranks start: each reads it once, in bcs_init.
  if (segment_membarrier_supported()) job->set_nm_flag(kNmAsymmetricFence, true);

  // Everything the children need is built before fork: after fork only
  // async-signal-safe calls are allowed (the NM is multi-threaded).
  std::vector<std::string> argv_s;
  argv_s.push_back(spec.program);
  argv_s.insert(argv_s.end(), spec.args.begin(), spec.args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  const int segfd = job->memfd_.get();
  const pid_t parent = ::getpid();
  // The background policy's cpu group, joined by each rank before it drops
  // root (cgroup.procs is root's): a node that cannot make one stops the
  // job's ranks instead when it is suspended, as plain gang scheduling does.
  if (spec.cpu_group) {
    std::string why;
    job->cpu_group_ = CpuGroup::make(spec.id, &why);
    if (!job->cpu_group_.valid())
      spdlog::warn("job {}: no cpu group ({}): its ranks will be stopped when suspended", spec.id,
                   why);
  }
  const CpuGroup* const group = job->cpu_group_.valid() ? &job->cpu_group_ : nullptr;
  // The rank's stdin. Opened here: the child only dup2()s.
  UniqueFd devnull(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (!devnull) {
    *error = std::string("/dev/null: ") + std::strerror(errno);
    return nullptr;
  }
  // Each rank's CPU, from this node manager's own (a cgroup's, Slurm's),
  // counting the job's ranks on every node manager of this host: each of
  // them reckons the same way, so no two share a CPU. They start at the
  // manager's base for this host, so other jobs' ranks there keep theirs.
  std::vector<uint32_t> host_nodes = spec.host_peers;
  host_nodes.push_back(self);
  const std::vector<int> cpu_of = host_rank_cpus(spec.bind, spec.rank_node, host_nodes,
                                                 allowed_cpus(), spec.host_slot_base);
  rlimit nofile{};
  const int max_fd = ::getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < (1u << 20)
                         ? static_cast<int>(nofile.rlim_cur)
                         : (1 << 20);

  for (auto& r : job->ranks_) {
    // The job's environment, minus the variables this NM sets for the rank
    // (a job launched from inside another job must not inherit its segment).
    // Nor the cluster's token, should a client have sent it.
    std::vector<std::string> env_s;
    for (const auto& kv : spec.env)
      if (!is_rank_env(kv) && kv.rfind("BCS_TOKEN=", 0) != 0) env_s.push_back(kv);
    env_s.push_back("BCS_SEGMENT_FD=" + std::to_string(kRankSegmentFd));
    env_s.push_back("BCS_LOCAL_INDEX=" + std::to_string(r->local_index));
    env_s.push_back("BCS_RANK=" + std::to_string(r->world_rank));
    env_s.push_back("BCS_SIZE=" + std::to_string(spec.nranks));
    env_s.push_back("BCS_JOB=" + std::to_string(spec.id));
    env_s.push_back("BCS_NODE=" + node_name);
    std::vector<char*> envp;
    for (auto& e : env_s) envp.push_back(e.data());
    envp.push_back(nullptr);
    std::string exec_err =
        "bcs: rank " + std::to_string(r->world_rank) + ": cannot execute '" + spec.program + "'\n";
    std::string cwd_err = "bcs: rank " + std::to_string(r->world_rank) +
                          ": cannot change directory to '" + spec.cwd + "'\n";
    std::string cred_err = "bcs: rank " + std::to_string(r->world_rank) + ": cannot run as " +
                           user_name(spec.uid) + "\n";
    std::string group_err = "bcs: rank " + std::to_string(r->world_rank) +
                            ": cannot join the job's cpu group " +
                            (group ? group->path() : std::string()) + "\n";

    // Rank 0's stdin, when the submitter's is forwarded: a pipe.
    UniqueFd in_read;
    if (spec.stdin_rank0 && r->world_rank == 0) {
      int in[2];
      if (::pipe2(in, O_CLOEXEC) != 0) {
        *error = std::string("pipe: ") + std::strerror(errno);
        job->kill_all();
        return nullptr;
      }
      in_read.reset(in[0]);
      r->in.reset(in[1]);
      ::fcntl(in[1], F_SETFL, O_NONBLOCK);
    }
    const int stdin_fd = in_read ? in_read.get() : devnull.get();
    int out[2], err[2];
    if (::pipe2(out, O_CLOEXEC) != 0) {
      *error = std::string("pipe: ") + std::strerror(errno);
      job->kill_all();
      return nullptr;
    }
    if (::pipe2(err, O_CLOEXEC) != 0) {
      ::close(out[0]);
      ::close(out[1]);
      *error = std::string("pipe: ") + std::strerror(errno);
      job->kill_all();
      return nullptr;
    }
    const int cpu = cpu_of[static_cast<size_t>(r->world_rank)];
    r->cpu = cpu;
    const pid_t pid = fork_rank(spec.id, [&] {
      // Child. Its own process group, so terminal signals reach only `bcs`
      // and a teardown can kill whatever the rank forked; and its own
      // session, because the kernel lets any process send SIGCONT to one
      // of its own session whoever owns it: in the node manager's session a
      // rank of one user could continue another user's job suspended by
      // gang scheduling (found by the two-user story, identity_test.cc).
      if (::setsid() < 0) ::setpgid(0, 0);
      // The rank starts with stdin (/dev/null, or rank 0's input pipe),
      // stdout and stderr (its pipes) and the segment at fd 3: nothing
      // else. The NM's own fds (gRPC, UCX's sockets, which UCX opens
      // without close-on-exec, epoll, other ranks' pipes) are closed below,
      // so a rank can neither write into the daemons' connections nor keep
      // their ports open.
      // (The NM's fds 0-2 are always open - see main - so none of these
      // descriptors is below 3 and the dup2s cannot overwrite each other.)
      if (::dup2(stdin_fd, 0) < 0 || ::dup2(out[1], 1) < 0 || ::dup2(err[1], 2) < 0)
        ::_exit(126);
      if (segfd == kRankSegmentFd) {
        ::fcntl(segfd, F_SETFD, 0);  // dup2 onto itself would keep close-on-exec
      } else if (::dup2(segfd, kRankSegmentFd) < 0) {
        ::_exit(126);
      }
      // Into the job's cpu group while still root; whatever it forks stays
      // there. A rank outside it would hold its CPU against the active row.
      if (group && !group->join_self()) {
        write_all_raw(2, group_err.c_str());
        ::_exit(126);
      }
      // The submitter's credentials, before anything is done on the rank's
      // behalf (raw system calls: only this thread exists here, and glibc's
      // wrappers would try to reach the parent's other threads). Groups,
      // then gid, then uid: after setuid nothing can be changed. A failure
      // is reported on the rank's stderr, which reaches the user.
      if (spec.change_creds &&
          (::syscall(SYS_setgroups, spec.groups.size(), spec.groups.data()) != 0 ||
           ::syscall(SYS_setresgid, spec.gid, spec.gid, spec.gid) != 0 ||
           ::syscall(SYS_setresuid, spec.uid, spec.uid, spec.uid) != 0)) {
        write_all_raw(2, cred_err.c_str());
        ::_exit(126);
      }
      // After the credential change, which clears the parent-death signal.
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(1);
      // A job held beside others: the rank keeps its orphans below itself,
      // so that the NM can tell whose they are (process_tree.h).
      if (spec.coscheduled) ::prctl(PR_SET_CHILD_SUBREAPER, 1);
      const int keep = kRankSegmentFd;
      close_fds_except(&keep, 1, max_fd);
      // The NM raised its own fd limit for its ranks' pipes; a rank gets
      // the ordinary one back.
      if (g_rank_nofile.rlim_cur != RLIM_INFINITY) ::setrlimit(RLIMIT_NOFILE, &g_rank_nofile);
      // The right to real-time priority that a service may give the node
      // manager for its own threads (LimitRTPRIO=1, sched_hint.h) is not
      // the rank's: a rank at SCHED_FIFO would hold a CPU against
      // everyone. (Lowering a limit needs no privilege.)
      const rlimit no_rt{0, 0};
      ::setrlimit(RLIMIT_RTPRIO, &no_rt);
      if (!spec.cwd.empty() && ::chdir(spec.cwd.c_str()) != 0) {
        write_all_raw(2, cwd_err.c_str());
        ::_exit(126);
      }
      sigset_t none;
      sigemptyset(&none);
      ::sigprocmask(SIG_SETMASK, &none, nullptr);
      // The NM ignores SIGPIPE (a closed pipe is an error it handles), and
      // an ignored signal stays ignored across execve: the rank gets the
      // default back, as under any other launcher.
      struct sigaction dfl {};
      dfl.sa_handler = SIG_DFL;
      ::sigaction(SIGPIPE, &dfl, nullptr);
      // A binding that fails (a CPU gone offline since) leaves the rank
      // where it may run anyway.
      if (cpu >= 0) bind_self_to_cpu(cpu);
      // A node manager that is not root holds its capabilities as ambient
      // ones, which a changed uid keeps and execve would hand to the rank:
      // cleared, the program starts with none (no file capabilities are
      // involved, so nothing else grants any).
      ::syscall(SYS_prctl, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
      ::execve(path.c_str(), argv.data(), envp.data());
      write_all_raw(2, exec_err.c_str());
      ::_exit(errno == ENOENT ? 127 : 126);
    });
    ::close(out[1]);
    ::close(err[1]);
    if (pid < 0) {
      ::close(out[0]);
      ::close(err[0]);
      *error = std::string("fork: ") + std::strerror(errno);
      job->kill_all();
      return nullptr;
    }
    r->pid = pid;
    r->out.reset(out[0]);
    r->err.reset(err[0]);
    ::fcntl(out[0], F_SETFL, O_NONBLOCK);
    ::fcntl(err[0], F_SETFL, O_NONBLOCK);
    r->pidfd.reset(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
    if (!r->pidfd) {
      // Without it the rank's exit would never be seen and the job would hang.
      *error = std::string("pidfd_open: ") + std::strerror(errno);
      job->kill_all();
      return nullptr;
    }
    job->view(*r).ctl->pid = static_cast<uint32_t>(pid);
    if (cpu >= 0)
      spdlog::debug("job {}: rank {} is pid {}, bound to CPU {}", spec.id, r->world_rank, pid, cpu);
    else
      spdlog::debug("job {}: rank {} is pid {}", spec.id, r->world_rank, pid);
  }
  return job;
}

NmJob::~NmJob() {
  // Only our own ranks: the last reference to a job may go after the next
  // job started, so its destructor must not touch what is below the NM.
  kill_ranks();
  // Reap whatever is left so no zombie outlives the job.
  std::lock_guard lk(copy_mu_);
  for (auto& r : ranks_)
    if (r->pid > 0 && !r->dead) {
      place_orphans();  // while the zombie still names the job
      ::waitpid(r->pid, nullptr, 0);
      r->dead = true;
      forget_rank(r->pid);
    }
}

int32_t NmJob::read(int32_t world_rank, uint64_t addr, void* dst, size_t len) {
  return cma(world_rank, addr, dst, len, false);
}

int32_t NmJob::write(int32_t world_rank, uint64_t addr, const void* src, size_t len) {
  return cma(world_rank, addr, const_cast<void*>(src), len, true);
}

pid_t NmJob::copy_pid(LocalRank& r) {
  if (r.dead) return 0;
  if (r.mpi_pid > 0) {
    if (r.mpi_pid == r.pid) return r.pid;
    // The wrapper's child exited (pidfd readable): its pid may be reused.
    pollfd p{r.mpi_pidfd.get(), POLLIN, 0};
    return ::poll(&p, 1, 0) == 0 ? r.mpi_pid : 0;
  }
  if (r.mpi_pid < 0) return r.pid;
  const uint32_t said = view(r).ctl->mpi_pid.load(std::memory_order_acquire);
  if (said == 0) return r.pid;  // not in MPI_Init yet: nothing of it to copy
  if (said == static_cast<uint32_t>(r.pid)) return r.mpi_pid = r.pid;
  // A rank started through a wrapper that forks (time, strace, a script).
  // Pinned first, checked second: if the pid was recycled in between, the
  // check looks at the process the pidfd holds.
  const uid_t uid = spec_.change_creds ? spec_.uid : ::getuid();
  const gid_t gid = spec_.change_creds ? spec_.gid : ::getgid();
  std::string why = "beyond the largest pid";
  UniqueFd fd;
  if (said <= kPidMaxLimit)
    fd.reset(static_cast<int>(::syscall(SYS_pidfd_open, static_cast<pid_t>(said), 0)));
  if (said <= kPidMaxLimit && !fd) why = std::string("pidfd_open: ") + std::strerror(errno);
  if (fd && process_runs_below(static_cast<pid_t>(said), r.pid, uid, gid, &why)) {
    spdlog::debug("job {}: rank {} runs MPI in pid {}, below pid {} which the node manager "
                  "started",
                  id(), r.world_rank, said, r.pid);
    r.mpi_pidfd = std::move(fd);
    return r.mpi_pid = static_cast<pid_t>(said);
  }
  // Harmless: the node keeps to the process it started, whose memory does
  // not hold the rank's buffers, so its messages fail as bad addresses.
  spdlog::warn("job {}: rank {} says it runs MPI in pid {}, which the node manager refuses ({}); "
               "it copies from and into pid {}, which it started",
               id(), r.world_rank, said, why, r.pid);
  r.mpi_pid = -1;
  return r.pid;
}

// One cross-memory copy between our buffer and a rank's memory, looping
// over partial transfers. Under copy_mu_, so the pid cannot be reaped (and
// recycled) while we use it.
int32_t NmJob::cma(int32_t world_rank, uint64_t addr, void* buf, size_t len, bool to_rank) {
  std::lock_guard lk(copy_mu_);
  LocalRank& r = local(world_rank);
  const pid_t pid = copy_pid(r);
  if (pid <= 0) return bcs_err_peer_gone;
  auto* p = static_cast<uint8_t*>(buf);
  while (len > 0) {
    struct iovec l {
      p, len
    };
    struct iovec rm {
      reinterpret_cast<void*>(addr), len
    };
    ssize_t n = to_rank ? ::process_vm_writev(pid, &l, 1, &rm, 1, 0)
                        : ::process_vm_readv(pid, &l, 1, &rm, 1, 0);
    if (n <= 0) {
      const int err = errno;
      spdlog::debug("process_vm_{}(rank {}): {}", to_rank ? "writev" : "readv", world_rank,
                    std::strerror(err));
      // EFAULT: the rank is alive but named memory it does not have.
      return err == EFAULT ? bcs_err_bad_address : bcs_err_peer_gone;
    }
    p += n;
    addr += static_cast<uint64_t>(n);
    len -= static_cast<size_t>(n);
  }
  return 0;
}

int32_t NmJob::cma_layout(int32_t world_rank, uint64_t base, const Layout& l, uint64_t off,
                          void* buf, size_t len, bool to_rank) {
  std::vector<struct iovec> segs;
  layout_segments(l, base, off, len, [&](uint64_t a, uint64_t n) {
    segs.push_back({reinterpret_cast<void*>(a), static_cast<size_t>(n)});
  });
  std::lock_guard lk(copy_mu_);
  LocalRank& r = local(world_rank);
  const pid_t pid = copy_pid(r);
  if (pid <= 0) return bcs_err_peer_gone;
  auto* p = static_cast<uint8_t*>(buf);
  for (size_t i = 0; i < segs.size();) {
    const size_t k = std::min<size_t>(segs.size() - i, IOV_MAX);
    size_t want = 0;
    for (size_t j = 0; j < k; ++j) want += segs[i + j].iov_len;
    struct iovec mine {
      p, want
    };
    ssize_t n = to_rank ? ::process_vm_writev(pid, &mine, 1, &segs[i], k, 0)
                        : ::process_vm_readv(pid, &mine, 1, &segs[i], k, 0);
    if (n <= 0) {
      const int err = errno;
      spdlog::debug("process_vm_{}(rank {}): {}", to_rank ? "writev" : "readv", world_rank,
                    std::strerror(err));
      return err == EFAULT ? bcs_err_bad_address : bcs_err_peer_gone;
    }
    // A partial transfer stops anywhere: resume inside the piece it reached.
    p += n;
    for (auto left = static_cast<size_t>(n); left > 0;) {
      if (segs[i].iov_len <= left) {
        left -= segs[i].iov_len;
        ++i;
      } else {
        segs[i].iov_base = static_cast<uint8_t*>(segs[i].iov_base) + left;
        segs[i].iov_len -= left;
        left = 0;
      }
    }
  }
  return 0;
}

int NmJob::reap(LocalRank& r) {
  int status = 0;
  {
    std::lock_guard lk(copy_mu_);
    if (!r.dead) {
      r.dead = true;
      // Its death handed its children to the NM: placed as the job's while
      // its zombie still says so (process_tree.h).
      place_orphans();
      rusage ru{};
      while (::wait4(r.pid, &status, 0, &ru) < 0 && errno == EINTR) {
      }
      auto ns = [](const timeval& t) {
        return static_cast<uint64_t>(t.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(t.tv_usec) * 1000ull;
      };
      r.cpu_ns = ns(ru.ru_utime) + ns(ru.ru_stime);
      forget_rank(r.pid);
    }
  }
  note_rank_gone();
  reaped_.notify_all();
  return status;
}

bool NmJob::wait_all_dead(std::chrono::milliseconds limit) {
  std::unique_lock lk(copy_mu_);
  return reaped_.wait_for(lk, limit, [&] {
    for (auto& r : ranks_)
      if (r->pid > 0 && !r->dead) return false;
    return true;
  });
}

void NmJob::kill_all() {
  kill_ranks();
  // And whatever left the groups (setsid) or was orphaned: what is below
  // this job's ranks and the orphans that are its (process_tree.h), not
  // another job's held on this node.
  if (int n = kill_job_tree(spec_.id)) spdlog::debug("job {}: killed {} process(es)", spec_.id, n);
}

void NmJob::end_corrupt(int32_t world_rank, const std::string& why) {
  if (!is_local(world_rank)) return;
  std::lock_guard lk(copy_mu_);
  LocalRank& r = local(world_rank);
  if (r.pid <= 0 || r.dead || !r.corrupted.empty()) return;
  r.corrupted = why;
  spdlog::error("job {}: rank {}: {}: ending it", spec_.id, world_rank, why);
  if (::kill(-r.pid, SIGKILL) != 0) ::kill(r.pid, SIGKILL);
}

void NmJob::note_rank_gone() {
  rank_gone_.store(true, std::memory_order_release);
  if (seg_.get()) segment_ring_bell(bell());  // (a job that never started has no segment)
}

void NmJob::kill_ranks() {
  note_rank_gone();
  std::lock_guard lk(copy_mu_);
  for (auto& r : ranks_) {
    if (r->pid <= 0 || r->dead) continue;
    r->killed_by_bcs = true;
    // The rank leads its own process group: take its children with it.
    if (::kill(-r->pid, SIGKILL) != 0) ::kill(r->pid, SIGKILL);
  }
}

bool NmJob::all_dead() {
  std::lock_guard lk(copy_mu_);
  for (auto& r : ranks_)
    if (r->pid > 0 && !r->dead) return false;
  return true;
}

void NmJob::begin_slice(uint64_t global) {
  if (job_slice_.load(std::memory_order_relaxed) == 0) first_slice_ = global;
  const uint64_t s = global - first_slice_ + 1;
  job_slice_.store(s, std::memory_order_relaxed);
  header()->job_slice.store(s, std::memory_order_release);
  for (auto& r : ranks_) {
    RankView v = view(*r);
    const uint64_t at = v.ctl->wake_at_slice.load(std::memory_order_relaxed);
    if (at != 0 && s >= at) rank_wake(v);
  }
}

void NmJob::note_drain(int32_t world_rank, uint64_t count) {
  LocalRank& r = local(world_rank);
  RankView v = view(r);
  if (v.ctl->note_drains.load(std::memory_order_relaxed) != 1) return;
  v.drains[r.drain_head & (v.ring_slots - 1)] = DrainNote{job_slice(), count};
  v.ctl->drain_head.store(++r.drain_head, std::memory_order_release);
}

bool NmJob::set_nm_flag(uint32_t flag, bool on) {
  const uint32_t f = on ? flags_.fetch_or(flag) | flag : flags_.fetch_and(~flag) & ~flag;
  // seq_cst: parking sets kNmParked, then re-reads the rings (rings_empty);
  // a rank publishes its head, then reads the flag.
  header()->nm_flags.store(f, std::memory_order_seq_cst);
  // Ranks that post without a fence (kNmAsymmetricFence) get theirs now:
  // every post either happened before it (the NM's next read of the rings
  // sees it) or reads the flag after it.
  if (on && (flag & (kNmParked | kNmBellOnPost)) && (f & kNmAsymmetricFence) &&
      !segment_membarrier()) {
    static std::atomic<bool> told{false};  // once per node manager, not per slice
    if (!told.exchange(true))
      spdlog::warn("job {}: membarrier failed ({}): ranks may post without seeing nm flag {}",
                   spec_.id, std::strerror(errno), flag);
    return false;
  }
  return true;
}

void NmJob::set_held_sends(int32_t world_rank, bool held) {
  LocalRank& r = local(world_rank);
  if (r.held_sends == held) return;
  r.held_sends = held;
  view(r).ctl->held_sends.store(held ? 1 : 0, std::memory_order_seq_cst);
}

bool NmJob::scan_posted(std::vector<PostedColl>* colls) {
  for (auto& r : ranks_) {
    const RankView v = view(*r);
    const uint64_t head = v.ctl->head.load(std::memory_order_acquire);
    const uint64_t seen = r->seen_head.load(std::memory_order_relaxed);
    // A rank that waits and posted since the DEM (a receive, most likely)
    // while sends to it are held: the receive may take one.
    if (r->held_sends && head != seen && v.ctl->waiting.load(std::memory_order_seq_cst))
      return true;
    // The head is rank-written: whatever it says, look at most at one ring
    // (slots the DEM has not read yet, from the head it read), at most
    // kRingPeekMax of it, as the ranks' own look does
    // (segment_slice_for_waiter). Each field is read once (the rank may be
    // writing the slot).
    if (ring_peek(v, seen, head, [&](DescKind kind, int32_t peer, int32_t context, uint64_t seq) {
          if (kind == DescKind::coll) {
            colls->push_back({r->world_rank, context, seq});
            return false;
          }
          return kind == DescKind::send && peer >= 0 &&
                 static_cast<uint32_t>(peer) < spec_.nranks && is_local(peer) &&
                 view(local(peer)).ctl->waiting.load(std::memory_order_seq_cst) != 0;
        }))
      return true;
  }
  return false;
}

bool NmJob::rings_empty() {
  for (auto& r : ranks_) {
    const RankControl* c = view(*r).ctl;
    if (c->head.load(std::memory_order_seq_cst) != r->seen_head.load(std::memory_order_relaxed))
      return false;
  }
  return true;
}

bool NmJob::ranks_bound() const {
  return std::all_of(ranks_.begin(), ranks_.end(), [](const auto& r) { return r->cpu >= 0; });
}

bool NmJob::cpu_waits(int cpu) {
  for (const auto& r : ranks_) {
    if (r->cpu != cpu) continue;
    const RankControl* c = view(*r).ctl;
    if (!c->waiting.load(std::memory_order_relaxed)) return false;
    // A rank copying for the runtime waits in MPI but has work (DmaOrder).
    for (const DmaOrder& o : c->dma) {
      const uint32_t st = o.state.load(std::memory_order_relaxed);
      if (st == kDmaPosted || st == kDmaTaken) return false;
    }
    return true;
  }
  return true;
}

bool NmJob::a_rank_computes(uint64_t now_ns, uint64_t min_ns) {
  // Ranks that outnumber the host's CPUs are not bound (binding.h): one
  // out of MPI may only wait for a CPU, and the strobe receiver at real
  // time only took CPU from them (4 ranks on 2 CPUs, 8-byte allreduce:
  // 71-78 against 64-73 us).
  if (!ranks_bound()) return false;
  bool computes = false;
  for (auto& r : ranks_) {
    const RankControl* c = view(*r).ctl;
    const bool in_mpi =
        c->waiting.load(std::memory_order_relaxed) != 0 ||
        c->mpi_state.load(std::memory_order_relaxed) == static_cast<uint32_t>(MpiState::finalized);
    // Every rank is looked at: each keeps its own watch.
    computes = r->computing.look(in_mpi, c->head.load(std::memory_order_relaxed), now_ns, min_ns) ||
               computes;
  }
  return computes;
}

}  // namespace bcs::nm
