// The subcommands of `bcs`; each returns the process exit status.
#pragma once

#include "options.h"

namespace bcs::cli {

int run_job(const RunOptions& o);
int list_jobs(const JobsOptions& o);
int kill_job(const KillOptions& o);
int show_stats(const StatsOptions& o);
int follow_slices(const MonitorOptions& o);
// bcs trace / bcs plot of a job id (on the manager) or a job directory.
int export_any(const ExportOptions& o);

}  // namespace bcs::cli
