#include "tls.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>

namespace bcs {

bool read_pem(const std::string& path, std::string* out, std::string* why) {
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    *why = path + ": " + std::strerror(errno);
    return false;
  }
  std::string s;
  s.reserve(4096);
  char buf[4096];
  while (f.read(buf, sizeof buf) || f.gcount() > 0) {
    s.append(buf, static_cast<size_t>(f.gcount()));
    if (s.size() > (size_t{1} << 20)) {
      *why = path + ": larger than 1 MiB, not a PEM file";
      return false;
    }
  }
  if (s.find("-----BEGIN") == std::string::npos) {
    *why = path + ": not a PEM file";
    return false;
  }
  *out = std::move(s);
  return true;
}

}  // namespace bcs
