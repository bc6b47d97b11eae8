// The job directory of a monitored run (bcs run --job-dir, BCS_MDS): where
// the ranks write their MMDS reports, and where bcs leaves summary.txt.
#pragma once

#include <string>

#include <vector>

#include "bcs/emds.h"
#include "bcs/export.h"
#include "bcs/mmds.h"
#include "options.h"

namespace bcs::cli {

// The directory for this run, created, as an absolute path; "" when the
// run is not monitored (no --job-dir, BCS_MDS off). On error returns "" and
// sets `err`. BCS_MDS is looked up in the ranks' settings (--env, -x) first,
// then in bcs's environment.
std::string job_dir_prepare(const RunOptions& o, std::string* err);
// After the job: summary.txt from the ranks' reports, and a line on stderr
// saying where it is (or why there is none).
void job_dir_finish(const std::string& dir);
// `bcs stats DIR`, or the reports of `bcs stats JOB` (from_job).
int show_mmds(const StatsOptions& o, const std::vector<monitor::RankReport>* from_job = nullptr);
// The job's slice series from the manager at `addr` as slices.csv in
// `dir`, and each of `nodes`' local series over the same slices as
// node-NAME.csv. job 0: every slice (a private cluster ran this job only);
// else the slices of that job (a standing cluster).
void job_dir_save_series(const std::string& dir, const std::string& addr, const std::string& token_file,
                         uint64_t job, const std::vector<std::string>& nodes);
// The reports of ranks that wrote none into `dir` (they ran on other
// hosts), as the manager kept them: mmds.rank<R>.json, as a rank would.
void job_dir_save_reports(const std::string& dir, const std::vector<monitor::RankReport>& ranks);
// The nodes the ranks' reports in `dir` came from (none without reports).
std::vector<std::string> job_dir_nodes(const std::string& dir);
// `bcs trace DIR -o FILE`, `bcs plot DIR --metric M -o FILE`.
int export_slices(const ExportOptions& o);
// The picture or trace of these slices and ranks into o.output; `source`
// names where they came from in messages and titles.
int export_write(const ExportOptions& o, const std::vector<monitor::SliceRecord>& slices,
                 const std::vector<monitor::RankReport>& ranks, const std::string& source,
                 const monitor::NodeSeriesList& nodes = {});

}  // namespace bcs::cli
