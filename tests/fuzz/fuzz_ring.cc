// Fuzz target: everything a rank can write into its descriptor ring, run
// through the node managers' point-to-point and collective roles. A rank
// shares its segment with the node manager, so every descriptor is hostile
// input (rule 9): the roles must name a rank that writes garbage, never
// crash, read or write outside what the rank owns (rank memory here is a
// buffer per rank, and the fakes refuse any access outside it), or
// complete a request index they did not check (the fakes abort).
//
// Input: records, each an op byte then up to 96 bytes of a descriptor (its
// 64-byte head and the first 32 bytes of its payload; the rest is zero).
//   op % 16 == 15   end of a slice: DEM, MSM and P2P run on both nodes
//   op % 16 == 14   the rank (op / 16 % 3) overwrites its ring head
//   else            rank op % 3 posts the descriptor; with bit 0x40 set its
//                   fields are first bent towards valid values (kind,
//                   request, peer, lengths, addresses into its memory), so
//                   that the fuzzer reaches matching and copying, not only
//                   the first check; with bit 0x20 an eager send's head
//                   passes its span (else it is torn)
// Ranks 0 and 2 live on node 0, rank 1 on node 1 (fakes.h).
#include <algorithm>
#include <array>
#include <cstring>

#include "fakes.h"
#include "fuzz_targets.h"

namespace {

using namespace bcs;
using namespace bcs::nm;
using namespace bcs::nm::fakes;

constexpr size_t kMem = 16 << 10;  // each rank's memory
constexpr size_t kRecord = 96;

void tame(Descriptor& d, uint64_t base) {
  d.kind = static_cast<DescKind>(1 + static_cast<uint8_t>(d.kind) % 8);
  d.request %= 64;
  d.peer = static_cast<int32_t>(static_cast<uint32_t>(d.peer) % 4) - 1;  // any, 0, 1, 2
  d.tag = static_cast<int32_t>(static_cast<uint32_t>(d.tag) % 5) - 1;    // any, 0..3
  d.context = static_cast<int32_t>(static_cast<uint32_t>(d.context) % 4);
  d.len %= 8192;
  if (d.flags & kDescInline)
    d.inline_len = static_cast<uint32_t>(d.len = d.len % (kInlineSpanMax + 1));
  d.addr = base + d.addr % (kMem - d.len);
  if (d.flags & kDescLayout) {  // a block list inside the rank's memory
    LayoutRef ref;
    std::memcpy(&ref, d.payload, sizeof ref);
    ref.blocks = base + ref.blocks % (kMem - 16 * sizeof(LayoutBlock));
    ref.nblocks = 1 + ref.nblocks % 16;
    ref.count = ref.count % 8;
    std::memcpy(d.payload, &ref, sizeof ref);
  }
}

}  // namespace

extern "C" int bcs_fuzz_ring(const uint8_t* data, size_t size) {
  TwoNodeCluster c;
  const std::array<uint32_t, 3> node{0, 1, 0};
  // Rank memory starts as the input's own bytes (block lists, payloads).
  std::array<std::vector<uint8_t>, 3> mem;
  for (int32_t r = 0; r < 3; ++r) {
    mem[r].resize(kMem);
    for (size_t i = 0; i < kMem && size; ++i) mem[r][i] = data[(i + 7 * r) % size];
    c.nodes[node[r]]->ranks.allow(r, mem[r].data(), kMem);
  }
  size_t at = 0;
  while (at < size) {
    const uint8_t op = data[at++];
    if (op % 16 == 15) {
      c.slice();
      continue;
    }
    if (op % 16 == 14) {
      const int32_t r = op / 16 % 3;
      uint64_t head = 0;
      std::memcpy(&head, data + at, std::min<size_t>(sizeof head, size - at));
      at += sizeof head;
      c.nodes[node[r]]->ranks.view_of(r).ctl->head.store(head);
      continue;
    }
    const int32_t r = op % 3;
    Descriptor d{};
    const size_t n = std::min(kRecord, size - at);
    std::memcpy(&d, data + at, std::min<size_t>(n, 64));
    if (n > 64) std::memcpy(d.payload, data + at + 64, n - 64);
    at += n;
    if (op & 0x40) tame(d, reinterpret_cast<uintptr_t>(mem[r].data()));
    RankView v = c.nodes[node[r]]->ranks.view_of(r);
    // The library marks the slot pending before it posts (a corrupt index
    // is the node manager's to refuse, not ours to write).
    if (d.request < v.request_slots)
      v.requests[d.request].state.store(static_cast<uint32_t>(ReqState::pending));
    // A hostile rank writes the whole slot itself (ring_try_post, the
    // library's, trusts its own caller's lengths).
    const uint64_t head = v.ctl->head.load(), tail = v.ctl->tail.load();
    if (head - tail >= v.ring_slots) {  // full, or a head scribbled past it
      c.slice();
      continue;
    }
    v.ring[head & (v.ring_slots - 1)] = d;
    // With bit 0x20 the head passes the slots an eager send's bytes take
    // (what they hold is whatever the ring held); without, a send that
    // claims more is torn.
    const uint64_t span = d.kind == DescKind::send && (d.flags & kDescInline)
                              ? ring_span_slots(d.inline_len)
                              : 1;
    v.ctl->head.store(head + ((op & 0x20) ? std::min(span, v.ring_slots - (head - tail)) : 1));
  }
  for (int k = 0; k < 3; ++k) c.slice();
  return 0;
}

#ifdef BCS_FUZZ_ENTRY
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return bcs_fuzz_ring(data, size);
}
#endif
