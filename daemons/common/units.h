// Parsing of human durations and sizes for the daemons and the CLI:
// "500us", "2ms", "1.5s", "10m", "250000ns"; "64KiB", "4MiB", "1048576".
#pragma once

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

}  // namespace bcs
