#include "wire.h"

namespace bcs::wire {
namespace {

void put_u32s(Writer& w, const std::vector<uint32_t>& v) {
  w.put<uint32_t>(static_cast<uint32_t>(v.size()));
  for (auto x : v) w.put(x);
}
std::vector<uint32_t> get_u32s(Reader& r) {
  auto n = r.get<uint32_t>();
  if (n > 65536) throw std::runtime_error("wire: absurd vector length");
  std::vector<uint32_t> v(n);
  for (auto& x : v) x = r.get<uint32_t>();
  return v;
}

void put_i32s(Writer& w, const std::vector<int32_t>& v) {
  w.put<uint32_t>(static_cast<uint32_t>(v.size()));
  for (auto x : v) w.put(x);
}
// Rank lists: never longer than the bytes that hold them.
std::vector<int32_t> get_i32s(Reader& r) {
  auto n = r.get<uint32_t>();
  if (n > r.rest().size() / sizeof(int32_t)) throw std::runtime_error("wire: truncated rank list");
  std::vector<int32_t> v(n);
  for (auto& x : v) x = r.get<int32_t>();
  return v;
}

void put_release(Writer& w, const std::vector<CollRelease>& v) {
  w.put<uint32_t>(static_cast<uint32_t>(v.size()));
  for (auto& x : v) {
    w.put(x.context);
    w.put(x.level);
  }
}
std::vector<CollRelease> get_release(Reader& r) {
  auto n = r.get<uint32_t>();
  if (n > 65536) throw std::runtime_error("wire: absurd vector length");
  std::vector<CollRelease> v(n);
  for (auto& x : v) {
    x.context = r.get<int32_t>();
    x.level = r.get<uint64_t>();
  }
  return v;
}
void put_levels(Writer& w, const std::vector<CollLevel>& v) {
  w.put<uint32_t>(static_cast<uint32_t>(v.size()));
  for (auto& x : v) w.put(x);
}
std::vector<CollLevel> get_levels(Reader& r) {
  auto n = r.get<uint32_t>();
  if (n > 65536) throw std::runtime_error("wire: absurd vector length");
  std::vector<CollLevel> v(n);
  for (auto& x : v) x = r.get<CollLevel>();
  return v;
}

}  // namespace

std::vector<uint8_t> encode(const Strobe& s) {
  Writer w;
  w.put(s.slice);
  w.put(s.phase);
  w.put(s.job);
  put_u32s(w, s.expect_batches);
  put_u32s(w, s.expect_gets);
  put_release(w, s.coll_release);
  w.put<uint8_t>(s.fused);
  w.put<uint8_t>(s.may_park);
  w.put(s.lease_ns);
  w.put(s.lease_slices);
  put_i32s(w, s.held);
  w.put<uint8_t>(s.job_blocked);
  w.put(s.hold_ns);
  w.put<uint8_t>(s.next_dem);
  w.put(s.var);
  return std::move(w.bytes());
}

Strobe decode_strobe(std::span<const uint8_t> b) {
  Reader r(b);
  Strobe s;
  s.slice = r.get<uint64_t>();
  s.phase = r.get<Phase>();
  s.job = r.get<uint64_t>();
  s.expect_batches = get_u32s(r);
  s.expect_gets = get_u32s(r);
  s.coll_release = get_release(r);
  s.fused = r.get<uint8_t>() != 0;
  s.may_park = r.get<uint8_t>() != 0;
  s.lease_ns = r.get<uint64_t>();
  s.lease_slices = r.get<uint32_t>();
  if (s.lease_slices > kMaxLeaseSlices) throw std::runtime_error("strobe: lease too long");
  s.held = get_i32s(r);
  s.job_blocked = r.get<uint8_t>() != 0;
  s.hold_ns = r.get<uint64_t>();
  if (s.hold_ns > kMaxHoldNs) throw std::runtime_error("strobe: hold too long");
  s.next_dem = r.get<uint8_t>() != 0;
  if (s.next_dem && (s.fused || s.phase == Phase::dem))
    throw std::runtime_error("strobe: a DEM or fused strobe cannot ask for the next DEM");
  s.var = r.get<uint16_t>();
  if (s.var < kVarPhase || s.var >= kVarPhase + kMaxRows)
    throw std::runtime_error("strobe: no such phase variable");
  return s;
}

std::vector<uint8_t> encode(const Report& x) {
  Writer w;
  w.put(x.slice);
  w.put(x.phase);
  w.put(x.drained);
  w.put(x.coll_drained);
  put_u32s(w, x.batches_to);
  put_levels(w, x.coll);
  w.put(x.transfers_pending);
  w.put(x.held);
  w.put(x.moving);
  w.put(x.matches);
  w.put(x.chunks);
  w.put(x.delivered);
  put_i32s(w, x.full);
  put_u32s(w, x.gets_to);
  w.put(x.bytes);
  w.put(x.collectives);
  w.put<uint8_t>(x.all_blocked);
  w.put<uint8_t>(x.post_started);
  w.put<uint8_t>(x.parked);
  w.put(x.waited_ns);
  w.put(x.errors);
  w.put_bytes({reinterpret_cast<const uint8_t*>(x.error.data()), x.error.size()});
  return std::move(w.bytes());
}

Report decode_report(std::span<const uint8_t> b) {
  Reader r(b);
  Report x;
  x.slice = r.get<uint64_t>();
  x.phase = r.get<Phase>();
  x.drained = r.get<uint32_t>();
  x.coll_drained = r.get<uint32_t>();
  x.batches_to = get_u32s(r);
  x.coll = get_levels(r);
  x.transfers_pending = r.get<uint32_t>();
  x.held = r.get<uint32_t>();
  x.moving = r.get<uint32_t>();
  x.matches = r.get<uint32_t>();
  x.chunks = r.get<uint32_t>();
  x.delivered = r.get<uint32_t>();
  x.full = get_i32s(r);
  x.gets_to = get_u32s(r);
  x.bytes = r.get<uint64_t>();
  x.collectives = r.get<uint32_t>();
  x.all_blocked = r.get<uint8_t>() != 0;
  x.post_started = r.get<uint8_t>() != 0;
  x.parked = r.get<uint8_t>() != 0;
  x.waited_ns = r.get<uint64_t>();
  x.errors = r.get<uint32_t>();
  const auto e = r.get_bytes();
  x.error.assign(e.begin(), e.end());
  return x;
}

std::vector<uint8_t> encode(const FusedReport& f) {
  Writer w;
  w.put<uint32_t>(static_cast<uint32_t>(f.parts.size()));
  for (size_t i = 0; i < f.parts.size(); ++i) {
    w.put<uint64_t>(i < f.ns.size() ? f.ns[i] : 0);
    w.put<uint64_t>(i < f.at.size() ? f.at[i] : 0);
    w.put_bytes(encode(f.parts[i]));
  }
  w.put(f.skipped);
  return std::move(w.bytes());
}

FusedReport decode_fused(std::span<const uint8_t> b) {
  Reader r(b);
  FusedReport f;
  const auto n = r.get<uint32_t>();
  // One report per microphase (DEM, MSM, P2P, BBM, RM) of each slice run.
  if (n == 0 || n > 5 * (kMaxLeaseSlices + 1))
    throw std::runtime_error("fused report: bad number of parts");
  for (uint32_t i = 0; i < n; ++i) {
    f.ns.push_back(r.get<uint64_t>());
    f.at.push_back(r.get<uint64_t>());
    f.parts.push_back(decode_report(r.get_bytes()));
  }
  f.skipped = r.get<uint32_t>();
  if (f.skipped > kMaxLeaseSkipped) throw std::runtime_error("fused report: too many periods skipped");
  return f;
}

std::vector<uint8_t> encode(const Bell& b) {
  Writer w;
  w.put(b.job);
  w.put(b.epoch);
  w.put(b.kind);
  return std::move(w.bytes());
}

Bell decode_bell(std::span<const uint8_t> b) {
  Reader r(b);
  Bell x;
  x.job = r.get<uint64_t>();
  x.epoch = r.get<uint64_t>();
  x.kind = r.get<BellKind>();
  if (x.kind != BellKind::blocked && x.kind != BellKind::work)
    throw std::runtime_error("bell of unknown kind");
  return x;
}

std::vector<uint8_t> encode(const DescBatch& b) {
  Writer w;
  w.put(b.slice);
  w.put(b.job);
  w.put<uint32_t>(static_cast<uint32_t>(b.sends.size()));
  for (const auto& s : b.sends) {
    w.put(s.src);
    w.put(s.dst);
    w.put(s.context);
    w.put(s.tag);
    w.put(s.pair_seq);
    w.put(s.slice);
    w.put(s.len);
    w.put(s.addr);
    w.put(s.request);
    w.put(s.pid);
    w.put<uint8_t>(s.is_inline);
    if (s.is_inline) w.put_bytes(s.payload);
  }
  w.put<uint32_t>(static_cast<uint32_t>(b.cancels.size()));
  for (const auto& c : b.cancels) {
    w.put(c.src);
    w.put(c.dst);
    w.put(c.request);
    w.put(c.pair_seq);
    w.put<uint8_t>(c.is_inline);
  }
  return std::move(w.bytes());
}

DescBatch decode_batch(std::span<const uint8_t> bytes) {
  Reader r(bytes);
  DescBatch b;
  b.slice = r.get<uint64_t>();
  b.job = r.get<uint64_t>();
  auto n = r.get<uint32_t>();
  // Each send takes at least 57 bytes on the wire: a count the message
  // cannot hold is a lie, refused before anything is allocated for it.
  constexpr size_t kMinSend = 4 * 4 + 4 * 8 + 4 + 4 + 1;
  if (n > r.rest().size() / kMinSend) throw std::runtime_error("wire: absurd send count");
  b.sends.resize(n);
  for (auto& s : b.sends) {
    s.src = r.get<int32_t>();
    s.dst = r.get<int32_t>();
    s.context = r.get<int32_t>();
    s.tag = r.get<int32_t>();
    s.pair_seq = r.get<uint64_t>();
    s.slice = r.get<uint64_t>();
    s.len = r.get<uint64_t>();
    s.addr = r.get<uint64_t>();
    s.request = r.get<uint32_t>();
    s.pid = r.get<uint32_t>();
    s.is_inline = r.get<uint8_t>() != 0;
    if (s.is_inline) {
      auto p = r.get_bytes();
      // The receiving node copies `len` bytes of it into a receive: a
      // payload of another length would be read past its end.
      if (p.size() != s.len || s.len > kInlineSpanMax)
        throw std::runtime_error("wire: inline payload of " + std::to_string(p.size()) +
                                 " bytes for a send of " + std::to_string(s.len));
      s.payload.assign(p.begin(), p.end());
    }
  }
  const auto nc = r.get<uint32_t>();
  for (uint32_t i = 0; i < nc; ++i) {
    SendCancel c;
    c.src = r.get<int32_t>();
    c.dst = r.get<int32_t>();
    c.request = r.get<uint32_t>();
    c.pair_seq = r.get<uint64_t>();
    c.is_inline = r.get<uint8_t>() != 0;
    b.cancels.push_back(c);  // grows with what was actually read: a lying count throws
  }
  return b;
}

std::vector<uint8_t> encode(const DmaGet& g) {
  Writer w;
  w.put(g);
  return std::move(w.bytes());
}

DmaGet decode_get(std::span<const uint8_t> b) {
  Reader r(b);
  const auto g = r.get<DmaGet>();
  if (g.direct > 1) throw std::runtime_error("wire: DmaGet direct flag " + std::to_string(g.direct));
  return g;
}

}  // namespace bcs::wire
