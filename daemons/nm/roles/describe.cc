#include "describe.h"

namespace bcs::nm {

namespace {
std::string who(int32_t r) { return r == kAnySource ? "any source" : "rank " + std::to_string(r); }
std::string which_tag(int32_t t) { return t == kAnyTag ? "any tag" : "tag " + std::to_string(t); }
}  // namespace

std::string describe_waits(LocalRanks& ranks, const Matcher& matcher, size_t max_bytes) {
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
              who(d.src) + " " + which_tag(d.tag) + " (context " + std::to_string(d.context) +
              ", posted in slice " + std::to_string(d.slice) + ")";
    }
    if (total > w.size()) line += " and " + std::to_string(total - w.size()) + " more";
    if (total == 0 && waiting) line += ", for no receive or probe (a send or a collective)";
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
