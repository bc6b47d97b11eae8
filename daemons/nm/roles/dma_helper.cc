#include "dma_helper.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <set>

namespace bcs::nm {

namespace {
constexpr size_t kStagingBytes = 4u << 20;
// Below this a second copy costs less than waking the receiver to make it.
constexpr size_t kSingleCopyMin = 128u << 10;
}

wire::Report DmaHelper::run(const wire::Strobe& strobe, LocalRanks* ranks, Net& net,
                            BufferReceiver& br) {
  wire::Report rep;
  // Remote reads this node must serve in this microphase (some may have
  // been served already, while it waited for this microstrobe).
  uint32_t to_serve = self_ < strobe.expect_gets.size() ? strobe.expect_gets[self_] : 0;
  auto serve_remaining = [&] {
    for (; to_serve > 0; --to_serve) {
      core::Message done;
      auto r = net.wait(wire::kEvDmaServed, &done, kPhaseDataTimeout);
      if (r != core::Status::ok) {
        spdlog::error("P2P: {} remote read(s) never came: {}", to_serve, core::status_str(r));
        rep.fail(fmt::format("{} remote read(s) to serve never came: {}", to_serve,
                             core::status_str(r)));
        return;
      }
    }
  };
  if (!ranks) {
    ahead_.clear();  // the job's ranks are gone with it
    landed_.clear();
    serve_remaining();
    return rep;
  }
  LocalRanks& job = *ranks;
  settle_ahead(job, br);
  // Who receives bytes in this P2P (help_for asks, once per order).
  receiving_.clear();
  for (const Chunk& c : br.chunks())
    if (!c.match->send.is_inline) receiving_.push_back(c.match->recv.rank);
  // Remote chunks asked for, by token; `direct`: the receiving rank read it
  // itself (with outcome `err`), the sender's node only confirms.
  // `group`: a piece of a chunk asked for in pieces (remote_gets), by the
  // token of its first; the chunk is finished when all of them came.
  struct Pending {
    Chunk c;
    bool direct = false;
    int32_t err = 0;
    uint64_t group = 0;
  };
  std::unordered_map<uint64_t, Pending> remote;
  struct Group {
    Chunk whole;
    uint32_t left = 0;
    int32_t err = 0;
  };
  std::unordered_map<uint64_t, Group> groups;

  // The sender's packed bytes [off, off + n), and the receiver's, whether
  // contiguous or not (layout.h).
  auto read_send = [&](const Match& m, uint64_t off, uint8_t* dst, size_t n) {
    return m.send.layout ? job.read_layout(m.send.src, m.send.addr, *m.send.layout, off, dst, n)
                         : job.read(m.send.src, m.send.addr + off, dst, n);
  };
  auto write_recv = [&](const Match& m, uint64_t off, const uint8_t* src, size_t n) {
    return m.recv.layout ? job.write_layout(m.recv.rank, m.recv.addr, *m.recv.layout, off, src, n)
                         : job.write(m.recv.rank, m.recv.addr + off, src, n);
  };
  auto finish_chunk = [&](const Chunk& c, int32_t err) {
    if (err) xfer_error_[c.transfer] = err;
    if (!c.last) return;
    const Match& m = *c.match;
    if (m.cancelled) {  // no receive: only the sender learns the outcome
      xfer_error_.erase(c.transfer);
      return;
    }
    int32_t e = 0;
    if (auto it = xfer_error_.find(c.transfer); it != xfer_error_.end()) {
      e = it->second;
      xfer_error_.erase(it);
    }
    if (!e && m.truncated) e = bcs_err_truncate;
    job.complete_status(m.recv.rank, m.recv.request, e, m.send.src, m.send.tag, m.bytes, 0,
                        m.send.pair_seq);
  };

  // This slice's single-copy chunks are posted to their ranks first, and
  // the next pieces (copies ahead) right behind them, so that a rank goes
  // from its chunk straight on to the next piece instead of waiting for
  // this P2P to finish with the chunk. The loop below then only settles
  // them, in order. Only into a rank with no order pending, so that its
  // await settles this one (the oldest).
  const auto& chunks = br.chunks();
  std::vector<char> preposted(chunks.size(), 0);
  if (copy_ahead_) {
    std::vector<int32_t> busy;
    for (const Ahead& a : ahead_) busy.push_back(a.to);
    for (size_t i = 0; i < chunks.size(); ++i) {
      const Chunk& c = chunks[i];
      const Match& m = *c.match;
      const uint32_t pid = single_copy_source(job, m, c.len);
      if (!pid || std::find(busy.begin(), busy.end(), m.recv.rank) != busy.end()) continue;
      const uint64_t src = m.send.addr + c.offset, dst = m.recv.addr + c.offset;
      if (landed(m.recv.rank, pid, src, dst, c.len)) continue;
      if (job.post_copy(pid, m.recv.rank, src, dst, c.len, help_for(job, m))) {
        preposted[i] = 1;
        busy.push_back(m.recv.rank);
      }
    }
    copy_ahead(job, br);
  }

  for (size_t ci = 0; ci < chunks.size(); ++ci) {
    const Chunk& c = chunks[ci];
    const Match& m = *c.match;
    if (m.send.is_inline) {
      land_inline(job, c);
      rep.bytes += c.len;
    } else if (m.cancelled && job.is_local(m.send.src)) {
      job.complete_status(m.send.src, m.send.request, m.cancel_late ? 0 : bcs_err_cancelled,
                          m.send.src, m.send.tag, 0, 0);
      finish_chunk(c, 0);
    } else if (job.is_local(m.send.src)) {
      // Local sender: read its memory, write the receiver's, through the
      // staging buffer (cross-memory attach needs one side to be us).
      int32_t err = LocalRanks::kNotDelegated;
      // A big contiguous chunk: the receiver copies it itself, once, if it
      // is asleep in MPI (segment.h, DmaOrder).
      if (preposted[ci]) {
        err = job.await_copy(m.recv.rank);
      } else if (c.len >= kSingleCopyMin && !m.send.layout && !m.recv.layout) {
        const uint64_t src = m.send.addr + c.offset, dst = m.recv.addr + c.offset;
        err = landed(m.recv.rank, job.pid_of(m.send.src), src, dst, c.len)
                  ? 0
                  : job.copy_by_receiver(m.send.src, m.recv.rank, src, dst, c.len);
      }
      const bool copied = err != LocalRanks::kNotDelegated;
      if (!copied) err = 0;
      if (!copied && staging_.size() < std::min<uint64_t>(c.len, kStagingBytes))
        staging_.resize(std::min<uint64_t>(std::max<uint64_t>(c.len, 1), kStagingBytes));
      for (uint64_t off = 0; !copied && off < c.len && !err;) {
        size_t n = std::min<uint64_t>(c.len - off, staging_.size());
        err = read_send(m, c.offset + off, staging_.data(), n);
        if (!err) err = write_recv(m, c.offset + off, staging_.data(), n);
        off += n;
      }
      rep.bytes += c.len;
      // The sender learns a failure too (its buffer may be the bad one),
      // as it does from a remote read.
      if (err) xfer_error_[c.transfer] = err;
      if (c.last) {
        const auto it = xfer_error_.find(c.transfer);
        const int32_t e = it == xfer_error_.end() ? 0 : it->second;
        job.complete_status(m.send.src, m.send.request, e, m.send.src, m.send.tag, m.send.len, 0);
      }
      finish_chunk(c, err);
    } else {
      wire::DmaGet g;
      g.job = job.job_id();
      g.token = next_token_++;
      g.src_rank = m.send.src;
      g.src_request = m.send.request;
      g.addr = m.send.addr + c.offset;
      g.len = c.len;
      g.last = c.last ? 1 : 0;
      g.cancelled = m.cancel_late ? wire::kCancelLate : m.cancelled ? wire::kCancelDone : 0;
      // A sender on a node manager of this host (it offered its process;
      // an offer from a node elsewhere is ignored): a big contiguous chunk
      // is read by the receiving rank itself, once, if it sleeps in MPI,
      // instead of crossing both node managers.
      const uint32_t node = job.node_of(m.send.src);
      if (m.send.pid && job.host_peer(node) && !g.cancelled && c.len >= kSingleCopyMin &&
          !m.recv.layout) {
        const uint64_t dst = m.recv.addr + c.offset;
        const int32_t e = preposted[ci] ? job.await_copy(m.recv.rank)
                          : landed(m.recv.rank, m.send.pid, g.addr, dst, c.len)
                              ? 0
                              : job.copy_from_process(m.send.pid, m.recv.rank, g.addr, dst, c.len);
        if (e != LocalRanks::kNotDelegated) {
          g.direct = 1;
          g.direct_error = e;
        }
      }
      auto send_get = [&](const wire::DmaGet& get) {
        const auto s = net.send(node, wire::kEvDmaGet, wire::encode(get));
        if (s == core::Status::ok) return true;
        spdlog::error("P2P: remote read from node {}: {}", node, core::status_str(s));
        rep.fail(fmt::format("remote read from node {} not sent: {}", node, core::status_str(s)));
        return false;
      };
      // A chunk from another host is asked for in pieces, all at once: the
      // sending node reads the next while one crosses the network and this
      // node writes the one before (remote_gets says how many; the MSM
      // announced as many to the sending node).
      if (const uint32_t pieces = remote_gets(c, job); pieces > 1 && !g.direct) {
        const uint64_t first_token = g.token;
        Group grp{c, 0, 0};
        for (uint32_t k = 0; k < pieces; ++k) {
          wire::DmaGet gp = g;
          const uint64_t off = uint64_t{k} * kRemotePiece;
          gp.token = k == 0 ? first_token : next_token_++;
          gp.addr = g.addr + off;
          gp.len = std::min<uint64_t>(kRemotePiece, c.len - off);
          gp.last = c.last && k + 1 == pieces ? 1 : 0;
          if (!send_get(gp)) {
            grp.err = bcs_err_peer_gone;
            break;
          }
          Chunk piece = c;
          piece.offset = c.offset + off;
          piece.len = gp.len;
          piece.last = false;
          remote.emplace(gp.token, Pending{piece, false, 0, first_token});
          ++grp.left;
        }
        if (grp.left == 0)
          finish_chunk(c, grp.err);
        else
          groups.emplace(first_token, grp);
        continue;
      }
      if (!send_get(g)) {
        finish_chunk(c, bcs_err_peer_gone);
        continue;
      }
      // A piece the rank read itself, before the transfer's last, gets no
      // answer: the sender's node keeps any failure of it (a refused
      // range, the rank's own error) and answers it with the last chunk,
      // which completes both ends. The round trip left this slice's path.
      if (g.direct && !g.last) {
        rep.bytes += c.len;
        finish_chunk(c, g.direct_error);
        continue;
      }
      remote.emplace(g.token, Pending{c, g.direct != 0, g.direct_error});
    }
  }

  // This slice's chunks are copied or asked for, and their orders settled:
  // the next pieces that did not fit beside them go now, while the remote
  // reads come back and the next slice begins.
  landed_.clear();  // what they covered was this slice's; the rest is copied again
  if (copy_ahead_) copy_ahead(job, br);

  while (!remote.empty()) {
    core::Message msg;
    auto s = net.wait(wire::kEvDmaData, &msg, kPhaseDataTimeout);
    if (s != core::Status::ok) {
      spdlog::error("P2P: waiting for {} remote chunks: {}", remote.size(), core::status_str(s));
      rep.fail(fmt::format("{} remote chunk(s) never came: {}", remote.size(),
                           core::status_str(s)));
      for (auto& [tok, p] : remote)
        if (!p.group) finish_chunk(p.c, bcs_err_peer_gone);
      for (auto& [tok, grp] : groups) finish_chunk(grp.whole, bcs_err_peer_gone);
      remote.clear();
      groups.clear();
      break;
    }
    if (msg.data.size() < sizeof(wire::DmaDataHeader)) continue;
    wire::DmaDataHeader h;
    std::memcpy(&h, msg.data.data(), sizeof h);
    auto it = remote.find(h.token);
    if (it == remote.end()) continue;  // a late answer of an aborted slice
    const Pending p = it->second;
    remote.erase(it);
    const Chunk& c = p.c;
    int32_t err = h.error;
    const size_t n = msg.data.size() - sizeof h;
    if (!err && n != (p.direct ? 0 : c.len)) err = bcs_err_internal;
    if (!err && p.direct) err = p.err;
    if (!err && n)
      err = write_recv(*c.match, c.offset, msg.data.data() + sizeof h, n);
    rep.bytes += p.direct ? c.len : n;
    if (p.group) {
      auto git = groups.find(p.group);
      if (git == groups.end()) continue;
      Group& grp = git->second;
      if (!grp.err) grp.err = err;
      if (--grp.left == 0) {
        finish_chunk(grp.whole, grp.err);
        groups.erase(git);
      }
      continue;
    }
    finish_chunk(c, err);
  }

  serve_remaining();
  br.chunks().clear();
  br.scheduler().finish_slice();
  rep.transfers_pending = static_cast<uint32_t>(br.scheduler().in_flight());
  return rep;
}

void DmaHelper::settle_ahead(LocalRanks& job, BufferReceiver& br) {
  landed_.clear();
  // Each rank's oldest order is the piece this slice's chunk should find
  // landed. A newer one (the piece after it) may go on copying through this
  // P2P, unless the rank receives a transfer's last chunk now: that
  // completes both ends, after which the sender may reuse its buffer, so no
  // order of the rank may still be reading it.
  auto finishing = [&](int32_t to) {
    return std::any_of(br.chunks().begin(), br.chunks().end(),
                       [&](const Chunk& c) { return c.last && c.match->recv.rank == to; });
  };
  std::vector<Ahead> kept;
  std::vector<int32_t> settled;
  for (const Ahead& a : ahead_) {
    const bool older = std::find(settled.begin(), settled.end(), a.to) != settled.end();
    if (older && !finishing(a.to)) {
      kept.push_back(a);
      continue;
    }
    settled.push_back(a.to);
    if (job.await_copy(a.to) == 0) landed_.push_back(a);
  }
  ahead_ = std::move(kept);
}

bool DmaHelper::landed(int32_t to, uint32_t pid, uint64_t src, uint64_t dst,
                       uint64_t len) const {
  if (pid == 0) return false;
  for (const Ahead& a : landed_)
    if (a.to == to && a.pid == pid && src >= a.src && src - a.src <= a.len &&
        len <= a.len - (src - a.src) && dst - src == a.dst - a.src)
      return true;
  return false;
}

void DmaHelper::land_inline(LocalRanks& job, const Chunk& c) {
  const Match& m = *c.match;
  if (m.cancelled) return;  // no receive: the sender completed at its post
  int32_t err = 0;
  // Whole (as the scheduler cuts them) into a contiguous buffer: into the
  // receive's landing, which the rank copies from (segment.h); else into
  // the buffer.
  const bool whole = c.offset == 0 && c.last && !m.recv.layout;
  const uint8_t* src = m.send.payload.data() + c.offset;
  if (c.len && !(whole && job.land(m.recv.rank, m.recv.request, src, c.len)))
    err = m.recv.layout
              ? job.write_layout(m.recv.rank, m.recv.addr, *m.recv.layout, c.offset, src, c.len)
              : job.write(m.recv.rank, m.recv.addr + c.offset, src, c.len);
  if (!err && m.truncated) err = bcs_err_truncate;
  job.complete_status(m.recv.rank, m.recv.request, err, m.send.src, m.send.tag, m.bytes, 0,
                      m.send.pair_seq);
}

void DmaHelper::deliver_inline(LocalRanks& job, BufferReceiver& br, wire::Report& rep) {
  auto& chunks = br.chunks();
  // Pairs with an earlier chunk of this slice left for P2P: a transfer
  // never finishes before an older one of its pair (ChunkScheduler).
  std::set<std::pair<int32_t, int32_t>> waiting;
  size_t kept = 0;
  for (size_t i = 0; i < chunks.size(); ++i) {
    const Chunk& c = chunks[i];
    const Match& m = *c.match;
    const std::pair<int32_t, int32_t> pair{m.send.src, m.recv.rank};
    if (m.send.is_inline && c.first && c.last && !waiting.count(pair)) {
      land_inline(job, c);
      ++rep.delivered;
      rep.bytes += c.len;
      continue;
    }
    waiting.insert(pair);
    chunks[kept++] = c;
  }
  chunks.resize(kept);
  rep.chunks = static_cast<uint32_t>(kept);
  // Nothing left for P2P: the delivered transfers are finished now (P2P,
  // which would finish them, may not run).
  if (kept == 0) br.scheduler().finish_slice();
}

uint32_t DmaHelper::remote_gets(const Chunk& c, LocalRanks& job) {
  const Match& m = *c.match;
  if (m.send.is_inline || job.is_local(m.send.src)) return 0;
  // One for a cancelled send, and for a chunk the receiving rank may read
  // itself (its fallback, if the rank is awake, is one read of it all).
  if (m.cancelled || m.cancel_late || c.len <= kRemotePiece) return 1;
  if (m.send.pid && job.host_peer(job.node_of(m.send.src)) && c.len >= kSingleCopyMin &&
      !m.recv.layout)
    return 1;
  return static_cast<uint32_t>((c.len + kRemotePiece - 1) / kRemotePiece);
}

uint32_t DmaHelper::single_copy_source(LocalRanks& job, const Match& m, uint64_t len) {
  // As the P2P's own paths decide (run): a big contiguous piece from a
  // local sender, or from a sender on a node manager of this host that
  // offered its process.
  if (m.send.is_inline || m.cancelled || m.cancel_late || len < kSingleCopyMin ||
      m.send.layout || m.recv.layout || !job.is_local(m.recv.rank))
    return 0;
  if (job.is_local(m.send.src)) return job.pid_of(m.send.src);
  return m.send.pid && job.host_peer(job.node_of(m.send.src)) ? m.send.pid : 0;
}

CopyHelp DmaHelper::help_for(LocalRanks& job, const Match& m) const {
  const int32_t s = m.send.src;
  if (!job.is_local(s)) return CopyHelp::split;
  if (std::find(receiving_.begin(), receiving_.end(), s) != receiving_.end())
    return CopyHelp::split;
  for (const Ahead& a : ahead_)
    if (a.to == s) return CopyHelp::split;
  return CopyHelp::share;
}

void DmaHelper::copy_ahead(LocalRanks& job, BufferReceiver& br) {
  br.scheduler().next_pieces([&](const Match& m, uint64_t off, uint64_t len) {
    // The sender's process, as the chunk's own copy would name it.
    const uint32_t pid = single_copy_source(job, m, len);
    if (!pid) return;
    // Two pieces ahead: the next slice's, and the one after it, so the rank
    // goes from one to the next while the node confirms the first. A rank
    // still copying the next slice's piece gets only the one after it.
    const Ahead first{m.recv.rank, pid, m.send.addr + off, m.recv.addr + off, len};
    const CopyHelp help = help_for(job, m);
    size_t mine = 0;
    bool has_first = false;
    for (const Ahead& a : ahead_)
      if (a.to == m.recv.rank) {
        ++mine;
        has_first |= a.pid == pid && a.src == first.src && a.dst == first.dst && a.len == len;
      }
    if (mine == 0) {
      if (!job.post_copy(pid, first.to, first.src, first.dst, len, help)) return;
      ahead_.push_back(first);
    } else if (mine > 1 || !has_first) {
      return;  // the rank's orders are for something else
    }
    const uint64_t next_len = std::min(len, m.bytes - off - len);
    if (next_len < kSingleCopyMin) return;
    const Ahead second{m.recv.rank, pid, first.src + len, first.dst + len, next_len};
    if (job.post_copy(pid, second.to, second.src, second.dst, next_len, help))
      ahead_.push_back(second);
  });
}

void DmaHelper::serve(const core::Message& m, LocalRanks* ranks, Net& net) {
  wire::DmaGet g;
  try {
    g = wire::decode_get(m.data);
  } catch (const std::exception& e) {
    spdlog::error("DMA get from node {}: {}", m.from, e.what());
    return;
  }
  // The reply is built in place: header, then the rank's bytes read
  // straight behind it (no zero-fill, no second copy of a multi-MiB chunk).
  wire::DmaDataHeader h;
  h.token = g.token;
  size_t n = 0;
  std::unique_ptr<uint8_t[]> reply;
  LayoutPtr layout;  // a non-contiguous send: g.addr - base is a packed offset
  uint64_t base = 0;
  int32_t earlier = 0;  // a piece of the transfer that got no answer failed
  // The receiving node waits for no answer to a direct piece before the
  // last (DmaHelper::run): its outcome goes with the last chunk's.
  const bool answer = !(g.direct && !g.last);
  if (!ranks || ranks->job_id() != g.job || !ranks->is_local(g.src_rank) ||
      g.len > (uint64_t{1} << 32)) {
    h.error = bcs_err_peer_gone;
  } else if (!ranks->read_grants().use(g.src_rank, g.src_request, m.from, g.addr, g.len,
                                       g.last || g.cancelled, &layout, &base, &earlier)) {
    // Not a range of a send this node forwarded to the asking node.
    spdlog::warn("job {}: node {} asked to read {} bytes at {:#x} of rank {} (request {}): "
                 "no send of that rank to that node covers it, refused",
                 g.job, m.from, g.len, g.addr, g.src_rank, g.src_request);
    h.error = bcs_err_peer_gone;
    // Unanswered: the transfer's last chunk says it (if the grant is that
    // node's at all).
    if (!answer) ranks->read_grants().note_error(g.src_rank, g.src_request, m.from, h.error);
  } else if (g.direct) {
    // The receiving rank read the range itself; the sender learns how that
    // went (its buffer may be the bad one), as from a read of ours, and so
    // does the receiver when an earlier piece failed unanswered.
    int32_t e = g.direct_error;
    e = e == 0 || e == bcs_err_peer_gone || e == bcs_err_bad_address ? e : bcs_err_internal;
    if (!g.last) {
      if (e) ranks->read_grants().note_error(g.src_rank, g.src_request, m.from, e);
    } else {
      if (!e) e = earlier;
      h.error = earlier;
      ranks->complete_status(g.src_rank, g.src_request, e, g.src_rank, 0, 0, 0);
    }
  } else if (g.cancelled) {
    // The receiver's node took the send out of matching: nothing to read.
    if (g.len == 0 && g.last)  // complete_status bounds-checks the request index
      ranks->complete_status(g.src_rank, g.src_request,
                             g.cancelled == wire::kCancelLate ? 0 : bcs_err_cancelled, g.src_rank,
                             0, 0, 0);
  } else {
    reply = std::make_unique_for_overwrite<uint8_t[]>(sizeof h + g.len);
    uint8_t* dst = reply.get() + sizeof h;
    h.error = earlier ? earlier  // a piece before it failed unanswered: the transfer did
              : !g.len ? 0
              : layout ? ranks->read_layout(g.src_rank, base, *layout, g.addr - base, dst, g.len)
                       : ranks->read(g.src_rank, g.addr, dst, g.len);
    if (!h.error) n = g.len;
    if (g.last) ranks->complete_status(g.src_rank, g.src_request, h.error, g.src_rank, 0, 0, 0);
  }
  if (!answer) return;
  if (!reply) reply = std::make_unique_for_overwrite<uint8_t[]>(sizeof h);
  std::memcpy(reply.get(), &h, sizeof h);
  auto s = net.send(m.from, wire::kEvDmaData, {reply.get(), sizeof h + n});
  if (s != core::Status::ok)
    spdlog::error("DMA get: reply to node {}: {}", m.from, core::status_str(s));
}

}  // namespace bcs::nm
