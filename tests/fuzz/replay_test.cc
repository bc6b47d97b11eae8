// The fuzz targets in every build, without libFuzzer: each runs over inputs
// made from a fixed seed (valid messages and rings, then mutated: bytes
// flipped, cut, grown), so a decoder or a role that starts to crash on
// hostile input fails here, in CI, with the input's number. The real
// coverage-guided runs are tests/fuzz/run.sh (clang, libFuzzer, ASan+UBSan).
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "bcs/record.h"
#include "fuzz_targets.h"
#include "wire.h"

namespace {

using Bytes = std::vector<uint8_t>;

// Flips, cuts or grows a copy of `b`.
Bytes mutate(Bytes b, std::mt19937_64& rng) {
  const int edits = 1 + static_cast<int>(rng() % 4);
  for (int e = 0; e < edits; ++e) {
    switch (rng() % 4) {
      case 0:
        if (!b.empty()) b[rng() % b.size()] ^= static_cast<uint8_t>(1u << (rng() % 8));
        break;
      case 1:
        if (!b.empty()) b[rng() % b.size()] = static_cast<uint8_t>(rng());
        break;
      case 2:
        b.resize(b.empty() ? 0 : rng() % b.size());
        break;
      case 3:
        for (int k = static_cast<int>(rng() % 16); k > 0; --k) b.push_back(static_cast<uint8_t>(rng()));
        break;
    }
  }
  return b;
}

// A valid message of each kind the wire target decodes, selector byte first.
Bytes valid_message(std::mt19937_64& rng) {
  namespace w = bcs::wire;
  const uint8_t which = static_cast<uint8_t>(rng() % 4);
  Bytes out{which};
  Bytes body;
  switch (which) {
    case 0: {
      w::Strobe s;
      s.slice = rng();
      s.expect_batches.assign(rng() % 5, static_cast<uint32_t>(rng() % 3));
      s.expect_gets.assign(rng() % 5, 1);
      s.coll_release.push_back({static_cast<int32_t>(rng() % 9), rng() % 100});
      body = w::encode(s);
      break;
    }
    case 1: {
      w::Report r;
      r.slice = rng();
      r.gets_to.assign(rng() % 4, 2);
      if (rng() % 2) r.fail("a lost batch");
      body = w::encode(r);
      break;
    }
    case 2: {
      w::DescBatch b;
      b.slice = rng();
      b.job = 1;
      for (int k = static_cast<int>(rng() % 4); k > 0; --k) {
        bcs::SendDesc s;
        s.src = 0;
        s.dst = 1;
        s.len = rng() % 200;
        s.is_inline = rng() % 2;
        if (s.is_inline) s.payload.assign(s.len, 7);
        b.sends.push_back(s);
      }
      b.cancels.push_back(bcs::SendCancel{0, 1, 3, rng() % 9, rng() % 2 == 0});
      body = w::encode(b);
      break;
    }
    case 3: {
      w::DmaGet g;
      g.token = rng();
      g.len = rng() % 4096;
      body = w::encode(g);
      break;
    }
  }
  out.insert(out.end(), body.begin(), body.end());
  return out;
}

TEST(FuzzReplay, WireDecodersRefuseOrRoundTripEveryInput) {
  std::mt19937_64 rng(20261124);
  for (int i = 0; i < 20000; ++i) {
    Bytes in = valid_message(rng);
    if (i % 4) in = mutate(std::move(in), rng);
    SCOPED_TRACE("input " + std::to_string(i));
    bcs_fuzz_wire(in.data(), in.size());
  }
}

// Valid recordings (a header, events of every kind), then mutated.
TEST(FuzzReplay, RecordDecoderRefusesOrRoundTripsEveryInput) {
  namespace r = bcs::record;
  std::mt19937_64 rng(20261126);
  for (int i = 0; i < 20000; ++i) {
    std::string text;
    r::Header h;
    h.rank = static_cast<int32_t>(rng() % 5) - 1;
    h.size = static_cast<uint32_t>(rng() % 64);
    h.program = "/bin/prog";
    h.args.assign(rng() % 3, "arg");
    h.exe_hash = rng();
    r::append_header(h, &text);
    for (int k = static_cast<int>(rng() % 6); k > 0; --k) {
      r::Event e;
      e.kind = static_cast<r::Kind>(1 + rng() % r::kKindMax);
      e.index = rng() % 100;
      e.source = static_cast<int32_t>(rng() % 9) - 2;
      e.tag = static_cast<int32_t>(rng() % 1000) - 1;
      e.seq = rng() % 1000;
      e.flag = rng() % 2;
      e.indices.assign(rng() % 4, static_cast<int32_t>(rng() % 7) - 1);
      e.repeat = rng() % 3 ? 1 : 1 + rng() % 100000;
      r::append_event(e, &text);
    }
    Bytes in(text.begin(), text.end());
    if (i % 4) in = mutate(std::move(in), rng);
    SCOPED_TRACE("input " + std::to_string(i));
    bcs_fuzz_record(in.data(), in.size());
  }
}

TEST(FuzzReplay, RingGarbageNeverCrashesTheRoles) {
  std::mt19937_64 rng(7);
  for (int i = 0; i < 1500; ++i) {
    Bytes in;
    const int records = 1 + static_cast<int>(rng() % 24);
    for (int k = 0; k < records; ++k) {
      uint8_t op = static_cast<uint8_t>(rng());
      if (rng() % 8 == 0) op = static_cast<uint8_t>((op & 0xf0) | 15);  // a slice boundary
      if (op % 16 == 14 && rng() % 4) op ^= 1;                          // scribbles: rarely
      if (rng() % 4) op |= 0x40;                                         // mostly tamed
      in.push_back(op);
      for (int b = 0; b < 96; ++b) in.push_back(static_cast<uint8_t>(rng() % 4 ? rng() % 4 : rng()));
    }
    SCOPED_TRACE("input " + std::to_string(i));
    bcs_fuzz_ring(in.data(), in.size());
  }
}

}  // namespace
