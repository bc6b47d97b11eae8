// The machine manager's side of the MDS (monitor/): the ranks' MMDS
// reports kept with their jobs (checked on arrival, bounded in bytes), and
// the per-job questions the Monitor service asks the manager (JobStats,
// whether a job may be followed and has ended).
#include "bcs/service.h"
#include "manager.h"

#include <spdlog/spdlog.h>

namespace bcs::mm {

// A rank's MMDS summary, as its node manager sent it: checked like any
// message from the network (a node manager may be buggy or hostile), kept
// with the job for Monitor.JobStats.
void Manager::keep_mmds_locked(Job& j, const Node& n, const v1::RankExit& e) {
  if (!e.has_mmds() || e.rank() >= j.rank_node.size() || j.rank_node[e.rank()] != n.id) return;
  monitor::RankReport r;
  std::string why;
  if (!monitor::mmds_from_proto(e.mmds(), &r, &why)) {
    spdlog::warn("job {}: node {} sent a bad MMDS summary for rank {}: {}", j.id, n.name, e.rank(), why);
    return;
  }
  v1::MmdsSummary m = e.mmds();
  m.set_rank(e.rank());
  m.set_host(n.name);
  if (m.has_report()) {
    const size_t bytes = m.ByteSizeLong();
    mmds_detail_.push_back({j.id, e.rank(), bytes});
    mmds_detail_bytes_ += bytes;
  }
  j.mmds[e.rank()] = std::move(m);
  while (mmds_detail_bytes_ > kMmdsDetailBudget && !mmds_detail_.empty()) {
    const MmdsDetail d = mmds_detail_.front();
    mmds_detail_.pop_front();
    mmds_detail_bytes_ -= d.bytes;
    if (auto it = jobs_.find(d.job); it != jobs_.end())
      if (auto r = it->second->mmds.find(d.rank); r != it->second->mmds.end()) {
        monitor::mmds_strip_proto(&r->second, false, false);
        r->second.set_has_report(false);  // counters only now
      }
  }
}

grpc::Status Manager::job_stats(grpc::ServerContext* ctx, const v1::JobStatsRequest& req,
                                v1::JobStatsReply* rep) {
  if (!authorized(ctx)) return unauthenticated();
  const Caller who = identify(ctx);
  const uint64_t job_id = req.job_id();
  std::lock_guard lk(mu_);
  auto it = jobs_.find(job_id);
  if (it == jobs_.end())
    return {grpc::StatusCode::NOT_FOUND, "no job " + std::to_string(job_id) +
                                             " (the manager keeps the last 1000 finished jobs)"};
  const Job& j = *it->second;
  if (std::string why = may_touch(who, j); !why.empty()) return {grpc::StatusCode::PERMISSION_DENIED, why};
  rep->set_job_id(job_id);
  rep->set_nranks(j.req.nranks());
  auto add = [&](const v1::MmdsSummary& m) {
    v1::MmdsSummary* out = rep->add_ranks();
    *out = m;
    monitor::mmds_strip_proto(out, req.detail(), req.events());
  };
  if (req.ranks().empty()) {
    for (const auto& [rank, m] : j.mmds) add(m);
  } else {
    for (uint32_t r : req.ranks())
      if (auto m = j.mmds.find(r); m != j.mmds.end()) add(m->second);
  }
  return grpc::Status::OK;
}

monitor::MonitorService::JobState Manager::job_state(grpc::ServerContext* ctx, uint64_t job_id) {
  using S = monitor::MonitorService::JobState;
  const Caller who = identify(ctx);
  std::lock_guard lk(mu_);
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return S::unknown;
  if (!may_touch(who, *it->second).empty()) return S::forbidden;
  return it->second->state == Job::State::done ? S::done : S::live;
}

}  // namespace bcs::mm
