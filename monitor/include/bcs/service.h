// The Monitor gRPC service (proto/bcs.proto), hosted by the machine
// manager: the EMDS slice series as a window (Slices) and live (Follow).
// The manager only wires it: it owns the recorder and says who may call.
#pragma once

#include <atomic>
#include <functional>

#include "bcs.grpc.pb.h"
#include "bcs/emds.h"
#include "bcs/mmds.h"

namespace bcs::monitor {

void slice_to_proto(const SliceRecord& r, v1::SliceStats* s);
SliceRecord slice_from_proto(const v1::SliceStats& s);
// MMDS summaries on the wire (node manager -> manager -> client). From the
// proto every name and counter is checked; false with `why` otherwise.
void local_to_proto(const LocalSliceRecord& r, v1::LocalSlice* s);
// False (with why) for a record that cannot be true.
bool local_from_proto(const v1::LocalSlice& s, LocalSliceRecord* r, std::string* why);
void mmds_to_proto(const RankReport& r, v1::MmdsSummary* m);
bool mmds_from_proto(const v1::MmdsSummary& m, RankReport* r, std::string* why);
// Drops what a JobStats caller did not ask for: the distributions
// (!detail), the events (!events).
void mmds_strip_proto(v1::MmdsSummary* m, bool detail, bool events);

class MonitorService final : public v1::Monitor::Service {
 public:
  using Authorize = std::function<bool(grpc::ServerContext*)>;
  // The manager answers per-job questions: it knows the jobs and who owns them.
  // The ranks the request names (all when none), stripped (mmds_strip_proto).
  using JobStatsFn =
      std::function<grpc::Status(grpc::ServerContext*, const v1::JobStatsRequest&, v1::JobStatsReply*)>;
  // Whether a job exists, may be watched by the caller, and has ended.
  enum class JobState { unknown, forbidden, live, done };
  using JobStateFn = std::function<JobState(grpc::ServerContext*, uint64_t)>;
  MonitorService(const EmdsRecorder& emds, const NodeSeries& nodes, Authorize authorize,
                 JobStatsFn job_stats, JobStateFn job_state)
      : emds_(emds),
        nodes_(nodes),
        authorize_(std::move(authorize)),
        job_stats_(std::move(job_stats)),
        job_state_(std::move(job_state)) {}
  grpc::Status NodeSlices(grpc::ServerContext* ctx, const v1::NodeSlicesRequest* req,
                          v1::NodeSlicesReply* rep) override;
  grpc::Status JobStats(grpc::ServerContext* ctx, const v1::JobStatsRequest* req,
                        v1::JobStatsReply* rep) override {
    return job_stats_(ctx, *req, rep);
  }
  grpc::Status Slices(grpc::ServerContext* ctx, const v1::SlicesRequest* req,
                      v1::SlicesReply* rep) override;
  grpc::Status Follow(grpc::ServerContext* ctx, const v1::FollowRequest* req,
                      grpc::ServerWriter<v1::FollowEvent>* w) override;
  // Ends every Follow call (the manager is stopping).
  void stop();

 private:
  const EmdsRecorder& emds_;
  const NodeSeries& nodes_;
  Authorize authorize_;
  JobStatsFn job_stats_;
  JobStateFn job_state_;
  std::atomic<bool> stopping_{false};
};

}  // namespace bcs::monitor
