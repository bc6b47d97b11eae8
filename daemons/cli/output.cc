#include "output.h"

#include <cerrno>
#include <unistd.h>

namespace bcs::cli {

bool write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

void LineLabeler::feed(uint32_t rank, int stream, std::string_view data) {
  if (!label_) {
    if (!data.empty()) sink_(stream, data);
    return;
  }
  std::string& pending = partial_[{rank, stream}];
  const std::string prefix = "[" + std::to_string(rank) + "] ";
  std::string out;
  while (!data.empty()) {
    size_t nl = data.find('\n');
    if (nl == std::string_view::npos) {
      pending.append(data);
      break;
    }
    out += prefix;
    out += pending;
    out.append(data.substr(0, nl + 1));
    pending.clear();
    data.remove_prefix(nl + 1);
  }
  // One sink call per chunk keeps the number of write(2)s low.
  if (!out.empty()) sink_(stream, out);
}

void LineLabeler::flush() {
  for (auto& [key, pending] : partial_) {
    if (pending.empty()) continue;
    std::string line = "[" + std::to_string(key.first) + "] " + pending + "\n";
    pending.clear();
    sink_(key.second, line);
  }
}

}  // namespace bcs::cli
