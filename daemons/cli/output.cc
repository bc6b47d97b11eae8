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
  // Invariant: pending.size() < kMaxLine.
  while (!data.empty()) {
    const size_t nl = data.find('\n');
    const size_t content = nl == std::string_view::npos ? data.size() : nl;
    const size_t room = kMaxLine - pending.size();
    if (nl != std::string_view::npos && content <= room) {  // a whole line that fits
      out += prefix;
      out += pending;
      out.append(data.substr(0, nl + 1));
      pending.clear();
      data.remove_prefix(nl + 1);
    } else if (content < room) {  // no newline yet, and still room
      pending.append(data);
      break;
    } else {  // too long: cut it here, the rest goes on as a new labelled line
      out += prefix;
      out += pending;
      out.append(data.substr(0, room));
      out += '\n';
      pending.clear();
      data.remove_prefix(room);
    }
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

namespace bcs::cli {
size_t LineLabeler::pending_bytes() const {
  size_t n = 0;
  for (const auto& [key, p] : partial_) n += p.size();
  return n;
}
}  // namespace bcs::cli
