// How big a job may be, checked by the CLI up front (a clear message before
// anything starts), by the machine manager at Launch (any client) and by the
// node manager at StartJob (any manager).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace bcs {

// Ranks on one node manager. Each costs a process, three fds in the NM (two
// pipes and a pidfd) and a 512 KiB area of the node's segment (a
// 1024-descriptor ring and a 4096-entry request table): 1024 ranks are a
// 512 MiB segment and 3072 fds, far past what a node runs well, and far
// below what would exhaust it.
inline constexpr uint32_t kMaxRanksPerNode = 1024;
// Ranks in a job: every node manager keeps the job's rank -> node map and
// the manager one record per rank.
inline constexpr uint32_t kMaxRanks = 65536;
// Unmatched sends one receiver may have waiting at its node manager (each
// a descriptor of up to a few hundred bytes there) before senders are held
// back: 2^24 is gigabytes, the most a job may ask for.
inline constexpr uint64_t kMaxUnexpectedLimit = 1u << 24;

// Empty if `nranks` ranks fit on `nodes` node managers placed as the
// manager places them (cyclic, or blocks of `ppn` dealt round the nodes),
// else why not. nodes == 0: not known yet (only the total is checked).
inline std::string job_size_problem(uint64_t nranks, uint64_t nodes, uint64_t ppn) {
  if (nranks > kMaxRanks)
    return std::to_string(nranks) + " ranks: a job has at most " + std::to_string(kMaxRanks);
  if (nodes == 0) return {};
  nodes = std::min(nodes, nranks);
  uint64_t per_node = (nranks + nodes - 1) / nodes;
  if (ppn) {
    std::vector<uint64_t> on(nodes, 0);
    for (uint64_t r = 0; r < nranks; ++r) ++on[(r / ppn) % nodes];
    per_node = *std::max_element(on.begin(), on.end());
  }
  if (per_node > kMaxRanksPerNode) {
    const uint64_t need = (nranks + kMaxRanksPerNode - 1) / kMaxRanksPerNode;
    return std::to_string(nranks) + " ranks on " + std::to_string(nodes) +
           " node manager(s) puts " + std::to_string(per_node) +
           " on one; a node manager runs at most " + std::to_string(kMaxRanksPerNode) +
           " ranks (use at least " + std::to_string(need) + " node managers)";
  }
  return {};
}

}  // namespace bcs
