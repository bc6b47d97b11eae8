// Parsing of human durations and sizes for the daemons and the CLI:
// "500us", "2ms", "1.5s", "10m", "250000ns"; "64KiB", "4MiB", "1048576".
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace bcs {

// Nanoseconds, or nullopt if `s` is not a duration. A bare number is seconds.
std::optional<uint64_t> parse_duration_ns(std::string_view s);
// Bytes, or nullopt. Suffixes: B, K/KiB, M/MiB, G/GiB (powers of two), KB/MB/GB (powers of ten).
std::optional<uint64_t> parse_size_bytes(std::string_view s);
// "500us", "2ms", "1.5s".
std::string format_duration(uint64_t ns);

// The gRPC keepalive timeout that, with a ping every 10 s, notices a silent
// peer within `liveness` (at least 5 s). Both daemons use it, so a manager
// and its node managers agree on how long a stall may last.
inline int keepalive_timeout_ms(std::chrono::nanoseconds liveness) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(liveness).count() - 10000;
  return static_cast<int>(ms < 5000 ? 5000 : ms > 3'600'000 ? 3'600'000 : ms);
}

}  // namespace bcs
