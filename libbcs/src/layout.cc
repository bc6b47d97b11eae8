#include "bcs/layout.h"

#include <algorithm>

namespace bcs {

LayoutPtr layout_make(std::vector<LayoutBlock> blocks, uint32_t count, int64_t extent,
                      std::string* why) {
  if (blocks.empty() || blocks.size() > kLayoutMaxBlocks) {
    *why = "layout of " + std::to_string(blocks.size()) + " blocks";
    return nullptr;
  }
  auto l = std::make_shared<Layout>();
  l->start.reserve(blocks.size());
  for (const LayoutBlock& b : blocks) {
    if (b.len == 0 || b.len > (uint64_t{1} << 40) || l->size > (uint64_t{1} << 40)) {
      *why = "layout block of " + std::to_string(b.len) + " bytes";
      return nullptr;
    }
    l->start.push_back(l->size);
    l->size += b.len;
  }
  if (count && l->size > (uint64_t{1} << 46) / count) {
    *why = "layout of " + std::to_string(count) + " instances of " + std::to_string(l->size) +
           " bytes";
    return nullptr;
  }
  l->blocks = std::move(blocks);
  l->count = count;
  l->extent = extent;
  return l;
}

size_t layout_find_block(const Layout& l, uint64_t within) {
  // The last block starting at or before `within` (starts are increasing).
  auto it = std::upper_bound(l.start.begin(), l.start.end(), within);
  return static_cast<size_t>(it - l.start.begin()) - 1;
}

}  // namespace bcs
