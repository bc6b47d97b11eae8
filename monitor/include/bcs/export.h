// Exports of the EMDS slice series (emds.h) for people and tools: CSV (the
// job directory's slices.csv), Chrome/Perfetto trace-event JSON (bcs trace)
// and an SVG line plot of one metric per slice, like the paper's Fig. 5.3
// (bcs plot). No network, no plotting library: the SVG is written here.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "bcs/emds.h"
#include "bcs/mmds.h"

namespace bcs::monitor {

// One header line, then one line per slice.
std::string slices_csv(const std::vector<SliceRecord>& slices);
// Throws std::runtime_error naming the line that is wrong.
std::vector<SliceRecord> slices_from_csv(std::string_view text);

// A node's local series (Table 5.2) as CSV: a job directory's node-NAME.csv
// (with LETTS and LTTS, derived: ignored when read back).
std::string local_slices_csv(const std::vector<LocalSliceRecord>& slices);
// Throws std::runtime_error naming the line that is wrong.
std::vector<LocalSliceRecord> local_slices_from_csv(std::string_view text);

// Metrics a plot can show: the paper's names (GETTS, GTDEM, GTMSM, GTTS,
// USRTS, USRDEM, USRMSM; and GTP2P, GTBBM, GTRM) or a CSV column (period_ns, dem_ns, bytes,
// descriptors, ...). Returns false for an unknown name.
bool slice_metric(const SliceRecord& s, std::string_view metric, double* value);
std::vector<std::string> slice_metric_names();

// Trace-event JSON: per slice, a complete event on the "strobe" track and
// its microphases (DEM, MSM, P2P, BBM, RM, in order) on the "microphases"
// track, with the slice's counters as args; counters (descriptors, bytes)
// as counter events.
// With `ranks` (MMDS reports recorded with BCS_MDS=all): one track per
// rank holding its MPI calls as they happened (a blocking call is the time
// the rank was blocked), and each point-to-point message as a flow from
// its send to its receive. Both clocks are CLOCK_MONOTONIC, so they line
// up when the ranks and the manager shared a host (an embedded run).
// With `nodes` (each node's local series): one track per node holding the
// microphases as that node ran them. A node's clock is taken as the
// manager's when the two agree within a second (one host), else it is
// shifted so that its earliest strobe reception meets the strobe.
using NodeSeriesList = std::vector<std::pair<std::string, std::vector<LocalSliceRecord>>>;
std::string slices_trace_json(const std::vector<SliceRecord>& slices,
                              const std::vector<RankReport>& ranks = {},
                              const NodeSeriesList& nodes = {});

// An SVG line plot of `metric` against the slice number. Throws
// std::runtime_error for an unknown metric or no slices.
std::string slices_svg(const std::vector<SliceRecord>& slices, std::string_view metric,
                       const std::string& title);

}  // namespace bcs::monitor
