#include "binding.h"

#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>

namespace bcs {

std::vector<int> allowed_cpus() {
  std::vector<int> cpus;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}

std::vector<int> rank_cpus(Binding b, uint32_t nranks, const std::vector<int>& cpus,
                           uint32_t base) {
  std::vector<int> out(nranks, -1);
  if (cpus.empty() || b == Binding::none) return out;
  const uint64_t n = cpus.size();
  // Oversubscribed: by default nobody is bound (as Open MPI does), so the
  // scheduler may still move a rank to whatever core is free. The same when
  // the ranks do not fit past `base`: wrapping round would pin them onto
  // CPUs that another job's ranks hold; the manager gives a base of n (or
  // more) when no free range of the host is wide enough. (64 bits: the sum
  // does not wrap.)
  if (b == Binding::by_default && uint64_t{base} + nranks > n) return out;
  // An explicit core that does not fit keeps today's round robin, now from
  // `base`: the user asked for bound ranks and accepts sharing, as with more
  // ranks than CPUs. A base of n is then exactly today's (CPU 0 first).
  for (uint32_t k = 0; k < nranks; ++k) out[k] = cpus[(uint64_t{base} + k) % n];
  return out;
}

std::vector<int> host_rank_cpus(Binding b, const std::vector<uint32_t>& rank_node,
                                const std::vector<uint32_t>& host_nodes,
                                const std::vector<int>& cpus, uint32_t base) {
  std::vector<size_t> here;  // world ranks on this host, ascending
  for (size_t r = 0; r < rank_node.size(); ++r)
    if (std::find(host_nodes.begin(), host_nodes.end(), rank_node[r]) != host_nodes.end())
      here.push_back(r);
  const std::vector<int> each = rank_cpus(b, static_cast<uint32_t>(here.size()), cpus, base);
  std::vector<int> out(rank_node.size(), -1);
  for (size_t k = 0; k < here.size(); ++k) out[here[k]] = each[k];
  return out;
}

bool bind_self_to_cpu(int cpu) {
  if (cpu < 0 || cpu >= CPU_SETSIZE) return false;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  return ::syscall(SYS_sched_setaffinity, 0, sizeof one, &one) == 0;
}

}  // namespace bcs
