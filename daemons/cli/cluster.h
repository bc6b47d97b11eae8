// The embedded default of `bcs run`: a private bcs-mm and K bcs-nm started on
// this host for one job and always torn down afterwards. No gRPC in here, so
// that it can be tested with fake daemons.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace bcs::cli {

struct ClusterError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Thrown by EmbeddedCluster::start when `interrupt_fd` became readable
// (a signal arrived) while waiting for the manager to come up.
struct StartInterrupted {};

// Locates a daemon: $env_var if set (path to the executable), else next to
// the running executable (readlink /proc/self/exe), else in $PATH.
// Throws ClusterError naming every place it looked.
std::string find_daemon(const std::string& name, const char* env_var);

// A child process bcs started. Movable, not copyable; the owner reaps it.
struct Child {
  std::string name;   // "bcs-mm", "bcs-nm node1"
  pid_t pid = -1;
  bool reaped = false;
  int wait_status = 0;
};

// Forks and execs `argv` (argv[0] = path). In the child: PR_SET_PDEATHSIG
// SIGKILL (then a getppid() check closes the race with a parent that died
// before the prctl), its own process group (a terminal Ctrl-C reaches only
// bcs, which then stops the job in order), empty signal mask, default
// SIGPIPE, stdin from /dev/null, stdout onto stderr (bcs's stdout carries
// only job output), and `keep_fd` (if >= 0) inherited across exec.
// Throws ClusterError if fork or exec fails (exec errors come back through a
// close-on-exec pipe, so "Permission denied" is reported, not a mystery exit).
// NOTE: PR_SET_PDEATHSIG fires when the *thread* that forked exits, so call
// this from the thread that lives as long as the cluster (main).
pid_t spawn(const std::vector<std::string>& argv, int keep_fd);

// "exited with status 3", "was killed by signal 9 (Killed)".
std::string describe_wait_status(int status);

struct ClusterConfig {
  uint32_t nodes = 1;
  std::vector<std::string> names;  // of the node managers; default node1..nodeK
  std::string slice;   // forwarded as --slice when non-empty
  std::string chunk;   // forwarded as --chunk when non-empty
  std::string liveness;  // forwarded as --liveness-timeout (to every daemon) when non-empty
  std::string token_file;  // forwarded as --token-file when non-empty (a
                           // token in $BCS_TOKEN reaches the daemons by the environment)
  bool verbose = false;  // daemons get --log-level debug
  int interrupt_fd = -1; // polled while waiting for the MM; readable = give up
  int ready_timeout_ms = 10000;
};

class EmbeddedCluster {
 public:
  EmbeddedCluster() = default;
  EmbeddedCluster(const EmbeddedCluster&) = delete;
  EmbeddedCluster& operator=(const EmbeddedCluster&) = delete;
  ~EmbeddedCluster() { teardown(); }

  // Starts bcs-mm on 127.0.0.1:0, reads its port from the ready pipe, then
  // starts `nodes` bcs-nm. Throws ClusterError or StartInterrupted; whatever
  // was started is still owned (and torn down) by this object.
  void start(const ClusterConfig& cfg);

  uint16_t port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  const std::vector<Child>& children() const { return children_; }
  // The node managers' names (--name), in the order they were started.
  const std::vector<std::string>& node_names() const { return names_; }

  // SIGTERM to every child still running, wait up to `grace_ms` in total,
  // then SIGKILL the rest; every child is reaped. Idempotent. Children that
  // had died before teardown are reported on stderr (they explain a lost
  // manager); with `verbose` every exit is reported.
  void teardown(int grace_ms = 5000);

 private:
  std::vector<Child> children_;
  std::vector<std::string> names_;
  uint16_t port_ = 0;
  bool verbose_ = false;
  bool torn_down_ = false;
};

}  // namespace bcs::cli
