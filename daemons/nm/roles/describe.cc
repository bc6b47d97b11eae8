#include "describe.h"

namespace bcs::nm {

namespace {
std::string who(int32_t r) { return r == kAnySource ? "any source" : "rank " + std::to_string(r); }
std::string which_tag(int32_t t) { return t == kAnyTag ? "any tag" : "tag " + std::to_string(t); }
// A communicator's point-to-point context is even, its collectives' the
// odd one after (segment.h); the predefined ones are named.
std::string comm_of(int32_t context) {
  const int32_t base = context & ~1;
  if (base == kContextWorld) return "MPI_COMM_WORLD";
  if (base == kContextSelf) return "MPI_COMM_SELF";
  return "context " + std::to_string(context);
}
const char* coll_name(bcs_coll_t k) {
  switch (k) {
    case BCS_COLL_BARRIER: return "a barrier";
    case BCS_COLL_BCAST: return "a broadcast";
    case BCS_COLL_GATHER: case BCS_COLL_GATHERV: return "a gather";
    case BCS_COLL_SCATTER: case BCS_COLL_SCATTERV: return "a scatter";
    case BCS_COLL_ALLGATHER: case BCS_COLL_ALLGATHERV: return "an allgather";
    case BCS_COLL_ALLTOALL: case BCS_COLL_ALLTOALLV: return "an alltoall";
    case BCS_COLL_REDUCE: return "a reduce";
    case BCS_COLL_ALLREDUCE: return "an allreduce";
    case BCS_COLL_SCAN: case BCS_COLL_EXSCAN: return "a scan";
    default: return "a collective";
  }
}
}  // namespace

std::string describe_waits(LocalRanks& ranks, const Matcher& matcher, const Collectives& coll,
                           size_t max_bytes) {
  constexpr size_t kShown = 2;  // receives named per rank
  std::string out;
  for (int32_t r : ranks.local_ranks()) {
    const RankView v = ranks.view_of(r);
    const bool waiting = v.ctl && v.ctl->waiting.load(std::memory_order_relaxed) != 0;
    std::string line =
        "rank " + std::to_string(r) + (waiting ? " waited in MPI" : " was not in an MPI wait");
    size_t total = 0;
    const auto w = matcher.waiting(r, kShown, &total);
    for (size_t i = 0; i < w.size(); ++i) {
      const RecvDesc& d = w[i];
      line += (i ? ", " : ", unmatched: ") +
              std::string(d.kind == DescKind::recv ? "a receive" : "a probe") + " from " +
              who(d.src) + " " + which_tag(d.tag) + " (" + comm_of(d.context) +
              ", posted in slice " + std::to_string(d.slice) + ")";
    }
    if (total > w.size()) line += " and " + std::to_string(total - w.size()) + " more";
    const auto colls = coll.waiting(r);
    for (const auto& c : colls) {
      line += std::string(", in ") + coll_name(c.kind) + " (collective " + std::to_string(c.seq) +
              " of " + comm_of(c.context);
      for (size_t i = 0; i < c.not_posted_here.size(); ++i)
        line += (i ? ", " : "; not posted here by rank ") + std::to_string(c.not_posted_here[i]);
      line += ")";
    }
    if (total == 0 && colls.empty() && waiting) line += ", for no receive, probe or collective";
    if (const size_t held = matcher.unexpected_count(r))
      line += ", " + std::to_string(held) + " message(s) for it no receive took";
    out += (out.empty() ? "" : "; ") + line;
    if (out.size() > max_bytes) {
      out.resize(max_bytes);
      out += " ...";
      break;
    }
  }
  return out;
}

}  // namespace bcs::nm
