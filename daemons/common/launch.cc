#include "launch.h"

#include <cctype>

namespace bcs {

namespace {

std::string_view name_of(std::string_view kv) { return kv.substr(0, kv.find('=')); }

// The first bytes of a long entry, for messages.
std::string shown(std::string_view s) {
  return s.size() <= 40 ? std::string(s) : std::string(s.substr(0, 40)) + "...";
}

}  // namespace

bool env_name_ok(std::string_view n) {
  if (n.empty() || n.size() > kMaxEnvNameBytes || std::isdigit(static_cast<unsigned char>(n[0])))
    return false;
  return std::all_of(n.begin(), n.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

std::string check_env_setting(std::string_view entry) {
  const auto eq = entry.find('=');
  if (eq == std::string_view::npos || !env_name_ok(entry.substr(0, eq)))
    return "'" + shown(entry) + "' is not NAME=VALUE with a valid variable name";
  if (is_rank_env(entry))
    return "'" + std::string(entry.substr(0, eq)) + "' is set by bcs itself for each rank";
  if (entry.find('\0') != std::string_view::npos)
    return "the value of " + std::string(entry.substr(0, eq)) + " contains a NUL byte";
  if (entry.size() > kMaxEnvEntryBytes)
    return std::string(entry.substr(0, eq)) + " is longer than 128 KiB";
  return {};
}

std::string check_job_env(const std::vector<std::string>& inherited,
                          const std::vector<std::string>& settings) {
  if (inherited.size() + settings.size() > kMaxEnvEntries)
    return "the environment has more than " + std::to_string(kMaxEnvEntries) + " variables";
  size_t total = 0;
  for (const auto& kv : inherited) {
    const auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0)
      return "environment entry '" + shown(kv) + "' is not NAME=VALUE";
    if (kv.find('\0') != std::string::npos)
      return "environment entry " + shown(name_of(kv)) + " contains a NUL byte";
    if (kv.size() > kMaxEnvEntryBytes)
      return "environment variable " + shown(name_of(kv)) + " is longer than 128 KiB";
    total += kv.size() + 1;
  }
  for (const auto& kv : settings) {
    if (auto why = check_env_setting(kv); !why.empty()) return why;
    total += kv.size() + 1;
  }
  if (total > kMaxEnvTotalBytes) return "the environment is larger than 1 MiB";
  return {};
}

std::vector<std::string> merge_job_env(std::vector<std::string> env,
                                       const std::vector<std::string>& settings) {
  for (const auto& s : settings) {
    const std::string_view name = name_of(s);
    auto same = std::find_if(env.begin(), env.end(),
                             [&](const std::string& kv) { return name_of(kv) == name; });
    if (same != env.end()) {
      *same = s;
      // A malformed environ could hold a name twice; the last entry must not
      // resurrect the old value.
      env.erase(std::remove_if(same + 1, env.end(),
                               [&](const std::string& kv) { return name_of(kv) == name; }),
                env.end());
    } else {
      env.push_back(s);
    }
  }
  return env;
}

bool host_name_ok(std::string_view n) {
  if (n.empty() || n.size() > kMaxHostNameBytes || n[0] == '-') return false;
  return std::all_of(n.begin(), n.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_';
  });
}

std::vector<uint32_t> place_by_slots(uint32_t nranks, const std::vector<uint32_t>& slots) {
  if (slots.empty() || std::find(slots.begin(), slots.end(), 0u) != slots.end()) return {};
  std::vector<uint32_t> out;
  out.reserve(nranks);
  size_t host = 0;
  uint32_t used = 0;  // of host's slots in this round
  for (uint32_t r = 0; r < nranks; ++r) {
    out.push_back(static_cast<uint32_t>(host));
    if (++used == slots[host]) {
      used = 0;
      host = (host + 1) % slots.size();
    }
  }
  return out;
}

}  // namespace bcs
