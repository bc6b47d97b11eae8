// Forwarding of job output to bcs's own stdout/stderr.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <utility>

namespace bcs::cli {

// write(2) until everything is written; retries EINTR and short writes.
// Returns false on a real error (e.g. EPIPE when the reader went away).
bool write_all(int fd, std::string_view data);

// Splits the byte stream of each (rank, stream) into lines and prefixes each
// complete line with "[R] ". Output of different ranks arrives interleaved at
// arbitrary byte boundaries, so a partial line is kept per (rank, stream)
// until its newline arrives; a line is therefore never torn by another
// rank's output.
class LineLabeler {
 public:
  // stream: 0 = stdout, 1 = stderr (bcs.v1.Stream). The sink gets whole
  // labelled lines (or unlabelled pass-through data when labelling is off).
  using Sink = std::function<void(int stream, std::string_view data)>;

  LineLabeler(bool label, Sink sink) : label_(label), sink_(std::move(sink)) {}

  // A line longer than this (a program writing megabytes without a newline)
  // is cut into labelled lines of at most this many bytes, so that what bcs
  // holds per (rank, stream) is bounded however long the line.
  static constexpr size_t kMaxLine = 64 * 1024;

  void feed(uint32_t rank, int stream, std::string_view data);
  // Emits every pending partial line, labelled and terminated with '\n'
  // (labelled output is line-oriented; a missing final newline is added).
  void flush();
  // Bytes held back as partial lines, over every rank and stream.
  size_t pending_bytes() const;

 private:
  bool label_;
  Sink sink_;
  std::map<std::pair<uint32_t, int>, std::string> partial_;
};

}  // namespace bcs::cli
