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

// ------------------------------------------------------------ queues

Matcher::PerRank::Bucket Matcher::PerRank::find_unexpected(const RecvDesc& r) {
  if (r.src != kAnySource && r.tag != kAnyTag) return unexpected.find({r.context, r.src, r.tag});
  // A wildcard: the earliest front among the buckets it accepts. Buckets
  // are ordered by (context, src, tag), so the context (and the source, if
  // given) bound the range to look at.
  auto lo = unexpected.lower_bound({r.context, r.src == kAnySource ? INT32_MIN : r.src, INT32_MIN});
  auto hi = unexpected.upper_bound({r.context, r.src == kAnySource ? INT32_MAX : r.src, INT32_MAX});
  Bucket best = unexpected.end();
  for (auto it = lo; it != hi; ++it) {
    const SendDesc& front = it->second.front();
    if (!desc_matches(r, front)) continue;
    if (best == unexpected.end() || canonical_less(front, best->second.front())) best = it;
  }
  return best;
}

SendDesc Matcher::PerRank::take_unexpected(Bucket b) {
  SendDesc s = std::move(b->second.front());
  b->second.pop_front();
  if (b->second.empty()) unexpected.erase(b);  // keeps wildcard scans short
  count_out(s);
  return s;
}

void Matcher::PerRank::add_unexpected(SendDesc s) {
  auto& q = unexpected[{s.context, s.src, s.tag}];
  const bool moves = !s.is_inline;
  bytes += s.payload.size();
  // Sends come in canonical order (each MSM's sorted, later slices later),
  // so numbering them as they come numbers them in that order, unless a
  // caller hands in an older slice late.
  if (unexpected_n == 0) arrivals_out_of_order = false;
  const auto key = std::make_tuple(s.slice, s.src, s.pair_seq);
  if (unexpected_n != 0 && key < last_arrival) arrivals_out_of_order = true;
  last_arrival = key;
  s.arrival = ++next_arrival;
  // Keep canonical order even then; in the normal case this is an append.
  if (q.empty() || !canonical_less(s, q.back())) {
    q.push_back(std::move(s));
  } else {
    arrivals_out_of_order = true;
    q.insert(std::upper_bound(q.begin(), q.end(), s, canonical_less), std::move(s));
  }
  ++unexpected_n;
  if (moves) ++moving_n;
}

// ------------------------------------------------------------ shelf

Matcher::ShelfOffer Matcher::shelf_candidates(int32_t rank, size_t max) const {
  ShelfOffer out;
  const auto pr = ranks_.find(rank);
  if (pr == ranks_.end()) return out;
  const auto& buckets = pr->second.unexpected;
  // Per key, the sends still to offer: a bucket's leading inline run.
  struct Run {
    std::deque<SendDesc>::const_iterator at, end;
  };
  std::vector<Run> runs;
  for (const auto& [key, q] : buckets) {
    if (runs.size() >= max) break;  // the first round alone fills the shelf
    if (q.front().shelvable()) runs.push_back({q.begin(), q.end()});
  }
  while (!runs.empty() && out.sends.size() < max) {
    size_t kept = 0;
    for (Run& r : runs) {
      if (out.sends.size() == max) break;
      out.sends.push_back(&*r.at);
      if (++r.at != r.end && r.at->shelvable()) runs[kept++] = r;
    }
    runs.resize(kept);
  }
  // The cuts: per bucket, the first send not offered (offers of a bucket
  // are its first ones, so counting them finds it), folded into the three
  // keys a wildcard receive may have.
  if (buckets.size() > kShelfCutKeys || pr->second.arrivals_out_of_order) {
    out.no_wildcards = true;
    return out;
  }
  std::map<std::tuple<int32_t, int32_t, int32_t>, size_t> offered;
  for (const SendDesc* d : out.sends) ++offered[{d->context, d->src, d->tag}];
  auto lower = [](auto& cuts, const auto& k, uint64_t v) {
    const auto it = cuts.find(k);
    if (it == cuts.end() || v < it->second) cuts[k] = v;
  };
  for (const auto& [key, q] : buckets) {
    const auto it = offered.find(key);
    const size_t n = it == offered.end() ? 0 : it->second;
    if (n == q.size()) continue;
    const auto [context, src, tag] = key;
    const uint64_t a = q[n].arrival;
    lower(out.src_cuts, std::make_pair(context, src), a);
    lower(out.tag_cuts, std::make_pair(context, tag), a);
    lower(out.context_cuts, context, a);
  }
  return out;
}

bool Matcher::take_shelved(int32_t rank, int32_t context, int32_t src, int32_t tag,
                           uint64_t pair_seq) {
  const auto pr = ranks_.find(rank);
  if (pr == ranks_.end()) return false;
  PerRank& p = pr->second;
  const auto b = p.unexpected.find({context, src, tag});
  if (b == p.unexpected.end()) return false;
  auto& q = b->second;
  // The front, unless the rank took out of order (it may not, but a send
  // it names is taken all the same: only its own messages are at stake).
  const auto it = std::find_if(q.begin(), q.end(),
                               [&](const SendDesc& s) { return s.pair_seq == pair_seq; });
  if (it == q.end() || !it->shelvable()) return false;
  p.count_out(*it);
  q.erase(it);
  if (q.empty()) p.unexpected.erase(b);
  return true;
}

// ------------------------------------------------------------ MSM

void Matcher::msm(uint64_t /*slice*/, const std::vector<RecvDesc>& local_posts,
                  std::vector<SendDesc> sends) {
  // The slice number is implied by the descriptors themselves (their `slice`
  // fields give the canonical order); the argument names the step for the
  // caller's tracing and is not needed for any decision.

  // Step 1: new receives and probes, in each rank's post order, against the
  // unexpected sends of that rank (oldest first = MPI non-overtaking).
  for (const RecvDesc& r : local_posts) {
    PerRank& pr = ranks_[r.rank];
    const auto b = pr.find_unexpected(r);
    const bool found = b != pr.unexpected.end();
    switch (r.kind) {
      case DescKind::recv:
        if (found) {
          matches_.push_back(make_match(pr.take_unexpected(b), r));
        } else if (r.src != kAnySource && r.tag != kAnyTag) {
          pr.posted_exact[{r.context, r.src, r.tag}].push_back({pr.next_order++, r});
        } else {
          pr.posted_wild.push_back({pr.next_order++, r});
        }
        break;
      case DescKind::cancel:
        // In post order: a receive posted before the cancel and still
        // unmatched now is removed; a matched one completes normally.
        cancel(r.rank, r.request);
        break;
      case DescKind::probe:
      case DescKind::iprobe:
        // A probe never consumes. An unanswered iprobe waits with the blocking
        // probes until step 3 so that this slice's sends can still answer it.
        if (found) {
          probe_results_.push_back(found_result(r, b->second.front()));
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

  // Step 2: the slice's sends in canonical order, whatever order the network
  // delivered them in.
  std::sort(sends.begin(), sends.end(), canonical_less);
  for (SendDesc& s : sends) {
    PerRank& pr = ranks_[s.dst];
    // The earliest posted receive that accepts it: the front of its exact
    // bucket, or the first accepting wildcard receive, whichever was posted
    // first.
    auto exact = pr.posted_exact.find({s.context, s.src, s.tag});
    auto wild = std::find_if(pr.posted_wild.begin(), pr.posted_wild.end(),
                             [&](const Posted& p) { return desc_matches(p.recv, s); });
    const bool have_exact = exact != pr.posted_exact.end();
    const bool have_wild = wild != pr.posted_wild.end();
    if (have_exact && (!have_wild || exact->second.front().order < wild->order)) {
      // Taken by the earliest posted receive: like an MPI library matching
      // an arrival against its posted queue first, the message never becomes
      // visible to probes.
      matches_.push_back(make_match(std::move(s), exact->second.front().recv));
      exact->second.pop_front();
      if (exact->second.empty()) pr.posted_exact.erase(exact);
      continue;
    }
    if (have_wild) {
      matches_.push_back(make_match(std::move(s), wild->recv));
      pr.posted_wild.erase(wild);
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
    pr.add_unexpected(std::move(s));
  }

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

void Matcher::cancel_sends(const std::vector<SendCancel>& cancels) {
  // Takes the named send out of the unexpected messages of c.dst.
  auto take = [&](const SendCancel& c, Match* m) {
    auto it = ranks_.find(c.dst);
    if (it == ranks_.end()) return false;
    PerRank& pr = it->second;
    for (auto b = pr.unexpected.begin(); b != pr.unexpected.end(); ++b) {
      auto& q = b->second;
      auto s = std::find_if(q.begin(), q.end(), [&](const SendDesc& x) {
        return x.src == c.src && x.is_inline == c.is_inline &&
               (c.is_inline ? x.pair_seq == c.pair_seq : x.request == c.request);
      });
      if (s == q.end()) continue;
      pr.count_out(*s);
      m->send = std::move(*s);
      q.erase(s);
      if (q.empty()) pr.unexpected.erase(b);
      return true;
    }
    return false;
  };
  for (const SendCancel& c : cancels) {
    Match m;
    m.cancelled = true;
    if (take(c, &m)) {
      if (c.is_inline) answer_inline_cancel(c, &m);
      matches_.push_back(std::move(m));
    } else if (c.is_inline) {  // a receive took it first: the send stands
      m.cancel_late = true;
      answer_inline_cancel(c, &m);
      matches_.push_back(std::move(m));
    }
  }
}

// The answer to an inline send's cancel moves no data and completes the
// cancel's own slot at the sender, like a cancelled non-inline send does.
void Matcher::answer_inline_cancel(const SendCancel& c, Match* m) {
  m->send.src = c.src;
  m->send.dst = c.dst;
  m->send.request = c.request;
  m->send.is_inline = false;
  m->send.payload.clear();
  m->send.len = 0;
  m->send.addr = 0;
  m->send.layout = nullptr;
}

void Matcher::cancel(int32_t rank, uint32_t request) {
  auto it = ranks_.find(rank);
  if (it == ranks_.end()) return;
  PerRank& pr = it->second;
  auto drop = [&](std::deque<Posted>& q) {
    for (auto p = q.begin(); p != q.end(); ++p)
      if (p->recv.request == request && p->recv.kind == DescKind::recv) {
        cancelled_.push_back(p->recv);
        q.erase(p);
        return true;
      }
    return false;
  };
  if (drop(pr.posted_wild)) return;
  for (auto b = pr.posted_exact.begin(); b != pr.posted_exact.end(); ++b)
    if (drop(b->second)) {
      if (b->second.empty()) pr.posted_exact.erase(b);
      return;
    }
}

std::vector<RecvDesc> Matcher::take_cancelled() {
  std::vector<RecvDesc> out;
  out.swap(cancelled_);
  return out;
}

std::vector<ProbeResult> Matcher::take_probe_results() { return std::exchange(probe_results_, {}); }

size_t Matcher::unexpected_count() const {
  size_t n = 0;
  for (const auto& [rank, pr] : ranks_) n += pr.unexpected_n;
  return n;
}

size_t Matcher::unexpected_moving() const {
  size_t n = 0;
  for (const auto& [rank, pr] : ranks_) n += pr.moving_n;
  return n;
}

size_t Matcher::unexpected_count(int32_t rank) const {
  const auto it = ranks_.find(rank);
  return it == ranks_.end() ? 0 : it->second.unexpected_n;
}

uint64_t Matcher::unexpected_bytes(int32_t rank) const {
  const auto it = ranks_.find(rank);
  return it == ranks_.end() ? 0 : it->second.bytes;
}

size_t Matcher::posted_count() const {
  size_t n = 0;
  for (const auto& [rank, pr] : ranks_) {
    n += pr.posted_wild.size();
    for (const auto& [key, q] : pr.posted_exact) n += q.size();
  }
  return n;
}

std::vector<RecvDesc> Matcher::waiting(int32_t rank, size_t max, size_t* total) const {
  *total = 0;
  auto it = ranks_.find(rank);
  if (it == ranks_.end()) return {};
  const PerRank& pr = it->second;
  std::vector<const Posted*> all;
  for (const auto& p : pr.posted_wild) all.push_back(&p);
  for (const auto& [key, q] : pr.posted_exact)
    for (const auto& p : q) all.push_back(&p);
  std::sort(all.begin(), all.end(),
            [](const Posted* a, const Posted* b) { return a->order < b->order; });
  *total = all.size() + pr.probes.size();
  std::vector<RecvDesc> out;
  for (size_t i = 0; i < all.size() && out.size() < max; ++i) out.push_back(all[i]->recv);
  for (size_t i = 0; i < pr.probes.size() && out.size() < max; ++i) out.push_back(pr.probes[i]);
  return out;
}

// ------------------------------------------------------------ ChunkScheduler

void ChunkScheduler::add(Match m) {
  const PairKey key{m.send.src, m.recv.rank};
  pairs_[key].push_back(Transfer{next_id_++, std::move(m)});
  ++count_;
}

uint64_t ChunkScheduler::serve(std::deque<Transfer>& q, uint64_t limit, uint64_t& left,
                               std::vector<Chunk>& out) {
  // Budget 0 means "no limit": chunking is then switched off.
  const bool unlimited = budget_ == 0;
  uint64_t spent = 0;
  for (Transfer& t : q) {
    // Fully scheduled but not yet finished (finish_slice() not called since):
    // nothing left to move for it.
    if (t.scheduled_last) continue;
    const uint64_t total = t.match.bytes;
    const uint64_t remaining = total - t.done;
    const uint64_t room = std::min(left, limit - spent);
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
      // Inline payloads travel whole (see the class comment).
      if (remaining > room && !out.empty()) break;
      c.len = remaining;
    } else {
      if (room == 0) break;
      c.len = std::min(room, remaining);
    }
    if (!unlimited) {
      left -= std::min(left, c.len);
      spent += c.len;
    }
    t.done += c.len;
    c.last = t.done == total;
    t.scheduled_last = c.last;
    out.push_back(c);
    // Partial: the pair's next transfer must not overtake it.
    if (!c.last) break;
  }
  return spent;
}

std::vector<Chunk> ChunkScheduler::schedule_slice() {
  std::vector<Chunk> out;
  // The pairs with something left to schedule, round-robin from next_first_.
  // (Only a fully scheduled prefix of a queue can lack work, so the scan
  // stops at its first unscheduled transfer.)
  std::vector<decltype(pairs_)::iterator> active;
  auto has_work = [](const std::deque<Transfer>& q) {
    for (const auto& t : q)
      if (!t.scheduled_last) return true;
    return false;
  };
  const auto start = pairs_.lower_bound(next_first_);
  for (auto it = start; it != pairs_.end(); ++it)
    if (has_work(it->second)) active.push_back(it);
  for (auto it = pairs_.begin(); it != start; ++it)
    if (has_work(it->second)) active.push_back(it);
  if (active.empty()) return out;
  // Next slice, the pair after this slice's first goes first.
  const auto after = std::next(active.front());
  next_first_ = after == pairs_.end() ? PairKey{INT32_MIN, INT32_MIN} : after->first;

  uint64_t left = budget_;
  const uint64_t share =
      budget_ == 0 ? UINT64_MAX : std::max<uint64_t>(1, budget_ / active.size());
  // Round one: an equal share each. Round two: what is left, in the same
  // order (a pair that needed less than its share leaves it to the others).
  for (auto it : active) serve(it->second, share, left, out);
  if (budget_ != 0)
    for (auto it : active) {
      if (left == 0) break;
      serve(it->second, UINT64_MAX, left, out);
    }
  return out;
}

void ChunkScheduler::next_pieces(
    const std::function<void(const Match&, uint64_t, uint64_t)>& fn) const {
  for (const auto& [key, q] : pairs_)
    for (const Transfer& t : q) {
      if (t.scheduled_last) continue;
      const uint64_t remaining = t.match.bytes - t.done;
      fn(t.match, t.done, budget_ == 0 ? remaining : std::min(remaining, budget_));
      break;  // the pair's later transfers wait for this one
    }
}

void ChunkScheduler::finish_slice() {
  // Within a pair transfers finish in order, so the finished ones are a
  // prefix of its queue. Popping from the front (and erasing emptied pairs
  // from the map) keeps the Match pointers of the others valid, as Chunk
  // promises.
  for (auto it = pairs_.begin(); it != pairs_.end();) {
    auto& q = it->second;
    while (!q.empty() && q.front().scheduled_last) {
      q.pop_front();
      --count_;
    }
    it = q.empty() ? pairs_.erase(it) : std::next(it);
  }
}

}  // namespace bcs
