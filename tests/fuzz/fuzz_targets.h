// The fuzz targets as plain functions: libFuzzer calls them through
// LLVMFuzzerTestOneInput (BCS_FUZZ_ENTRY, clang builds), the replay test
// (replay_test.cc) calls them on generated inputs in every build.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

extern "C" int bcs_fuzz_wire(const uint8_t* data, size_t size);
extern "C" int bcs_fuzz_ring(const uint8_t* data, size_t size);
extern "C" int bcs_fuzz_record(const uint8_t* data, size_t size);

namespace bcs::fuzz {
// A property broken: abort, so that libFuzzer saves the input and the
// replay test dies naming it.
[[noreturn]] inline void finding(const char* what) {
  std::fprintf(stderr, "fuzz finding: %s\n", what);
  std::abort();
}
}  // namespace bcs::fuzz
