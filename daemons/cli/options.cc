#include "options.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdlib>
#include <cctype>
#include <climits>
#include <cstdint>
#include <iterator>
#include <ostream>

#include "launch.h"
#include "job_limits.h"
#include "token.h"
#include "units.h"

#ifndef BCS_VERSION
#define BCS_VERSION "unknown"
#endif

namespace bcs::cli {

uint32_t RunOptions::effective_nodes() const {
  if (!nodes) return manager ? 0 : std::min<uint32_t>(1, nranks);
  return std::min(*nodes, nranks);
}

namespace {

// CLI11 validators built on daemons/common/units.h, so that "2ms" or "64KiB"
// are checked before anything is started.
const CLI::Validator kDuration(
    [](std::string& s) -> std::string {
      auto ns = parse_duration_ns(s);
      if (!ns) return "'" + s + "' is not a duration (e.g. 500us, 2ms, 1.5s, 10m)";
      if (*ns == 0) return "duration must be greater than zero";
      return {};
    },
    "DURATION", "duration");

// A slice is micro- to milliseconds: a bare number ("500") is far more
// likely a mistake than 500 seconds, so the slice must carry its unit, and
// it must be one the machine manager accepts.
const CLI::Validator kSliceDuration(
    [](std::string& s) -> std::string {
      if (s.empty() || !std::isalpha(static_cast<unsigned char>(s.back())))
        return "'" + s + "' needs a unit (e.g. 250us, 1ms)";
      auto ns = parse_duration_ns(s);
      if (!ns) return "'" + s + "' is not a duration (e.g. 250us, 1ms)";
      if (*ns < 10'000 || *ns > 10'000'000'000ull) return "a slice must be between 10us and 10s";
      return {};
    },
    "DURATION", "slice");

const CLI::Validator kSize(
    [](std::string& s) -> std::string {
      auto b = parse_size_bytes(s);
      if (!b) return "'" + s + "' is not a size (e.g. 65536, 64KiB, 4MiB)";
      if (*b == 0) return "size must be greater than zero";
      return {};
    },
    "SIZE", "size");

// -x NAME or -x NAME=VALUE (as Open MPI's mpirun).
const CLI::Validator kEnvExport(
    [](std::string& s) -> std::string {
      if (s.find('=') != std::string::npos) return check_env_setting(s);
      if (!env_name_ok(s)) return "'" + s + "' is not an environment variable name";
      if (is_rank_env(s)) return "'" + s + "' is set by bcs itself for each rank";
      return {};
    },
    "", "env-export");  // no description: the type name says it

const CLI::Validator kEnvAssignment(
    [](std::string& s) -> std::string { return check_env_setting(s); }, "", "env-assignment");

const CLI::Validator kAtLeastOne(
    [](std::string& s) -> std::string {
      // The value has already been converted successfully when this runs on
      // an unsigned option, but "-0" or "0" still need a clear message.
      try {
        if (std::stoll(s) < 1) return "must be at least 1";
      } catch (...) {
        return "'" + s + "' is not a positive integer";
      }
      return {};
    },
    "N>=1", "at-least-one");

// The token never travels on the command line (see daemons/common/token.h):
// --token VALUE is refused with the reason, --token-file names a file.
const CLI::Validator kNoTokenOnCommandLine(
    [](std::string&) -> std::string { return kTokenOnCommandLine; }, "", "no-token");

void add_token_options(CLI::App* sub, std::string* token_file) {
  sub->add_option("--token-file", *token_file,
                  "File holding the cluster's shared token (default: $BCS_TOKEN)");
  static std::string refused;  // never kept: the check always fails
  sub->add_option("--token", refused, "(refused: use --token-file or $BCS_TOKEN)")
      ->check(kNoTokenOnCommandLine);
}

void add_manager_options(CLI::App* sub, std::string* manager, std::string* token_file) {
  sub->add_option("--manager", *manager, "Machine manager to talk to (HOST:PORT or unix:PATH)")
      ->capture_default_str();
  add_token_options(sub, token_file);
}

}  // namespace

// mpiexec's `-np N` (Open MPI, MPICH, Intel MPI; what users type). CLI11
// reads a single-dash name as short flags (-n p), so that spelling becomes
// --np - among bcs's own options only, before PROGRAM: a program's own
// `-np` is its business. An option that takes a value skips it; the first
// word that is neither is PROGRAM, and the scan stops there (a word it
// misjudges stops it early, which leaves `-np` to CLI11's error, as before).
void accept_mpiexec_np(const CLI::App& run_cmd, std::vector<std::string>& words) {
  for (size_t i = 1; i < words.size(); ++i) {
    std::string& w = words[i];
    if (w == "-np" || w.rfind("-np=", 0) == 0) {
      const bool has_value = w.size() > 3;
      w.insert(0, "-");
      if (!has_value) ++i;  // its count
      continue;
    }
    if (w.size() < 2 || w[0] != '-') break;  // PROGRAM
    const std::string name = w.substr(0, w.find('='));
    const CLI::Option* o = run_cmd.get_option_no_throw(name);
    if (o && o->get_expected_min() > 0 && w.find('=') == std::string::npos) ++i;
  }
}

ParseResult parse_args(int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
  CLI::App app{
      "bcs: an MPI runtime built on Buffered Coscheduling.\n"
      "Runs MPI programs on a private on-host cluster (default) or on a running\n"
      "machine manager (bcs-mm) with its node managers (bcs-nm).",
      "bcs"};
  app.set_version_flag("--version", std::string("bcs ") + BCS_VERSION);
  app.require_subcommand(1);
  app.footer(
      "Examples:\n"
      "  bcs run -n 4 ./ring                 private cluster on this host, 1 node\n"
      "  bcs run -n 8 --nodes 2 -l ./app x   2 node managers, output labelled by rank\n"
      "  bcs run --manager 10.0.0.1:7600 --token-file ~/.bcs-token -n 64 ./app\n"
      "  bcs jobs; bcs kill 3; bcs stats --last 50   (manager at 127.0.0.1:7600)\n"
      "  bcs run --manager unix:/run/bcs/mm.sock --detach -n 4 ./app; bcs attach 5 --manager ...\n"
      "Run `bcs SUBCOMMAND --help` for the options of each subcommand.");

  RunOptions run;
  std::string slice, chunk, timeout;
  uint32_t nodes = 0;
  std::string manager;
  auto* run_cmd = app.add_subcommand(
      "run",
      "Run a program with N ranks: bcs run -n N [OPTIONS] PROGRAM [ARGS...]\n"
      "(everything after PROGRAM is passed to the program; mpiexec's -np N works too)");
  run_cmd->footer(
      "Without --manager, bcs starts a private bcs-mm and K x bcs-nm on this host\n"
      "(found next to the bcs executable, then in PATH; BCS_MM_PATH / BCS_NM_PATH\n"
      "override) and stops them when the job ends.\n"
      "With --manager the job lives as long as bcs does: if bcs is killed (even with\n"
      "SIGKILL) or loses its connection, the manager ends the job, as mpirun's would\n"
      "end. --detach launches it to run on its own: bcs prints the job id and exits 0;\n"
      "`bcs attach JOB` shows its output (what the manager kept of it, at most 64 MiB\n"
      "unread: older output is dropped with a note) and returns its exit status, and\n"
      "`bcs jobs` says which jobs are detached.\n"
      "--timeout counts from when the job starts running, and only its own running\n"
      "time: not while it is queued (on a busy cluster a job may first wait for its\n"
      "node managers to be free), and not while gang scheduling (bcs-mm --mpl) keeps\n"
      "it suspended for another job's quantum.\n"
      "Exit status: the job's; 124 on --timeout; 130/143 on SIGINT/SIGTERM;\n"
      "1 if the job could not be launched or the machine manager was lost;\n"
      "2 for bad arguments.\n"
      "Examples:\n"
      "  bcs run -n 4 ./ring\n"
      "  bcs run -n 8 --nodes 2 -l --timeout 5m ./app -x 3\n"
      "  bcs run --host a:2,b --env OMP_NUM_THREADS=1 -x HOME ./app   (ranks 0,1 on a, 2 on b)\n"
      "  bcs run --manager 10.0.0.1:7600 --token-file ~/.bcs-token -n 64 ./app\n"
      "  bcs run --manager 10.0.0.1:7600 --hostfile hosts ./app   (node managers by --name)");
  // Stop at PROGRAM: its own flags (even ones that look like ours, such as
  // -l) belong to it, as with mpirun.
  run_cmd->prefix_command();
  auto* np_opt = run_cmd->add_option("-n,--np", run.nranks,
                                     "Number of ranks (required unless --host/--hostfile give "
                                     "it: the sum of their slots)")
      ->check(kAtLeastOne);
  auto* nodes_opt = run_cmd
      ->add_option("--nodes", nodes,
                   "Node managers to spread the ranks over (embedded default 1; "
                   "with --manager default all registered); never more than N")
      ->check(kAtLeastOne);
  run_cmd->add_option("--ppn", run.ppn,
                      "Ranks per node manager, filled in rank order (e.g. -n 4 --nodes 2 --ppn 3 "
                      "puts ranks 0-2 on one and 3 on the other); default: cyclic placement")
      ->check(kAtLeastOne);
  run_cmd->add_option("--slice", slice, "Time slice (strobe period), e.g. 500us, 2ms")
      ->check(kSliceDuration);
  run_cmd->add_option("--chunk", chunk,
                      "Per-slice byte budget of a DMA helper, e.g. 64KiB (default: what the "
                      "slowest node manager of the job copies in one slice)")
      ->check(kSize);
  run_cmd
      ->add_option("--max-unexpected", run.max_unexpected,
                   "Unmatched sends one receiver may have waiting before further sends to it "
                   "wait in their senders' rings (default: the manager's, 65536)")
      ->check(CLI::Range(uint64_t{1}, bcs::kMaxUnexpectedLimit));
  run_cmd
      ->add_option("--strobe", run.strobe,
                   "Slice pacing: adaptive (default: the next slice starts at once when every "
                   "rank is blocked, and none run while nothing is to do) or fixed (one slice "
                   "per period, as in the paper)")
      ->check(CLI::IsMember({"adaptive", "fixed"}));
  run_cmd
      ->add_option("--bind-to", run.bind,
                   "Where the ranks run: core (a host's k-th rank of the job on the k-th CPU its "
                   "node manager may use) or none (on any of them). Default: core when a host's "
                   "ranks do not outnumber those CPUs, else none")
      ->check(CLI::IsMember({"core", "none"}));
  run_cmd
      ->add_option("--stdin", run.stdin_to,
                   "Where bcs's standard input goes: 0 (rank 0's stdin, as with mpiexec), none "
                   "(every rank's stdin is /dev/null) or auto (0 when it is a pipe, a socket or "
                   "a file, none for a terminal or /dev/null)")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "0", "none"}));
  run_cmd
      ->add_option("--liveness-timeout", run.liveness,
                   "Embedded cluster: how long a stopped or hung daemon may stay silent before "
                   "the job fails (default 60s; shorter stalls only delay it)")
      ->check(kDuration);
  run_cmd->add_flag("-l,--label", run.label, "Prefix every output line with [RANK]");
  run_cmd->add_flag("--slurm", run.slurm,
                    "Inside a Slurm allocation (sbatch, salloc): a cluster on its nodes for this "
                    "job, ranks placed as Slurm allocated the tasks (deploy/slurm/bcs.sbatch)");
  std::vector<std::string> env_export, host_lists, host_files;
  run_cmd
      ->add_option("-x", env_export,
                   "Set NAME in the ranks' environment to its value here (an error if unset), "
                   "or to VALUE. The ranks get bcs's whole environment anyway; -x makes a "
                   "missing variable an error")
      ->type_name("NAME[=VALUE]")
      ->allow_extra_args(false)  // one NAME per -x: the next word may be PROGRAM
      ->check(kEnvExport);
  run_cmd
      ->add_option("--env", run.env_set,
                   "Set NAME=VALUE in the ranks' environment (after -x; later ones win)")
      ->type_name("NAME=VALUE")
      ->allow_extra_args(false)
      ->check(kEnvAssignment);
  auto* host_opt = run_cmd
      ->add_option("--host", host_lists,
                   "Node managers by name, with ranks (slots) each: H1[:S1],H2[:S2],... "
                   "(S defaults to 1). Rank r goes to the host of slot r mod (sum of S). "
                   "Embedded: one node manager per distinct host, named after it; with "
                   "--manager: the registered node managers of these names (bcs-nm --name)")
      ->type_name("HOSTS")
      ->allow_extra_args(false);
  auto* hostfile_opt = run_cmd
      ->add_option("--hostfile", host_files,
                   "Hosts from a file, one per line: NAME, NAME:SLOTS or NAME slots=SLOTS "
                   "('#' comments); used as --host")
      ->type_name("FILE")
      ->allow_extra_args(false);
  run_cmd->add_option("--timeout", timeout,
                      "Kill the job after it has run this long (exit 124): its own running "
                      "time, not while it is queued for free node managers nor while gang "
                      "scheduling keeps it suspended")
      ->check(kDuration);
  auto* manager_opt = run_cmd->add_option(
      "--manager", manager, "Submit to a running machine manager (HOST:PORT) instead of "
                            "starting a private cluster");
  run_cmd->add_flag(
      "--detach", run.detach,
      "With --manager: launch the job, print its id and exit; it runs on without bcs "
      "(bcs attach JOB for its output and exit status, bcs kill JOB to end it). Without "
      "--detach the manager ends the job when bcs goes away (killed, connection lost)");
  add_token_options(run_cmd, &run.token_file);
  run_cmd
      ->add_option("--job-dir", run.job_dir,
                   "Directory for the job's statistics: with BCS_MDS=summary|all each rank "
                   "writes its MMDS report there and bcs writes summary.txt (default: a new "
                   "bcs-job-* directory here when BCS_MDS is on)")
      ->type_name("DIR");
  auto* record_opt = run_cmd
      ->add_option("--record", run.record_dir,
                   "Record what each rank observes that another run could change (wildcard "
                   "matches, tests, probes, wait-any/some) into DIR, a new directory, for "
                   "bcs replay DIR")
      ->type_name("DIR");
  run_cmd
      ->add_flag("--record-wtime", run.record_wtime,
                 "With --record: record MPI_Wtime's readings too, and replay them (for programs "
                 "that decide by the clock; every reading is a record)")
      ->needs(record_opt);
  run_cmd
      ->add_option("--replay", run.replay_dir,
                   "Replay the recording in DIR: the ranks observe what they observed then "
                   "(a program that does something else is stopped, saying where)")
      ->type_name("DIR")
      ->excludes(record_opt);
  run_cmd->add_flag("-v,--verbose", run.verbose,
                    "Say what bcs does; embedded daemons log at debug level");

  ReplayOptions replay;
  uint32_t replay_nodes = 0;
  std::string replay_manager;
  auto* replay_cmd = app.add_subcommand(
      "replay", "Run a recorded job again (bcs run --record DIR), observing what it observed");
  replay_cmd->add_option("DIR", replay.dir, "The recording")->required();
  replay_cmd->add_flag("--info", replay.info, "Print the recording's header and events per rank");
  auto* replay_nodes_opt = replay_cmd->add_option("--nodes", replay_nodes,
                                                  "Node managers (default: as recorded)")
                               ->check(kAtLeastOne);
  replay_cmd->add_option("--slice", replay.slice, "Time slice (default: as recorded)")
      ->check(kSliceDuration);
  replay_cmd->add_option("--timeout", replay.timeout,
                         "Kill the job after this long (exit 124); counts from when the job starts "
                         "running")
      ->check(kDuration);
  auto* replay_manager_opt = replay_cmd->add_option(
      "--manager", replay_manager, "Submit to a running machine manager (HOST:PORT)");
  add_token_options(replay_cmd, &replay.token_file);
  replay_cmd->add_flag("-l,--label", replay.label, "Prefix every output line with [RANK]");
  uint32_t stop_rank = 0;
  auto* stop_rank_opt = replay_cmd->add_option(
      "--stop-rank", stop_rank,
      "Rank R waits at the end of its MPI_Init (asleep, until SIGCONT) and says how to attach "
      "gdb to it; the others wait for it in their first call that needs it");
  replay_cmd
      ->add_option("--until-slice", replay.until_slice,
                   "Run up to job slice S, then pause every rank (each in its first MPI call "
                   "from slice S on, asleep until SIGCONT) and say how to attach gdb")
      ->check(kAtLeastOne);

  JobsOptions jobs;
  auto* jobs_cmd = app.add_subcommand("jobs", "List the jobs of a running machine manager");
  add_manager_options(jobs_cmd, &jobs.manager, &jobs.token_file);
  jobs_cmd->add_flag("--matrix", jobs.matrix,
                     "Show the gang matrix instead: a row per multiprogramming level (bcs-mm "
                     "--mpl), a column per node manager, the job holding each; '*' marks the "
                     "row whose quantum runs, '#' another user's job, '.' a free slot");

  KillOptions kill;
  auto* kill_cmd = app.add_subcommand("kill", "Kill a job on a running machine manager");
  kill_cmd->add_option("JOBID", kill.job_id, "Job id (see `bcs jobs`)")->required();
  add_manager_options(kill_cmd, &kill.manager, &kill.token_file);

  AttachOptions attach;
  auto* attach_cmd = app.add_subcommand(
      "attach",
      "Follow a job's output on a running machine manager (a job run with bcs run --detach: "
      "what the manager kept of it first) and exit with its status, as bcs run would");
  attach_cmd->add_option("JOBID", attach.job_id, "Job id (see `bcs jobs`)")->required();
  attach_cmd->add_flag("-l,--label", attach.label, "Prefix every output line with [RANK]");
  add_manager_options(attach_cmd, &attach.manager, &attach.token_file);
  attach_cmd->footer(
      "Ctrl-C leaves the job: a detached job runs on (attach again later); a job run\n"
      "without --detach ends when its last client is gone. Exit status: the job's; 130/143\n"
      "when interrupted; 1 if the manager refused or was lost.");

  StatsOptions stats;
  auto* stats_cmd = app.add_subcommand(
      "stats",
      "Per-slice statistics of a running machine manager (Monitor service), or with JOB or DIR "
      "the MMDS summary of a job (Table 5.3)");
  stats_cmd->add_option("JOB|DIR", stats.target,
                        "A job id on the manager (its ranks' MMDS summaries), or a job directory "
                        "holding mmds.rank*.json (bcs run --job-dir)");
  stats_cmd->add_option("--node", stats.node,
                        "One node manager's own series (the paper's local metrics, Table 5.2) "
                        "instead of the global one");
  stats_cmd->add_option("--from", stats.from, "First slice of a range (instead of --last)");
  stats_cmd->add_option("--to", stats.to, "Last slice of a range (instead of --last)");
  stats_cmd->add_flag("--json", stats.json, "With JOB|DIR: every rank's report as one JSON document");
  stats_cmd->add_flag("--per-rank", stats.per_rank, "With JOB|DIR: a table per rank after the total");
  stats_cmd->add_option("--last", stats.last, "How many of the most recent slices")
      ->capture_default_str()
      ->check(kAtLeastOne);
  add_manager_options(stats_cmd, &stats.manager, &stats.token_file);

  MonitorOptions mon;
  auto* monitor_cmd = app.add_subcommand(
      "monitor", "Follow the slices of a running machine manager live, or one job's (Monitor service)");
  monitor_cmd->add_option("JOB", mon.job, "Only this job's slices; the table ends when the job does");
  monitor_cmd->add_option("--count", mon.count, "Stop after this many slices (default: until Ctrl-C)");
  // `bcs monitor JOB --follow` reads as what it does; following is all it does.
  monitor_cmd->add_flag("-f,--follow", mon.follow, "Follow the slices as they run (the default)");
  add_manager_options(monitor_cmd, &mon.manager, &mon.token_file);

  ExportOptions trace, plot;
  plot.plot = true;
  auto* trace_cmd = app.add_subcommand(
      "trace", "Chrome/Perfetto trace-event JSON of a job's slices (and, recorded with "
               "BCS_MDS=all in a job directory, its ranks' calls)");
  trace_cmd->add_option("JOB|DIR", trace.dir,
                        "A job id on the manager (its slices and ranks' summaries), or a job "
                        "directory (bcs run --job-dir)")
      ->required();
  add_manager_options(trace_cmd, &trace.manager, &trace.token_file);
  trace_cmd->add_option("-o,--output", trace.output, "Where to write the trace (JSON)")->required();
  auto* plot_cmd = app.add_subcommand(
      "plot", "An SVG plot of one per-slice metric of a job (on the manager, or a job directory)");
  plot_cmd->add_option("JOB|DIR", plot.dir,
                       "A job id on the manager (its slices), or a job directory (bcs run --job-dir)")
      ->required();
  add_manager_options(plot_cmd, &plot.manager, &plot.token_file);
  plot_cmd->add_option("--metric", plot.metric,
                       "GETTS (the period, default), GTDEM, GTMSM, GTTS, USRTS, USRDEM, USRMSM, "
                       "GTP2P, GTBBM, GTRM, or a column of slices.csv (descriptors, bytes, ...)")
      ->capture_default_str();
  plot_cmd->add_option("-o,--output", plot.output, "Where to write the picture (SVG)")->required();

  // CLI11 2.1 hands a "--" inside a prefix-command subcommand up to the
  // root, which rejects what follows. So for `run`, split at the first "--"
  // ourselves: words after it start the program, unless the program was
  // already named before it (then "--" is one of the program's arguments).
  std::vector<std::string> words(argv + (argc > 0 ? 1 : 0), argv + argc);
  std::vector<std::string> tail;
  bool split = false;
  if (!words.empty() && words[0] == "run") {
    auto dd = std::find(words.begin(), words.end(), "--");
    if (dd != words.end()) {
      tail.assign(dd + 1, words.end());
      words.erase(dd, words.end());
      split = true;
    }
  }
  if (!words.empty() && words[0] == "run") accept_mpiexec_np(*run_cmd, words);
  std::reverse(words.begin(), words.end());  // CLI11 takes them back to front

  try {
    app.parse(words);
    if (*run_cmd) {
      std::vector<std::string> rest = run_cmd->remaining();
      // After "--" even a name starting with '-' is the program.
      const bool named_after_dd = split && rest.empty();
      if (split) {
        if (!rest.empty()) rest.push_back("--");
        rest.insert(rest.end(), tail.begin(), tail.end());
      }
      if (rest.empty()) throw CLI::RequiredError("PROGRAM");
      // prefix_command() also parks unknown options met before PROGRAM in
      // remaining(); those are typos, not the program.
      if (!named_after_dd && rest.front().size() > 1 && rest.front()[0] == '-')
        throw CLI::ExtrasError(std::vector<std::string>{rest.front()});
      run.program = rest.front();
      run.args.assign(rest.begin() + 1, rest.end());
      if (*nodes_opt) run.nodes = nodes;
      if (*manager_opt) run.manager = manager;
      if (!slice.empty()) {
        run.slice = slice;
        run.slice_ns = *parse_duration_ns(slice);
      }
      if (!chunk.empty()) {
        run.chunk = chunk;
        run.chunk_bytes = *parse_size_bytes(chunk);
      }
      if (!timeout.empty()) {
        run.timeout = timeout;
        run.timeout_ns = *parse_duration_ns(timeout);
      }
      // -x first, then --env: later settings win.
      std::vector<std::string> settings;
      for (const auto& x : env_export) {
        if (x.find('=') != std::string::npos) {
          settings.push_back(x);
          continue;
        }
        const char* v = std::getenv(x.c_str());
        if (!v) throw CLI::ValidationError("-x " + x, x + " is not set in this environment");
        settings.push_back(x + "=" + v);
        if (auto why = check_env_setting(settings.back()); !why.empty())
          throw CLI::ValidationError("-x " + x, why);
      }
      settings.insert(settings.end(), run.env_set.begin(), run.env_set.end());
      run.env_set = std::move(settings);

      if (*host_opt && *hostfile_opt)
        throw CLI::ValidationError("--host", "give --host or --hostfile, not both");
      try {
        for (const auto& l : host_lists) add_host_list(l, &run.hosts);
        for (const auto& f : host_files) add_host_file(f, &run.hosts);
      } catch (const HostError& e) {
        throw CLI::ValidationError(*host_opt ? "--host" : "--hostfile", e.what());
      }
      if (!run.hosts.empty()) {
        if (*nodes_opt || run.ppn)
          throw CLI::ValidationError("--host", "--host/--hostfile place the ranks themselves: "
                                               "no --nodes or --ppn with them");
        if (!*np_opt) {
          const uint64_t total = total_slots(run.hosts);
          if (total > UINT32_MAX) throw CLI::ValidationError("--host", "too many slots");
          run.nranks = static_cast<uint32_t>(total);
        }
      } else if (run.slurm) {
        // The allocation gives the ranks and their places (the script's
        // host file); -n may ask for fewer.
        if (*nodes_opt || run.ppn)
          throw CLI::ValidationError("--slurm", "--slurm places the ranks as Slurm allocated "
                                                "the tasks: no --nodes or --ppn with it");
      } else if (!*np_opt) {
        throw CLI::RequiredError("-n");
      }
      if (run.slurm && !run.hosts.empty())
        throw CLI::ValidationError("--slurm", "--slurm places the ranks as Slurm allocated the "
                                              "tasks: no --host/--hostfile with it");
      if (run.detach) {
        // Without --manager the cluster is bcs's own and goes with it: a
        // job cannot outlive it.
        if (!run.manager)
          throw CLI::ValidationError(
              "--detach", "a detached job needs a standing cluster: give --manager HOST:PORT or "
                          "unix:PATH (without --manager, bcs run starts a private cluster that "
                          "ends with it)");
        if (!timeout.empty())
          throw CLI::ValidationError("--detach", "--timeout is enforced by bcs run itself, "
                                                 "which a detached job outlives: not with --detach");
        if (!run.job_dir.empty())
          throw CLI::ValidationError("--detach", "--job-dir is written when the job ends, by bcs "
                                                 "run, which a detached job outlives: not with "
                                                 "--detach (bcs stats JOB reads its statistics)");
      }
      if (run.slurm && run.manager)
        throw CLI::ValidationError("--slurm", "--slurm starts its own cluster in the allocation "
                                              "(as Slurm allocated the tasks): no --manager with it");
      return Command{std::move(run)};
    }
    if (*replay_cmd) {
      if (*replay_nodes_opt) replay.nodes = replay_nodes;
      if (*stop_rank_opt) replay.stop_rank = stop_rank;
      if (*replay_manager_opt) replay.manager = replay_manager;
      if (!replay.timeout.empty()) replay.timeout_ns = *parse_duration_ns(replay.timeout);
      return Command{std::move(replay)};
    }
    if (*jobs_cmd) return Command{std::move(jobs)};
    if (*kill_cmd) return Command{std::move(kill)};
    if (*attach_cmd) return Command{std::move(attach)};
    if (*trace_cmd) return Command{std::move(trace)};
    if (*monitor_cmd) return Command{std::move(mon)};
    if (*plot_cmd) return Command{std::move(plot)};
    return Command{std::move(stats)};
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e, out, err);
    // CLI11's own codes (105, 106, ...) mean nothing to a shell user: any
    // usage error is 2, like other Unix tools; help/version stay 0.
    return code == 0 ? 0 : 2;
  }
}

}  // namespace bcs::cli
