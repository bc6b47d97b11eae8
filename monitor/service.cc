// The Monitor gRPC service (include/bcs/service.h).
#include "bcs/service.h"

#include <string>

namespace bcs::monitor {

void slice_to_proto(const SliceRecord& r, v1::SliceStats* s) {
  s->set_slice(r.slice);
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
  for (uint64_t u : r.retries) s->add_usr(u);
}

SliceRecord slice_from_proto(const v1::SliceStats& s) {
  SliceRecord r;
  r.slice = s.slice();
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
  return r;
}

namespace {
const grpc::Status kUnauthenticated{grpc::StatusCode::UNAUTHENTICATED, "bad or missing bcs-token"};
}  // namespace

grpc::Status MonitorService::Slices(grpc::ServerContext* ctx, const v1::SlicesRequest* req,
                                    v1::SlicesReply* rep) {
  if (!authorize_(ctx)) return kUnauthenticated;
  std::vector<SliceRecord> out;
  if (req->range()) {
    if (req->first_slice() > req->last_slice())
      return {grpc::StatusCode::INVALID_ARGUMENT,
              "slice range " + std::to_string(req->first_slice()) + ".." +
                  std::to_string(req->last_slice()) + " is empty"};
    std::pair<uint64_t, uint64_t> kept;
    if (!emds_.range(req->first_slice(), req->last_slice(), &out, &kept))
      return {grpc::StatusCode::OUT_OF_RANGE,
              "slices " + std::to_string(req->first_slice()) + ".." +
                  std::to_string(req->last_slice()) + " are not all kept: " +
                  (kept.second ? "the window holds slices " + std::to_string(kept.first) + ".." +
                                     std::to_string(kept.second) + " (the last " +
                                     std::to_string(emds_.window()) + " at most)"
                               : std::string("no slice has run yet"))};
  } else {
    out = emds_.last(req->last() ? req->last() : 100);
  }
  for (const auto& r : out) slice_to_proto(r, rep->add_slices());
  rep->set_total_slices(emds_.total());
  return grpc::Status::OK;
}

grpc::Status MonitorService::Follow(grpc::ServerContext* ctx, const v1::FollowRequest*,
                                    grpc::ServerWriter<v1::FollowEvent>* w) {
  if (!authorize_(ctx)) return kUnauthenticated;
  // From now on: what was recorded before the call is Slices' business.
  uint64_t seq = emds_.total();
  while (!stopping_.load(std::memory_order_relaxed) && !ctx->IsCancelled()) {
    std::vector<SliceRecord> batch;
    uint64_t missed = 0;
    // Woken by every record; the timeout only bounds how late a cancel or
    // a stop is seen.
    seq = emds_.wait_after(seq, std::chrono::milliseconds(200), &batch, &missed);
    if (batch.empty() && !missed) continue;
    v1::FollowEvent ev;
    ev.set_missed(missed);
    for (const auto& r : batch) slice_to_proto(r, ev.add_slices());
    if (!w->Write(ev)) break;  // the client went away
  }
  return grpc::Status::OK;
}

void MonitorService::stop() {
  stopping_.store(true);
  emds_.wake_all();
}

}  // namespace bcs::monitor
