#include "collective_helper.h"

#include <spdlog/spdlog.h>

#include <cstring>

namespace bcs::nm {

namespace {
// A bundle on the wire: which job, slice and microphase it belongs to, then
// the bytes of collectives.h. A bundle of another slice (a late answer of an
// aborted one) is dropped.
struct CollHeader {
  uint64_t job;
  uint64_t slice;
  uint8_t phase;
  uint8_t pad[7];
};
}  // namespace

wire::Report CollectiveHelper::run(const wire::Strobe& s, CollPhase phase, Collectives& coll,
                                   LocalRanks& ranks, Net& net) {
  wire::Report rep;
  for (auto& o : coll.begin(phase, s.coll_release, ranks)) {
    std::vector<uint8_t> msg(sizeof(CollHeader) + o.bytes.size());
    CollHeader h{ranks.job_id(), s.slice, static_cast<uint8_t>(s.phase), {}};
    std::memcpy(msg.data(), &h, sizeof h);
    if (!o.bytes.empty()) std::memcpy(msg.data() + sizeof h, o.bytes.data(), o.bytes.size());
    auto r = net.send(o.node, wire::kEvCollData, msg);
    if (r != core::Status::ok) {
      spdlog::error("{}: collective data to node {}: {}", wire::phase_name(s.phase), o.node,
                    core::status_str(r));
      rep.fail(fmt::format("collective data to node {} not sent: {}", o.node,
                           core::status_str(r)));
    }
  }
  bool lost = false;
  for (uint32_t got = 0; got < coll.expected();) {
    core::Message m;
    auto r = net.wait(wire::kEvCollData, &m, kPhaseDataTimeout);
    if (r != core::Status::ok) {
      spdlog::error("{}: waiting for collective data ({} of {} bundles): {}",
                    wire::phase_name(s.phase), got, coll.expected(), core::status_str(r));
      rep.fail(fmt::format("collective data: {} of {} bundles came: {}", got, coll.expected(),
                           core::status_str(r)));
      lost = true;
      break;
    }
    CollHeader h;
    if (m.data.size() < sizeof h) continue;
    std::memcpy(&h, m.data.data(), sizeof h);
    if (h.job != ranks.job_id() || h.slice != s.slice || h.phase != static_cast<uint8_t>(s.phase))
      continue;
    ++got;
    if (!coll.receive(m.from, std::span<const uint8_t>(m.data).subspan(sizeof h))) {
      spdlog::error("{}: malformed or unexpected collective data from node {}",
                    wire::phase_name(s.phase), m.from);
      rep.fail(fmt::format("malformed or unexpected collective data from node {}", m.from));
    }
  }
  auto done = coll.finish(ranks, lost);
  rep.collectives = done.collectives;
  rep.bytes = done.bytes;
  return rep;
}

}  // namespace bcs::nm
