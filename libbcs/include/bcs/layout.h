// Non-contiguous buffers as the node managers see them (kDescLayout): a
// validated copy of the block list a rank posted, and the map from a range
// of the packed message to the (address, length) segments of the rank's
// memory it occupies. Chunking cuts the packed stream at any byte, so a
// chunk may start or end inside a block; the segments say where.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bcs/segment.h"

namespace bcs {

struct Layout {
  std::vector<LayoutBlock> blocks;  // one instance, in order
  std::vector<uint64_t> start;      // packed offset of each block within an instance
  uint32_t count = 0;
  int64_t extent = 0;
  uint64_t size = 0;  // packed bytes of one instance
  uint64_t total() const { return size * count; }
};
using LayoutPtr = std::shared_ptr<const Layout>;

// Builds a layout from the blocks a rank wrote (already copied out of its
// memory). Null with the reason in *why if the list is not one the library
// would post: no blocks or too many, an empty block, sizes that overflow.
LayoutPtr layout_make(std::vector<LayoutBlock> blocks, uint32_t count, int64_t extent,
                      std::string* why);

// Calls f(address, length) for each piece of rank memory holding packed
// bytes [off, off + len) of the layout at `base`, in order. The range must
// lie within total().
template <typename F>
void layout_segments(const Layout& l, uint64_t base, uint64_t off, uint64_t len, F&& f);

// ---------------------------------------------------------------- details
size_t layout_find_block(const Layout& l, uint64_t within);  // block holding offset `within`

template <typename F>
void layout_segments(const Layout& l, uint64_t base, uint64_t off, uint64_t len, F&& f) {
  if (!len || !l.size) return;
  uint64_t inst = off / l.size, within = off % l.size;
  size_t b = layout_find_block(l, within);
  while (len > 0) {
    const LayoutBlock& blk = l.blocks[b];
    const uint64_t skip = within - l.start[b];
    const uint64_t n = std::min<uint64_t>(blk.len - skip, len);
    // uint64 arithmetic wraps like the rank's pointer arithmetic would.
    const uint64_t addr =
        base + inst * static_cast<uint64_t>(l.extent) + static_cast<uint64_t>(blk.disp) + skip;
    f(addr, n);
    len -= n;
    within += n;
    if (++b == l.blocks.size() || within == l.size) {
      b = 0;
      within = 0;
      ++inst;
    } else if (within < l.start[b]) {
      within = l.start[b];
    }
  }
}

}  // namespace bcs
