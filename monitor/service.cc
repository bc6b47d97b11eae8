// The Monitor gRPC service (include/bcs/service.h).
#include "bcs/service.h"

#include <cctype>
#include <string>

namespace bcs::monitor {

void slice_to_proto(const SliceRecord& r, v1::SliceStats* s) {
  s->set_slice(r.slice);
  s->set_job_id(r.job);
  s->set_start_ns(r.start_ns);
  s->set_period_ns(r.period_ns);
  s->set_late_ns(r.late_ns);
  s->set_dem_ns(r.phase_ns[0]);
  s->set_msm_ns(r.phase_ns[1]);
  s->set_p2p_ns(r.phase_ns[2]);
  s->set_bbm_ns(r.phase_ns[3]);
  s->set_rm_ns(r.phase_ns[4]);
  s->set_descriptors(r.descriptors);
  s->set_chunks(r.chunks);
  s->set_bytes(r.bytes);
  s->set_coll_descriptors(r.coll_descriptors);
  s->set_collectives(r.collectives);
  s->set_coll_bytes(r.coll_bytes);
  s->set_skipped(r.skipped);
  s->set_early(r.early);
  s->set_leased(r.leased);
  s->set_held(r.held);
  s->set_bells(r.bells);
  s->set_dem_ahead(r.dem_ahead);
  s->set_switches(r.switches);
  s->set_switch_ns(r.switch_ns);
  for (uint64_t u : r.retries) s->add_usr(u);
}

SliceRecord slice_from_proto(const v1::SliceStats& s) {
  SliceRecord r;
  r.slice = s.slice();
  r.job = s.job_id();
  r.start_ns = s.start_ns();
  r.period_ns = s.period_ns();
  r.late_ns = s.late_ns();
  r.phase_ns[0] = s.dem_ns();
  r.phase_ns[1] = s.msm_ns();
  r.phase_ns[2] = s.p2p_ns();
  r.phase_ns[3] = s.bbm_ns();
  r.phase_ns[4] = s.rm_ns();
  for (int i = 0; i < 5 && i < s.usr_size(); ++i) r.retries[i] = s.usr(i);
  r.descriptors = s.descriptors();
  r.chunks = s.chunks();
  r.bytes = s.bytes();
  r.coll_descriptors = s.coll_descriptors();
  r.collectives = s.collectives();
  r.coll_bytes = s.coll_bytes();
  r.skipped = s.skipped();
  r.early = s.early();
  r.leased = s.leased();
  r.held = s.held();
  r.bells = s.bells();
  r.dem_ahead = s.dem_ahead();
  r.switches = s.switches();
  r.switch_ns = s.switch_ns();
  return r;
}

namespace {

void call_to_proto(const std::string& name, bool blocking, bool sized, const PrimitiveStats& s,
                   v1::MmdsCall* c) {
  c->set_name(name);
  c->set_blocking(blocking);
  c->set_sized(sized);
  c->set_count(s.count);
  c->set_total_ns(s.total_ns);
  c->set_min_ns(s.min_ns);
  c->set_max_ns(s.max_ns);
  c->set_bytes(s.bytes);
}

bool call_from_proto(const v1::MmdsCall& c, PrimitiveStats* s, std::string* why) {
  if (c.count() == 0 ? c.total_ns() != 0 || c.bytes() != 0
                     : c.min_ns() > c.max_ns() || c.max_ns() > c.total_ns()) {
    *why = "inconsistent counters for " + c.name().substr(0, 40);
    return false;
  }
  s->count = c.count();
  s->total_ns = c.total_ns();
  s->min_ns = c.min_ns();
  s->max_ns = c.max_ns();
  s->bytes = c.bytes();
  return true;
}

bool call_name_ok(const std::string& n) {
  if (n.size() < 5 || n.size() > 40 || n.compare(0, 4, "MPI_") != 0) return false;
  for (char ch : n)
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '_') return false;
  return true;
}

}  // namespace

void local_to_proto(const LocalSliceRecord& r, v1::LocalSlice* s) {
  s->set_slice(r.slice);
  s->set_job_id(r.job);
  for (uint64_t p : r.phase_ns) s->add_phase_ns(p);
  s->set_start_ns(r.start_ns);
  for (uint64_t p : r.phase_at_ns) s->add_phase_at_ns(p);
  s->set_descriptors(r.descriptors);
  s->set_coll_descriptors(r.coll_descriptors);
  s->set_matches(r.matches);
  s->set_chunks(r.chunks);
  s->set_bytes(r.bytes);
  s->set_sender_bytes(r.sender_bytes);
  s->set_second_thread_bytes(r.second_thread_bytes);
  s->set_collectives(r.collectives);
  s->set_blocked(r.blocked);
  s->set_nlocal(r.nlocal);
}

bool local_from_proto(const v1::LocalSlice& s, LocalSliceRecord* r, std::string* why) {
  if (s.phase_ns_size() != 5 || s.phase_at_ns_size() != 5) {
    *why = "a local slice without its five microphase times";
    return false;
  }
  if (s.coll_descriptors() > s.descriptors() || s.blocked() > s.nlocal() ||
      s.sender_bytes() > s.bytes() || s.second_thread_bytes() > s.bytes() - s.sender_bytes()) {
    *why = "a local slice whose counts contradict each other";
    return false;
  }
  LocalSliceRecord x;
  x.slice = s.slice();
  x.job = s.job_id();
  x.start_ns = s.start_ns();
  for (int i = 0; i < 5; ++i) {
    x.phase_ns[i] = s.phase_ns(i);
    x.phase_at_ns[i] = s.phase_at_ns(i);
  }
  x.descriptors = s.descriptors();
  x.coll_descriptors = s.coll_descriptors();
  x.matches = s.matches();
  x.chunks = s.chunks();
  x.bytes = s.bytes();
  x.sender_bytes = s.sender_bytes();
  x.second_thread_bytes = s.second_thread_bytes();
  x.collectives = s.collectives();
  x.blocked = s.blocked();
  x.nlocal = s.nlocal();
  *r = x;
  return true;
}

void mmds_to_proto(const RankReport& r, v1::MmdsSummary* m) {
  m->set_rank(static_cast<uint32_t>(r.rank));
  m->set_host(r.host);
  m->set_run_ns(r.run_ns);
  auto hist = [](const LogHistogram& h, v1::MmdsHistogram* p) {
    for (uint64_t b : h.bins()) p->add_bins(b);
  };
  for (const auto& c : r.calls) {
    v1::MmdsCall* pc = m->add_calls();
    call_to_proto(c.name, c.blocking, c.sized, c.stats, pc);
    if (r.full && c.has_histograms) {
      hist(c.latency, pc->mutable_latency());
      hist(c.size, pc->mutable_sizes());
    }
  }
  call_to_proto("granularity", false, false, r.granularity, m->mutable_granularity());
  call_to_proto("overhead", false, false, r.overhead, m->mutable_overhead());
  if (!r.full) return;
  m->set_has_report(true);
  m->set_size(static_cast<uint32_t>(r.size));
  m->set_resolution(r.res);
  hist(r.granularity_hist, m->mutable_granularity_hist());
  hist(r.overhead_hist, m->mutable_overhead_hist());
  for (const auto& n : r.event_calls) m->add_event_calls(n);
  for (const auto& e : r.events) {
    m->add_events(e.call);
    m->add_events(e.start_ns);
    m->add_events(e.dur_ns);
  }
  m->set_events_dropped(r.events_dropped);
  for (const auto& x : r.messages) {
    m->add_messages(x.at_ns);
    m->add_messages(static_cast<uint64_t>(x.peer));
    m->add_messages(x.send ? 1 : 0);
    m->add_messages(x.seq);
    m->add_messages(x.bytes);
  }
  m->set_messages_dropped(r.messages_dropped);
}

void mmds_strip_proto(v1::MmdsSummary* m, bool detail, bool events) {
  if (!detail) {
    for (auto& c : *m->mutable_calls()) {
      c.clear_latency();
      c.clear_sizes();
    }
    m->clear_granularity_hist();
    m->clear_overhead_hist();
  }
  if (!events) {
    m->clear_event_calls();
    m->clear_events();
    m->clear_messages();
  }
}

bool mmds_from_proto(const v1::MmdsSummary& m, RankReport* r, std::string* why) {
  if (m.calls_size() > 1024) {
    *why = "too many calls";
    return false;
  }
  RankReport out;
  out.rank = static_cast<int>(m.rank());
  out.host = m.host().substr(0, 256);
  out.run_ns = m.run_ns();
  out.full = m.has_report();
  if (out.full) {
    out.size = static_cast<int>(m.size());
    out.res = m.resolution();
    if (!LogHistogram::valid_res(out.res) || m.size() == 0 || m.rank() >= m.size() ||
        m.size() > (1u << 24)) {
      *why = "a report with a bad resolution or rank";
      return false;
    }
  }
  // A histogram has at most one bin past 64 powers of two per resolution step.
  auto hist = [&](const v1::MmdsHistogram& p, LogHistogram* h) {
    if (static_cast<uint64_t>(p.bins_size()) > 64ull * out.res + 1) {
      *why = "a histogram with too many bins";
      return false;
    }
    *h = LogHistogram(out.res);
    h->set_bins({p.bins().begin(), p.bins().end()});
    return true;
  };
  for (const auto& c : m.calls()) {
    if (!call_name_ok(c.name())) {
      *why = "a call name is not an MPI call name";
      return false;
    }
    CallReport cr;
    cr.name = c.name();
    cr.blocking = c.blocking();
    cr.sized = c.sized();
    if (!call_from_proto(c, &cr.stats, why)) return false;
    if (out.full && (c.has_latency() || c.has_sizes())) {
      cr.has_histograms = true;
      if (!hist(c.latency(), &cr.latency) || !hist(c.sizes(), &cr.size)) return false;
    }
    out.calls.push_back(std::move(cr));
  }
  if (!call_from_proto(m.granularity(), &out.granularity, why) ||
      !call_from_proto(m.overhead(), &out.overhead, why))
    return false;
  if (!out.full) {
    *r = std::move(out);
    return true;
  }
  if (!hist(m.granularity_hist(), &out.granularity_hist) || !hist(m.overhead_hist(), &out.overhead_hist))
    return false;
  if (m.event_calls_size() > 1024 || m.events_size() % 3 || m.messages_size() % 5) {
    *why = "events that are not whole";
    return false;
  }
  for (const auto& n : m.event_calls()) {
    if (!call_name_ok(n)) {
      *why = "an event call name is not an MPI call name";
      return false;
    }
    out.event_calls.push_back(n);
  }
  for (int i = 0; i < m.events_size(); i += 3) {
    if (m.events(i) >= out.event_calls.size()) {
      *why = "an event names no call";
      return false;
    }
    out.events.push_back({static_cast<uint32_t>(m.events(i)), m.events(i + 1), m.events(i + 2)});
  }
  out.events_dropped = m.events_dropped();
  for (int i = 0; i < m.messages_size(); i += 5) {
    if (m.messages(i + 1) >= static_cast<uint64_t>(out.size) || m.messages(i + 2) > 1) {
      *why = "a message names no rank";
      return false;
    }
    out.messages.push_back({m.messages(i), static_cast<int32_t>(m.messages(i + 1)), m.messages(i + 2) == 1,
                            m.messages(i + 3), m.messages(i + 4)});
  }
  out.messages_dropped = m.messages_dropped();
  *r = std::move(out);
  return true;
}

namespace {
const grpc::Status kUnauthenticated{grpc::StatusCode::UNAUTHENTICATED, "bad or missing bcs-token"};
}  // namespace

grpc::Status MonitorService::Slices(grpc::ServerContext* ctx, const v1::SlicesRequest* req,
                                    v1::SlicesReply* rep) {
  if (!authorize_(ctx)) return kUnauthenticated;
  // A job: its own window, which the other jobs' slices do not push out.
  const uint64_t job = req->job_id();
  const std::string whose = job ? " of job " + std::to_string(job) : std::string();
  if (job) {
    const JobState st = job_state_(ctx, job);
    if (st == JobState::unknown) return {grpc::StatusCode::NOT_FOUND, "no job " + std::to_string(job)};
    if (st == JobState::forbidden)
      return {grpc::StatusCode::PERMISSION_DENIED, "job " + std::to_string(job) + " is another user's"};
  }
  std::vector<SliceRecord> out;
  if (req->range()) {
    if (req->first_slice() > req->last_slice())
      return {grpc::StatusCode::INVALID_ARGUMENT,
              "slice range " + std::to_string(req->first_slice()) + ".." +
                  std::to_string(req->last_slice()) + " is empty"};
    std::pair<uint64_t, uint64_t> kept;
    const bool all = job ? emds_.range_of(job, req->first_slice(), req->last_slice(), &out, &kept)
                         : emds_.range(req->first_slice(), req->last_slice(), &out, &kept);
    if (!all)
      return {grpc::StatusCode::OUT_OF_RANGE,
              "slices " + std::to_string(req->first_slice()) + ".." +
                  std::to_string(req->last_slice()) + whose + " are not all kept: " +
                  (kept.second ? "the window holds slices " + std::to_string(kept.first) + ".." +
                                     std::to_string(kept.second) + " (the last " +
                                     std::to_string(emds_.window()) + " at most" +
                                     (job ? " of the job" : "") + ")"
                               : std::string(job ? "no slice of it is kept" : "no slice has run yet"))};
  } else {
    const size_t n = req->last() ? req->last() : 100;
    out = job ? emds_.last_of(job, n) : emds_.last(n);
  }
  for (const auto& r : out) slice_to_proto(r, rep->add_slices());
  rep->set_total_slices(job ? emds_.total_of(job) : emds_.total());
  return grpc::Status::OK;
}

grpc::Status MonitorService::Follow(grpc::ServerContext* ctx, const v1::FollowRequest* req,
                                    grpc::ServerWriter<v1::FollowEvent>* w) {
  if (!authorize_(ctx)) return kUnauthenticated;
  const uint64_t job = req->job_id();
  if (job) {
    const JobState st = job_state_(ctx, job);
    if (st == JobState::unknown) return {grpc::StatusCode::NOT_FOUND, "no job " + std::to_string(job)};
    if (st == JobState::forbidden)
      return {grpc::StatusCode::PERMISSION_DENIED, "job " + std::to_string(job) + " is another user's"};
  }
  // From now on: what was recorded before the call is Slices' business.
  uint64_t seq = emds_.total();
  bool ended = false;
  while (!stopping_.load(std::memory_order_relaxed) && !ctx->IsCancelled()) {
    std::vector<SliceRecord> batch;
    uint64_t missed = 0;
    // Woken by every record; the timeout only bounds how late a cancel, a
    // stop or the job's end is seen.
    seq = emds_.wait_after(seq, std::chrono::milliseconds(200), &batch, &missed);
    v1::FollowEvent ev;
    ev.set_missed(missed);
    for (const auto& r : batch)
      if (!job || r.job == job) slice_to_proto(r, ev.add_slices());
    if ((ev.slices_size() || missed) && !w->Write(ev)) break;  // the client went away
    // A job that has ended ends the stream, after one more round for a
    // slice recorded as it ended.
    if (ended) break;
    if (job && job_state_(ctx, job) == JobState::done) ended = true;
  }
  return grpc::Status::OK;
}

grpc::Status MonitorService::NodeSlices(grpc::ServerContext* ctx, const v1::NodeSlicesRequest* req,
                                        v1::NodeSlicesReply* rep) {
  if (!authorize_(ctx)) return kUnauthenticated;
  if (!nodes_.known(req->node()))
    return {grpc::StatusCode::NOT_FOUND, "no node '" + req->node().substr(0, 64) + "' has reported slices"};
  std::vector<LocalSliceRecord> out;
  if (req->range()) {
    std::pair<uint64_t, uint64_t> kept;
    if (req->first_slice() > req->last_slice())
      return {grpc::StatusCode::INVALID_ARGUMENT, "empty slice range"};
    if (!nodes_.range(req->node(), req->first_slice(), req->last_slice(), &out, &kept))
      return {grpc::StatusCode::OUT_OF_RANGE,
              "slices " + std::to_string(req->first_slice()) + ".." + std::to_string(req->last_slice()) +
                  " are not all kept for node " + req->node() + ": the window holds slices " +
                  std::to_string(kept.first) + ".." + std::to_string(kept.second)};
  } else {
    out = nodes_.last(req->node(), req->last() ? req->last() : 100);
  }
  rep->set_node(req->node());
  for (const auto& r : out) local_to_proto(r, rep->add_slices());
  return grpc::Status::OK;
}

void MonitorService::stop() {
  stopping_.store(true);
  emds_.wake_all();
}

}  // namespace bcs::monitor
