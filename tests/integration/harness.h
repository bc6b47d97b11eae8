// A small harness for integration tests: runs real commands (`bcs run`,
// daemons) with a hard deadline, captures their output, and finds whatever
// they left behind.
//
// Leftovers are found by a marker: every command a test starts gets
// BCS_TEST_MARKER=<unique> in its environment; bcs hands its environment to
// the daemons and the ranks, so any live process whose environment holds the
// marker after the command returned is an orphan.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace bcs::test {

struct RunResult {
  int status = -1;         // exit status, or 128+signal
  bool timed_out = false;  // the harness had to kill it
  std::string out, err;
};

// Absolute path of a built binary (bin/bcs, bin/bcs-mm, ...).
std::string bin(const std::string& name);
// Absolute path of a test program (prog_ring, ...).
std::string prog(const std::string& name);
// Absolute path of a program of the integration stories (it_block, ...).
std::string it_prog(const std::string& name);

// The marker of this test process (unique per process).
const std::string& marker();

// Another user to run a command as (the test runs as root), and where.
struct As {
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;
  std::string cwd = "/";
};

// Runs argv to completion or until `limit` passes (then SIGKILLs it and sets
// timed_out). `env` entries are added to the inherited environment.
// `on_stdout`, if given, sees the whole stdout so far after every read: tests
// react to what the job says (e.g. "rank 1 pid 1234 blocking") instead of
// sleeping.
using OutputHook = std::function<void(const std::string& out_so_far)>;
RunResult run(const std::vector<std::string>& argv, std::chrono::seconds limit,
              const std::map<std::string, std::string>& env = {}, OutputHook on_stdout = {});
// The same, as another user.
RunResult run_as(const As& who, const std::vector<std::string>& argv, std::chrono::seconds limit,
                 const std::map<std::string, std::string>& env = {}, OutputHook on_stdout = {});

// `bcs run ARGS...` with a bcs-level --timeout below the harness limit.
RunResult bcs_run(const std::vector<std::string>& args,
                  std::chrono::seconds limit = std::chrono::seconds(90),
                  const std::map<std::string, std::string>& env = {}, OutputHook on_stdout = {});

// What each thread of the given processes is doing (from /proc: state,
// scheduling, kernel wait channel) and, where gdb is installed, its user
// stack: for a failure report when a job on daemons the test started hung.
std::string threads_of(const std::vector<pid_t>& pids);

// A background process the test owns (a daemon). Killed by PID at destruction.
class Background {
 public:
  Background(const std::vector<std::string>& argv,
             const std::map<std::string, std::string>& env = {}, const As* as = nullptr);
  ~Background();
  Background(const Background&) = delete;
  Background& operator=(const Background&) = delete;
  pid_t pid() const { return pid_; }
  // The first line the process wrote on its ready fd (fd 3), or "" after `limit`.
  std::string ready_line(std::chrono::seconds limit);
  // SIGTERM then wait (bounded), SIGKILL if needed. Returns the exit status.
  int stop(std::chrono::seconds limit = std::chrono::seconds(10));
  // Waits for it to exit on its own. Returns the status, or -1 after `limit`.
  int wait(std::chrono::seconds limit);

 private:
  pid_t pid_ = -1;
  int ready_fd_ = -1;
  int status_ = -1;
};

// PIDs of live processes carrying this test's marker (excluding zombies).
std::vector<pid_t> marked_processes();
// Waits (bounded) until no marked process is alive; returns those left.
std::vector<pid_t> wait_no_marked_processes(std::chrono::seconds limit);
// Entries of /dev/shm.
std::vector<std::string> shm_entries();
// PIDs of marked processes whose environment has KEY=VALUE.
std::vector<pid_t> marked_with(const std::string& key, const std::string& value);
// Marked processes running the executable at `path` (e.g. bin("bcs-nm")).
std::vector<pid_t> marked_running(const std::string& path);

// A TCP socket in LISTEN state, from /proc/net/tcp and /proc/net/tcp6.
struct Listener {
  pid_t pid = 0;
  std::string ip;  // "127.0.0.1", "::1", "::ffff:127.0.0.1", "0.0.0.0", ...
  uint16_t port = 0;
  bool loopback = false;
};
// The listening TCP sockets held by these processes (socket inode -> pid
// through /proc/PID/fd).
std::vector<Listener> tcp_listeners_of(const std::vector<pid_t>& pids);

}  // namespace bcs::test

namespace bcs::test {
// tests/integration/block.c: every rank prints "rank R pid P blocking" and
// waits forever for a message nobody sends.
std::string blocker();
// Occurrences of `what` in `s`.
size_t count(const std::string& s, const std::string& what);
// If `out` holds "rank R pid P blocking", sends `sig` to P and returns true.
bool kill_announced_rank(const std::string& out, int rank, int sig);
// The sum of column `col` of a CSV file with a header line (a job
// directory's slices.csv or node-NAME.csv); nullopt if the file or the
// column is not there.
std::optional<uint64_t> csv_column_sum(const std::string& path, const std::string& col);

// A new directory under /tmp ("/tmp/PREFIX-XXXXXX"), removed with all it
// holds however the test ends (an early ASSERT returns at once). `path` is
// empty if it could not be made.
struct TempDir {
  std::string path;
  explicit TempDir(const char* prefix);
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
};

}  // namespace bcs::test
