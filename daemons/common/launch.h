// What a launch request may contain, checked alike by the CLI (early, with
// a message about the option), the machine manager (the request comes from
// the network) and the node manager (it trusts nothing either): the ranks'
// environment and the host names that select node managers.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

namespace bcs {

// Metadata of a Jobs.Attach call: who attaches ("bcs run, pid 123"), for
// the message of a job ended because its clients went away (the manager
// cuts and sanitises it: it is the client's word).
inline constexpr const char* kClientMetadata = "bcs-client";

// The environment variables a node manager sets for each rank it starts. A
// job's environment never overrides them: the NM drops such entries from the
// inherited environment, and explicit settings (`--env`, `-x`) naming them
// are refused.
inline constexpr const char* kRankEnvNames[] = {"BCS_SEGMENT_FD", "BCS_LOCAL_INDEX", "BCS_RANK",
                                                "BCS_SIZE",       "BCS_JOB",         "BCS_NODE"};

// Whether "NAME=VALUE" (or a bare NAME) names one of them.
inline bool is_rank_env(std::string_view kv) {
  const std::string_view name = kv.substr(0, kv.find('='));
  return std::any_of(std::begin(kRankEnvNames), std::end(kRankEnvNames),
                     [&](const char* n) { return name == n; });
}

// Limits. execve refuses a single string longer than MAX_ARG_STRLEN (32
// pages) and all of argv + envp beyond a quarter of the stack limit (2 MiB by
// default), so a job past these could not start anyway: refusing it at the
// door gives a clear message instead of a failure on every node.
inline constexpr size_t kMaxEnvNameBytes = 255;
inline constexpr size_t kMaxEnvEntryBytes = 128 * 1024;
inline constexpr size_t kMaxEnvTotalBytes = 1024 * 1024;
inline constexpr size_t kMaxEnvEntries = 16384;
inline constexpr size_t kMaxHostNameBytes = 255;
inline constexpr size_t kMaxHosts = 65536;
inline constexpr uint32_t kMaxSlotsPerHost = 1u << 20;

// A portable variable name (POSIX "Portable Character Set" names, as shells
// accept them): [A-Za-z_][A-Za-z0-9_]*, at most kMaxEnvNameBytes.
bool env_name_ok(std::string_view name);

// Why `entry` cannot be set explicitly (`--env NAME=VALUE`, `-x`), or "".
std::string check_env_setting(std::string_view entry);

// Why `inherited` (the submitter's environment, NAME=VALUE each) plus
// `settings` (explicit NAME=VALUE, see check_env_setting) cannot be a job's
// environment, or "". Inherited names may be anything a process can export
// (a shell exports e.g. BASH_FUNC_f%%) but must be non-empty, free of NUL,
// and have their '='.
std::string check_job_env(const std::vector<std::string>& inherited,
                          const std::vector<std::string>& settings);

// `inherited` with each setting applied in order: it replaces the entry of
// the same name, or is appended. Later settings win.
std::vector<std::string> merge_job_env(std::vector<std::string> inherited,
                                       const std::vector<std::string>& settings);

// A host name as `--host` / `--hostfile` give it, naming a node manager (its
// `bcs-nm --name`, which defaults to the host name): letters, digits, '.',
// '-', '_', not starting with '-', at most kMaxHostNameBytes.
bool host_name_ok(std::string_view name);

// Rank -> index of its host, when the hosts have `slots` ranks each: the
// ranks fill the slots in order (host 0's first, then host 1's, ...) and wrap
// around to host 0 when there are more ranks than slots. Empty if `slots` is
// empty or has a zero.
std::vector<uint32_t> place_by_slots(uint32_t nranks, const std::vector<uint32_t>& slots);

}  // namespace bcs
