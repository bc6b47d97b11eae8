// Builders and renderings shared by the matcher's tests (matcher_test.cc:
// rules by example; matcher_model_test.cc: determinism and the reference
// model).
#pragma once

#include <sstream>
#include <string>
#include <vector>

#include "bcs/matcher.h"

namespace bcs::matcher_test {

inline SendDesc send(int32_t src, int32_t dst, int32_t tag, uint64_t pair_seq, uint64_t slice,
                     uint64_t len = 8, int32_t context = 0) {
  SendDesc s;
  s.src = src;
  s.dst = dst;
  s.tag = tag;
  s.pair_seq = pair_seq;
  s.slice = slice;
  s.len = len;
  s.context = context;
  s.addr = 0x10000 * static_cast<uint64_t>(src + 1) + pair_seq;
  s.request = static_cast<uint32_t>(pair_seq);
  return s;
}

inline RecvDesc recv(int32_t rank, int32_t src, int32_t tag, uint32_t request, uint64_t slice,
                     uint64_t cap = 1024, int32_t context = 0, DescKind kind = DescKind::recv) {
  RecvDesc r;
  r.rank = rank;
  r.kind = kind;
  r.src = src;
  r.tag = tag;
  r.request = request;
  r.slice = slice;
  r.cap = cap;
  r.context = context;
  r.addr = 0x900000 + request;
  return r;
}

inline RecvDesc probe(int32_t rank, int32_t src, int32_t tag, uint32_t request, uint64_t slice,
                      DescKind kind = DescKind::probe, int32_t context = 0) {
  return recv(rank, src, tag, request, slice, 0, context, kind);
}

// A compact, complete rendering of a match, for exact sequence comparisons.
inline std::string str(const Match& m) {
  std::ostringstream o;
  o << "s(" << m.send.slice << "," << m.send.src << "->" << m.send.dst << ",#" << m.send.pair_seq
    << ",t" << m.send.tag << ",c" << m.send.context << ",len" << m.send.len << ")"
    << " r(" << m.recv.rank << ",req" << m.recv.request << ",src" << m.recv.src << ",t"
    << m.recv.tag << ",cap" << m.recv.cap << ") bytes" << m.bytes << (m.truncated ? " T" : "");
  return o.str();
}

inline std::string str(const ProbeResult& p) {
  std::ostringstream o;
  o << "p(" << p.probe.rank << ",req" << p.probe.request << ",k" << int(p.probe.kind) << ") "
    << (p.found ? "found" : "none");
  if (p.found) o << " src" << p.source << " t" << p.tag << " len" << p.len;
  return o.str();
}

template <typename T>
std::vector<std::string> strs(const std::vector<T>& v) {
  std::vector<std::string> out;
  for (const auto& x : v) out.push_back(str(x));
  return out;
}

}  // namespace bcs::matcher_test
