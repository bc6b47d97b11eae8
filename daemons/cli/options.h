// Command line of the `bcs` manager CLI, parsed into plain structs so that
// the parsing can be unit-tested without gRPC or child processes.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "hosts.h"

namespace bcs::cli {

inline constexpr const char* kDefaultManager = "127.0.0.1:7600";

struct RunOptions {
  uint32_t nranks = 0;
  std::optional<uint32_t> nodes;     // --nodes as given (before min(K, N))
  uint32_t ppn = 0;                  // --ppn: ranks per node, filled in order (0 = cyclic)
  uint64_t slice_ns = 0;             // 0 = manager default
  std::string slice;                 // as typed, forwarded to an embedded bcs-mm
  uint64_t chunk_bytes = 0;          // 0 = manager default
  uint64_t max_unexpected = 0;       // 0 = manager default
  std::string chunk;
  std::string strobe;                // --strobe adaptive|fixed; empty = manager default
  std::string bind;                  // --bind-to core|none; empty = each node's default
  std::string stdin_to = "auto";     // --stdin auto|0|none: where bcs's stdin goes
  std::string liveness;              // --liveness-timeout for an embedded cluster
  bool label = false;
  uint64_t timeout_ns = 0;           // 0 = none
  std::string timeout;               // as typed, for "timed out after DUR"
  std::optional<std::string> manager;  // absent = embedded private cluster
  std::string token_file;            // --token-file; without it $BCS_TOKEN
  bool verbose = false;
  bool slurm = false;                // --slurm: inside a Slurm allocation (slurm.cc)
  // --detach (with --manager only): launch, print the job id and return;
  // the job runs on without a client (bcs attach JOB for its output).
  // Without it the manager ends the job when this bcs goes away.
  bool detach = false;
  // --job-dir: where the ranks' MMDS reports and the summary go. A run with
  // BCS_MDS on and no --job-dir gets a new directory (job_dir stays empty
  // here; the run creates it).
  std::string job_dir;
  // --record DIR: the ranks record what they observe for a replay (a new
  // directory); --replay DIR: they replay that recording.
  std::string record_dir;
  bool record_wtime = false;  // --record-wtime: MPI_Wtime readings too
  std::string replay_dir;
  std::string program;
  std::vector<std::string> args;     // argv[1..] of the program
  // Environment of the ranks: bcs's own environment, with these NAME=VALUE
  // settings applied in order (later ones win): first the -x options (-x
  // NAME takes NAME's value here and fails if it is unset; -x NAME=VALUE as
  // --env), then the --env options.
  std::vector<std::string> env_set;
  // --host / --hostfile: node managers by name, with their slots (empty:
  // --nodes / --ppn placement). -n defaults to the sum of the slots.
  std::vector<Host> hosts;

  // Nodes to ask for: min(K, N) with K = --nodes (default 1 when embedded);
  // 0 (= every registered node) with --manager and no --nodes. Unused with
  // hosts.
  uint32_t effective_nodes() const;
};

struct JobsOptions {
  std::string manager = kDefaultManager;
  std::string token_file;
  bool matrix = false;  // the gang matrix instead of the jobs
};

struct KillOptions {
  std::string manager = kDefaultManager;
  std::string token_file;
  uint64_t job_id = 0;
};

// bcs attach JOB: a job's output from now on (what the manager holds of it
// first), and its exit status as bcs run would return it.
struct AttachOptions {
  std::string manager = kDefaultManager;
  std::string token_file;
  uint64_t job_id = 0;
  bool label = false;
};

struct StatsOptions {
  std::string manager = kDefaultManager;
  std::string token_file;
  uint32_t last = 20;
  // A job directory (bcs run --job-dir): its MMDS summary instead of the
  // manager's slices.
  std::string target;
  std::optional<uint64_t> from, to;  // a slice range instead of --last
  std::string node;                  // one node's local series (Table 5.2) instead
  bool json = false;
  bool per_rank = false;
};

// bcs trace DIR -o FILE / bcs plot DIR --metric M -o FILE: exports of a job
// directory's slice series (slices.csv).
struct ExportOptions {
  bool plot = false;  // else trace
  std::string dir;    // a job directory, or a job id on the manager
  std::string manager = kDefaultManager;
  std::string token_file;
  std::string output;
  std::string metric = "GETTS";
};

// bcs monitor: the slices as they run (Monitor.Follow).
struct MonitorOptions {
  std::string manager = kDefaultManager;
  std::string token_file;
  uint64_t count = 0;  // stop after this many slices (0: until interrupted)
  uint64_t job = 0;    // only this job's slices, until it ends (0: all)
  bool follow = false; // --follow: accepted, following is what it does
};

// bcs replay DIR: the recorded job again, made to observe what it observed.
struct ReplayOptions {
  std::string dir;
  bool info = false;                 // print the recording's header and event counts
  std::optional<uint32_t> nodes;     // node managers (default: as recorded)
  std::string slice;                 // slice length (default: as recorded)
  std::string timeout;
  uint64_t timeout_ns = 0;
  std::optional<std::string> manager;
  std::string token_file;
  bool label = false;
  std::optional<uint32_t> stop_rank;  // --stop-rank: this rank stops at MPI_Init for a debugger
  uint64_t until_slice = 0;           // --until-slice: every rank pauses there (0: no)
};

using Command = std::variant<RunOptions, JobsOptions, KillOptions, StatsOptions, ExportOptions,
                             MonitorOptions, ReplayOptions, AttachOptions>;

// Either a command to execute or an exit status (help/version printed: 0,
// bad arguments: 2, message already written to `out`/`err`).
using ParseResult = std::variant<Command, int>;

ParseResult parse_args(int argc, const char* const* argv, std::ostream& out, std::ostream& err);

}  // namespace bcs::cli
