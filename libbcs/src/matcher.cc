// MSM matching and chunk scheduling. See matcher.h for the contract; the
// comments here explain the choices the contract leaves open.
#include "bcs/matcher.h"

#include <algorithm>
#include <climits>
#include <tuple>
#include <utility>

namespace bcs {

namespace {

// Total order used for sends. (slice, src, pair_seq) is what the design
// prescribes; dst breaks ties between the streams of one sender to different
// local ranks, and the remaining fields only matter for malformed input
// (duplicate pair_seq), where they still keep the outcome independent of the
// order the sends were handed in.
auto canonical_key(const SendDesc& s) {
  return std::tie(s.slice, s.src, s.pair_seq, s.dst, s.context, s.tag, s.len, s.addr, s.request);
}

bool canonical_less(const SendDesc& a, const SendDesc& b) {
  return canonical_key(a) < canonical_key(b);
}

// Consumed entries are first overwritten with this rank (which desc_matches
// can never accept, as no real rank or destination has it) and removed in one
// pass at the end of the step. Erasing each from the middle of a deque would
// move half the queue per match: O(n^2) bytes moved for n matches per slice,
// which dominated the MSM at 1024 messages per slice.
constexpr int32_t kConsumed = INT32_MIN;

// Removes the consumed element `it` of `q`: at the front (the common case
// with wildcards or in-order traffic) it is popped together with any
// tombstones behind it, so scans never walk a growing prefix of dead
// entries; elsewhere it becomes a tombstone and `q` is listed in `dirty`
// (once) for compaction.
template <typename Q, typename It, typename IsDead>
void consume(Q& q, It it, std::vector<Q*>& dirty, IsDead is_dead, void (*kill)(typename Q::value_type&)) {
  if (it == q.begin()) {
    q.pop_front();
    while (!q.empty() && is_dead(q.front())) q.pop_front();
    return;
  }
  kill(*it);
  if (std::find(dirty.begin(), dirty.end(), &q) == dirty.end()) dirty.push_back(&q);
}

bool send_dead(const SendDesc& s) { return s.dst == kConsumed; }
bool recv_dead(const RecvDesc& r) { return r.rank == kConsumed; }
void kill_send(SendDesc& s) { s.dst = kConsumed; }
void kill_recv(RecvDesc& r) { r.rank = kConsumed; }

ProbeResult found_result(const RecvDesc& p, const SendDesc& s) {
  ProbeResult r;
  r.probe = p;
  r.found = true;
  r.source = s.src;
  r.tag = s.tag;
  r.len = s.len;
  return r;
}

Match make_match(SendDesc s, const RecvDesc& r) {
  Match m;
  m.bytes = std::min(s.len, r.cap);
  m.truncated = s.len > r.cap;
  m.send = std::move(s);
  m.recv = r;
  return m;
}

}  // namespace

bool desc_matches(const RecvDesc& r, const SendDesc& s) {
  return r.context == s.context && (r.src == kAnySource || r.src == s.src) &&
         (r.tag == kAnyTag || r.tag == s.tag) && r.rank == s.dst;
}

void Matcher::msm(uint64_t /*slice*/, const std::vector<RecvDesc>& local_posts,
                  std::vector<SendDesc> sends) {
  // The slice number is implied by the descriptors themselves (their `slice`
  // fields give the canonical order); the argument names the step for the
  // caller's tracing and is not needed for any decision.

  // Step 1: new receives and probes, in each rank's post order, against the
  // unexpected sends of that rank (oldest first = MPI non-overtaking).
  std::vector<std::deque<SendDesc>*> dirty_unexpected;
  for (const RecvDesc& r : local_posts) {
    PerRank& pr = ranks_[r.rank];
    auto it = std::find_if(pr.unexpected.begin(), pr.unexpected.end(),
                           [&](const SendDesc& s) { return desc_matches(r, s); });
    switch (r.kind) {
      case DescKind::recv:
        if (it != pr.unexpected.end()) {
          matches_.push_back(make_match(std::move(*it), r));
          consume(pr.unexpected, it, dirty_unexpected, send_dead, kill_send);
        } else {
          pr.posted.push_back(r);
        }
        break;
      case DescKind::probe:
      case DescKind::iprobe:
        // A probe never consumes. An unanswered iprobe waits with the blocking
        // probes until step 3 so that this slice's sends can still answer it.
        if (it != pr.unexpected.end()) {
          probe_results_.push_back(found_result(r, *it));
        } else {
          pr.probes.push_back(r);
        }
        break;
      default:
        // Not a point-to-point receive-side descriptor (sends and collectives
        // are routed elsewhere by the caller); ignore rather than guess.
        break;
    }
  }

  // Compact before step 2, whose ordered insertion needs intact keys.
  for (auto* q : dirty_unexpected)
    std::erase_if(*q, send_dead);

  // Step 2: the slice's sends in canonical order, whatever order the network
  // delivered them in.
  std::sort(sends.begin(), sends.end(), canonical_less);
  std::vector<std::deque<RecvDesc>*> dirty_posted;
  for (SendDesc& s : sends) {
    PerRank& pr = ranks_[s.dst];
    auto rit = std::find_if(pr.posted.begin(), pr.posted.end(),
                            [&](const RecvDesc& r) { return desc_matches(r, s); });
    if (rit != pr.posted.end()) {
      // Taken by the earliest posted receive: like an MPI library matching
      // an arrival against its posted queue first, the message never becomes
      // visible to probes.
      matches_.push_back(make_match(std::move(s), *rit));
      consume(pr.posted, rit, dirty_posted, recv_dead, kill_recv);
      continue;
    }
    // Answer every waiting probe that accepts it (probes do not consume, so
    // one send may answer several).
    for (auto pit = pr.probes.begin(); pit != pr.probes.end();) {
      if (desc_matches(*pit, s)) {
        probe_results_.push_back(found_result(*pit, s));
        pit = pr.probes.erase(pit);
      } else {
        ++pit;
      }
    }
    // Keep `unexpected` in canonical order even if a caller hands in an older
    // slice late; in the normal case this is an append.
    if (pr.unexpected.empty() || !canonical_less(s, pr.unexpected.back())) {
      pr.unexpected.push_back(std::move(s));
    } else {
      auto pos = std::upper_bound(pr.unexpected.begin(), pr.unexpected.end(), s, canonical_less);
      pr.unexpected.insert(pos, std::move(s));
    }
  }

  for (auto* q : dirty_posted)
    std::erase_if(*q, recv_dead);

  // Step 3: iprobes that nothing answered complete as not-found. Ranks are
  // visited in rank order (std::map) so the result order is deterministic.
  for (auto& [rank, pr] : ranks_) {
    for (auto pit = pr.probes.begin(); pit != pr.probes.end();) {
      if (pit->kind == DescKind::iprobe) {
        ProbeResult res;
        res.probe = *pit;
        res.found = false;
        probe_results_.push_back(std::move(res));
        pit = pr.probes.erase(pit);
      } else {
        ++pit;
      }
    }
  }
}

std::vector<Match> Matcher::take_matches() { return std::exchange(matches_, {}); }

std::vector<ProbeResult> Matcher::take_probe_results() {
  return std::exchange(probe_results_, {});
}

size_t Matcher::unexpected_count() const {
  size_t n = 0;
  for (const auto& [rank, pr] : ranks_) n += pr.unexpected.size();
  return n;
}

size_t Matcher::posted_count() const {
  size_t n = 0;
  for (const auto& [rank, pr] : ranks_) n += pr.posted.size();
  return n;
}

// ------------------------------------------------------------ ChunkScheduler

void ChunkScheduler::add(Match m) {
  Transfer t{next_id_++, std::move(m)};
  transfers_.push_back(std::move(t));
}

std::vector<Chunk> ChunkScheduler::schedule_slice() {
  std::vector<Chunk> out;
  // Budget 0 means "no limit": chunking is then switched off.
  const bool unlimited = budget_ == 0;
  uint64_t left = budget_;
  for (Transfer& t : transfers_) {
    // Fully scheduled but not yet finished (finish_slice() not called since):
    // nothing left to move for it.
    if (t.scheduled_last) continue;
    const uint64_t total = t.match.bytes;
    const uint64_t remaining = total - t.done;
    Chunk c;
    c.transfer = t.id;
    c.match = &t.match;
    c.offset = t.done;
    c.first = t.done == 0;
    if (total == 0) {
      // Costs nothing, so it never waits behind an exhausted budget.
      c.len = 0;
    } else if (unlimited) {
      c.len = remaining;
    } else if (t.match.send.is_inline) {
      // Inline payloads travel whole. One that does not fit waits for the
      // next slice (FIFO: nothing behind it overtakes), unless the slice is
      // still empty, so that a budget smaller than one inline message can
      // never stall the queue.
      if (remaining > left && !out.empty()) break;
      c.len = remaining;
      left -= std::min(left, remaining);
    } else {
      if (left == 0) break;
      c.len = std::min(left, remaining);
      left -= c.len;
    }
    t.done += c.len;
    c.last = t.done == total;
    t.scheduled_last = c.last;
    out.push_back(c);
    // A partially scheduled transfer used up the budget; stop here so that
    // later transfers do not overtake it.
    if (!c.last) break;
  }
  return out;
}

void ChunkScheduler::finish_slice() {
  // schedule_slice() never lets a transfer complete before an older one
  // (it stops at the first partial one), so finished transfers are always a
  // prefix. Popping from the front keeps the Match pointers of the others
  // valid, as Chunk promises.
  while (!transfers_.empty() && transfers_.front().scheduled_last) transfers_.pop_front();
}

}  // namespace bcs
