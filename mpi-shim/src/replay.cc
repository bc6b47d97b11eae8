// Record and replay in the rank (replay.h).
#include "replay.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <map>
#include <vector>

#include "bcs/bcs.h"

namespace bcs::shim::replay {

Mode g_mode = Mode::off;
bool g_wtime = false;

namespace {

using record::Event;
using record::Kind;

// A recording's file of this rank.
std::string rank_file(const std::string& dir, int rank) { return dir + "/rank" + std::to_string(rank) + ".rec"; }

// Replay exit status: the job ends with it and the manager's message names
// the rank (MPI_ERR_OTHER's value is as good as any, but a distinct one
// tells a script that the replay diverged).
constexpr int kDiverged = 86;

struct State {
  int rank = 0;
  std::string path;
  // Recording: the stream so far, written out in blocks.
  int fd = -1;
  std::string buf;
  uint64_t wild_posted = 0;
  std::vector<bool> matched;  // per wildcard receive: its match recorded
  bool have_last = false;     // the last sequential event, not written yet
  Event last;                 // (the same again only counts: Event::repeat)
  // Replaying.
  std::vector<Event> seq_events;  // in order
  size_t next = 0;
  uint64_t used = 0;  // of seq_events[next]'s repeats
  std::map<uint64_t, Event> matches;  // by wildcard receive number
  uint64_t last_match = 0;            // the highest number recorded
  // Recording: the slice schedule's notes not written yet (one drain event).
  Event drains;
  // bcs replay --until-slice S (BCS_UNTIL_SLICE): 0 = none.
  uint64_t until_slice = 0;
};

State& st() {
  static State s;
  return s;
}

}  // namespace

void diverge(const char* fn, const std::string& recorded, const std::string& observed) {
  std::fprintf(stderr,
               "bcs: rank %d: replay diverged in %s: the recording has %s, the program did %s "
               "(recording %s)\n",
               st().rank, fn, recorded.c_str(), observed.c_str(), st().path.c_str());
  bcs_abort(kDiverged);
}

namespace {

[[noreturn]] void unusable(const std::string& why) {
  std::fprintf(stderr, "bcs: rank %d: %s\n", st().rank, why.c_str());
  bcs_abort(kDiverged);
}

void flush() {
  State& s = st();
  size_t off = 0;
  while (off < s.buf.size()) {
    const ssize_t n = ::write(s.fd, s.buf.data() + off, s.buf.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      // A recording with a hole could not be replayed: better none.
      unusable("cannot write the recording " + s.path + ": " + std::strerror(errno));
    }
    off += static_cast<size_t>(n);
  }
  s.buf.clear();
}

void append(const Event& e) {
  record::append_event(e, &st().buf);
  if (st().buf.size() >= (size_t{1} << 16)) flush();
}

// The pending sequential event, written.
void settle() {
  State& s = st();
  if (!s.have_last) return;
  s.have_last = false;
  append(s.last);
}

volatile sig_atomic_t g_held = 0;

// Sleeps (no polling) until SIGCONT: `signal SIGCONT` in gdb, or `kill -CONT
// PID` without it. A stop by SIGSTOP would be undone by nothing a debugger
// does by default (detaching leaves the process stopped); a handler is.
// `where`: "waits in MPI_Init", "paused in slice 12".
void hold_for_debugger(int rank, const std::string& where) {
  sigset_t cont, old;
  sigemptyset(&cont);
  sigaddset(&cont, SIGCONT);
  sigprocmask(SIG_BLOCK, &cont, &old);  // no SIGCONT lost between the check and the sleep
  struct sigaction sa {}, prev{};
  sa.sa_handler = [](int) { g_held = 0; };
  sigemptyset(&sa.sa_mask);
  sigaction(SIGCONT, &sa, &prev);
  g_held = 1;
  const char* node = std::getenv("BCS_NODE");
  const long pid = static_cast<long>(::getpid());
  std::fprintf(stderr,
               "bcs: rank %d %s for a debugger: pid %ld on node %s. Attach with "
               "`gdb -p %ld`, set breakpoints, then `signal SIGCONT` lets it run on (without "
               "gdb: `kill -CONT %ld`)\n",
               rank, where.c_str(), pid, node && *node ? node : "?", pid, pid);
  sigset_t wait_for = old;
  sigdelset(&wait_for, SIGCONT);
  while (g_held) sigsuspend(&wait_for);
  sigaction(SIGCONT, &prev, nullptr);
  sigprocmask(SIG_SETMASK, &old, nullptr);
}

// The slice schedule as the node manager notes it (record mode), in
// batches of up to kDrainBatch notes. Not settled first: a polling loop's
// run of "not yet"s stays one record across slices, so the schedule is not
// in order with the program's events.
constexpr size_t kDrainBatch = 1024;

void drains_out() {
  Event& d = st().drains;
  if (d.indices.empty()) return;
  append(d);
  d.indices.clear();
}

void on_drain(uint64_t slice, uint64_t count) {
  if (slice == 0) {  // lapped (see DrainNote): cannot happen, said if it does
    std::fprintf(stderr, "bcs: rank %d: the slice schedule lost %llu notes\n", st().rank,
                 static_cast<unsigned long long>(count));
    return;
  }
  const record::Drain d{slice, count};
  Event& batch = st().drains;
  if (batch.indices.size() >= 2 * kDrainBatch || !record::add_drain(&batch, d)) {
    drains_out();
    record::add_drain(&batch, d);
  }
}

void on_until_slice(uint64_t now) {
  hold_for_debugger(st().rank, "paused in slice " + std::to_string(now) + " (--until-slice " +
                                   std::to_string(st().until_slice) + ") and waits");
}

}  // namespace

void start(int rank, int size, bool threads) {
  State& s = st();
  s.rank = rank;
  const char* rec = std::getenv("BCS_RECORD");
  const char* rep = std::getenv("BCS_REPLAY");
  if (rec && *rec && rep && *rep) unusable("BCS_RECORD and BCS_REPLAY are both set");
  const uint64_t exe = (rec && *rec) || (rep && *rep) ? record::hash_file("/proc/self/exe") : 0;
  if (rec && *rec) {
    s.path = rank_file(rec, rank);
    s.fd = ::open(s.path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (s.fd < 0) unusable("cannot create the recording " + s.path + ": " + std::strerror(errno));
    record::Header h;
    h.rank = rank;
    h.size = static_cast<uint32_t>(size);
    h.exe_hash = exe;
    const char* wt = std::getenv("BCS_RECORD_WTIME");
    h.wtime = wt && std::strcmp(wt, "1") == 0;
    record::append_header(h, &s.buf);
    flush();
    bcs_set_drain_observer(on_drain);
    // A program that exits without MPI_Finalize still leaves what it did.
    std::atexit([] {
      if (st().fd >= 0 && g_mode == Mode::record) {
        drains_out();
        settle();
        flush();
      }
    });
    g_mode = Mode::record;
    g_wtime = h.wtime;
  } else if (rep && *rep) {
    s.path = rank_file(rep, rank);
    record::File f;
    std::string err;
    if (!record::read_file(s.path, &f, &err)) unusable("cannot replay: " + err);
    if (f.header.rank != rank || f.header.size != static_cast<uint32_t>(size))
      unusable("cannot replay: " + s.path + " is rank " + std::to_string(f.header.rank) + " of " +
               std::to_string(f.header.size) + ", this is rank " + std::to_string(rank) + " of " +
               std::to_string(size));
    if (f.header.exe_hash && exe && f.header.exe_hash != exe)
      diverge("MPI_Init", "another executable", "this one (its bytes differ from the recorded program's)");
    for (auto& e : f.events) {
      if (e.kind == Kind::match) {
        if (e.index == 0 || !s.matches.emplace(e.index, e).second)
          unusable("cannot replay: " + s.path + ": wildcard receive number " + std::to_string(e.index) +
                   " recorded twice or zero");
        s.last_match = std::max(s.last_match, e.index);
      } else if (e.kind != Kind::drain) {  // the schedule is not replayed
        s.seq_events.push_back(std::move(e));
      }
    }
    g_mode = Mode::replay;
    g_wtime = f.header.wtime;
    // bcs replay --stop-rank: this rank waits for a debugger.
    if (const char* stop = std::getenv("BCS_STOP_RANK"); stop && *stop && std::atoi(stop) == rank)
      hold_for_debugger(rank, "waits in MPI_Init");
  }
  // Said at the start, as for any call not covered (not_covered): events
  // are recorded in the order this process made its calls, so threads that
  // call MPI in another order when replayed may see each other's outcomes.
  if (threads && g_mode != Mode::off)
    std::fprintf(stderr,
                 "bcs: rank %d: MPI_THREAD_SERIALIZED: what each thread observes is not %s "
                 "apart (a replay whose threads call MPI in another order may go another "
                 "way)\n",
                 rank, g_mode == Mode::record ? "recorded" : "replayed");
  if (const char* until = std::getenv("BCS_UNTIL_SLICE"); until && *until) {
    s.until_slice = std::strtoull(until, nullptr, 10);
    if (s.until_slice) bcs_set_slice_alarm(s.until_slice, on_until_slice);
  }
}

void stop() {
  State& s = st();
  if (s.until_slice) {
    const uint64_t now = bcs_job_slice();
    if (now < s.until_slice)
      std::fprintf(stderr,
                   "bcs: rank %d reached MPI_Finalize in slice %llu, before slice %llu "
                   "(--until-slice)\n",
                   s.rank, static_cast<unsigned long long>(now),
                   static_cast<unsigned long long>(s.until_slice));
    bcs_set_slice_alarm(0, nullptr);
    s.until_slice = 0;
  }
  if (g_mode == Mode::record) {
    bcs_set_drain_observer(nullptr);  // the notes so far first
    drains_out();
    settle();
    flush();
    ::close(s.fd);
    s.fd = -1;
  } else if (g_mode == Mode::replay) {
    if (s.next < s.seq_events.size()) {
      Event left = s.seq_events[s.next];
      left.repeat -= s.used;
      diverge("MPI_Finalize", record::describe(left) + " still to come",
              "MPI_Finalize");
    }
    if (s.wild_posted < s.last_match)
      diverge("MPI_Finalize",
              std::to_string(s.last_match) + " wildcard receives",
              "only " + std::to_string(s.wild_posted) + " before MPI_Finalize");
  }
  g_mode = Mode::off;
  g_wtime = false;
}

uint64_t recv_posted(const char* fn, int* source, int* tag) {
  if (*source != -1 /* MPI_ANY_SOURCE */ && *tag != -1 /* MPI_ANY_TAG */) return 0;
  State& s = st();
  const uint64_t n = ++s.wild_posted;
  if (g_mode == Mode::replay) {
    auto it = s.matches.find(n);
    if (it == s.matches.end()) {
      // Recorded but never matched (cancelled, or still pending at the
      // end): posted as it was.
      if (n <= s.last_match) return n;
      diverge(fn, std::to_string(s.last_match) + " wildcard receives",
              "wildcard receive #" + std::to_string(n));
    }
    const Event& e = it->second;
    if ((*source != -1 && *source != e.source) || (*tag != -1 && *tag != e.tag))
      diverge(fn, record::describe(e),
              "a receive #" + std::to_string(n) + " from source " + std::to_string(*source) + " tag " +
                  std::to_string(*tag));
    *source = e.source;
    *tag = e.tag;
  }
  return n;
}

void recv_matched(const char* fn, uint64_t number, int source, int tag, uint64_t seq,
                  uint64_t slice) {
  if (number == 0) return;
  State& s = st();
  if (g_mode == Mode::record) {
    if (s.matched.size() <= number) s.matched.resize(number + 1, false);
    if (s.matched[number]) return;  // its status read again (MPI_Request_get_status)
    s.matched[number] = true;
    Event e;
    e.kind = Kind::match;
    e.index = number;
    e.source = source;
    e.tag = tag;
    e.seq = seq;
    e.slice = slice;
    append(e);
  } else if (g_mode == Mode::replay) {
    auto it = s.matches.find(number);
    if (it == s.matches.end()) return;
    const Event& e = it->second;
    if (e.source != source || e.tag != tag || (e.seq && seq && e.seq != seq)) {
      Event seen = e;
      seen.source = source;
      seen.tag = tag;
      seen.seq = seq;
      seen.slice = slice;
      diverge(fn, record::describe(e), record::describe(seen));
    }
  }
}

double wtime(double t) {
  Event e;
  e.kind = Kind::wtime;
  if (g_mode == Mode::record) {
    std::memcpy(&e.seq, &t, sizeof t);
    record(e);
    return t;
  }
  if (g_mode != Mode::replay) return t;
  e = next(Kind::wtime, "MPI_Wtime");
  double r;
  std::memcpy(&r, &e.seq, sizeof r);
  return r;
}

void not_covered(const char* fn) {
  static std::vector<std::string> said;
  if (std::find(said.begin(), said.end(), fn) != said.end()) return;
  said.emplace_back(fn);
  std::fprintf(stderr,
               "bcs: rank %d: %s: its outcome is not %s yet (a replay may go another way from "
               "here)\n",
               st().rank, fn, g_mode == Mode::record ? "recorded" : "replayed");
}

void record(const Event& e) {
  if (g_mode != Mode::record) return;
  State& s = st();
  // What completed or found something notes the slice it was seen in; a
  // "not yet" does not, so a polling loop's stay one record.
  const bool outcome = e.flag || !e.indices.empty() || e.kind == Kind::waitany ||
                       e.kind == Kind::probe || e.kind == Kind::mprobe;
  const uint64_t slice = outcome && e.kind != Kind::wtime ? bcs_job_slice() : 0;
  if (s.have_last && s.last.slice == slice && s.last.same_as(e)) {
    ++s.last.repeat;
    return;
  }
  settle();
  s.last = e;
  s.last.slice = slice;
  s.last.repeat = 1;
  s.have_last = true;
}

Event next(Kind k, const char* fn) {
  State& s = st();
  if (s.next >= s.seq_events.size())
    diverge(fn, "nothing more of its kind (the recording ends here)", fn);
  const Event& e = s.seq_events[s.next];
  if (e.kind != k) diverge(fn, record::describe(e), fn);
  Event one = e;
  one.repeat = 1;
  if (++s.used == e.repeat) {
    s.used = 0;
    ++s.next;
  }
  return one;
}

}  // namespace bcs::shim::replay
