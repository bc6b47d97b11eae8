#include "hosts.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <sstream>

#include "launch.h"

namespace bcs::cli {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// SLOTS: a decimal number of ranks, 1..kMaxSlotsPerHost.
uint32_t parse_slots(std::string_view s, const std::string& where) {
  const std::string shown(s.substr(0, 20));
  if (s.empty() || s.size() > 8 ||
      !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; }))
    throw HostError(where + "'" + shown + "' is not a number of slots");
  const unsigned long v = std::stoul(std::string(s));
  if (v < 1 || v > kMaxSlotsPerHost)
    throw HostError(where + "a host needs 1 to " + std::to_string(kMaxSlotsPerHost) +
                    " slots, not " + shown);
  return static_cast<uint32_t>(v);
}

void add(std::vector<Host>* hosts, std::string_view name, uint32_t slots, const std::string& where) {
  if (!host_name_ok(name))
    throw HostError(where + "'" + std::string(name.substr(0, 40)) +
                    "' is not a host name (letters, digits, '.', '-', '_')");
  auto same = std::find_if(hosts->begin(), hosts->end(), [&](const Host& h) { return h.name == name; });
  if (same != hosts->end()) {
    if (uint64_t{same->slots} + slots > kMaxSlotsPerHost)
      throw HostError(where + "host " + same->name + " has too many slots");
    same->slots += slots;
    return;
  }
  if (hosts->size() >= kMaxHosts)
    throw HostError(where + "more than " + std::to_string(kMaxHosts) + " hosts");
  hosts->push_back(Host{std::string(name), slots});
}

// "NAME" or "NAME:SLOTS".
void add_spec(std::vector<Host>* hosts, std::string_view spec, const std::string& where) {
  const auto colon = spec.find(':');
  if (colon == std::string_view::npos) return add(hosts, spec, 1, where);
  add(hosts, spec.substr(0, colon), parse_slots(spec.substr(colon + 1), where), where);
}

}  // namespace

void add_host_list(std::string_view list, std::vector<Host>* hosts) {
  if (trim(list).empty()) throw HostError("empty host list");
  size_t pos = 0;
  while (pos <= list.size()) {
    size_t end = list.find(',', pos);
    if (end == std::string_view::npos) end = list.size();
    const std::string_view spec = trim(list.substr(pos, end - pos));
    if (spec.empty()) throw HostError("empty host name in '" + std::string(list) + "'");
    add_spec(hosts, spec, "");
    pos = end + 1;
  }
}

void add_host_file(const std::string& path, std::vector<Host>* hosts) {
  std::ifstream in(path);
  if (!in) throw HostError("cannot read host file '" + path + "'");
  std::string line;
  size_t lineno = 0, found = 0;
  while (std::getline(in, line)) {
    ++lineno;
    const std::string where = path + ":" + std::to_string(lineno) + ": ";
    std::string_view l = line;
    l = trim(l.substr(0, l.find('#')));
    if (l.empty()) continue;
    std::istringstream words{std::string(l)};
    std::string name, w;
    words >> name;
    std::vector<std::string> rest;
    while (words >> w) rest.push_back(w);
    uint32_t slots = 0;  // 0: not given on this line
    for (const auto& word : rest) {
      const auto eq = word.find('=');
      const std::string key = word.substr(0, eq);
      if (eq == std::string::npos || (key != "slots" && key != "max_slots" && key != "max-slots"))
        throw HostError(where + "unknown word '" + word.substr(0, 40) +
                        "' (expected slots=N after the host name)");
      const uint32_t v = parse_slots(std::string_view(word).substr(eq + 1), where);
      if (key == "slots") slots = v;
    }
    if (slots && name.find(':') != std::string::npos)
      throw HostError(where + "slots given twice (NAME:SLOTS and slots=)");
    if (slots)
      add(hosts, name, slots, where);
    else
      add_spec(hosts, name, where);
    ++found;
  }
  if (in.bad()) throw HostError("error reading host file '" + path + "'");
  if (found == 0) throw HostError("host file '" + path + "' names no host");
}

uint64_t total_slots(const std::vector<Host>& hosts) {
  uint64_t t = 0;
  for (const auto& h : hosts) t += h.slots;
  return t;
}

std::vector<std::string> used_hosts(const std::vector<Host>& hosts, uint32_t nranks) {
  std::vector<std::string> out;
  uint64_t before = 0;  // slots of the hosts before this one
  for (const auto& h : hosts) {
    if (before >= nranks) break;
    out.push_back(h.name);
    before += h.slots;
  }
  return out;
}

}  // namespace bcs::cli
