// `bcs run --host` / `--hostfile`: which node managers a job uses, by name,
// and how many ranks (slots) each takes. A host name is a node manager's
// name (`bcs-nm --name`, default the host name). With a running manager the
// names must be registered; in the embedded default bcs starts one node
// manager per distinct host, named after it, so any names work.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace bcs::cli {

struct Host {
  std::string name;
  uint32_t slots = 1;
  bool operator==(const Host&) const = default;
};

// A host list or file that cannot be used; what() says why (and where).
struct HostError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Adds "a,b:2,c" (NAME[:SLOTS], comma separated; SLOTS defaults to 1) to
// `hosts`. A name already present gets the new slots added to its own, so
// "a,a" is a:2 (as with mpiexec). Throws HostError.
void add_host_list(std::string_view list, std::vector<Host>* hosts);

// Adds the hosts of a host file: one per line, "NAME", "NAME:SLOTS" (MPICH)
// or "NAME slots=SLOTS" (Open MPI; max_slots= / max-slots= are accepted and
// ignored: bcs does not cap ranks per host); '#' starts a comment, blank
// lines are skipped. Throws HostError naming the file and line.
void add_host_file(const std::string& path, std::vector<Host>* hosts);

// The sum of the slots.
uint64_t total_slots(const std::vector<Host>& hosts);

// The names of the hosts that get at least one of `nranks` ranks (a prefix
// of `hosts`: the ranks fill the slots host by host, see place_by_slots).
std::vector<std::string> used_hosts(const std::vector<Host>& hosts, uint32_t nranks);

}  // namespace bcs::cli
