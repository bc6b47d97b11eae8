// MMDS statistics, configuration, JSON form and the Table 5.3 summary
// (include/bcs/mmds.h).
#include "bcs/mmds.h"

#include "bcs/segment.h"

#include <dirent.h>

#include <algorithm>
#include <cerrno>
#include <cctype>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

namespace bcs::monitor {

using nlohmann::json;

// ------------------------------------------------------------------ histogram

namespace {
uint32_t log2_of(uint32_t res) { return static_cast<uint32_t>(__builtin_ctz(res)); }
}  // namespace

bool LogHistogram::valid_res(uint32_t res) {
  return res >= 1 && res <= kMaxRes && (res & (res - 1)) == 0;
}

LogHistogram::LogHistogram(uint32_t res) : res_(valid_res(res) ? res : 4) {}

uint32_t LogHistogram::bin_of(uint64_t v, uint32_t res) {
  if (v == 0) return 0;
  const uint32_t k = 63u - static_cast<uint32_t>(__builtin_clzll(v));
  const uint32_t lr = log2_of(res);
  const uint64_t j = k >= lr ? (v >> (k - lr)) & (res - 1) : (v << (lr - k)) & (res - 1);
  return 1 + k * res + static_cast<uint32_t>(j);
}

uint64_t LogHistogram::lower_bound(uint32_t bin, uint32_t res) {
  if (bin == 0) return 0;
  const uint32_t b = bin - 1, k = b / res, j = b % res, lr = log2_of(res);
  if (k >= lr) return static_cast<uint64_t>(res + j) << (k - lr);
  return ((static_cast<uint64_t>(res + j) << k) + res - 1) / res;
}

void LogHistogram::add(uint64_t v, uint64_t n) {
  const uint32_t b = bin_of(v, res_);
  if (b >= bins_.size()) bins_.resize(b + 1, 0);
  bins_[b] += n;
  count_ += n;
}

void LogHistogram::merge(const LogHistogram& o) {
  if (o.res_ != res_) throw std::runtime_error("histograms of different resolutions");
  if (o.bins_.size() > bins_.size()) bins_.resize(o.bins_.size(), 0);
  for (size_t i = 0; i < o.bins_.size(); ++i) bins_[i] += o.bins_[i];
  count_ += o.count_;
}

void LogHistogram::set_bins(std::vector<uint64_t> bins) {
  bins_ = std::move(bins);
  count_ = 0;
  for (uint64_t b : bins_) count_ += b;
}

void PrimitiveStats::merge(const PrimitiveStats& o) {
  if (o.count == 0) return;
  if (count == 0 || o.min_ns < min_ns) min_ns = o.min_ns;
  max_ns = std::max(max_ns, o.max_ns);
  count += o.count;
  total_ns += o.total_ns;
  bytes += o.bytes;
}

// --------------------------------------------------------------- configuration

bool MmdsConfig::rank_selected(int rank) const {
  if (ranks.empty()) return true;
  for (const auto& [lo, hi] : ranks)
    if (rank >= lo && rank <= hi) return true;
  return false;
}

bool MmdsConfig::call_histogram(std::string_view name) const {
  if (!histograms) return false;
  if (calls.empty()) return true;
  return std::find(calls.begin(), calls.end(), name) != calls.end();
}

namespace {

std::vector<std::string> split(std::string_view s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    const size_t p = s.find(sep, start);
    out.emplace_back(s.substr(start, p == std::string_view::npos ? std::string_view::npos : p - start));
    if (p == std::string_view::npos) break;
    start = p + 1;
  }
  return out;
}

bool parse_int(const std::string& s, long lo, long hi, long* out) {
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(s.c_str(), &end, 10);
  if (errno || *end || v < lo || v > hi) return false;
  *out = v;
  return true;
}

}  // namespace

std::string mmds_parse_config(const char* mds, const char* ranks, const char* calls,
                              const char* res, MmdsConfig* out, const char* events) {
  MmdsConfig c;
  const std::string m = mds ? mds : "";
  if (m.empty() || m == "off" || m == "0") {
    *out = c;
    return "";
  }
  if (m == "summary") {
    c.enabled = true;
  } else if (m == "all") {
    c.enabled = c.histograms = true;
    c.max_events = 100000;
  } else {
    return "BCS_MDS='" + m + "': expected off, summary or all";
  }
  if (ranks && *ranks) {
    for (const auto& item : split(ranks, ',')) {
      const auto dash = item.find('-');
      long lo = 0, hi = 0;
      const bool ok = dash == std::string::npos
                          ? parse_int(item, 0, 1L << 30, &lo) && (hi = lo, true)
                          : parse_int(item.substr(0, dash), 0, 1L << 30, &lo) &&
                                parse_int(item.substr(dash + 1), 0, 1L << 30, &hi) && lo <= hi;
      if (!ok)
        return "BCS_MDS_RANKS='" + std::string(ranks) + "': '" + item +
               "' is not a rank or a range LO-HI";
      c.ranks.emplace_back(static_cast<int>(lo), static_cast<int>(hi));
    }
  }
  if (calls && *calls) {
    for (const auto& item : split(calls, ',')) {
      if (item.rfind("MPI_", 0) != 0 || item.size() < 5)
        return "BCS_MDS_CALLS='" + std::string(calls) + "': '" + item + "' is not an MPI call name";
      c.calls.push_back(item);
    }
  }
  if (res && *res) {
    long r = 0;
    if (!parse_int(res, 1, LogHistogram::kMaxRes, &r) || !LogHistogram::valid_res(static_cast<uint32_t>(r)))
      return "BCS_MDS_RES='" + std::string(res) + "': expected 1, 2, 4, 8 or 16 bins per power of two";
    c.res = static_cast<uint32_t>(r);
  }
  if (events && *events) {
    long n = 0;
    if (!parse_int(events, 0, 100'000'000L, &n))
      return "BCS_MDS_EVENTS='" + std::string(events) + "': expected a count from 0 to 100000000";
    c.max_events = c.histograms ? static_cast<uint64_t>(n) : 0;
  }
  *out = c;
  return "";
}

// ------------------------------------------------------------- from the segment

namespace {

bool counter_ok(const MmdsCounter& c) {
  if (c.count == 0) return c.total_ns == 0 && c.bytes == 0;
  return c.min_ns <= c.max_ns && c.max_ns <= c.total_ns;
}

PrimitiveStats stats_of(const MmdsCounter& c) {
  PrimitiveStats s;
  s.count = c.count;
  s.total_ns = c.total_ns;
  s.min_ns = c.min_ns;
  s.max_ns = c.max_ns;
  s.bytes = c.bytes;
  return s;
}

}  // namespace

bool mmds_report_from_segment(const MmdsArea& area, const char* block, int rank, int size,
                              RankReport* out, std::string* why) {
  why->clear();
  const uint64_t len = area.report_len.load(std::memory_order_acquire);
  if (len == 0) return false;
  if (len > kMmdsReportMax) {
    *why = "MMDS report claims " + std::to_string(len) + " bytes (at most " +
           std::to_string(kMmdsReportMax) + ")";
    return false;
  }
  try {
    // A copy: the block is the rank's to scribble on.
    RankReport r = mmds_from_json(std::string(block, static_cast<size_t>(len)));
    if (r.rank != rank || r.size != size) {
      *why = "MMDS report is rank " + std::to_string(r.rank) + " of " + std::to_string(r.size);
      return false;
    }
    *out = std::move(r);
    return true;
  } catch (const std::exception& e) {
    *why = std::string("MMDS report: ") + e.what();
    return false;
  }
}

bool mmds_from_segment(const MmdsArea& area, RankReport* out, std::string* why) {
  why->clear();
  const uint32_t n = area.ncalls.load(std::memory_order_acquire);
  if (n == 0) return false;
  if (n > kMmdsMaxCalls) {
    *why = "MMDS area claims " + std::to_string(n) + " calls (at most " + std::to_string(kMmdsMaxCalls) + ")";
    return false;
  }
  RankReport r;
  for (uint32_t i = 0; i < n; ++i) {
    const char* name = area.names[i];
    const size_t len = strnlen(name, kMmdsNameLen);
    if (len == kMmdsNameLen || len < 5 || std::strncmp(name, "MPI_", 4) != 0) {
      *why = "MMDS call name " + std::to_string(i) + " is not an MPI call name";
      return false;
    }
    for (size_t k = 0; k < len; ++k)
      if (!std::isalnum(static_cast<unsigned char>(name[k])) && name[k] != '_') {
        *why = "MMDS call name " + std::to_string(i) + " holds a bad character";
        return false;
      }
    const MmdsCounter c = area.calls[i];
    if (!counter_ok(c)) {
      *why = std::string("MMDS counters of ") + name + " are inconsistent";
      return false;
    }
    if (c.count == 0) continue;
    CallReport cr;
    cr.name.assign(name, len);
    cr.blocking = area.flags[i] & kMmdsBlocking;
    cr.sized = area.flags[i] & kMmdsSized;
    cr.stats = stats_of(c);
    r.calls.push_back(std::move(cr));
  }
  if (!counter_ok(area.granularity) || !counter_ok(area.overhead)) {
    *why = "MMDS granularity/overhead counters are inconsistent";
    return false;
  }
  r.granularity = stats_of(area.granularity);
  r.overhead = stats_of(area.overhead);
  r.run_ns = area.run_ns;
  *out = std::move(r);
  return true;
}

// ------------------------------------------------------------------------ JSON

std::string mmds_rank_file(int rank) { return "mmds.rank" + std::to_string(rank) + ".json"; }

namespace {

json stats_json(const PrimitiveStats& s) {
  return json{{"count", s.count}, {"total_ns", s.total_ns}, {"min_ns", s.min_ns},
              {"max_ns", s.max_ns}, {"bytes", s.bytes}};
}

// Bins as [lower_bound, count] pairs of the non-empty bins: readable, and
// independent of how bins are numbered.
json hist_json(const LogHistogram& h) {
  json bins = json::array();
  for (uint32_t b = 0; b < h.bins().size(); ++b)
    if (h.bins()[b]) bins.push_back(json::array({LogHistogram::lower_bound(b, h.res()), h.bins()[b]}));
  return bins;
}

// Events as flat triples (call, start, duration): compact for 100000 of them.
json events_json(const RankReport& r) {
  json data = json::array();
  for (const auto& e : r.events) {
    data.push_back(e.call);
    data.push_back(e.start_ns);
    data.push_back(e.dur_ns);
  }
  return json{{"calls", r.event_calls}, {"data", std::move(data)}, {"dropped", r.events_dropped}};
}

// Message ends as flat quintuples (at, peer, send, seq, bytes).
json messages_json(const RankReport& r) {
  json data = json::array();
  for (const auto& m : r.messages) {
    data.push_back(m.at_ns);
    data.push_back(m.peer);
    data.push_back(m.send ? 1 : 0);
    data.push_back(m.seq);
    data.push_back(m.bytes);
  }
  return json{{"data", std::move(data)}, {"dropped", r.messages_dropped}};
}

json rank_json(const RankReport& r) {
  json calls = json::array();
  for (const auto& c : r.calls) {
    json j{{"name", c.name}, {"blocking", c.blocking}, {"sized", c.sized}, {"stats", stats_json(c.stats)}};
    if (c.has_histograms) {
      j["latency_ns"] = hist_json(c.latency);
      j["size_bytes"] = hist_json(c.size);
    }
    calls.push_back(std::move(j));
  }
  return json{{"format", "bcs-mmds-1"},
              {"rank", r.rank},
              {"size", r.size},
              {"host", r.host},
              {"run_ns", r.run_ns},
              {"resolution", r.res},
              {"calls", std::move(calls)},
              {"granularity", {{"stats", stats_json(r.granularity)}, {"hist_ns", hist_json(r.granularity_hist)}}},
              {"overhead", {{"stats", stats_json(r.overhead)}, {"hist_ns", hist_json(r.overhead_hist)}}},
              {"events", events_json(r)},
              {"messages", messages_json(r)}};
}

uint64_t u64(const json& j, const char* key) {
  const json& v = j.at(key);
  if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<int64_t>() >= 0))
    throw std::runtime_error(std::string("'") + key + "' is not a non-negative integer");
  return v.get<uint64_t>();
}

PrimitiveStats stats_from(const json& j) {
  PrimitiveStats s;
  s.count = u64(j, "count");
  s.total_ns = u64(j, "total_ns");
  s.min_ns = u64(j, "min_ns");
  s.max_ns = u64(j, "max_ns");
  s.bytes = u64(j, "bytes");
  if (s.count && s.min_ns > s.max_ns) throw std::runtime_error("min_ns > max_ns");
  return s;
}

LogHistogram hist_from(const json& j, uint32_t res) {
  LogHistogram h(res);
  if (!j.is_array()) throw std::runtime_error("a histogram is not an array");
  for (const auto& pair : j) {
    if (!pair.is_array() || pair.size() != 2 || !pair[0].is_number_unsigned() ||
        !pair[1].is_number_unsigned())
      throw std::runtime_error("a histogram bin is not [lower_bound, count]");
    h.add(pair[0].get<uint64_t>(), pair[1].get<uint64_t>());
  }
  return h;
}

}  // namespace

std::string mmds_to_json(const RankReport& r) { return rank_json(r).dump() + "\n"; }

RankReport mmds_from_json(std::string_view text) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw std::runtime_error(std::string("not JSON: ") + e.what());
  }
  try {
    if (!j.is_object() || j.value("format", "") != "bcs-mmds-1")
      throw std::runtime_error("not an MMDS rank report (format is not bcs-mmds-1)");
    RankReport r;
    r.full = true;
    // Checked as unsigned counts before narrowing: a rank's report (its
    // segment block) may hold any number here, and a float-to-int
    // conversion out of range is undefined.
    const uint64_t rank = u64(j, "rank"), size = u64(j, "size");
    if (size < 1 || size > (1u << 24) || rank >= size) throw std::runtime_error("bad rank/size");
    r.rank = static_cast<int>(rank);
    r.size = static_cast<int>(size);
    r.host = j.at("host").get<std::string>();
    r.run_ns = u64(j, "run_ns");
    r.res = static_cast<uint32_t>(u64(j, "resolution"));
    if (!LogHistogram::valid_res(r.res)) throw std::runtime_error("bad resolution");
    for (const auto& c : j.at("calls")) {
      CallReport cr{c.at("name").get<std::string>(), c.at("blocking").get<bool>(),
                    c.at("sized").get<bool>(), stats_from(c.at("stats")), false,
                    LogHistogram(r.res), LogHistogram(r.res)};
      if (c.contains("latency_ns")) {
        cr.has_histograms = true;
        cr.latency = hist_from(c.at("latency_ns"), r.res);
        cr.size = hist_from(c.at("size_bytes"), r.res);
      }
      r.calls.push_back(std::move(cr));
    }
    r.granularity = stats_from(j.at("granularity").at("stats"));
    r.overhead = stats_from(j.at("overhead").at("stats"));
    r.granularity_hist = hist_from(j.at("granularity").at("hist_ns"), r.res);
    r.overhead_hist = hist_from(j.at("overhead").at("hist_ns"), r.res);
    if (j.contains("events")) {
      const json& ev = j.at("events");
      r.event_calls = ev.at("calls").get<std::vector<std::string>>();
      r.events_dropped = u64(ev, "dropped");
      const json& d = ev.at("data");
      if (!d.is_array() || d.size() % 3) throw std::runtime_error("events are not triples");
      for (size_t i = 0; i < d.size(); i += 3) {
        if (!d[i].is_number_unsigned() || !d[i + 1].is_number_unsigned() || !d[i + 2].is_number_unsigned())
          throw std::runtime_error("an event is not three counts");
        if (d[i].get<uint64_t>() >= r.event_calls.size()) throw std::runtime_error("an event names no call");
        CallEvent e{d[i].get<uint32_t>(), d[i + 1].get<uint64_t>(), d[i + 2].get<uint64_t>()};
        r.events.push_back(e);
      }
    }
    if (j.contains("messages")) {
      const json& ms = j.at("messages");
      r.messages_dropped = u64(ms, "dropped");
      const json& d = ms.at("data");
      if (!d.is_array() || d.size() % 5) throw std::runtime_error("messages are not quintuples");
      for (size_t i = 0; i < d.size(); i += 5) {
        for (size_t k = 0; k < 5; ++k)
          if (!d[i + k].is_number_unsigned()) throw std::runtime_error("a message is not five counts");
        MsgEvent m;
        m.at_ns = d[i].get<uint64_t>();
        const uint64_t peer = d[i + 1].get<uint64_t>();
        if (peer >= static_cast<uint64_t>(r.size)) throw std::runtime_error("a message names no rank");
        m.peer = static_cast<int32_t>(peer);
        if (d[i + 2].get<uint64_t>() > 1) throw std::runtime_error("a message is neither send nor receive");
        m.send = d[i + 2].get<uint64_t>() == 1;
        m.seq = d[i + 3].get<uint64_t>();
        m.bytes = d[i + 4].get<uint64_t>();
        r.messages.push_back(m);
      }
    }
    return r;
  } catch (const json::exception& e) {
    throw std::runtime_error(std::string("malformed MMDS report: ") + e.what());
  }
}

std::vector<RankReport> mmds_read_dir(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) throw std::runtime_error(dir + ": " + std::strerror(errno));
  std::vector<std::string> files;
  while (const dirent* e = ::readdir(d)) {
    const std::string n = e->d_name;
    if (n.rfind("mmds.rank", 0) == 0 && n.size() > 14 && n.compare(n.size() - 5, 5, ".json") == 0)
      files.push_back(n);
  }
  ::closedir(d);
  if (files.empty())
    throw std::runtime_error(dir + ": no MMDS reports (mmds.rank*.json); was the job run with BCS_MDS=summary or all?");
  std::vector<RankReport> out;
  for (const auto& f : files) {
    const std::string path = dir + "/" + f;
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    if (!in) throw std::runtime_error(path + ": cannot read");
    try {
      out.push_back(mmds_from_json(ss.str()));
    } catch (const std::exception& e) {
      throw std::runtime_error(path + ": " + e.what());
    }
    if (f != mmds_rank_file(out.back().rank))
      throw std::runtime_error(path + ": holds rank " + std::to_string(out.back().rank));
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.rank < b.rank; });
  return out;
}

std::string mmds_job_json(const std::vector<RankReport>& ranks) {
  json all = json::array();
  for (const auto& r : ranks) {
    // Statistics and distributions; the events are bcs trace's.
    json j = rank_json(r);
    j.erase("events");
    j.erase("messages");
    all.push_back(std::move(j));
  }
  return json{{"ranks", std::move(all)}}.dump(1) + "\n";
}

// ------------------------------------------------------------------- Table 5.3

namespace {

void table_of(std::ostringstream& out, const std::vector<const RankReport*>& rs) {
  // Primitives in order of total time, as one reads a profile.
  std::map<std::string, PrimitiveStats> calls;
  std::map<std::string, bool> sized;
  PrimitiveStats gran, ovh;
  uint64_t run = 0;
  for (const auto* r : rs) {
    for (const auto& c : r->calls) {
      calls[c.name].merge(c.stats);
      sized[c.name] = c.sized;
    }
    gran.merge(r->granularity);
    ovh.merge(r->overhead);
    run += r->run_ns;
  }
  std::vector<std::pair<std::string, PrimitiveStats>> rows(calls.begin(), calls.end());
  std::stable_sort(rows.begin(), rows.end(),
                   [](const auto& a, const auto& b) { return a.second.total_ns > b.second.total_ns; });
  auto us = [](double ns) { return ns / 1e3; };
  char line[256];
  std::snprintf(line, sizeof line, "%-26s %12s %12s %14s %10s %12s %14s\n", "Primitive", "Min(us)",
                "Max(us)", "Total(us)", "Count", "Average(us)", "Bytes");
  out << line;
  auto row = [&](const std::string& name, const PrimitiveStats& s, bool bytes) {
    std::snprintf(line, sizeof line, "%-26s %12.3f %12.3f %14.3f %10" PRIu64 " %12.3f %14s\n",
                  name.c_str(), us(static_cast<double>(s.min_ns)), us(static_cast<double>(s.max_ns)),
                  us(static_cast<double>(s.total_ns)), s.count, us(s.avg_ns()),
                  bytes ? std::to_string(s.bytes).c_str() : "");
    std::string l = line;  // no trailing blanks where there are no bytes
    while (l.size() > 1 && l[l.size() - 2] == ' ') l.erase(l.size() - 2, 1);
    out << l;
  };
  for (const auto& [name, s] : rows) row(name, s, sized[name]);
  row("Comp Granularity", gran, false);
  row("Comm Overhead", ovh, false);
  const uint64_t sum = gran.total_ns + ovh.total_ns;
  std::snprintf(line, sizeof line,
                "run time %.3f us (MPI_Init to MPI_Finalize%s); granularity + overhead %.3f us "
                "(%+.4f%%)\n",
                us(static_cast<double>(run)), rs.size() > 1 ? ", summed over ranks" : "",
                us(static_cast<double>(sum)),
                run ? 100.0 * (static_cast<double>(sum) - static_cast<double>(run)) / static_cast<double>(run)
                    : 0.0);
  out << line;
}

}  // namespace

std::string mmds_table(const std::vector<RankReport>& ranks, bool per_rank) {
  std::ostringstream out;
  std::vector<const RankReport*> all;
  for (const auto& r : ranks) all.push_back(&r);
  out << "MMDS summary: " << ranks.size() << " rank" << (ranks.size() == 1 ? "" : "s")
      << (ranks.empty() || static_cast<int>(ranks.size()) == ranks.front().size
              ? ""
              : " of " + std::to_string(ranks.front().size))
      << "\n";
  table_of(out, all);
  if (per_rank)
    for (const auto& r : ranks) {
      out << "\nrank " << r.rank << " (" << r.host << ")\n";
      table_of(out, {&r});
    }
  return out.str();
}

}  // namespace bcs::monitor
