#include "nic.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstring>

namespace bcs::nm {

using namespace std::chrono_literals;
using wire::Phase;

namespace {
// How long a node waits for the data of one microphase (descriptor batches,
// remote chunks) before declaring the microphase failed. Generous: a peer
// that is alive always answers within the microphase; one that died is
// noticed by the MM through its control stream and the job is torn down.
constexpr auto kPhaseDataTimeout = 10s;
constexpr size_t kStagingBytes = 4u << 20;
}  // namespace

Nic::Nic(core::Fabric& fabric, uint32_t self) : fabric_(fabric), self_(self) {
  // Remote reads are served from inside progress, whatever this node is
  // waiting for (two nodes may read from each other in one microphase).
  // Each one served is also signalled on kEvDmaServed, which the P2P
  // microphase counts against the number the microstrobe announced.
  fabric_.set_handler(wire::kEvDmaGet, [this](core::Message&& m) {
    dma_serve_get(std::move(m));
    fabric_.xfer_and_signal(self_, wire::kEvDmaServed, {});
  });
}

Nic::~Nic() { fabric_.set_handler(wire::kEvDmaGet, nullptr); }

void Nic::set_job(std::shared_ptr<NmJob> job) {
  std::lock_guard lk(job_mu_);
  pending_job_ = std::move(job);
}

void Nic::sync_job() {
  std::shared_ptr<NmJob> j;
  {
    std::lock_guard lk(job_mu_);
    j = pending_job_;
  }
  if (!j) {
    st_.reset();
  } else if (!st_ || st_->job != j) {
    st_ = std::make_unique<NodeJobState>(j, j->spec().chunk_bytes);
  }
}

// ------------------------------------------------------------ strobe receiver
void Nic::run() {
  pthread_setname_np(pthread_self(), "bcs-sr");
  for (;;) {
    core::Message m;
    // The timeout only bounds how long a finished job's state lingers when no
    // strobes come; it is not a poll (test_event sleeps on the UCX event fd).
    auto s = fabric_.test_event(wire::kEvStrobe, &m, std::chrono::nanoseconds(200ms));
    if (s == core::Status::closed) return;
    if (s == core::Status::timeout) {
      sync_job();
      continue;
    }
    if (s != core::Status::ok) {
      spdlog::error("strobe receiver: {}", core::status_str(s));
      return;
    }
    wire::Report rep;
    wire::Strobe strobe;
    try {
      strobe = wire::decode_strobe(m.data);
      rep = on_strobe(strobe);
    } catch (const std::exception& e) {
      spdlog::error("strobe receiver: {}", e.what());
      rep.errors = 1;
    }
    rep.slice = strobe.slice;
    rep.phase = strobe.phase;
    auto enc = wire::encode(rep);
    fabric_.var_set(wire::kVarPhase, wire::phase_value(strobe.slice, strobe.phase), {0}, enc);
  }
}

wire::Report Nic::on_strobe(const wire::Strobe& s) {
  if (s.phase == Phase::dem) sync_job();
  // A strobe for a job this node does not run (it ended here already, or the
  // job has no rank here) still needs a report, or the MM would wait.
  if (st_ && st_->job->id() != s.job && s.phase == Phase::dem) st_.reset();
  switch (s.phase) {
    case Phase::dem:
      return buffer_sender_dem(s.slice);
    case Phase::msm:
      return buffer_receiver_msm(s);
    case Phase::p2p:
      return dma_helper_p2p(s);
    case Phase::bbm:
      return collective_helper_bbm(s);
    case Phase::rm:
      return reduce_helper_rm(s.slice);
  }
  return {};
}

// ------------------------------------------------------------ buffer sender
wire::Report Nic::buffer_sender_dem(uint64_t slice) {
  wire::Report rep;
  if (!st_) return rep;
  auto& st = *st_;
  auto& job = *st.job;
  const uint32_t nnodes =
      *std::max_element(job.spec().rank_node.begin(), job.spec().rank_node.end()) + 1;
  std::vector<wire::DescBatch> batches(nnodes);
  st.local_posts.clear();
  st.local_sends.clear();
  uint32_t drained = 0;

  for (auto& r : job.ranks()) {
    RankView v = job.view(*r);
    const int32_t me = r->world_rank;
    size_t n = ring_drain(v, [&](const Descriptor& d) {
      switch (d.kind) {
        case DescKind::send: {
          SendDesc s;
          s.src = me;
          s.dst = d.peer;
          s.context = d.context;
          s.tag = d.tag;
          s.pair_seq = ++st.pair_seq[{me, d.peer}];
          s.slice = slice - 1;
          s.len = d.len;
          s.addr = d.addr;
          s.request = d.request;
          s.is_inline = (d.flags & kDescInline) != 0;
          if (s.is_inline) s.payload.assign(d.payload, d.payload + d.inline_len);
          if (d.peer < 0 || static_cast<uint32_t>(d.peer) >= job.spec().nranks) {
            spdlog::warn("job {}: rank {} sent to invalid rank {}", job.id(), me, d.peer);
            break;
          }
          uint32_t node = job.node_of(d.peer);
          if (node == self_)
            st.local_sends.push_back(std::move(s));
          else
            batches[node].sends.push_back(std::move(s));
          break;
        }
        case DescKind::recv:
        case DescKind::probe:
        case DescKind::iprobe: {
          RecvDesc rd;
          rd.rank = me;
          rd.kind = d.kind;
          rd.src = d.peer;
          rd.context = d.context;
          rd.tag = d.tag;
          rd.addr = d.addr;
          rd.cap = d.len;
          rd.request = d.request;
          rd.slice = slice - 1;
          st.local_posts.push_back(rd);
          break;
        }
        case DescKind::barrier:
          st.barriers[me].emplace_back(d.seq, d.request);
          st.barrier_count[me] = std::max(st.barrier_count[me], d.seq);
          break;
      }
    });
    drained += static_cast<uint32_t>(n);
    // A rank that found its ring full sleeps on its futex until we make
    // room. Only then is a wake-up due (the ring held ring_slots entries):
    // waking on every drain would rouse ranks blocked in MPI_Recv for nothing.
    if (n >= v.ring_slots) rank_wake(v);
  }

  rep.batches_to.assign(nnodes, 0);
  for (uint32_t node = 0; node < nnodes; ++node) {
    auto& b = batches[node];
    if (b.sends.empty()) continue;
    b.slice = slice;
    b.job = job.id();
    auto enc = wire::encode(b);
    auto s = fabric_.xfer_and_signal(node, wire::kEvDescBatch, enc);
    if (s != core::Status::ok) {
      spdlog::error("DEM: batch to node {}: {}", node, core::status_str(s));
      rep.errors++;
      continue;
    }
    rep.batches_to[node] = 1;
  }

  // CH's local half: the lowest barrier number every local rank has reached.
  uint64_t level = UINT64_MAX;
  for (auto& r : job.ranks()) level = std::min(level, st.barrier_count[r->world_rank]);
  rep.barrier_level = job.ranks().empty() ? 0 : level;
  rep.has_local_barrier_ranks = job.ranks().empty() ? 0 : 1;
  rep.drained = drained;
  rep.transfers_pending = static_cast<uint32_t>(st.scheduler.in_flight());
  st.drained = drained;
  return rep;
}

// ------------------------------------------------------------ buffer receiver
wire::Report Nic::buffer_receiver_msm(const wire::Strobe& s) {
  wire::Report rep;
  const uint32_t expect = self_ < s.expect_batches.size() ? s.expect_batches[self_] : 0;
  std::vector<SendDesc> sends;
  if (st_) sends = std::move(st_->local_sends);
  for (uint32_t i = 0; i < expect; ++i) {
    core::Message m;
    auto r = fabric_.test_event(wire::kEvDescBatch, &m, kPhaseDataTimeout);
    if (r != core::Status::ok) {
      spdlog::error("MSM: waiting for descriptor batch {}/{}: {}", i + 1, expect,
                    core::status_str(r));
      rep.errors++;
      break;
    }
    auto b = wire::decode_batch(m.data);
    if (!st_ || b.job != st_->job->id()) continue;  // stale job
    for (auto& x : b.sends) sends.push_back(std::move(x));
  }
  if (!st_) return rep;
  auto& st = *st_;
  auto& job = *st.job;

  st.matcher.msm(s.slice, st.local_posts, std::move(sends));
  st.local_posts.clear();

  for (auto& pr : st.matcher.take_probe_results()) {
    RankView v = job.view_of(pr.probe.rank);
    request_complete(v, pr.probe.request, 0, pr.source, pr.tag, pr.len, pr.found ? 1 : 0);
  }
  auto matches = st.matcher.take_matches();
  rep.matches = static_cast<uint32_t>(matches.size());
  for (auto& m : matches) st.scheduler.add(std::move(m));
  st.chunks = st.scheduler.schedule_slice();
  rep.chunks = static_cast<uint32_t>(st.chunks.size());
  // Remote reads the DMA helper will send in P2P, per sender node, so that
  // each sender knows how many to serve.
  rep.gets_to.assign(
      job.spec().rank_node.empty()
          ? 0
          : *std::max_element(job.spec().rank_node.begin(), job.spec().rank_node.end()) + 1,
      0);
  for (const Chunk& c : st.chunks)
    if (!c.match->send.is_inline && !job.is_local(c.match->send.src))
      rep.gets_to[job.node_of(c.match->send.src)]++;
  rep.transfers_pending = static_cast<uint32_t>(st.scheduler.in_flight());
  return rep;
}

// ------------------------------------------------------------ DMA helper
wire::Report Nic::dma_helper_p2p(const wire::Strobe& strobe) {
  wire::Report rep;
  // Remote reads this node must serve in this microphase (some may have
  // been served already, while it waited for this microstrobe).
  uint32_t to_serve = self_ < strobe.expect_gets.size() ? strobe.expect_gets[self_] : 0;
  auto serve_remaining = [&] {
    for (; to_serve > 0; --to_serve) {
      core::Message done;
      auto r = fabric_.test_event(wire::kEvDmaServed, &done, kPhaseDataTimeout);
      if (r != core::Status::ok) {
        spdlog::error("P2P: {} remote read(s) never came: {}", to_serve, core::status_str(r));
        rep.errors++;
        return;
      }
    }
  };
  if (!st_) {
    serve_remaining();
    return rep;
  }
  auto& st = *st_;
  auto& job = *st.job;

  std::unordered_map<uint64_t, Chunk> remote;  // token -> chunk

  auto finish_chunk = [&](const Chunk& c, int32_t err) {
    if (err) st.xfer_error[c.transfer] = err;
    if (!c.last) return;
    const Match& m = *c.match;
    int32_t e = 0;
    if (auto it = st.xfer_error.find(c.transfer); it != st.xfer_error.end()) {
      e = it->second;
      st.xfer_error.erase(it);
    }
    if (!e && m.truncated) e = bcs_err_truncate;
    RankView v = job.view_of(m.recv.rank);
    request_complete(v, m.recv.request, e, m.send.src, m.send.tag, m.bytes);
  };

  for (auto& c : st.chunks) {
    const Match& m = *c.match;
    if (m.send.is_inline) {
      int32_t err = 0;
      if (c.len)
        err =
            job.write(m.recv.rank, m.recv.addr + c.offset, m.send.payload.data() + c.offset, c.len);
      rep.bytes += c.len;
      finish_chunk(c, err);
    } else if (job.is_local(m.send.src)) {
      // Local sender: read its memory, write the receiver's, through the
      // staging buffer (cross-memory attach needs one side to be us).
      int32_t err = 0;
      if (staging_.size() < std::min<uint64_t>(c.len, kStagingBytes))
        staging_.resize(std::min<uint64_t>(std::max<uint64_t>(c.len, 1), kStagingBytes));
      for (uint64_t off = 0; off < c.len && !err;) {
        size_t n = std::min<uint64_t>(c.len - off, staging_.size());
        err = job.read(m.send.src, m.send.addr + c.offset + off, staging_.data(), n);
        if (!err) err = job.write(m.recv.rank, m.recv.addr + c.offset + off, staging_.data(), n);
        off += n;
      }
      rep.bytes += c.len;
      if (c.last) {
        RankView sv = job.view_of(m.send.src);
        request_complete(sv, m.send.request, 0, m.send.src, m.send.tag, m.send.len);
      }
      finish_chunk(c, err);
    } else {
      wire::DmaGet g;
      g.job = job.id();
      g.token = next_token_++;
      g.src_rank = m.send.src;
      g.src_request = m.send.request;
      g.addr = m.send.addr + c.offset;
      g.len = c.len;
      g.last = c.last ? 1 : 0;
      auto s = fabric_.xfer_and_signal(job.node_of(m.send.src), wire::kEvDmaGet, wire::encode(g));
      if (s != core::Status::ok) {
        spdlog::error("P2P: remote read from node {}: {}", job.node_of(m.send.src),
                      core::status_str(s));
        rep.errors++;
        finish_chunk(c, bcs_err_peer_gone);
        continue;
      }
      remote.emplace(g.token, c);
    }
  }

  while (!remote.empty()) {
    core::Message msg;
    auto s = fabric_.test_event(wire::kEvDmaData, &msg, kPhaseDataTimeout);
    if (s != core::Status::ok) {
      spdlog::error("P2P: waiting for {} remote chunks: {}", remote.size(), core::status_str(s));
      rep.errors++;
      for (auto& [tok, c] : remote) finish_chunk(c, bcs_err_peer_gone);
      remote.clear();
      break;
    }
    if (msg.data.size() < sizeof(wire::DmaDataHeader)) continue;
    wire::DmaDataHeader h;
    std::memcpy(&h, msg.data.data(), sizeof h);
    auto it = remote.find(h.token);
    if (it == remote.end()) continue;  // a late answer of an aborted slice
    Chunk c = it->second;
    remote.erase(it);
    int32_t err = h.error;
    const size_t n = msg.data.size() - sizeof h;
    if (!err && n != c.len) err = bcs_err_internal;
    if (!err && n)
      err = job.write(c.match->recv.rank, c.match->recv.addr + c.offset, msg.data.data() + sizeof h,
                      n);
    rep.bytes += n;
    finish_chunk(c, err);
  }

  serve_remaining();
  st.chunks.clear();
  st.scheduler.finish_slice();
  rep.transfers_pending = static_cast<uint32_t>(st.scheduler.in_flight());
  return rep;
}

void Nic::dma_serve_get(core::Message&& m) {
  wire::DmaGet g;
  try {
    g = wire::decode_get(m.data);
  } catch (const std::exception& e) {
    spdlog::error("DMA get: {}", e.what());
    return;
  }
  std::shared_ptr<NmJob> job;
  {
    std::lock_guard lk(job_mu_);
    job = pending_job_;
  }
  // The reply is built in place: header, then the rank's bytes read
  // straight behind it (no zero-fill, no second copy of a multi-MiB chunk).
  wire::DmaDataHeader h;
  h.token = g.token;
  size_t n = 0;
  std::unique_ptr<uint8_t[]> reply;
  if (!job || job->id() != g.job || !job->is_local(g.src_rank)) {
    h.error = bcs_err_peer_gone;
  } else {
    reply = std::make_unique_for_overwrite<uint8_t[]>(sizeof h + g.len);
    h.error = g.len ? job->read(g.src_rank, g.addr, reply.get() + sizeof h, g.len) : 0;
    if (!h.error) n = g.len;
    if (g.last) {
      RankView v = job->view_of(g.src_rank);
      request_complete(v, g.src_request, h.error, g.src_rank, 0, 0);
    }
  }
  if (!reply) reply = std::make_unique_for_overwrite<uint8_t[]>(sizeof h);
  std::memcpy(reply.get(), &h, sizeof h);
  auto s = fabric_.xfer_and_signal(m.from, wire::kEvDmaData, {reply.get(), sizeof h + n});
  if (s != core::Status::ok)
    spdlog::error("DMA get: reply to node {}: {}", m.from, core::status_str(s));
}

// ------------------------------------------------------------ collective helper
wire::Report Nic::collective_helper_bbm(const wire::Strobe& s) {
  wire::Report rep;
  if (!st_) return rep;
  auto& st = *st_;
  for (auto& [rank, waiting] : st.barriers) {
    RankView v = st.job->view_of(rank);
    auto keep = std::remove_if(waiting.begin(), waiting.end(), [&](auto& b) {
      if (b.first > s.barrier_release) return false;
      request_complete(v, b.second, 0, rank, 0, 0);
      return true;
    });
    waiting.erase(keep, waiting.end());
  }
  return rep;
}

// ------------------------------------------------------------ reduce helper
wire::Report Nic::reduce_helper_rm(uint64_t slice) {
  // No reduction is scheduled by this version of the MSM; the microphase
  // exists so that the strobe protocol has its final shape.
  (void)slice;
  return {};
}

}  // namespace bcs::nm
