// The job directory of a monitored run (bcs run --job-dir, BCS_MDS): where
// the ranks write their MMDS reports, and where bcs leaves summary.txt.
#pragma once

#include <string>

#include <vector>

#include "bcs/emds.h"
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
// The slice series of the job's cluster, as slices.csv in `dir` (an
// embedded run: the private cluster ran this job only).
void job_dir_save_slices(const std::string& dir, const std::vector<monitor::SliceRecord>& slices);
// A node's local series as node-NAME.csv in `dir` (nothing if empty).
void job_dir_save_node(const std::string& dir, const std::string& node,
                       const std::vector<monitor::LocalSliceRecord>& slices);
// `bcs trace DIR -o FILE`, `bcs plot DIR --metric M -o FILE`.
int export_slices(const ExportOptions& o);
// The picture or trace of these slices and ranks into o.output; `source`
// names where they came from in messages and titles.
int export_write(const ExportOptions& o, const std::vector<monitor::SliceRecord>& slices,
                 const std::vector<monitor::RankReport>& ranks, const std::string& source);

}  // namespace bcs::cli
