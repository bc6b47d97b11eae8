// The rank side of the DMA helper's copy orders (segment.h, DmaOrder): a
// rank asleep in MPI carries them out with its own rights, and splits a
// large one over a second thread of its own when a CPU is to spare.
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <memory>
#include <system_error>
#include <thread>

#include "rank.h"

namespace bcs::rank_side {

namespace {

// Copies `len` bytes between this process (`mine`) and process `pid`
// (`theirs`): reads them (process_vm_readv) or, for a sender's share,
// writes them. Returns 0 or what DmaOrder::error says.
int32_t copy_range(bool write, pid_t pid, uint64_t mine, uint64_t theirs, uint64_t len) {
  for (uint64_t done = 0; done < len;) {
    iovec local{reinterpret_cast<void*>(mine + done), len - done};
    iovec remote{reinterpret_cast<void*>(theirs + done), len - done};
    const ssize_t n = write ? ::process_vm_writev(pid, &local, 1, &remote, 1, 0)
                            : ::process_vm_readv(pid, &local, 1, &remote, 1, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      return n < 0 && errno == EPERM    ? bcs::kDmaNotPermitted
             : n < 0 && errno == EFAULT ? bcs_err_bad_address
                                        : bcs_err_peer_gone;
    done += static_cast<uint64_t>(n);
  }
  return 0;
}

// Whether a CPU is left for a second thread: fewer of this node's ranks
// are awake (computing, or copying as this one is) than there are CPUs.
// Ranks asleep in MPI leave theirs free, unless they have copy orders of
// their own: a rank copying for the runtime keeps its `waiting` flag, and
// two ranks exchanging large messages each splitting made four threads on
// two CPUs (osu_bibw 16 MiB: 6.8 GB/s against 8.5-8.7 unsplit). The
// daemons' threads sleep while ranks copy. A node manager knows only its
// own node's ranks, so several node managers on one host each count as a
// host of their own, which is what that layout stands for.
bool cpu_to_spare() {
  static const long cpus = ::sysconf(_SC_NPROCESSORS_ONLN);
  const auto& s = st();
  long awake = 1;  // this rank
  for (uint32_t i = 0; i < s.layout.nlocal && awake < cpus; ++i) {
    const bcs::RankControl* c = bcs::segment_rank_view(s.map.base(), i, s.layout).ctl;
    if (c == s.view.ctl) continue;
    bool copying = false;
    for (const bcs::DmaOrder& o : c->dma) {
      const uint32_t st = o.state.load(std::memory_order_relaxed);
      copying |= st == bcs::kDmaPosted || st == bcs::kDmaTaken;
    }
    if (!copying && (c->waiting.load(std::memory_order_relaxed) ||
                     c->mpi_state.load(std::memory_order_relaxed) ==
                         static_cast<uint32_t>(bcs::MpiState::finalized)))
      continue;
    ++awake;
  }
  return awake < cpus;
}

// The rank's second copier: a thread that copies the last part of a split
// order while the rank's own thread copies the first. It is started at the
// first split and sleeps on a futex between orders (it never spins). It
// runs with every signal blocked, so the program's handlers run on its own
// threads, and off the CPU the rank is bound to (the node manager binds
// ranks to cores: a second thread there would only take turns with the
// first).
class SecondCopier {
 public:
  SecondCopier() = default;
  SecondCopier(const SecondCopier&) = delete;
  SecondCopier& operator=(const SecondCopier&) = delete;
  ~SecondCopier() {
    if (!thread_) return;
    // A child of fork has no such thread; joining would wait forever, and
    // std::thread's destructor would end the process. Its memory is left.
    if (owner_ != ::getpid()) {
      static_cast<void>(thread_.release());
      return;
    }
    stop_ = true;
    go_.fetch_add(1, std::memory_order_release);
    bcs::futex_wake_all(&go_);
    thread_->join();
  }

  // Hands the thread a range to copy; false when it cannot run.
  bool start(bool write, pid_t pid, uint64_t mine, uint64_t theirs, uint64_t len) {
    if (!running() && !launch()) return false;
    job_ = Job{write, pid, mine, theirs, len};
    go_.fetch_add(1, std::memory_order_release);
    bcs::futex_wake_all(&go_);
    return true;
  }

  // Waits for the range handed by start(); returns its copy_range result.
  int32_t finish() {
    const uint32_t want = go_.load(std::memory_order_relaxed);
    // The halves are even, so the other one is usually done or nearly:
    // a short spin first, then the futex.
    for (int i = 0; i < 2000 && done_.load(std::memory_order_acquire) != want; ++i)
      __builtin_ia32_pause();
    for (uint32_t d; (d = done_.load(std::memory_order_acquire)) != want;)
      bcs::futex_wait(&done_, d);
    return err_;
  }

 private:
  struct Job {
    bool write = false;
    pid_t pid = 0;
    uint64_t mine = 0, theirs = 0, len = 0;
  };

  bool running() {
    if (thread_ && owner_ != ::getpid()) {  // forked: see the destructor
      static_cast<void>(thread_.release());
      go_.store(0);
      done_.store(0);
    }
    return thread_ != nullptr;
  }

  bool launch() {
    sigset_t all, old;
    sigfillset(&all);
    if (pthread_sigmask(SIG_BLOCK, &all, &old) != 0) return false;
    cpu_set_t away;
    CPU_ZERO(&away);
    int bound = -1;  // the CPU this thread is bound to, if only one
    if (sched_getaffinity(0, sizeof away, &away) == 0 && CPU_COUNT(&away) == 1)
      for (int c = 0; c < CPU_SETSIZE; ++c)
        if (CPU_ISSET(c, &away)) bound = c;
    try {
      thread_ = std::make_unique<std::thread>([this, bound] { run(bound); });
      owner_ = ::getpid();
    } catch (const std::system_error&) {
      thread_.reset();
    }
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    return thread_ != nullptr;
  }

  void run(int bound) {
    // Named for ps, top and perf: an operator sees whose thread this is.
    pthread_setname_np(pthread_self(), "bcs-copier");
    if (bound >= 0) {
      cpu_set_t m;
      CPU_ZERO(&m);
      const long n = ::sysconf(_SC_NPROCESSORS_CONF);
      for (long c = 0; c < n && c < CPU_SETSIZE; ++c)
        if (c != bound) CPU_SET(static_cast<int>(c), &m);
      // Fails only when no other CPU is allowed: then it stays beside.
      pthread_setaffinity_np(pthread_self(), sizeof m, &m);
    }
    uint32_t seen = 0;
    for (;;) {
      uint32_t g;
      while ((g = go_.load(std::memory_order_acquire)) == seen) bcs::futex_wait(&go_, seen);
      seen = g;
      if (stop_) return;
      err_ = copy_range(job_.write, job_.pid, job_.mine, job_.theirs, job_.len);
      done_.store(g, std::memory_order_release);
      bcs::futex_wake_all(&done_);
    }
  }

  std::unique_ptr<std::thread> thread_;
  pid_t owner_ = 0;
  // go_ counts ranges handed out, done_ the last one finished; job_,
  // err_ and stop_ are published by them (release / acquire).
  std::atomic<uint32_t> go_{0};
  std::atomic<uint32_t> done_{0};
  Job job_;
  int32_t err_ = 0;
  bool stop_ = false;
};

SecondCopier& second_copier() {
  static SecondCopier c;
  return c;
}

void carry_out(bcs::DmaOrder& o) {
  uint32_t expected = bcs::kDmaPosted;
  if (!o.state.compare_exchange_strong(expected, bcs::kDmaTaken, std::memory_order_acq_rel))
    return;  // the node manager took it back
  const pid_t pid = static_cast<pid_t>(o.pid);
  const uint64_t src = o.src, dst = o.dst, len = o.len;
  // Reading the sender into this rank, or (write) this rank, the sender,
  // into the receiver: either way the other process is `pid`.
  const bool write = o.write != 0;
  const uint64_t mine = write ? src : dst, theirs = write ? dst : src;
  // The second thread takes the last part, page aligned, when asked to and
  // a CPU is there for it.
  const uint64_t half = (len / 2) & ~uint64_t{4095};
  const bool split = o.split != 0 && half != 0 && cpu_to_spare() &&
                     second_copier().start(write, pid, mine + half, theirs + half, len - half);
  int32_t err = copy_range(write, pid, mine, theirs, split ? half : len);
  if (split) {
    const int32_t e2 = second_copier().finish();
    if (!err) err = e2;
  }
  o.second = split ? len - half : 0;
  o.error = err;
  // seq_cst store, then load: pairs with the NM's store of nm_waiting and
  // re-read of state (NmJob::await_copy), so one of the two sees the other.
  o.state.store(bcs::kDmaDone, std::memory_order_seq_cst);
  if (o.nm_waiting.load(std::memory_order_seq_cst)) bcs::futex_wake_all(&o.state);
}

}  // namespace

bool dma_order_posted(const bcs::RankControl* ctl) {
  for (const bcs::DmaOrder& o : ctl->dma)
    if (o.state.load(std::memory_order_acquire) == bcs::kDmaPosted) return true;
  return false;
}

void take_dma_orders() {
  auto* ctl = st().view.ctl;
  for (;;) {
    // seq_cst: pairs with the NM's post of a next order (NmJob::post_copy).
    bcs::DmaOrder* next = nullptr;
    for (bcs::DmaOrder& o : ctl->dma)
      if (o.state.load(std::memory_order_seq_cst) == bcs::kDmaPosted && (!next || o.seq < next->seq))
        next = &o;
    if (!next) return;
    // Copying for the runtime is waiting in MPI (a wake-up that cleared
    // the flag meanwhile changed nothing else).
    ctl->waiting.store(1, std::memory_order_seq_cst);
    carry_out(*next);
  }
}

}  // namespace bcs::rank_side
