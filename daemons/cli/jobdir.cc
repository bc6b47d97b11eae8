// Job directories of monitored runs (jobdir.h).
#include "jobdir.h"

#include <unistd.h>

#include <cstdio>
#include <cctype>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "bcs/export.h"
#include "bcs/mmds.h"
#include "manager_client.h"

namespace bcs::cli {
namespace fs = std::filesystem;

namespace {

// NAME's value in the ranks' environment: the last --env/-x setting, else
// bcs's own.
std::optional<std::string> rank_env(const RunOptions& o, const std::string& name) {
  std::optional<std::string> v;
  if (const char* e = std::getenv(name.c_str())) v = e;
  for (const auto& kv : o.env_set)
    if (kv.rfind(name + "=", 0) == 0) v = kv.substr(name.size() + 1);
  return v;
}

}  // namespace

std::string job_dir_prepare(const RunOptions& o, std::string* err) {
  // The ranks would only say "MMDS off" one by one: refuse bad settings here.
  const auto mds = rank_env(o, "BCS_MDS"), ranks = rank_env(o, "BCS_MDS_RANKS"),
             calls = rank_env(o, "BCS_MDS_CALLS"), res = rank_env(o, "BCS_MDS_RES");
  monitor::MmdsConfig cfg;
  const std::string bad =
      monitor::mmds_parse_config(mds ? mds->c_str() : nullptr, ranks ? ranks->c_str() : nullptr,
                                 calls ? calls->c_str() : nullptr, res ? res->c_str() : nullptr, &cfg);
  if (!bad.empty()) {
    *err = bad;
    return "";
  }
  if (o.job_dir.empty() && !cfg.enabled) return "";
  std::string dir = o.job_dir;
  if (dir.empty()) {
    // bcs-job-YYYYmmdd-HHMMSS-PID: sorts by time, unique per bcs process.
    char stamp[32];
    const std::time_t t = std::time(nullptr);
    std::tm tm{};
    ::localtime_r(&t, &tm);
    std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
    dir = std::string("bcs-job-") + stamp + "-" + std::to_string(::getpid());
  }
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir)) {
    *err = "--job-dir " + dir + ": " + (ec ? ec.message() : "not a directory");
    return "";
  }
  const fs::path abs = fs::absolute(dir, ec);
  // Reports of an earlier run would be summed with this one's.
  for (const auto& e : fs::directory_iterator(abs, ec)) {
    const std::string n = e.path().filename().string();
    if (n.rfind("mmds.rank", 0) == 0) {
      *err = "--job-dir " + abs.string() + " holds another run's reports (" + n +
             "); give an empty or new directory";
      return "";
    }
  }
  return abs.string();
}

void job_dir_finish(const std::string& dir) {
  bool any = false;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    any = any || e.path().filename().string().rfind("mmds.rank", 0) == 0;
  if (!any) {
    say("job directory " + dir + " (no MMDS reports: BCS_MDS is off)");
    return;
  }
  std::vector<monitor::RankReport> ranks;
  try {
    ranks = monitor::mmds_read_dir(dir);
  } catch (const std::exception& e) {
    say(std::string("MMDS: ") + e.what());
    return;
  }
  const std::string path = dir + "/summary.txt";
  std::ofstream out(path);
  out << monitor::mmds_table(ranks, true);
  out.close();
  if (!out) {
    say("MMDS: cannot write " + path);
    return;
  }
  say("MMDS statistics of " + std::to_string(ranks.size()) + " rank" +
      (ranks.size() == 1 ? "" : "s") + " in " + dir + " (summary.txt; bcs stats " + dir + ")");
}

int show_mmds(const StatsOptions& o, const std::vector<monitor::RankReport>* from_job) {
  std::vector<monitor::RankReport> ranks;
  if (from_job) {
    ranks = *from_job;
  } else {
    std::error_code ec;
    if (!fs::is_directory(o.target, ec)) {
      say(o.target + ": neither a job id nor a job directory");
      return 2;
    }
    try {
      ranks = monitor::mmds_read_dir(o.target);
    } catch (const std::exception& e) {
      say(e.what());
      return 1;
    }
  }
  const std::string text =
      o.json ? monitor::mmds_job_json(ranks) : monitor::mmds_table(ranks, o.per_rank);
  std::fwrite(text.data(), 1, text.size(), stdout);
  return 0;
}

namespace {

void save_text(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  out.close();
  if (!out) say("cannot write " + path);
}

}  // namespace

void job_dir_save_series(const std::string& dir, const std::string& addr, const std::string& token_file,
                         uint64_t job, const std::vector<std::string>& nodes) {
  // Each node's own series: its last slices reached the manager before its
  // last rank's exit (the node manager sends them first).
  std::vector<monitor::SliceRecord> slices;
  monitor::NodeSeriesList series;
  fetch_job_series(addr, token_file, job, nodes, &slices, &series);
  save_text(dir + "/slices.csv", monitor::slices_csv(slices));
  for (const auto& [node, mine] : series) {
    std::string safe = node;  // a host name, but it becomes a file name
    for (char& c : safe)
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != '_') c = '_';
    save_text(dir + "/node-" + safe + ".csv", monitor::local_slices_csv(mine));
  }
}

void job_dir_save_reports(const std::string& dir, const std::vector<monitor::RankReport>& ranks) {
  for (const auto& r : ranks) {
    const std::string path = dir + "/" + monitor::mmds_rank_file(r.rank);
    std::error_code ec;
    if (fs::exists(path, ec)) continue;  // the rank wrote its own
    save_text(path, monitor::mmds_to_json(r));
  }
}

std::vector<std::string> job_dir_nodes(const std::string& dir) {
  std::vector<std::string> nodes;
  try {
    for (const auto& r : monitor::mmds_read_dir(dir))
      if (std::find(nodes.begin(), nodes.end(), r.host) == nodes.end()) nodes.push_back(r.host);
  } catch (const std::exception&) {
    // No reports (BCS_MDS off): no nodes to name.
  }
  return nodes;
}

int export_write(const ExportOptions& o, const std::vector<monitor::SliceRecord>& slices,
                 const std::vector<monitor::RankReport>& ranks, const std::string& source,
                 const monitor::NodeSeriesList& nodes) {
  std::string text;
  try {
    text = o.plot ? monitor::slices_svg(slices, o.metric, o.metric + " per slice (" + source + ")")
                  : monitor::slices_trace_json(slices, ranks, nodes);
  } catch (const std::exception& e) {
    say(source + ": " + e.what());
    return 1;
  }
  std::ofstream out(o.output, std::ios::binary);
  out << text;
  out.close();
  if (!out) {
    say("cannot write " + o.output);
    return 1;
  }
  return 0;
}

int export_slices(const ExportOptions& o) {
  std::error_code ec;
  if (!fs::is_directory(o.dir, ec)) {
    say(o.dir + ": neither a job id nor a job directory");
    return 2;
  }
  const std::string path = o.dir + "/slices.csv";
  std::ifstream in(path, std::ios::binary);
  // A trace may be made of the ranks' reports alone; a plot needs slices.
  bool reports = false;
  for (const auto& e : fs::directory_iterator(o.dir, ec))
    reports = reports || e.path().filename().string().rfind("mmds.rank", 0) == 0;
  if (!in && (o.plot || !reports)) {
    say(path + ": cannot read (slices are saved by an embedded bcs run with --job-dir or BCS_MDS)");
    return 1;
  }
  std::vector<monitor::SliceRecord> slices;
  std::vector<monitor::RankReport> ranks;
  try {
    if (in) {
      std::stringstream ss;
      ss << in.rdbuf();
      slices = monitor::slices_from_csv(ss.str());
    }
  } catch (const std::exception& e) {
    say(path + ": " + e.what());
    return 1;
  }
  try {
    if (reports && !o.plot) ranks = monitor::mmds_read_dir(o.dir);
  } catch (const std::exception& e) {
    say(e.what());
    return 1;
  }
  // Each node's series (node-NAME.csv), sorted by name as a job's are.
  monitor::NodeSeriesList nodes;
  if (!o.plot) {
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(o.dir, ec)) {
      const std::string n = e.path().filename().string();
      if (n.rfind("node-", 0) == 0 && n.size() > 9 && n.compare(n.size() - 4, 4, ".csv") == 0)
        files.push_back(e.path());
    }
    std::sort(files.begin(), files.end());
    for (const auto& f : files) {
      std::ifstream nf(f, std::ios::binary);
      std::stringstream ss;
      ss << nf.rdbuf();
      const std::string n = f.filename().string();
      try {
        nodes.emplace_back(n.substr(5, n.size() - 9), monitor::local_slices_from_csv(ss.str()));
      } catch (const std::exception& e) {
        say(f.string() + ": " + e.what());
        return 1;
      }
    }
  }
  return export_write(o, slices, ranks, o.dir, nodes);
}

}  // namespace bcs::cli
