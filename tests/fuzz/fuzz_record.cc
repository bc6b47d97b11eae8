// Fuzz target: the record decoder (libbcs/include/bcs/record.h). A
// recording is a file anyone may hand to bcs replay, and each rank of the
// replay reads its own: truncated, corrupted or foreign bytes must give an
// error naming the offset, never a crash or an allocation the bytes cannot
// justify. What it accepts must survive its own round trip.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "bcs/record.h"
#include "fuzz_targets.h"

extern "C" int bcs_fuzz_record(const uint8_t* data, size_t size) {
  namespace r = bcs::record;
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  r::File f;
  std::string err;
  if (!r::parse(in, "fuzz.rec", &f, &err)) {
    if (err.rfind("fuzz.rec: ", 0) != 0) bcs::fuzz::finding("record: an error that does not name the file");
    return 0;
  }
  std::string once;
  r::append_header(f.header, &once);
  for (const auto& e : f.events) r::append_event(e, &once);
  r::File again;
  if (!r::parse(once, "again.rec", &again, &err)) bcs::fuzz::finding("record: its own encoding refused");
  if (!(again.header == f.header) || again.events != f.events)
    bcs::fuzz::finding("record: decode(encode(x)) differs from x");
  return 0;
}

#ifdef BCS_FUZZ_ENTRY
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) { return bcs_fuzz_record(data, size); }
#endif
