// bcs stats, bcs monitor, bcs trace and bcs plot: what the Monitor service
// (or a job directory) says about jobs, slices and nodes.
#include <grpcpp/grpcpp.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "bcs/service.h"
#include "commands.h"
#include "jobdir.h"
#include "manager_client.h"

namespace bcs::cli {
namespace {

// Which slices bcs stats asks for: the last --last, or --from..--to (the
// same fields in SlicesRequest and NodeSlicesRequest).
template <class Request>
void set_window(const StatsOptions& o, Request* req) {
  req->set_last(o.last);
  if (o.from || o.to) {
    req->set_range(true);
    req->set_first_slice(o.from.value_or(0));
    req->set_last_slice(o.to.value_or(UINT64_MAX));
  }
}

// bcs stats JOB, first: what gang scheduling gave the job (from List),
// when it shared node managers with others; nothing for a job that never
// switched or that the manager no longer lists.
void show_job_share(const StatsOptions& o, uint64_t job) {
  auto conn = connect_manager(o.manager, o.token_file);
  if (!conn) return;
  auto stub = pb::Jobs::NewStub(conn->channel);
  grpc::ClientContext ctx;
  conn->prepare(ctx, kRpcDeadline);
  pb::ListReply rep;
  if (!stub->List(&ctx, pb::ListRequest{}, &rep).ok()) return;
  for (const auto& j : rep.jobs()) {
    if (j.job_id() != job || !j.switches()) continue;
    std::printf("job %llu: %s, row %u of the gang matrix, %llu quanta, share %.2f (%.3f s suspended)",
                static_cast<unsigned long long>(job), j.state().c_str(), j.row(),
                static_cast<unsigned long long>(j.quanta()), j.cpu_share(),
                static_cast<double>(j.suspended_ns()) / 1e9);
    if (j.switches())
      std::printf(", %llu switches: p50 %.1f us, p99 %.1f us",
                  static_cast<unsigned long long>(j.switches()),
                  static_cast<double>(j.switch_p50_ns()) / 1e3,
                  static_cast<double>(j.switch_p99_ns()) / 1e3);
    std::printf("\n");
  }
}

// bcs stats JOB: the MMDS summaries the manager kept for the job.
int show_job_stats(const StatsOptions& o, uint64_t job) {
  show_job_share(o, job);
  std::vector<monitor::RankReport> ranks;
  if (int rc = fetch_job_reports(o.manager, o.token_file, job, false, &ranks)) return rc;
  if (ranks.empty()) {
    say("job " + std::to_string(job) + ": no MMDS summaries (was it run with BCS_MDS=summary or all?)");
    return 1;
  }
  return show_mmds(o, &ranks);
}

// bcs stats --node NAME: one node's local series.
int show_node_stats(const StatsOptions& o) {
  pb::NodeSlicesReply rep;
  int rc = monitor_call(o.manager, o.token_file, [&](pb::Monitor::Stub& stub, grpc::ClientContext& ctx) {
    pb::NodeSlicesRequest req;
    req.set_node(o.node);
    set_window(o, &req);
    return stub.NodeSlices(&ctx, req, &rep);
  });
  if (rc) return rc;
  auto us = [](uint64_t ns) { return static_cast<double>(ns) / 1e3; };
  std::printf("node %s\n%10s %9s %9s %9s %9s %9s %11s %7s %7s %12s %12s %12s %5s %7s\n",
              rep.node().c_str(), "slice", "ltdem_us", "ltmsm_us", "ltp2p_us", "ltbbm_us", "ltrm_us",
              "descriptors", "matches", "chunks", "bytes", "by_sender", "by_2nd_thread", "colls",
              "blocked");
  for (const auto& s : rep.slices()) {
    if (s.phase_ns_size() != 5) continue;
    std::printf("%10llu %9.1f %9.1f %9.1f %9.1f %9.1f %11u %7u %7u %12llu %12llu %12llu %5u %4u/%-2u\n",
                static_cast<unsigned long long>(s.slice()), us(s.phase_ns(0)), us(s.phase_ns(1)),
                us(s.phase_ns(2)), us(s.phase_ns(3)), us(s.phase_ns(4)), s.descriptors(), s.matches(),
                s.chunks(), static_cast<unsigned long long>(s.bytes()),
                static_cast<unsigned long long>(s.sender_bytes()),
                static_cast<unsigned long long>(s.second_thread_bytes()), s.collectives(), s.blocked(),
                s.nlocal());
  }
  return 0;
}

// bcs trace JOB / bcs plot JOB: the job's slices from the manager's window
// (every slice carries its job), and for a trace its ranks' calls and
// messages and its nodes' microphases over those slices.
int export_job(const ExportOptions& o, uint64_t job) {
  // Asked for a plot too: the manager's answer says whether the job is the
  // caller's. Its refusal (another user's job, a job it does not know) ends
  // the command with the reason and status 1, never with a file of another
  // user's slices (issue 42). A job run without BCS_MDS has no reports, and
  // a trace of its slices still.
  std::vector<monitor::RankReport> ranks;
  if (int rc = fetch_job_reports(o.manager, o.token_file, job, !o.plot, &ranks)) return rc;
  if (o.plot) ranks.clear();
  std::vector<std::string> hosts;
  for (const auto& r : ranks)
    if (std::find(hosts.begin(), hosts.end(), r.host) == hosts.end()) hosts.push_back(r.host);
  std::sort(hosts.begin(), hosts.end());
  std::vector<monitor::SliceRecord> slices;
  monitor::NodeSeriesList nodes;
  fetch_job_series(o.manager, o.token_file, job, hosts, &slices, &nodes);
  if (slices.empty()) {
    say("job " + std::to_string(job) + ": no slices in the manager's window (the last " +
        std::to_string(kJobDirSlices) + ")");
    return 1;
  }
  return export_write(o, slices, ranks, "job " + std::to_string(job), nodes);
}

}  // namespace

int export_any(const ExportOptions& o) {
  if (!o.dir.empty() && o.dir.find_first_not_of("0123456789") == std::string::npos && o.dir.size() < 20)
    return export_job(o, std::stoull(o.dir));
  return export_slices(o);
}

int show_stats(const StatsOptions& o) {
  if (!o.node.empty()) return show_node_stats(o);
  if (!o.target.empty()) {
    if (o.target.find_first_not_of("0123456789") == std::string::npos && o.target.size() < 20)
      return show_job_stats(o, std::stoull(o.target));
    return show_mmds(o);
  }
  pb::SlicesReply rep;
  int rc = monitor_call(o.manager, o.token_file, [&](pb::Monitor::Stub& stub, grpc::ClientContext& ctx) {
    pb::SlicesRequest req;
    set_window(o, &req);
    return stub.Slices(&ctx, req, &rep);
  });
  if (rc) return rc;
  auto us = [](uint64_t ns) { return static_cast<double>(ns) / 1e3; };
  // start: "period" (the strobe's clock), "early" (every rank was blocked),
  // "lease" (early, run by a one-node job's node on its own), "ahead" (its
  // DEM ran on the nodes as the slice before ended) or "+N" (a rank posted
  // after N periods with nothing to do: parked).
  // job: several jobs run at once, their slices interleave (each numbers
  // its own). Last, so that the columns before it keep their places; then
  // sw_us: gang scheduling's switches of the job since its slice before
  // (suspended, resumed) and their cost, "-" for none.
  std::printf("%10s %11s %6s %9s %9s %9s %9s %9s %11s %7s %12s %5s %8s %6s %9s\n", "slice",
              "period_us", "start", "dem_us", "msm_us", "p2p_us", "bbm_us", "rm_us", "descriptors",
              "chunks", "bytes", "colls", "late_us", "job", "sw_us");
  uint64_t early = 0, skipped = 0, leased = 0, held = 0, bells = 0, ahead = 0, switches = 0,
           switch_ns = 0;
  for (const auto& s : rep.slices()) {
    const std::string start = s.skipped()  ? "+" + std::to_string(s.skipped())
                              : s.leased() ? "lease"
                              : s.dem_ahead() ? "ahead"
                              : s.early()  ? "early"
                                           : "period";
    early += s.early() && !s.skipped();
    leased += s.leased();
    held += s.held();
    bells += s.bells();
    ahead += s.dem_ahead();
    skipped += s.skipped();
    switches += s.switches();
    switch_ns += s.switch_ns();
    char sw[32] = "-";
    if (s.switches()) std::snprintf(sw, sizeof sw, "%u:%.1f", s.switches(), us(s.switch_ns()));
    std::printf("%10llu %11.1f %6s %9.1f %9.1f %9.1f %9.1f %9.1f %11u %7u %12llu %5u %8.1f %6llu %9s\n",
                static_cast<unsigned long long>(s.slice()), us(s.period_ns()), start.c_str(),
                us(s.dem_ns()), us(s.msm_ns()), us(s.p2p_ns()), us(s.bbm_ns()), us(s.rm_ns()),
                s.descriptors(), s.chunks(), static_cast<unsigned long long>(s.bytes() + s.coll_bytes()),
                s.collectives(), us(s.late_ns()), static_cast<unsigned long long>(s.job_id()), sw);
  }
  if (switches)
    std::printf("(gang scheduling: %llu switches before these slices, %.1f us in all)\n",
                static_cast<unsigned long long>(switches), us(switch_ns));
  std::printf(
      "(%d of %llu slices; %llu started early; %llu ran on a node's lease, %llu with their DEM run "
      "ahead; %llu periods skipped (parked or on a lease); %llu sends held back by "
      "--max-unexpected; %llu doorbells)\n",
      rep.slices_size(), static_cast<unsigned long long>(rep.total_slices()),
      static_cast<unsigned long long>(early), static_cast<unsigned long long>(leased),
      static_cast<unsigned long long>(ahead),
      static_cast<unsigned long long>(skipped), static_cast<unsigned long long>(held),
      static_cast<unsigned long long>(bells));
  // The figures an operator asks first: does the clock keep its period?
  // (Over the slices the clock started: early ones are not its doing.) Per
  // job: each has its own slice length and is paced from its own previous
  // slice, and one distribution of several would describe none of them.
  std::map<uint64_t, std::pair<std::vector<uint64_t>, std::vector<uint64_t>>> by_job;
  for (const auto& s : rep.slices())
    if (s.period_ns() && !s.early()) {
      auto& [periods, late] = by_job[s.job_id()];
      periods.push_back(s.period_ns());
      late.push_back(s.late_ns());
    }
  auto pct = [](std::vector<uint64_t> v, double q) {
    std::sort(v.begin(), v.end());
    return static_cast<double>(v[static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5)]) / 1e3;
  };
  for (const auto& [job, pl] : by_job) {
    const auto& [periods, late] = pl;
    const std::string who = by_job.size() > 1 ? " of job " + std::to_string(job) : std::string();
    std::printf("period%s: p50 %.1f us, p99 %.1f us, max %.1f us; strobe lateness p99 %.1f us\n",
                who.c_str(), pct(periods, 0.5), pct(periods, 0.99), pct(periods, 1.0), pct(late, 0.99));
  }
  return 0;
}

int follow_slices(const MonitorOptions& o) {
  SignalBlock sig;  // Ctrl-C ends the stream cleanly (the call is cancelled)
  auto conn = connect_manager(o.manager, o.token_file);
  if (!conn) return 1;
  auto stub = pb::Monitor::NewStub(conn->channel);
  grpc::ClientContext ctx;
  conn->prepare(ctx, std::chrono::hours(24 * 365));
  std::atomic<bool> interrupted{false};
  std::thread watcher([&] {
    pollfd p{sig.fd(), POLLIN, 0};
    while (!interrupted.load()) {
      if (::poll(&p, 1, 200) > 0) {
        interrupted = true;
        ctx.TryCancel();
      }
    }
  });
  pb::FollowRequest freq;
  freq.set_job_id(o.job);
  auto reader = stub->Follow(&ctx, freq);
  pb::FollowEvent ev;
  uint64_t shown = 0;
  auto us = [](uint64_t ns) { return static_cast<double>(ns) / 1e3; };
  // On a terminal the table redraws in place, newest slice at the bottom,
  // as top does; into a pipe or file it is plain rows, one header.
  const bool tty = ::isatty(1);
  winsize ws{};
  const size_t rows = tty && ::ioctl(1, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 6 ? ws.ws_row - 4 : 20;
  std::deque<std::string> screen;
  uint64_t missed = 0;
  char header[160], line[160];
  std::snprintf(header, sizeof header, "%10s %11s %9s %9s %9s %9s %9s %11s %7s %12s %5s %6s\n", "slice",
                "period_us", "dem_us", "msm_us", "p2p_us", "bbm_us", "rm_us", "descriptors", "chunks",
                "bytes", "colls", "job");
  if (!tty) std::fputs(header, stdout);
  while ((o.count == 0 || shown < o.count) && reader->Read(&ev)) {
    missed += ev.missed();
    if (ev.missed() && !tty)
      std::printf("(%llu slices not shown: this client fell behind the window)\n",
                  static_cast<unsigned long long>(ev.missed()));
    for (const auto& s : ev.slices()) {
      std::snprintf(line, sizeof line, "%10llu %11.1f %9.1f %9.1f %9.1f %9.1f %9.1f %11u %7u %12llu %5u %6llu\n",
                    static_cast<unsigned long long>(s.slice()), us(s.period_ns()), us(s.dem_ns()),
                    us(s.msm_ns()), us(s.p2p_ns()), us(s.bbm_ns()), us(s.rm_ns()), s.descriptors(),
                    s.chunks(), static_cast<unsigned long long>(s.bytes() + s.coll_bytes()),
                    s.collectives(), static_cast<unsigned long long>(s.job_id()));
      if (tty) {
        screen.emplace_back(line);
        if (screen.size() > rows) screen.pop_front();
      } else {
        std::fputs(line, stdout);
      }
      if (++shown == o.count) break;
    }
    if (tty) {
      std::printf("\x1b[H\x1b[2J%s slices%s: %llu shown%s\n", o.job ? ("job " + std::to_string(o.job)).c_str() : "all",
                  "", static_cast<unsigned long long>(shown),
                  missed ? (", " + std::to_string(missed) + " missed (fell behind)").c_str() : "");
      std::fputs(header, stdout);
      for (const auto& l : screen) std::fputs(l.c_str(), stdout);
    }
    std::fflush(stdout);
  }
  // Stopped by --count: cancel the stream (else it ended by itself: the
  // job ended, the manager stopped, or the call failed).
  const bool enough = o.count && shown >= o.count;
  if (enough) ctx.TryCancel();
  grpc::Status st = reader->Finish();
  const bool was_interrupted = interrupted.exchange(true);
  watcher.join();
  if (enough || st.ok()) return 0;
  if (was_interrupted && st.error_code() == grpc::StatusCode::CANCELLED) return 0;
  say("machine manager at " + o.manager + ": " + describe(st));
  return 1;
}

}  // namespace bcs::cli
