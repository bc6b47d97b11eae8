#include "token.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "fd.h"

namespace bcs {

std::optional<std::string> load_token(const std::string& file, std::string* why) {
  auto fail = [&](std::string m) -> std::optional<std::string> {
    if (why) *why = std::move(m);
    return std::nullopt;
  };
  std::string t;
  if (!file.empty()) {
    UniqueFd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY));
    if (!fd) return fail("token file " + file + ": " + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0) return fail("token file " + file + ": " + std::strerror(errno));
    if (!S_ISREG(st.st_mode)) return fail("token file " + file + " is not a regular file");
    if (st.st_mode & 077)
      return fail("token file " + file + " is readable by other users (chmod 600 " + file + ")");
    char buf[4096];
    for (;;) {
      ssize_t n = ::read(fd.get(), buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return fail("token file " + file + ": " + std::strerror(errno));
      if (n == 0) break;
      t.append(buf, static_cast<size_t>(n));
      if (t.size() > 4096) return fail("token file " + file + " is longer than 4 KiB");
    }
  } else if (const char* e = std::getenv(kTokenEnv)) {
    t = e;
  }
  const auto ws = " \t\r\n";
  const size_t b = t.find_first_not_of(ws);
  if (b == std::string::npos) {
    if (!file.empty()) return fail("token file " + file + " is empty");
    return std::string();  // no token
  }
  return t.substr(b, t.find_last_not_of(ws) - b + 1);
}

bool tokens_equal(std::string_view a, std::string_view b) {
  // Every byte of the longer one is looked at; the lengths are folded in.
  const size_t n = a.size() > b.size() ? a.size() : b.size();
  volatile unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff = diff | static_cast<unsigned char>(x ^ y);
  }
  return diff == 0;
}

}  // namespace bcs
