// Fuzz target: the fabric's message decoders (daemons/common/wire.h). Any
// peer on the fabric can send a node manager or the machine manager any
// bytes; a decoder must either refuse them (an exception the caller turns
// into a failed report) or produce a message, never read out of bounds,
// allocate for a count the bytes cannot hold, or crash. A message it
// accepts must also survive its own round trip: encoding it and decoding
// that gives the same bytes again (what one node sends, the next reads).
#include <cstddef>
#include <cstdint>
#include <exception>
#include <span>
#include <vector>

#include "fuzz_targets.h"
#include "wire.h"

namespace {

template <typename Decode>
void round_trip(std::span<const uint8_t> in, Decode decode) {
  std::vector<uint8_t> once;
  try {
    once = bcs::wire::encode(decode(in));
  } catch (const std::exception&) {
    return;  // refused: what a decoder may do with garbage
  }
  // What we encoded ourselves must decode, to the same bytes.
  const std::vector<uint8_t> twice = bcs::wire::encode(decode(once));
  if (once != twice) bcs::fuzz::finding("wire: encode(decode(x)) is not stable");
}

}  // namespace

extern "C" int bcs_fuzz_wire(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::span<const uint8_t> in(data + 1, size - 1);
  switch (data[0] % 6) {
    case 0: round_trip(in, [](auto b) { return bcs::wire::decode_strobe(b); }); break;
    case 1: round_trip(in, [](auto b) { return bcs::wire::decode_report(b); }); break;
    case 2: round_trip(in, [](auto b) { return bcs::wire::decode_batch(b); }); break;
    case 3: round_trip(in, [](auto b) { return bcs::wire::decode_get(b); }); break;
    case 4: round_trip(in, [](auto b) { return bcs::wire::decode_bell(b); }); break;
    case 5: round_trip(in, [](auto b) { return bcs::wire::decode_fused(b); }); break;
  }
  return 0;
}

#ifdef BCS_FUZZ_ENTRY
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return bcs_fuzz_wire(data, size);
}
#endif
