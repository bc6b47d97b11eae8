// The roles' state of every job a node manager holds, and which one the
// strobe receiver runs now.
//
// Gang scheduling (issue 43 step 2) puts jobs whose node sets overlap on
// one node manager, one of them active at a time, switched at slice
// boundaries where nothing is in flight. A switch must not lose what the
// job that stops leaves in its roles: unexpected messages in its buffer
// receiver, collectives in their rounds, transfers not yet done, the
// buffer sender's per-pair sequence numbers. So each held job keeps its
// own state, made at its first slice here and dropped only when the job is
// no longer held, and each strobe picks the state of the job it names.
// Strobe receiver thread only. A template so that the unit tests can hold
// roles over fake ranks (tests/unit/nm/held_states_test.cc).
#pragma once

#include <cstdint>
#include <map>
#include <memory>

#include "bcs/core.h"
#include "wire.h"

namespace bcs::nm {

template <class State>
class HeldStates {
 public:
  // A DEM strobe of `job`, which begins a slice: first `held(id, state)`
  // is asked of every state (a job no longer held loses its state here, at
  // a slice boundary), then the state of `job` becomes current, made by
  // `make()` if it has none and `job_held` says the node holds it. nullptr:
  // the node runs nothing of `job` (it ended here, or has no rank here),
  // and the strobe still gets a report.
  template <class Held, class Make>
  State* begin_slice(uint64_t job, bool job_held, Held&& held, Make&& make) {
    prune(held);
    auto it = states_.find(job);
    if (it == states_.end() && job_held) it = states_.emplace(job, make()).first;
    cur_ = it == states_.end() ? nullptr : it->second.get();
    return cur_;
  }
  // A later microstrobe of a slice: the state its DEM chose, if `job` is
  // that one's (a job released during its slice keeps its state to the
  // slice's end, so the microphase still drains and reports).
  State* within_slice(uint64_t job) {
    auto it = states_.find(job);
    cur_ = it == states_.end() ? nullptr : it->second.get();
    return cur_;
  }
  // Makes the state of `job` if it has none, leaving the current one.
  template <class Make>
  State* hold(uint64_t job, Make&& make) {
    auto it = states_.find(job);
    if (it == states_.end()) it = states_.emplace(job, make()).first;
    return it->second.get();
  }
  // Drops the state of every job `held(id, state)` says is no longer held.
  template <class Held>
  void prune(Held&& held) {
    for (auto it = states_.begin(); it != states_.end();) {
      if (held(it->first, *it->second)) {
        ++it;
        continue;
      }
      if (cur_ == it->second.get()) cur_ = nullptr;
      it = states_.erase(it);
    }
  }
  State* current() const { return cur_; }
  State* find(uint64_t job) const {
    auto it = states_.find(job);
    return it == states_.end() ? nullptr : it->second.get();
  }
  size_t size() const { return states_.size(); }
  template <class F>
  void for_each(F&& f) const {
    for (const auto& [id, s] : states_) f(id, *s);
  }

 private:
  std::map<uint64_t, std::unique_ptr<State>> states_;
  State* cur_ = nullptr;
};

// The job a remote read (kEvDmaGet) names: it is served by that job's
// ranks, whichever job the strobe receiver runs now (two jobs held, a read
// of the one that stopped may still come from a slow peer, and is refused
// by its own job's grants, not by another's). 0 when it cannot be decoded
// (DmaHelper::serve says why).
inline uint64_t dma_get_job(const core::Message& m) {
  try {
    return wire::decode_get(m.data).job;
  } catch (const std::exception&) {
    return 0;
  }
}

}  // namespace bcs::nm
