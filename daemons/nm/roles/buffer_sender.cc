#include "buffer_sender.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string_view>

namespace bcs::nm {

BufferSender::BufferSender(uint32_t self) : self_(self) {
  if (const char* f = std::getenv("BCS_TEST_FAULT")) {
    if (std::string_view(f) == "bad-batch") fault_ = Fault::bad_batch;
    if (std::string_view(f) == "lose-batch") fault_ = Fault::lose_batch;
    if (std::string_view(f) == "hide-moving") fault_ = Fault::hide_moving;
    if (fault_ != Fault::none) spdlog::warn("test fault injection on: {}", f);
  }
}

void BufferSender::hold_sends_to(std::vector<int32_t> receivers, bool job_blocked) {
  job_blocked_ = job_blocked;
  hold_to_ = std::move(receivers);
  std::sort(hold_to_.begin(), hold_to_.end());
}

// A send held while its ring's tail stays put and every rank of the job is
// blocked, for longer than the limit: its receiver took none of the sends
// that keep it full (a receive would have released it) and nobody will
// post anything: the bound deadlocked the program. End the sender with the
// reason. A receiver that computes for an hour before it receives is not
// blocked, and keeps its senders waiting as long as it likes.
void BufferSender::hold_check(int32_t me, RankView& v, int32_t held_to, LocalRanks& ranks) {
  if (held_to < 0) {
    if (!held_.empty()) held_.erase(me);  // the common case costs no look-up
    return;
  }
  const auto now = std::chrono::steady_clock::now();
  const uint64_t tail = v.ctl->tail.load(std::memory_order_relaxed);
  auto [it, fresh] = held_.try_emplace(me, Held{tail, held_to, now});
  if (!fresh && (it->second.tail != tail || !job_blocked_)) it->second = Held{tail, held_to, now};
  if (now - it->second.since <= hold_limit_) return;
  const auto secs = std::chrono::duration_cast<std::chrono::seconds>(hold_limit_).count();
  // Read after "rank N was ended by its node manager: it ".
  ranks.rank_corrupted(
      me, fmt::format("kept sending to rank {}, which has {} or more unexpected messages "
                      "waiting (the limit; bcs run --max-unexpected) and received none of them "
                      "for {} s",
                      it->second.to, max_unexpected_, secs));
  held_.erase(it);
}

wire::Report BufferSender::run(uint64_t slice, LocalRanks& ranks, Net& net, BufferReceiver& br,
                               Collectives& coll) {
  wire::Report rep;
  const uint32_t nnodes = ranks.nnodes();
  std::vector<wire::DescBatch> batches(nnodes);
  uint32_t drained = 0, coll_drained = 0, moving = 0;

  for (int32_t me : ranks.local_ranks()) {
    RankView v = ranks.view_of(me);
    // Fails the request a bad descriptor names (if the index is sane).
    auto refuse = [&](const Descriptor& d, const std::string& why) {
      spdlog::error("job {}: rank {}: {}", ranks.job_id(), me, why);
      // An inline send or a bypassed collective was completed by the rank
      // itself: its slot may be in use again.
      // A registration has no request: its collectives fail later instead.
      // A cancel names another request: a bad cancel must not complete it.
      const bool rank_owned = (d.flags & kDescNoComplete) || d.kind == DescKind::comm ||
                              d.kind == DescKind::cancel ||
                              (d.kind == DescKind::send && (d.flags & kDescInline));
      if (!rank_owned && d.request < v.request_slots)
        ranks.complete_status(me, d.request, bcs_err_internal, me, 0, 0, 0);
    };
    // Garbage only a rank that scribbles over its segment can write (the
    // library checks all of it before posting): the rank is ended, named,
    // and nothing more of its ring is read.
    bool corrupt = false;
    auto corrupted = [&](const Descriptor&, const std::string& why) {
      if (!corrupt) ranks.rank_corrupted(me, "corrupted its descriptor ring: " + why);
      corrupt = true;
    };
    // A non-contiguous buffer's block list, copied out of the rank and
    // checked: it must describe exactly `bytes` packed bytes.
    auto layout_of = [&](const Descriptor& d, uint64_t bytes, LayoutPtr* out) {
      LayoutRef ref;
      std::memcpy(&ref, d.payload, sizeof ref);
      if (ref.nblocks == 0 || ref.nblocks > kLayoutMaxBlocks) {
        corrupted(d, "layout of " + std::to_string(ref.nblocks) + " blocks");
        return false;
      }
      std::vector<LayoutBlock> blocks(ref.nblocks);
      if (ranks.read(me, ref.blocks, blocks.data(), blocks.size() * sizeof(LayoutBlock))) {
        corrupted(d, "layout block list unreadable");
        return false;
      }
      std::string why;
      *out = layout_make(std::move(blocks), ref.count, ref.extent, &why);
      if (*out && (*out)->total() != bytes)
        why = "layout of " + std::to_string((*out)->total()) + " bytes for " +
              std::to_string(bytes);
      if (!*out || (*out)->total() != bytes) {
        corrupted(d, why);
        return false;
      }
      return true;
    };
    auto take = [&](const Descriptor& d, const RingSpan& span) {
      if (corrupt) return;
      switch (d.kind) {
        case DescKind::send: {
          if (d.peer < 0 || static_cast<uint32_t>(d.peer) >= ranks.nranks())
            return corrupted(d, "send to invalid rank " + std::to_string(d.peer));
          if ((d.flags & kDescInline) && (d.inline_len > kInlineSpanMax || d.inline_len != d.len))
            return corrupted(d, "inline length " + std::to_string(d.inline_len) + " invalid");
          if (d.request >= v.request_slots)
            return corrupted(d, "request index " + std::to_string(d.request) + " out of range");
          SendDesc s;
          s.src = me;
          s.dst = d.peer;
          s.context = d.context;
          s.tag = d.tag;
          s.pair_seq = ++pair_seq_[{me, d.peer}];
          s.slice = slice - 1;
          s.len = d.len;
          s.addr = d.addr;
          s.request = d.request;
          s.is_inline = (d.flags & kDescInline) != 0;
          if (!s.is_inline) ++moving;
          // An eager send's bytes come from its span (read with `d`, so of
          // d.inline_len bytes), an inline one's from its payload.
          if (s.is_inline) {
            const uint8_t* p = span.data ? span.data : d.payload;
            s.payload.assign(p, p + d.inline_len);
          }
          if (!s.is_inline && (d.flags & kDescLayout) && !layout_of(d, d.len, &s.layout)) return;
          const uint32_t node = ranks.node_of(d.peer);
          if (node == self_) {
            br.add_local_send(std::move(s));
          } else {
            // The receiver's node will read this buffer: it may, and only it.
            if (!s.is_inline)
              ranks.read_grants().grant(me, s.request, node, s.addr, s.len, s.layout);
            // A node manager of this host: its rank may read this one's
            // buffer itself (DmaHelper, single copy).
            if (!s.is_inline && !s.layout) s.pid = ranks.offer_pid(me, node);
            batches[node].sends.push_back(std::move(s));
          }
          return;
        }
        case DescKind::recv:
        case DescKind::probe:
        case DescKind::iprobe: {
          if (d.request >= v.request_slots)
            return corrupted(d, "request index " + std::to_string(d.request) + " out of range");
          if (d.peer != kAnySource && (d.peer < 0 || static_cast<uint32_t>(d.peer) >= ranks.nranks()))
            return corrupted(d, "receive from invalid rank " + std::to_string(d.peer));
          RecvDesc rd;
          rd.rank = me;
          rd.kind = d.kind;
          rd.src = d.peer;
          rd.context = d.context;
          rd.tag = d.tag;
          rd.addr = d.addr;
          rd.cap = d.len;
          if (d.kind == DescKind::recv && (d.flags & kDescLayout) && !layout_of(d, d.len, &rd.layout))
            return;
          rd.request = d.request;
          rd.slice = slice - 1;
          br.add_local_post(rd);
          return;
        }
        case DescKind::cancel: {
          if (d.request >= v.request_slots)
            return corrupted(d, "cancel of request index " + std::to_string(d.request) +
                                 " out of range");
          if (d.flags & kDescCancelSend) {
            // Taken at the receiver's node, after the send it names.
            if (d.peer < 0 || static_cast<uint32_t>(d.peer) >= ranks.nranks())
              return corrupted(d, "cancel of a send to invalid rank " + std::to_string(d.peer));
            SendCancel c{me, d.peer, d.request};
            ++moving;  // answered through a chunk (P2P)
            // An inline send's cancel names the send by its number (which
            // may be anything: one not found is answered "too late") and
            // brings its own slot for the answer.
            c.is_inline = (d.flags & kDescCancelInline) != 0;
            if (c.is_inline) c.pair_seq = d.addr;
            const uint32_t node = ranks.node_of(d.peer);
            if (node == self_) {
              br.add_local_cancel(c);
            } else {
              // The receiver's node answers through a remote read of
              // nothing, as for a cancelled send: let it, for that slot.
              if (c.is_inline) ranks.read_grants().grant(me, c.request, node, 0, 0);
              batches[node].cancels.push_back(c);
            }
            return;
          }
          RecvDesc rd;
          rd.rank = me;
          rd.kind = DescKind::cancel;
          rd.request = d.request;
          rd.slice = slice - 1;
          br.add_local_post(rd);  // in post order with the rank's receives
          return;
        }
        case DescKind::comm: {
          ++coll_drained;
          if (d.len < 1 || d.len > ranks.nranks())
            return refuse(d, "communicator of " + std::to_string(d.len) + " members");
          std::vector<int32_t> members(d.len);
          if (ranks.read(me, d.addr, members.data(), members.size() * sizeof(int32_t)))
            return refuse(d, "communicator member list unreadable");
          std::string why;
          if (!coll.register_comm(me, d.context, std::move(members), &why)) refuse(d, why);
          return;
        }
        case DescKind::coll: {
          ++coll_drained;
          std::string why;
          if (!coll.post(me, d, &why)) refuse(d, why);
          return;
        }
      }
      corrupted(d, "descriptor of unknown kind " + std::to_string(static_cast<int>(d.kind)));
    };
    // Each descriptor comes read once, into private memory (ring_drain_holding):
    // the rank may write its ring while we look, and a field checked must be
    // the field used.
    int32_t held_to = -1;
    const RingDrained dr = ring_drain_holding(
        v, taken_[me],
        [&](const Descriptor& d, const RingSpan& span) {
          const bool to_peer =
              d.kind == DescKind::send ||
              (d.kind == DescKind::cancel && (d.flags & kDescCancelSend));
          if (!corrupt && to_peer && std::binary_search(hold_to_.begin(), hold_to_.end(), d.peer)) {
            if (held_to < 0) held_to = d.peer;
            ++rep.held;
            return false;
          }
          take(d, span);
          return true;
        });
    const size_t n = dr.taken;
    if (dr.torn && !corrupt) {
      ranks.rank_corrupted(me, "corrupted its descriptor ring: head " +
                                   std::to_string(dr.head) + " ends within an eager send");
      corrupt = true;
    }
    corrupt = corrupt || dr.bad;
    ranks.ring_seen(me, dr.head);
    if (n && !corrupt) ranks.note_drain(me, n);
    hold_check(me, v, held_to, ranks);
    if (dr.bad)
      ranks.rank_corrupted(me, "corrupted its descriptor ring: head " +
                                   std::to_string(v.ctl->head.load()) + " is not within a ring of tail " +
                                   std::to_string(v.ctl->tail.load()));
    drained += static_cast<uint32_t>(n);
    // A rank that found its ring full sleeps on its futex until we make
    // room. Only then is a wake-up due (the ring was full and its tail
    // moved): waking on every drain would rouse ranks blocked in MPI_Recv
    // for nothing.
    if (dr.full_before && v.ctl->head.load(std::memory_order_relaxed) -
                               v.ctl->tail.load(std::memory_order_relaxed) <
                           v.ring_slots)
      rank_wake(v);
  }

  rep.batches_to.assign(nnodes, 0);
  for (uint32_t node = 0; node < nnodes; ++node) {
    auto& b = batches[node];
    if (b.sends.empty() && b.cancels.empty()) continue;
    b.slice = slice;
    b.job = ranks.job_id();
    if (fault_ == Fault::lose_batch) {  // test only: announced, never sent
      rep.batches_to[node] = 1;
      continue;
    }
    auto bytes = wire::encode(b);
    if (fault_ == Fault::bad_batch) bytes.resize(bytes.size() / 2);  // test only: truncated
    auto s = net.send(node, wire::kEvDescBatch, bytes);
    if (s != core::Status::ok) {
      spdlog::error("DEM: batch to node {}: {}", node, core::status_str(s));
      rep.fail(fmt::format("descriptor batch to node {} not sent: {}", node, core::status_str(s)));
      continue;
    }
    rep.batches_to[node] = 1;
  }
  // The collective and reduce helpers' local half: per context, how far
  // every local member got.
  rep.coll = coll.levels();
  // Collectives alone do not need the MSM.
  rep.drained = drained - coll_drained;
  rep.coll_drained = coll_drained;
  rep.moving = fault_ == Fault::hide_moving ? 0 : moving;  // test only: hidden
  return rep;
}

}  // namespace bcs::nm
