// Where a node manager lets its ranks run (`bcs run --bind-to`). A rank
// bound to a core of its own never shares it with another rank while a
// core idles: left alone, the scheduler starts a node's ranks next to their
// parent and may keep two of them on one core for milliseconds (measured
// on bench/halo.c: the first ten steps took 15-30 ms unbound, 12-18 bound,
// Open MPI, which binds to cores by default for two ranks, 12-13).
#pragma once

#include <cstdint>
#include <vector>

namespace bcs {

// The ranks of a host are the job's ranks on every node manager of that
// host, in world rank order; each node manager reckons them alike.
enum class Binding {
  by_default,  // core when the host's ranks do not outnumber its CPUs, else none
  core,        // the host's k-th rank on the k-th allowed CPU (k mod their number)
  none,        // every allowed CPU
};

// The CPUs this process may run on (sched_getaffinity), ascending; empty
// when the kernel does not say.
std::vector<int> allowed_cpus();

// For each of a host's `nranks` ranks, the CPU to bind it to, or -1 for
// none, out of `cpus` (allowed_cpus()). The k-th rank goes to
// cpus[(base + k) % n]: `base` (StartJob::host_slot_base) is where the
// manager put this job among the jobs running at once on the host, so that
// their ranks do not pin to the same CPUs. by_default binds only when the
// ranks fit from there (base + nranks <= n), else none is bound, as when
// ranks outnumber CPUs. core always binds, wrapping round: it was asked for.
std::vector<int> rank_cpus(Binding b, uint32_t nranks, const std::vector<int>& cpus,
                           uint32_t base = 0);

// Per world rank of a job placed by `rank_node` (rank -> node id), the CPU
// to bind it to: rank_cpus (from `base`) over the ranks on the nodes in
// `host_nodes` (the node managers of this host), -1 for every other rank.
std::vector<int> host_rank_cpus(Binding b, const std::vector<uint32_t>& rank_node,
                                const std::vector<uint32_t>& host_nodes,
                                const std::vector<int>& cpus, uint32_t base);

// Binds the calling process to `cpu` with the raw system call (safe between
// fork and exec in a multi-threaded parent). False on failure.
bool bind_self_to_cpu(int cpu);

}  // namespace bcs
