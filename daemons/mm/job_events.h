// Events of a job's stream (Jobs.Attach) built from the manager's state,
// and the names its node managers go by there and in `bcs jobs`.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "bcs.pb.h"
#include "manager.h"

namespace bcs::mm {

// The registered names of `ids` (fabric ids, as in Job::nodes), in that
// order; "node N" for one that has left. Under mu_ (nodes_ is the map).
inline std::vector<std::string> node_names(const std::map<uint32_t, std::shared_ptr<Node>>& nodes,
                                           const std::vector<uint32_t>& ids) {
  std::vector<std::string> out;
  out.reserve(ids.size());
  for (uint32_t id : ids) {
    auto it = nodes.find(id);
    out.push_back(it != nodes.end() && it->second ? it->second->name : "node " + std::to_string(id));
  }
  return out;
}

// JobEvent.started: the job went running at `start_ns` (now_ns(), the
// manager's CLOCK_MONOTONIC) on its node managers (j.nodes, named from
// `nodes`: nodes_, under mu_). Pushed once, when the job's state becomes
// running and before its first slice: `bcs run --timeout` counts from when
// it sees it, so time spent queued does not count.
inline v1::JobEvent started_event(const Job& j, const std::map<uint32_t, std::shared_ptr<Node>>& nodes,
                                  uint64_t start_ns) {
  v1::JobEvent ev;
  auto* s = ev.mutable_started();
  s->set_start_ns(start_ns);
  for (auto& n : node_names(nodes, j.nodes)) s->add_nodes(std::move(n));
  return ev;
}

}  // namespace bcs::mm
