// The node manager's I/O thread (bcs-io) and the control stream's writer.
// One epoll over every rank's stdout/stderr pipe, its pidfd and rank 0's
// stdin pipe, plus the termination signals: it forwards output, feeds rank
// 0's input (RankInput), reaps ranks and reports their exits. Only main.cc
// includes it.
#pragma once

#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "bcs.grpc.pb.h"
#include "bcs/service.h"
#include "control_words.h"
#include "fd.h"
#include "job.h"
#include "process_tree.h"
#include "signals.h"

namespace bcs::nm {

using Stream = grpc::ClientReaderWriter<v1::NodeMsg, v1::ManagerMsg>;

// Writes to the control stream come from the main and the I/O threads.
class Uplink {
 public:
  explicit Uplink(Stream* s) : s_(s) {}
  bool send(const v1::NodeMsg& m) {
    std::lock_guard lk(mu_);
    return s_->Write(m);
  }

 private:
  std::mutex mu_;
  Stream* s_;
};

// The I/O thread: one epoll over every rank's stdout/stderr pipe and pidfd,
// plus a signalfd for SIGTERM/SIGINT/SIGHUP and an eventfd to stop it.
class IoLoop {
 public:
  IoLoop(Uplink& up, std::function<void()> on_signal) : up_(up), on_signal_(std::move(on_signal)) {
    ep_.reset(::epoll_create1(EPOLL_CLOEXEC));
    stop_.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    const sigset_t set = termination_signals();
    sig_.reset(::signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK));
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    chld_.reset(::signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK));
    add(stop_.get(), kStop);
    add(sig_.get(), kSignal);
    add(chld_.get(), kChild);
  }

  // Watches every rank of `job` (called from the main thread).
  void watch(const std::shared_ptr<NmJob>& job) {
    std::lock_guard lk(mu_);
    for (auto& r : job->ranks()) {
      uint64_t id = next_id_;
      next_id_ += 4;
      watches_[id] = {job, r.get()};
      add(r->out.get(), id | 0);
      add(r->err.get(), id | 1);
      add(r->pidfd.get(), id | 2);
      if (r->in) add(r->in.get(), id | 3, 0);  // watched for writing once input waits
    }
  }

  // Rank 0's stdin (RankInput, from the session thread): appended to what
  // waits for its pipe, which this loop writes whenever the pipe has room.
  // Input for a job whose rank 0 has no pipe here (gone, or never had one)
  // is acknowledged at once, so the manager's window never stays shut.
  void input(uint64_t job_id, const std::string& data, bool eof) {
    uint64_t dropped = 0;
    {
      std::lock_guard lk(mu_);
      auto it = std::find_if(watches_.begin(), watches_.end(), [&](const auto& kv) {
        return kv.second.job->id() == job_id && kv.second.rank->in;
      });
      if (it == watches_.end()) {
        dropped = data.size();
      } else if (inputs_[it->first].pending.size() + data.size() > kInputPendingMax) {
        // The manager keeps 1 MiB unacknowledged at most: more is a
        // manager that does not, and the node does not buffer for it.
        spdlog::error("job {}: input for rank 0 beyond {} bytes waiting; dropped", job_id,
                      kInputPendingMax);
        dropped = data.size();
      } else {
        Input& in = inputs_[it->first];
        in.pending.append(data);
        in.eof = in.eof || eof;
        watch_input_locked(it->first, *it->second.rank);
      }
    }
    if (dropped) taken(job_id, dropped);
  }

  // Output back-pressure (PauseOutput): stops or resumes watching the
  // stdout/stderr pipes of `job_id`'s ranks. The pipes stay open; a rank
  // blocks in write once its pipe is full.
  void pause_output(uint64_t job_id, bool pause) {
    std::lock_guard lk(mu_);
    for (auto& [id, w] : watches_) {
      if (w.job->id() != job_id) continue;
      for (int which = 0; which < 2; ++which) {
        UniqueFd& fd = which == 0 ? w.rank->out : w.rank->err;
        if (!fd) continue;
        epoll_event ev{};
        ev.events = pause ? 0u : static_cast<uint32_t>(EPOLLIN);
        ev.data.u64 = id | static_cast<uint64_t>(which);
        ::epoll_ctl(ep_.get(), EPOLL_CTL_MOD, fd.get(), &ev);
      }
    }
  }

  // Called (from this thread) before the exit of a job's last local rank
  // is reported: the local EMDS of the job goes first on the same stream,
  // so the manager has all of it when the job ends.
  void set_before_last_exit(std::function<void()> f) {
    std::lock_guard lk(mu_);
    before_last_exit_ = std::move(f);
  }

  void stop() {
    uint64_t one = 1;
    [[maybe_unused]] auto n = ::write(stop_.get(), &one, sizeof one);
  }

  void run() {
    pthread_setname_np(pthread_self(), "bcs-io");
    epoll_event evs[32];
    for (;;) {
      int n = ::epoll_wait(ep_.get(), evs, 32, -1);
      if (n < 0 && errno == EINTR) continue;
      for (int i = 0; i < n; ++i) {
        uint64_t key = evs[i].data.u64;
        if (key == kStop) return;
        if (key == kChild) {
          // Orphans of the job, inherited as subreaper, that died. (Ranks
          // are reaped through their pidfds in handle().)
          signalfd_siginfo si;
          while (::read(chld_.get(), &si, sizeof si) == sizeof si) {
          }
          reap_orphans();
          continue;
        }
        if (key == kSignal) {
          signalfd_siginfo si;
          while (::read(sig_.get(), &si, sizeof si) == sizeof si)
            spdlog::info("signal {} received: shutting down", si.ssi_signo);
          on_signal_();
          continue;
        }
        handle(key, evs[i].events);
      }
    }
  }

 private:
  static constexpr uint64_t kStop = 1, kSignal = 2, kChild = 3;
  struct Watch {
    std::shared_ptr<NmJob> job;
    LocalRank* rank;
  };

  void add(int fd, uint64_t key, uint32_t events = EPOLLIN) {
    epoll_event ev{};
    ev.events = events;
    ev.data.u64 = key;
    ::epoll_ctl(ep_.get(), EPOLL_CTL_ADD, fd, &ev);
  }

  // Rank 0's input waiting here at most: four times the manager's window.
  static constexpr size_t kInputPendingMax = size_t{4} << 20;
  // What waits for rank 0's stdin pipe.
  struct Input {
    std::string pending;
    bool eof = false;
  };

  // Watch rank 0's pipe for room while input waits (under mu_).
  void watch_input_locked(uint64_t id, LocalRank& r) {
    epoll_event ev{};
    ev.events = EPOLLOUT;
    ev.data.u64 = id | 3;
    ::epoll_ctl(ep_.get(), EPOLL_CTL_MOD, r.in.get(), &ev);
  }

  // Tells the manager `bytes` of the job's input are done with.
  void taken(uint64_t job_id, uint64_t bytes) {
    v1::NodeMsg m;
    m.mutable_input_taken()->set_job_id(job_id);
    m.mutable_input_taken()->set_bytes(bytes);
    up_.send(m);
  }

  // Writes what the pipe takes now. Once all is written: closed after eof,
  // else unwatched until more comes. A rank 0 that closed its stdin or is
  // gone (EPIPE) gets nothing more: the rest is dropped, and acknowledged.
  // `gone`: the rank exited or nobody reads the pipe; the pipe is closed
  // and whatever is pending dropped.
  void write_input(uint64_t id, bool gone = false) {
    uint64_t job_id = 0, done = 0;
    {
      std::lock_guard lk(mu_);
      auto w = watches_.find(id);
      if (w == watches_.end() || !w->second.rank->in) return;
      LocalRank& r = *w->second.rank;
      job_id = w->second.job->id();
      Input& in = inputs_[id];
      size_t off = 0;
      bool broken = gone;
      while (!broken && off < in.pending.size()) {
        const ssize_t n = ::write(r.in.get(), in.pending.data() + off, in.pending.size() - off);
        if (n > 0) {
          off += static_cast<size_t>(n);
        } else if (n < 0 && errno == EINTR) {
          continue;
        } else if (n < 0 && errno == EAGAIN) {
          break;
        } else {
          broken = true;
        }
      }
      done = off;
      in.pending.erase(0, off);
      if (broken) {
        done += in.pending.size();
        in.pending.clear();
      }
      if (in.pending.empty() && (in.eof || broken)) {
        ::epoll_ctl(ep_.get(), EPOLL_CTL_DEL, r.in.get(), nullptr);
        r.in.reset();  // rank 0 reads EOF
        inputs_.erase(id);
      } else if (in.pending.empty()) {
        epoll_event ev{};
        ev.data.u64 = id | 3;
        ::epoll_ctl(ep_.get(), EPOLL_CTL_MOD, r.in.get(), &ev);
      }
    }
    if (done) taken(job_id, done);
  }

  // Forwards what the pipe holds now; false at EOF.
  bool pump(Watch& w, int which) {
    UniqueFd& fd = which == 0 ? w.rank->out : w.rank->err;
    if (!fd) return false;
    char buf[65536];
    for (;;) {
      ssize_t n = ::read(fd.get(), buf, sizeof buf);
      if (n > 0) {
        v1::NodeMsg m;
        auto* o = m.mutable_output();
        o->set_job_id(w.job->id());
        o->set_rank(static_cast<uint32_t>(w.rank->world_rank));
        o->set_stream(which == 0 ? v1::STDOUT : v1::STDERR);
        o->set_data(buf, static_cast<size_t>(n));
        up_.send(m);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EAGAIN) return true;
      ::epoll_ctl(ep_.get(), EPOLL_CTL_DEL, fd.get(), nullptr);
      fd.reset();
      return false;
    }
  }

  void handle(uint64_t key, uint32_t events) {
    Watch w;
    {
      std::lock_guard lk(mu_);
      auto it = watches_.find(key & ~uint64_t{3});
      if (it == watches_.end()) return;
      w = it->second;
    }
    int which = static_cast<int>(key & 3);
    if (which < 2) {
      pump(w, which);
      return;
    }
    if (which == 3) {
      // EPOLLERR: nobody holds the pipe's read end any more (rank 0 closed
      // its stdin). epoll reports that whatever it was asked for, so the
      // pipe is done with now, or this loop would wake for it forever.
      write_input(key & ~uint64_t{3}, (events & (EPOLLERR | EPOLLHUP)) != 0);
      return;
    }
    // The rank exited: reap it, then forward what is left in its pipes
    // (everything it wrote before dying is there), then report the exit.
    ::epoll_ctl(ep_.get(), EPOLL_CTL_DEL, w.rank->pidfd.get(), nullptr);
    write_input(key & ~uint64_t{3}, true);  // its stdin: closed, the rest dropped
    int status = w.job->reap(*w.rank);
    pump(w, 0);
    pump(w, 1);
    // Descendants of the rank may still hold the pipes: stop listening.
    for (UniqueFd* fd : {&w.rank->out, &w.rank->err})
      if (*fd) {
        ::epoll_ctl(ep_.get(), EPOLL_CTL_DEL, fd->get(), nullptr);
        fd->reset();
      }
    w.rank->pidfd.reset();
    // Nothing a rank started may outlive the job: once no rank of the job is
    // left here, whatever is still below the NM (a detached grandchild, a
    // daemonised helper) is killed - before the last exit is reported, so
    // it is gone by the time the job's exit status reaches `bcs`.
    if (w.job->all_dead()) {
      if (int n = kill_job_tree(w.job->id()))
        spdlog::info("job {}: killed {} process(es) the ranks left behind", w.job->id(), n);
      std::function<void()> flush;
      {
        std::lock_guard lk(mu_);
        flush = before_last_exit_;
      }
      if (flush) flush();
    }
    RankView v = w.job->view(*w.rank);
    v1::NodeMsg m;
    auto* e = m.mutable_rank_exit();
    e->set_job_id(w.job->id());
    e->set_rank(static_cast<uint32_t>(w.rank->world_rank));
    e->set_pid(static_cast<uint32_t>(w.rank->pid));
    e->set_cpu_ns(w.rank->cpu_ns);
    if (WIFSIGNALED(status))
      e->set_signal(WTERMSIG(status));
    else
      e->set_exit_code(WEXITSTATUS(status));
    e->set_killed_by_bcs(w.rank->killed_by_bcs && WIFSIGNALED(status) &&
                         WTERMSIG(status) == SIGKILL);
    const uint32_t ms = v.ctl->mpi_state.load();
    const uint32_t aborted = v.ctl->aborted.load();
    const int32_t code = v.ctl->abort_code.load();
    if (std::string junk = control_junk(ms, aborted, code, status); !junk.empty()) {
      // The rank wrote over its control words: its MPI state and abort are
      // not its word, and the manager reports a corrupted segment instead
      // of an MPI_Abort with a code read back from the garbage.
      spdlog::warn("job {} rank {}: {}", w.job->id(), w.rank->world_rank, junk);
      e->set_junk(junk);
    } else {
      e->set_mpi_initialized(ms != static_cast<uint32_t>(MpiState::none));
      e->set_mpi_finalized(ms == static_cast<uint32_t>(MpiState::finalized));
      e->set_aborted(aborted != 0);
      e->set_noticed_peer_loss(aborted == kAbortedNoticingPeer);
      e->set_abort_code(aborted ? code : 0);
    }
    e->set_corrupted(w.rank->corrupted);  // set before the kill, read after the reap
    // Its MMDS counters, read without its help (it is gone): checked, and
    // dropped with a warning if torn or scribbled on.
    {
      monitor::RankReport rep;
      std::string why;
      if (monitor::mmds_from_segment(*v.mmds, &rep, &why)) {
        // Its whole report, when it reached MPI_Finalize: distributions and
        // events for the Monitor service. Checked too; the counters stand
        // without it.
        monitor::RankReport full;
        std::string bad;
        if (monitor::mmds_report_from_segment(*v.mmds, v.mmds_report, w.rank->world_rank,
                                              static_cast<int>(w.job->spec().nranks), &full, &bad))
          rep = std::move(full);
        else if (!bad.empty())
          spdlog::warn("job {} rank {}: MMDS report dropped: {}", w.job->id(), w.rank->world_rank, bad);
        monitor::mmds_to_proto(rep, e->mutable_mmds());
      } else if (!why.empty()) {
        spdlog::warn("job {} rank {}: MMDS summary dropped: {}", w.job->id(), w.rank->world_rank, why);
      }
    }
    up_.send(m);
    std::lock_guard lk(mu_);
    watches_.erase(key & ~uint64_t{3});
  }

  Uplink& up_;
  std::function<void()> before_last_exit_;
  std::function<void()> on_signal_;
  UniqueFd ep_, stop_, sig_, chld_;
  std::mutex mu_;
  std::map<uint64_t, Watch> watches_;
  std::map<uint64_t, Input> inputs_;  // by watch id: rank 0's stdin
  uint64_t next_id_ = 16;
};

}  // namespace bcs::nm
