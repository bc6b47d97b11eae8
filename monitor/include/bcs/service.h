// The Monitor gRPC service (proto/bcs.proto), hosted by the machine
// manager: the EMDS slice series as a window (Slices) and live (Follow).
// The manager only wires it: it owns the recorder and says who may call.
#pragma once

#include <atomic>
#include <functional>

#include "bcs.grpc.pb.h"
#include "bcs/emds.h"

namespace bcs::monitor {

void slice_to_proto(const SliceRecord& r, v1::SliceStats* s);
SliceRecord slice_from_proto(const v1::SliceStats& s);

class MonitorService final : public v1::Monitor::Service {
 public:
  using Authorize = std::function<bool(grpc::ServerContext*)>;
  MonitorService(const EmdsRecorder& emds, Authorize authorize)
      : emds_(emds), authorize_(std::move(authorize)) {}
  grpc::Status Slices(grpc::ServerContext* ctx, const v1::SlicesRequest* req,
                      v1::SlicesReply* rep) override;
  grpc::Status Follow(grpc::ServerContext* ctx, const v1::FollowRequest* req,
                      grpc::ServerWriter<v1::FollowEvent>* w) override;
  // Ends every Follow call (the manager is stopping).
  void stop();

 private:
  const EmdsRecorder& emds_;
  Authorize authorize_;
  std::atomic<bool> stopping_{false};
};

}  // namespace bcs::monitor
