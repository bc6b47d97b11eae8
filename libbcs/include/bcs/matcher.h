// Message scheduling microphase (MSM): the buffer receiver's matching and the
// DMA helper's chunk schedule. Pure logic, no I/O, so it can be unit-tested
// and benchmarked alone and so that record/replay only needs the descriptors.
//
// Determinism: every decision is a function of the descriptors handed in per
// slice, never of their arrival order over the network. Incoming sends of a
// slice are put in canonical order (slice posted, source rank, per-pair
// sequence) before matching; a rank's own receives and probes are taken in
// its post order.
#pragma once

#include <climits>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <tuple>
#include <utility>
#include <vector>

#include "bcs/layout.h"
#include "bcs/segment.h"

namespace bcs {

// A send descriptor as the destination node's buffer receiver sees it.
struct SendDesc {
  int32_t src = 0;  // world rank of the sender
  int32_t dst = 0;  // world rank of the receiver
  int32_t context = 0;
  int32_t tag = 0;
  uint64_t pair_seq = 0;  // per (src, dst) sequence, assigned by the sender's BS (1, 2, ...)
  uint64_t slice = 0;     // slice in which it was posted
  uint64_t len = 0;       // message bytes
  uint64_t addr = 0;      // in the sender's address space (not inline)
  LayoutPtr layout;       // non-contiguous: the blocks at addr (sender's node only)
  uint32_t request = 0;   // the sender's request slot (not inline)
  // The sender's process, offered by its node manager to a receiver's node
  // manager on the same host for a single copy (0: none).
  uint32_t pid = 0;
  bool is_inline = false;         // inline or eager: the sender completed at its post
  std::vector<uint8_t> payload;  // inline bytes (len of them)
  // May go on its receiver's unexpected shelf (an entry holds kInlineMax
  // bytes): inline, not eager.
  bool shelvable() const { return is_inline && len <= kInlineMax; }
  // Set by the matcher when the send becomes unexpected: its place in its
  // receiver's unexpected messages, in canonical order (the unexpected
  // shelf's wildcards compare these).
  uint64_t arrival = 0;
};

// A receive or probe descriptor of a local rank.
struct RecvDesc {
  int32_t rank = 0;                // world rank of the receiver (a local rank)
  DescKind kind = DescKind::recv;  // recv, probe or iprobe
  int32_t src = kAnySource;        // world rank or kAnySource
  int32_t context = 0;
  int32_t tag = kAnyTag;
  uint64_t addr = 0;
  LayoutPtr layout;  // non-contiguous: the blocks at addr
  uint64_t cap = 0;  // receive buffer capacity in bytes (packed)
  uint32_t request = 0;
  uint64_t slice = 0;
};

// A sender's cancel of its send in request slot `request` to rank `dst`;
// of an inline send (`is_inline`), the send numbered `pair_seq` from `src`
// to `dst`, and `request` is the sender's slot that learns the outcome.
struct SendCancel {
  int32_t src = 0;
  int32_t dst = 0;
  uint32_t request = 0;
  uint64_t pair_seq = 0;
  bool is_inline = false;
};

// A matched pair: what the DMA helper must move. A cancelled send is a
// "match" without a receive that moves nothing: its only effect is that the
// sender's request completes as cancelled (through the same path, so a
// remote sender's node learns it in the P2P microphase).
struct Match {
  SendDesc send;
  RecvDesc recv;
  uint64_t bytes = 0;      // min(send.len, recv.cap)
  bool truncated = false;  // send.len > recv.cap
  bool cancelled = false;  // the send was cancelled before any receive matched it
  // With `cancelled`: the answer to the cancel of an inline send that a
  // receive had already taken (send.request is the cancel's slot, which
  // completes without error: the send stands).
  bool cancel_late = false;
};

// Answer to a probe/iprobe.
struct ProbeResult {
  RecvDesc probe;
  bool found = false;
  int32_t source = 0;
  int32_t tag = 0;
  uint64_t len = 0;
};

class Matcher {
 public:
  // One MSM step for `slice`. `local_posts`: receive/probe descriptors of
  // local ranks, in each rank's post order (ranks may be interleaved; only the
  // relative order within one rank matters). `sends`: every send descriptor
  // destined to a local rank that was exchanged in this slice's DEM, in any
  // order. Order of work:
  //   1. each rank's new receives/probes, in post order, against that rank's
  //      unexpected sends (earliest first);
  //   2. the new sends, in canonical order, against posted receives (earliest
  //      posted first), then against pending blocking probes;
  //   3. iprobes still unanswered complete as not-found.
  // Results accumulate until taken.
  void msm(uint64_t slice, const std::vector<RecvDesc>& local_posts, std::vector<SendDesc> sends);
  // After msm: cancels of sends that arrived by now. One still unexpected
  // leaves matching and becomes a cancelled Match (taken with the matches);
  // one already matched is not cancelled. The cancel of an inline send
  // always yields a Match (no data): cancelled, or cancel_late.
  void cancel_sends(const std::vector<SendCancel>& cancels);

  std::vector<Match> take_matches();
  std::vector<ProbeResult> take_probe_results();
  // Receives removed by a cancel descriptor before they matched.
  std::vector<RecvDesc> take_cancelled();

  // The unexpected shelf (segment.h, Shelf): the sends `rank` could take
  // without a slice. Per (context, source, tag), the leading run of inline
  // sends, in send order; the keys take turns (each key's first, then each
  // key's second, ...), so that a backlog from one source does not crowd
  // out the others; at most `max` in all. And the cuts: the lowest
  // `arrival` of a send held but not offered, per (context, source), per
  // (context, tag) and per context (absent: none), so that a wildcard
  // receive takes the earliest offered send it accepts only if no send
  // held back comes before it. With more than kShelfCutKeys keys, or
  // arrivals out of canonical order (a slice handed in late), the cuts are
  // 0 and wildcards go to the node manager. Nothing is taken; the pointers
  // are valid until the matcher changes.
  struct ShelfOffer {
    std::vector<const SendDesc*> sends;
    std::map<std::pair<int32_t, int32_t>, uint64_t> src_cuts;  // (context, src)
    std::map<std::pair<int32_t, int32_t>, uint64_t> tag_cuts;  // (context, tag)
    std::map<int32_t, uint64_t> context_cuts;
    bool no_wildcards = false;  // every cut is 0
  };
  static constexpr size_t kShelfCutKeys = 4096;
  ShelfOffer shelf_candidates(int32_t rank, size_t max) const;
  // The rank took this unexpected send from its shelf: it leaves matching.
  // False when the matcher holds no such send (it never offers one it does
  // not hold, so only a rank that lied about its shelf gets here).
  bool take_shelved(int32_t rank, int32_t context, int32_t src, int32_t tag, uint64_t pair_seq);

  size_t unexpected_count() const;
  size_t unexpected_count(int32_t rank) const;  // sends waiting for `rank`
  // Bytes of the sends waiting for `rank` held here (inline and eager
  // sends' payloads): the node's memory they cost.
  uint64_t unexpected_bytes(int32_t rank) const;
  // Unexpected sends that are not inline: a receive that matches one makes
  // a transfer that moves data (the others are delivered from their
  // descriptors).
  size_t unexpected_moving() const;
  size_t posted_count() const;
  // `rank`'s receives and blocking probes that no send matched yet, the
  // earliest posted first, at most `max`; `*total`: how many in all. What
  // a hung job's ranks wait for (bcs kill's report).
  std::vector<RecvDesc> waiting(int32_t rank, size_t max, size_t* total) const;

 private:
  // Removes `rank`'s posted receive in request slot `request`, if unmatched.
  void cancel(int32_t rank, uint32_t request);
  static void answer_inline_cancel(const SendCancel& c, Match* m);

  // Matching queues of one receiving rank, bucketed so that the common,
  // fully specified case is a map look-up instead of a scan (a scan per
  // message made the MSM quadratic: ~1 ms for 1024 messages in one slice).
  // Semantics are those of one ordered queue per side:
  //  - unexpected sends, in canonical order, bucketed by (context, src,
  //    tag); within a bucket every send matches the same receives, so the
  //    earliest matching send is always some bucket's front;
  //  - posted receives, numbered in post order; fully specified ones
  //    bucketed by (context, src, tag), wildcard ones in one list.
  using Key = std::tuple<int32_t, int32_t, int32_t>;  // context, src, tag
  struct Posted {
    uint64_t order;  // post order within the rank
    RecvDesc recv;
  };
  struct PerRank {
    std::map<Key, std::deque<SendDesc>> unexpected;
    std::map<Key, std::deque<Posted>> posted_exact;
    std::deque<Posted> posted_wild;  // src or tag is a wildcard, post order
    std::deque<RecvDesc> probes;     // pending blocking probes, post order
    uint64_t next_order = 0;
    size_t unexpected_n = 0;
    size_t moving_n = 0;  // of them, not inline
    uint64_t bytes = 0;   // their payloads
    uint64_t next_arrival = 0;
    std::tuple<uint64_t, int32_t, uint64_t> last_arrival{};  // (slice, src, pair_seq)
    bool arrivals_out_of_order = false;  // until the unexpected messages run out
    using Bucket = std::map<Key, std::deque<SendDesc>>::iterator;
    // The bucket whose front is the earliest unexpected send `r` accepts,
    // or unexpected.end().
    Bucket find_unexpected(const RecvDesc& r);
    void add_unexpected(SendDesc s);
    SendDesc take_unexpected(Bucket b);
    // Every way a send leaves the unexpected messages comes through here.
    void count_out(const SendDesc& s) {
      --unexpected_n;
      if (!s.is_inline) --moving_n;
      bytes -= s.payload.size();
    }
  };
  std::map<int32_t, PerRank> ranks_;
  std::vector<Match> matches_;
  std::vector<ProbeResult> probe_results_;
  std::vector<RecvDesc> cancelled_;
};

// True when a receive/probe (src, tag, context) accepts a send.
bool desc_matches(const RecvDesc& r, const SendDesc& s);

// One piece of a matched transfer, scheduled into one slice.
struct Chunk {
  uint64_t transfer = 0;   // id of the transfer (order of arrival in the scheduler)
  Match* match = nullptr;  // owned by the scheduler, valid until the transfer is finished
  uint64_t offset = 0;
  uint64_t len = 0;
  bool first = false;
  bool last = false;  // completing this chunk completes the transfer
};

// Cuts matched transfers into per-slice chunks under a byte budget.
//
// Fair between pairs, FIFO within one: transfers are queued per (sender,
// receiver) pair, and a pair's transfers move strictly one after the other
// (MPI's non-overtaking rule, and a transfer never finishes before an older
// one of its pair). Each slice the pairs with work are visited round-robin,
// starting one further every slice: first each gets up to an equal share of
// the budget, then what is left goes round again. So a small message is
// never held behind another pair's large transfer for more than its own
// slice, whatever the arrival order (a 1 GiB transfer and an 8-byte one
// both make progress in the very next slice). The order depends only on
// what was added, never on timing: matching stays deterministic.
//
// A zero-byte transfer is one empty chunk that costs nothing. Inline
// transfers are one chunk each, and one larger than what is left waits for
// the next slice, unless nothing at all was scheduled yet in this one (a
// budget smaller than one inline message never stalls the queue).
class ChunkScheduler {
 public:
  explicit ChunkScheduler(uint64_t budget_bytes) : budget_(budget_bytes) {}
  void set_budget(uint64_t b) { budget_ = b; }
  uint64_t budget() const { return budget_; }

  void add(Match m);
  // The chunks of the next slice. Pointers stay valid until finish_slice().
  std::vector<Chunk> schedule_slice();
  // Forget transfers whose last chunk has been scheduled (call after the P2P
  // microphase carried out the chunks of schedule_slice()).
  void finish_slice();
  bool idle() const { return count_ == 0; }
  size_t in_flight() const { return count_; }
  // Each pair's next piece as the next slice would cut it with the whole
  // budget: `fn(match, offset, len)`, in pair order. A guess (a pair that
  // shares the budget gets less), for work that may start early - the DMA
  // helper's copies ahead; nothing is scheduled.
  void next_pieces(const std::function<void(const Match&, uint64_t, uint64_t)>& fn) const;

 private:
  struct Transfer {
    uint64_t id;
    Match match;
    uint64_t done = 0;  // bytes already scheduled
    bool scheduled_last = false;
  };
  using PairKey = std::pair<int32_t, int32_t>;  // (sender, receiver) world ranks
  // Schedules from the front of one pair's queue, at most `limit` bytes
  // (and what `left` allows); returns the bytes spent.
  uint64_t serve(std::deque<Transfer>& q, uint64_t limit, uint64_t& left,
                 std::vector<Chunk>& out);
  uint64_t budget_;
  uint64_t next_id_ = 0;
  size_t count_ = 0;
  // std::map: iteration in key order (deterministic), and its nodes never
  // move, so Chunk::match stays valid while pairs come and go.
  std::map<PairKey, std::deque<Transfer>> pairs_;
  PairKey next_first_{INT32_MIN, INT32_MIN};  // round-robin: the pair served first
};

}  // namespace bcs
