#include "units.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace bcs {
namespace {

// Splits "1.5ms" into 1.5 and "ms"; false if there is no leading number.
bool split_number(std::string_view s, double* value, std::string_view* unit) {
  std::string buf(s);
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(buf.c_str(), &end);
  if (end == buf.c_str() || errno != 0 || !std::isfinite(v) || v < 0) return false;
  *value = v;
  *unit = s.substr(static_cast<size_t>(end - buf.c_str()));
  return true;
}

}  // namespace

std::optional<uint64_t> parse_duration_ns(std::string_view s) {
  double v;
  std::string_view unit;
  if (!split_number(s, &v, &unit)) return std::nullopt;
  double mult;
  if (unit.empty() || unit == "s")
    mult = 1e9;
  else if (unit == "ns")
    mult = 1;
  else if (unit == "us" || unit == "µs")
    mult = 1e3;
  else if (unit == "ms")
    mult = 1e6;
  else if (unit == "m" || unit == "min")
    mult = 60e9;
  else if (unit == "h")
    mult = 3600e9;
  else
    return std::nullopt;
  double ns = v * mult;
  if (ns > 1.8e19) return std::nullopt;
  return static_cast<uint64_t>(std::llround(ns));
}

std::optional<uint64_t> parse_size_bytes(std::string_view s) {
  double v;
  std::string_view unit;
  if (!split_number(s, &v, &unit)) return std::nullopt;
  double mult;
  if (unit.empty() || unit == "B")
    mult = 1;
  else if (unit == "K" || unit == "KiB" || unit == "k")
    mult = 1024.0;
  else if (unit == "M" || unit == "MiB")
    mult = 1024.0 * 1024;
  else if (unit == "G" || unit == "GiB")
    mult = 1024.0 * 1024 * 1024;
  else if (unit == "KB" || unit == "kB")
    mult = 1e3;
  else if (unit == "MB")
    mult = 1e6;
  else if (unit == "GB")
    mult = 1e9;
  else
    return std::nullopt;
  return static_cast<uint64_t>(std::llround(v * mult));
}

std::string format_duration(uint64_t ns) {
  char buf[64];
  if (ns < 1000)
    std::snprintf(buf, sizeof buf, "%lluns", static_cast<unsigned long long>(ns));
  else if (ns < 1000000)
    std::snprintf(buf, sizeof buf, "%gus", ns / 1e3);
  else if (ns < 1000000000)
    std::snprintf(buf, sizeof buf, "%gms", ns / 1e6);
  else
    std::snprintf(buf, sizeof buf, "%gs", ns / 1e9);
  return buf;
}

}  // namespace bcs
