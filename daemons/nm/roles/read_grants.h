// Remote reads are capabilities. A node manager serves a DmaGet only for a
// send one of its ranks posted to a rank on the requesting node, and only
// inside that send's buffer: the buffer sender grants the read when it
// forwards the send descriptor, the DMA helper checks every request against
// the grant and drops it with the transfer's last chunk (or its cancel).
// Anything else a peer asks for (another rank's memory, another range, a
// request that was never sent to it) is refused and logged. Shared between
// the strobe-receiver thread (grants) and the fabric's progress (serving).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <utility>

#include "bcs/layout.h"

namespace bcs::nm {

class ReadGrants {
 public:
  // `layout`: the send is non-contiguous, at base `addr`, and [addr, addr +
  // len) stands for its packed bytes.
  void grant(int32_t rank, uint32_t request, uint32_t node, uint64_t addr, uint64_t len,
             LayoutPtr layout = nullptr) {
    std::lock_guard lk(mu_);
    grants_[{rank, request}] = Grant{node, addr, len, std::move(layout)};
  }
  // Whether `node` may read [addr, addr + len) of `rank`'s send `request`;
  // `last` ends the grant (the transfer's last chunk, or its cancel). For a
  // non-contiguous send, *layout and *base say how to read it (the range is
  // then packed offsets from base). *earlier: the first failure noted for
  // the transfer (a refused piece, or one the receiving rank could not
  // read), 0 if none: pieces that get no answer report it with the last.
  bool use(int32_t rank, uint32_t request, uint32_t node, uint64_t addr, uint64_t len,
           bool last, LayoutPtr* layout = nullptr, uint64_t* base = nullptr,
           int32_t* earlier = nullptr) {
    std::lock_guard lk(mu_);
    auto it = grants_.find({rank, request});
    if (it == grants_.end()) return false;
    const Grant& g = it->second;
    const bool ok = g.node == node && addr >= g.addr && len <= g.len &&
                    addr - g.addr <= g.len - len;  // no overflow: both sides checked
    if (ok && layout) *layout = g.layout;
    if (ok && base) *base = g.addr;
    if (ok && earlier) *earlier = g.error;
    if (ok && last) grants_.erase(it);
    return ok;
  }
  // A piece of `node`'s transfer of `rank`'s send `request` that gets no
  // answer failed with `error` (refused, or the receiving rank's own read
  // failed): the first one is kept for use()'s *earlier. Another node's
  // word changes nothing of the transfer.
  void note_error(int32_t rank, uint32_t request, uint32_t node, int32_t error) {
    std::lock_guard lk(mu_);
    auto it = grants_.find({rank, request});
    if (it != grants_.end() && it->second.node == node && !it->second.error)
      it->second.error = error;
  }

  size_t size() const {
    std::lock_guard lk(mu_);
    return grants_.size();
  }

 private:
  struct Grant {
    uint32_t node;
    uint64_t addr, len;
    LayoutPtr layout;
    int32_t error = 0;
  };
  mutable std::mutex mu_;
  std::map<std::pair<int32_t, uint32_t>, Grant> grants_;
};

}  // namespace bcs::nm
