// The environment variables a node manager sets for each rank it starts.
// A job's own environment never overrides them (the NM drops such entries,
// and `bcs run --env` refuses them up front).
#pragma once

#include <algorithm>
#include <iterator>
#include <string>

namespace bcs {

inline constexpr const char* kRankEnvNames[] = {"BCS_SEGMENT_FD", "BCS_LOCAL_INDEX", "BCS_RANK",
                                                "BCS_SIZE",       "BCS_JOB",         "BCS_NODE"};

// Whether "NAME=VALUE" (or a bare NAME) names one of them.
inline bool is_rank_env(const std::string& kv) {
  const std::string name = kv.substr(0, kv.find('='));
  return std::any_of(std::begin(kRankEnvNames), std::end(kRankEnvNames),
                     [&](const char* n) { return name == n; });
}

}  // namespace bcs
