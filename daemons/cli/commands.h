// The subcommands of `bcs`; each returns the process exit status.
#pragma once

#include "options.h"

namespace bcs::cli {

int run_job(const RunOptions& o);
int list_jobs(const JobsOptions& o);
int kill_job(const KillOptions& o);
// bcs attach JOB: its output and, at its end, its exit status.
int attach_job(const AttachOptions& o);
int show_stats(const StatsOptions& o);
int follow_slices(const MonitorOptions& o);
// bcs trace / bcs plot of a job id (on the manager) or a job directory.
int export_any(const ExportOptions& o);
// bcs replay DIR (record_commands.cc).
int replay_job(const ReplayOptions& o);
// bcs run --record / --replay: the recording's directory made ready and the
// ranks' environment set (BCS_RECORD / BCS_REPLAY); false after saying why.
bool record_prepare(RunOptions* o);

}  // namespace bcs::cli
