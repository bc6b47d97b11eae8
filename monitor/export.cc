// Exports of the slice series (include/bcs/export.h).
#include "bcs/export.h"

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <map>
#include <sstream>
#include <tuple>
#include <stdexcept>

namespace bcs::monitor {

namespace {

// The CSV columns, in order, and how each maps onto a SliceRecord.
struct Column {
  const char* name;
  uint64_t (*get)(const SliceRecord&);
  void (*set)(SliceRecord&, uint64_t);
};

#define BCS_COL(name, expr)                                                      \
  Column {                                                                       \
    #name, [](const SliceRecord& s) -> uint64_t { return static_cast<uint64_t>(s.expr); }, \
        [](SliceRecord& s, uint64_t v) { s.expr = static_cast<decltype(s.expr)>(v); }       \
  }

const std::vector<Column>& columns() {
  static const std::vector<Column> cols = {
      BCS_COL(slice, slice),
      BCS_COL(job, job),
      BCS_COL(start_ns, start_ns),
      BCS_COL(period_ns, period_ns),
      BCS_COL(late_ns, late_ns),
      BCS_COL(dem_ns, phase_ns[0]),
      BCS_COL(msm_ns, phase_ns[1]),
      BCS_COL(p2p_ns, phase_ns[2]),
      BCS_COL(bbm_ns, phase_ns[3]),
      BCS_COL(rm_ns, phase_ns[4]),
      BCS_COL(usr_dem, retries[0]),
      BCS_COL(usr_msm, retries[1]),
      BCS_COL(usr_p2p, retries[2]),
      BCS_COL(usr_bbm, retries[3]),
      BCS_COL(usr_rm, retries[4]),
      // Table 5.1's GTTS (the slice's microphases, end to end: shorter than
      // the period when the slice had little to do) and USRTS (retries over
      // the whole slice). Derived: written, ignored when read back.
      Column{"gtts_ns",
             [](const SliceRecord& s) {
               uint64_t t = 0;
               for (uint64_t p : s.phase_ns) t += p;
               return t;
             },
             [](SliceRecord&, uint64_t) {}},
      Column{"usr_ts",
             [](const SliceRecord& s) {
               uint64_t t = 0;
               for (uint64_t r : s.retries) t += r;
               return t;
             },
             [](SliceRecord&, uint64_t) {}},
      BCS_COL(descriptors, descriptors),
      BCS_COL(chunks, chunks),
      BCS_COL(bytes, bytes),
      BCS_COL(coll_descriptors, coll_descriptors),
      BCS_COL(collectives, collectives),
      BCS_COL(coll_bytes, coll_bytes),
      BCS_COL(skipped, skipped),
      BCS_COL(held, held),
      BCS_COL(early, early),
      BCS_COL(leased, leased),
      BCS_COL(bells, bells),
      BCS_COL(dem_ahead, dem_ahead),
      BCS_COL(switches, switches),
      BCS_COL(switch_ns, switch_ns),
  };
  return cols;
}
#undef BCS_COL

// The paper's names (Table 5.1) for columns.
const std::vector<std::pair<const char*, const char*>>& aliases() {
  static const std::vector<std::pair<const char*, const char*>> a = {
      {"GETTS", "period_ns"}, {"GTDEM", "dem_ns"},   {"GTMSM", "msm_ns"},   {"GTP2P", "p2p_ns"},
      {"GTBBM", "bbm_ns"},    {"GTRM", "rm_ns"},     {"GTTS", "gtts_ns"},   {"USRTS", "usr_ts"},
      {"USRDEM", "usr_dem"},  {"USRMSM", "usr_msm"},
  };
  return a;
}

const Column* column(std::string_view name) {
  for (const auto& [alias, col] : aliases())
    if (name == alias) name = col;
  for (const auto& c : columns())
    if (name == c.name) return &c;
  return nullptr;
}

constexpr const char* kPhaseNames[5] = {"DEM", "MSM", "P2P", "BBM", "RM"};

}  // namespace

std::string slices_csv(const std::vector<SliceRecord>& slices) {
  std::string out;
  for (size_t i = 0; i < columns().size(); ++i) {
    if (i) out += ',';
    out += columns()[i].name;
  }
  out += '\n';
  for (const auto& s : slices) {
    for (size_t i = 0; i < columns().size(); ++i) {
      if (i) out += ',';
      out += std::to_string(columns()[i].get(s));
    }
    out += '\n';
  }
  return out;
}

namespace {

// Splits CSV text into lines of fields; `row` gets each line after the
// header with its number. The header's names go through `header`.
template <class Header, class Row>
void read_csv(std::string_view text, Header&& header, Row&& row) {
  size_t line_no = 0, pos = 0;
  bool have_header = false;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (line.empty()) continue;
    std::vector<std::string> fields;
    size_t f = 0;
    for (;;) {
      const size_t c = line.find(',', f);
      fields.emplace_back(line.substr(f, c == std::string_view::npos ? std::string_view::npos : c - f));
      if (c == std::string_view::npos) break;
      f = c + 1;
    }
    auto bad = [&](const std::string& why) {
      return std::runtime_error("line " + std::to_string(line_no) + ": " + why);
    };
    if (!have_header) {
      header(fields, bad);
      have_header = true;
      continue;
    }
    std::vector<uint64_t> values;
    for (const std::string& v : fields) {
      char* e = nullptr;
      errno = 0;
      const unsigned long long x = std::strtoull(v.c_str(), &e, 10);
      if (v.empty() || *e || errno || v[0] == '-') throw bad("'" + v + "' is not a count");
      values.push_back(x);
    }
    row(values, bad);
  }
  if (!have_header) throw std::runtime_error("no header line");
}

}  // namespace

std::vector<SliceRecord> slices_from_csv(std::string_view text) {
  std::vector<SliceRecord> out;
  std::vector<const Column*> order;
  read_csv(
      text,
      [&](const std::vector<std::string>& names, auto& bad) {
        // The header names the columns (any order, known names).
        for (const auto& name : names) {
          const Column* c = column(name);
          if (!c) throw bad("unknown column '" + name + "'");
          order.push_back(c);
        }
        if (order.front() != &columns().front()) throw bad("the first column must be 'slice'");
      },
      [&](const std::vector<uint64_t>& v, auto& bad) {
        if (v.size() != order.size())
          throw bad(std::to_string(v.size()) + " fields, the header has " + std::to_string(order.size()));
        SliceRecord s;
        for (size_t i = 0; i < v.size(); ++i) order[i]->set(s, v[i]);
        out.push_back(s);
      });
  return out;
}

namespace {

struct LocalColumn {
  const char* name;
  uint64_t (*get)(const LocalSliceRecord&);
  void (*set)(LocalSliceRecord&, uint64_t);
};

#define BCS_LCOL(name, expr)                                                                  \
  LocalColumn {                                                                               \
    #name, [](const LocalSliceRecord& s) -> uint64_t { return static_cast<uint64_t>(s.expr); }, \
        [](LocalSliceRecord& s, uint64_t v) { s.expr = static_cast<decltype(s.expr)>(v); }      \
  }

uint64_t ltts(const LocalSliceRecord& s) {
  uint64_t t = 0;
  for (uint64_t p : s.phase_ns) t += p;
  return t;
}

// Table 5.2's names where it has one (LTDEM ... LTTS); LETTS is computed
// from consecutive start_ns by local_slices_csv.
const std::vector<LocalColumn>& local_columns() {
  static const std::vector<LocalColumn> cols = {
      BCS_LCOL(slice, slice),
      BCS_LCOL(start_ns, start_ns),
      LocalColumn{"letts_ns", nullptr, [](LocalSliceRecord&, uint64_t) {}},
      LocalColumn{"ltts_ns", ltts, [](LocalSliceRecord&, uint64_t) {}},
      BCS_LCOL(ltdem_ns, phase_ns[0]),
      BCS_LCOL(ltmsm_ns, phase_ns[1]),
      BCS_LCOL(ltp2p_ns, phase_ns[2]),
      BCS_LCOL(ltbbm_ns, phase_ns[3]),
      BCS_LCOL(ltrm_ns, phase_ns[4]),
      BCS_LCOL(descriptors, descriptors),
      BCS_LCOL(coll_descriptors, coll_descriptors),
      BCS_LCOL(matches, matches),
      BCS_LCOL(chunks, chunks),
      BCS_LCOL(bytes, bytes),
      BCS_LCOL(collectives, collectives),
      BCS_LCOL(blocked, blocked),
      BCS_LCOL(nlocal, nlocal),
      BCS_LCOL(dem_at_ns, phase_at_ns[0]),
      BCS_LCOL(msm_at_ns, phase_at_ns[1]),
      BCS_LCOL(p2p_at_ns, phase_at_ns[2]),
      BCS_LCOL(bbm_at_ns, phase_at_ns[3]),
      BCS_LCOL(rm_at_ns, phase_at_ns[4]),
      BCS_LCOL(sender_bytes, sender_bytes),
      BCS_LCOL(second_thread_bytes, second_thread_bytes),
      BCS_LCOL(job, job),
  };
  return cols;
}
#undef BCS_LCOL

}  // namespace

std::string local_slices_csv(const std::vector<LocalSliceRecord>& slices) {
  std::string out;
  for (size_t i = 0; i < local_columns().size(); ++i) out += (i ? "," : "") + std::string(local_columns()[i].name);
  out += '\n';
  const LocalSliceRecord* prev = nullptr;
  for (const auto& s : slices) {
    // LETTS: since this node's previous slice (0 for the first kept).
    const uint64_t letts = prev && s.start_ns >= prev->start_ns ? s.start_ns - prev->start_ns : 0;
    prev = &s;
    for (size_t i = 0; i < local_columns().size(); ++i) {
      const auto& c = local_columns()[i];
      out += (i ? "," : "") + std::to_string(c.get ? c.get(s) : letts);
    }
    out += '\n';
  }
  return out;
}

std::vector<LocalSliceRecord> local_slices_from_csv(std::string_view text) {
  std::vector<LocalSliceRecord> out;
  std::vector<const LocalColumn*> order;
  read_csv(
      text,
      [&](const std::vector<std::string>& names, auto& bad) {
        for (const auto& name : names) {
          const LocalColumn* c = nullptr;
          for (const auto& k : local_columns())
            if (name == k.name) c = &k;
          if (!c) throw bad("unknown column '" + name + "'");
          order.push_back(c);
        }
        if (order.front() != &local_columns().front()) throw bad("the first column must be 'slice'");
      },
      [&](const std::vector<uint64_t>& v, auto& bad) {
        if (v.size() != order.size())
          throw bad(std::to_string(v.size()) + " fields, the header has " + std::to_string(order.size()));
        LocalSliceRecord s;
        for (size_t i = 0; i < v.size(); ++i) order[i]->set(s, v[i]);
        out.push_back(s);
      });
  return out;
}

bool slice_metric(const SliceRecord& s, std::string_view metric, double* value) {
  const Column* c = column(metric);
  if (!c) return false;
  *value = static_cast<double>(c->get(s));
  return true;
}

std::vector<std::string> slice_metric_names() {
  std::vector<std::string> n;
  for (const auto& [alias, col] : aliases()) n.push_back(alias);
  for (const auto& c : columns()) n.push_back(c.name);
  return n;
}

namespace {

// How much to subtract from a node's clock to put its records on the
// manager's (see export.h).
int64_t node_clock_offset(const std::vector<SliceRecord>& slices, const std::vector<LocalSliceRecord>& local) {
  std::map<uint64_t, uint64_t> start;
  for (const auto& s : slices) start[s.slice] = s.start_ns;
  bool any = false, same = true;
  int64_t best = 0;
  for (const auto& l : local) {
    auto it = start.find(l.slice);
    if (it == start.end() || !l.start_ns) continue;
    const int64_t d = static_cast<int64_t>(l.start_ns - it->second);
    if (d < -1'000'000'000 || d > 1'000'000'000) same = false;
    if (!any || d < best) best = d;
    any = true;
  }
  return any && !same ? best : 0;
}

}  // namespace

std::string slices_trace_json(const std::vector<SliceRecord>& slices,
                              const std::vector<RankReport>& ranks, const NodeSeriesList& nodes) {
  using nlohmann::json;
  json ev = json::array();
  uint64_t t0 = slices.empty() ? UINT64_MAX : slices.front().start_ns;
  for (const auto& r : ranks)
    if (!r.events.empty()) t0 = std::min(t0, r.events.front().start_ns);
  if (t0 == UINT64_MAX) t0 = 0;
  auto us = [](uint64_t ns) { return static_cast<double>(ns) / 1e3; };
  ev.push_back({{"ph", "M"}, {"pid", 1}, {"name", "process_name"}, {"args", {{"name", "bcs strobe"}}}});
  ev.push_back({{"ph", "M"}, {"pid", 1}, {"tid", 1}, {"name", "thread_name"}, {"args", {{"name", "slices"}}}});
  ev.push_back({{"ph", "M"}, {"pid", 1}, {"tid", 2}, {"name", "thread_name"}, {"args", {{"name", "microphases"}}}});
  for (const auto& s : slices) {
    if (s.start_ns < t0) continue;  // a clock that went back: not drawable
    const double ts = us(s.start_ns - t0);
    uint64_t total = 0;
    for (uint64_t p : s.phase_ns) total += p;
    ev.push_back({{"ph", "X"},
                  {"pid", 1},
                  {"tid", 1},
                  {"name", "slice " + std::to_string(s.slice)},
                  {"ts", ts},
                  {"dur", us(total)},
                  {"args",
                   {{"period_ns", s.period_ns}, {"descriptors", s.descriptors}, {"chunks", s.chunks},
                    {"bytes", s.bytes}, {"collectives", s.collectives}, {"skipped", s.skipped},
                    {"early", s.early}, {"leased", s.leased}}}});
    double at = ts;
    for (int p = 0; p < 5; ++p) {
      if (!s.phase_ns[p]) continue;  // skipped microphase
      ev.push_back({{"ph", "X"},
                    {"pid", 1},
                    {"tid", 2},
                    {"name", kPhaseNames[p]},
                    {"ts", at},
                    {"dur", us(s.phase_ns[p])},
                    {"args", {{"slice", s.slice}, {"retries", s.retries[p]}}}});
      at += us(s.phase_ns[p]);
    }
    ev.push_back({{"ph", "C"}, {"pid", 1}, {"name", "traffic"}, {"ts", ts},
                  {"args", {{"descriptors", s.descriptors}, {"collectives", s.collectives}}}});
  }
  if (!ranks.empty())
    ev.push_back({{"ph", "M"}, {"pid", 2}, {"name", "process_name"}, {"args", {{"name", "ranks"}}}});
  for (const auto& r : ranks) {
    const int tid = r.rank + 1;
    ev.push_back({{"ph", "M"},
                  {"pid", 2},
                  {"tid", tid},
                  {"name", "thread_name"},
                  {"args", {{"name", "rank " + std::to_string(r.rank) + " (" + r.host + ")"}}}});
    for (const auto& e : r.events) {
      if (e.start_ns < t0 || e.call >= r.event_calls.size()) continue;
      ev.push_back({{"ph", "X"},
                    {"pid", 2},
                    {"tid", tid},
                    {"name", r.event_calls[e.call]},
                    {"ts", us(e.start_ns - t0)},
                    {"dur", us(e.dur_ns)}});
    }
  }
  // Messages: the n-th send of A to B is the receive at B from A numbered n.
  std::map<std::tuple<int, int, uint64_t>, const MsgEvent*> received;
  for (const auto& r : ranks)
    for (const auto& m : r.messages)
      if (!m.send) received[{m.peer, r.rank, m.seq}] = &m;
  uint64_t flow = 0;
  for (const auto& r : ranks)
    for (const auto& m : r.messages) {
      if (!m.send) continue;
      auto it = received.find({r.rank, m.peer, m.seq});
      if (it == received.end() || m.at_ns < t0 || it->second->at_ns < m.at_ns) continue;
      ++flow;
      const json args = {{"bytes", m.bytes}, {"seq", m.seq}, {"from", r.rank}, {"to", m.peer}};
      ev.push_back({{"ph", "s"}, {"id", flow}, {"pid", 2}, {"tid", r.rank + 1}, {"cat", "message"},
                    {"name", "message"}, {"ts", us(m.at_ns - t0)}, {"args", args}});
      ev.push_back({{"ph", "f"}, {"bp", "e"}, {"id", flow}, {"pid", 2}, {"tid", m.peer + 1},
                    {"cat", "message"}, {"name", "message"}, {"ts", us(it->second->at_ns - t0)},
                    {"args", args}});
    }
  // Each node's microphases, as it ran them.
  if (!nodes.empty())
    ev.push_back({{"ph", "M"}, {"pid", 3}, {"name", "process_name"}, {"args", {{"name", "nodes"}}}});
  for (size_t n = 0; n < nodes.size(); ++n) {
    const auto& [name, local] = nodes[n];
    const int tid = static_cast<int>(n) + 1;
    ev.push_back({{"ph", "M"}, {"pid", 3}, {"tid", tid}, {"name", "thread_name"},
                  {"args", {{"name", "node " + name}}}});
    const int64_t off = node_clock_offset(slices, local);
    for (const auto& l : local) {
      // Modular: a node's clock may be anything (a file may say anything).
      const uint64_t start = l.start_ns - static_cast<uint64_t>(off);
      if (!l.start_ns || start < t0) continue;
      for (int p = 0; p < 5; ++p) {
        if (!l.phase_ns[p]) continue;
        ev.push_back({{"ph", "X"},
                      {"pid", 3},
                      {"tid", tid},
                      {"name", kPhaseNames[p]},
                      {"ts", us(start + l.phase_at_ns[p] - t0)},
                      {"dur", us(l.phase_ns[p])},
                      {"args", {{"slice", l.slice}, {"descriptors", l.descriptors}, {"matches", l.matches},
                                {"chunks", l.chunks}, {"bytes", l.bytes}, {"blocked", l.blocked}}}});
      }
    }
  }
  return json{{"traceEvents", std::move(ev)}, {"displayTimeUnit", "ns"}}.dump() + "\n";
}

std::string slices_svg(const std::vector<SliceRecord>& slices, std::string_view metric,
                       const std::string& title) {
  if (!column(metric)) throw std::runtime_error("unknown metric '" + std::string(metric) + "'");
  if (slices.empty()) throw std::runtime_error("no slices to plot");
  // Time metrics are shown in microseconds.
  const Column* col = column(metric);
  const std::string cname = col->name;
  const bool time = cname.size() > 3 && cname.compare(cname.size() - 3, 3, "_ns") == 0;
  std::vector<std::pair<double, double>> pts;
  for (const auto& s : slices) {
    double v = 0;
    slice_metric(s, metric, &v);
    pts.emplace_back(static_cast<double>(s.slice), time ? v / 1e3 : v);
  }
  double x0 = pts.front().first, x1 = pts.front().first, y1 = 0;
  for (const auto& [x, y] : pts) {
    x0 = std::min(x0, x);
    x1 = std::max(x1, x);
    y1 = std::max(y1, y);
  }
  if (x1 == x0) x1 = x0 + 1;
  // A "nice" top for the y axis: 1, 2 or 5 times a power of ten.
  double top = 1;
  if (y1 > 0) {
    const double p = std::pow(10.0, std::floor(std::log10(y1)));
    top = y1 <= p ? p : y1 <= 2 * p ? 2 * p : y1 <= 5 * p ? 5 * p : 10 * p;
  }
  const double W = 800, H = 420, L = 80, R = 20, T = 40, B = 50;
  auto X = [&](double x) { return L + (x - x0) / (x1 - x0) * (W - L - R); };
  auto Y = [&](double y) { return H - B - y / top * (H - T - B); };
  std::ostringstream o;
  char buf[160];
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W << "\" height=\"" << H
    << "\" viewBox=\"0 0 " << W << " " << H << "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  o << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  auto esc = [](const std::string& s) {
    std::string r;
    for (char c : s) r += c == '<' ? "&lt;" : c == '>' ? "&gt;" : c == '&' ? "&amp;" : std::string(1, c);
    return r;
  };
  o << "<text x=\"" << W / 2 << "\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">" << esc(title)
    << "</text>\n";
  // Axes, grid and ticks.
  for (int i = 0; i <= 5; ++i) {
    const double y = top * i / 5;
    std::snprintf(buf, sizeof buf, "%g", y);
    o << "<line x1=\"" << L << "\" x2=\"" << W - R << "\" y1=\"" << Y(y) << "\" y2=\"" << Y(y)
      << "\" stroke=\"#ddd\"/>\n<text x=\"" << L - 6 << "\" y=\"" << Y(y) + 4
      << "\" text-anchor=\"end\">" << buf << "</text>\n";
    const double x = x0 + (x1 - x0) * i / 5;
    std::snprintf(buf, sizeof buf, "%.0f", x);
    o << "<text x=\"" << X(x) << "\" y=\"" << H - B + 18 << "\" text-anchor=\"middle\">" << buf
      << "</text>\n";
  }
  o << "<line x1=\"" << L << "\" x2=\"" << L << "\" y1=\"" << T << "\" y2=\"" << H - B
    << "\" stroke=\"black\"/>\n<line x1=\"" << L << "\" x2=\"" << W - R << "\" y1=\"" << H - B
    << "\" y2=\"" << H - B << "\" stroke=\"black\"/>\n";
  o << "<text x=\"" << (L + W - R) / 2 << "\" y=\"" << H - 10
    << "\" text-anchor=\"middle\">slice</text>\n";
  o << "<text transform=\"translate(18," << (T + H - B) / 2
    << ") rotate(-90)\" text-anchor=\"middle\">" << esc(std::string(metric)) << (time ? " (us)" : "")
    << "</text>\n";
  o << "<polyline fill=\"none\" stroke=\"#1f5fa8\" stroke-width=\"1.2\" points=\"";
  for (const auto& [x, y] : pts) {
    std::snprintf(buf, sizeof buf, "%.1f,%.1f ", X(x), Y(y));
    o << buf;
  }
  o << "\"/>\n</svg>\n";
  return o.str();
}

}  // namespace bcs::monitor
