// The unexpected shelf (segment.h, Shelf): small unexpected messages the
// buffer receiver offers to their receiving rank, which takes them without
// a slice. Both sides of the protocol live here, so that one unit test
// plays them against each other:
//   - shelf_take: the rank's side, called by a receive;
//   - ShelfKeeper: the node manager's side for one rank, driven by the
//     buffer receiver around each MSM that concerns the rank.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "bcs/matcher.h"
#include "bcs/segment.h"

namespace bcs {

// What a receive took from the shelf.
struct ShelfTaken {
  int32_t src = 0;
  int32_t tag = 0;
  uint32_t len = 0;  // the message's bytes (a longer one than the buffer is cut)
  uint64_t pair_seq = 0;
};

// The rank's side: takes the entry a receive of (context, src, tag) gets -
// the first of that key, or for a wildcard (src kAnySource, tag kAnyTag,
// or both) the earliest it accepts if nothing it would accept that is held
// but not offered comes before it - and copies min(len, cap) of its bytes
// to `buf`. False: there is none (or the node manager
// withdrew it meanwhile), and the receive goes to the node manager as
// usual; `buf` is untouched then. The caller must have no receive or probe
// of its own still open (see segment.h).
bool shelf_take(Shelf* shelf, int32_t src, int32_t context, int32_t tag, void* buf, size_t cap,
                ShelfTaken* out);
// A probe's side: what shelf_take would take, without taking it.
bool shelf_peek(Shelf* shelf, int32_t src, int32_t context, int32_t tag, ShelfTaken* out);

// The node manager's side of one rank's shelf. Not thread-safe: the buffer
// receiver's thread owns it.
class ShelfKeeper {
 public:
  // Withdraws every entry still offered, and takes those the rank took out
  // of `m` (they were received). Returns how many the rank took. An entry
  // holding a word that is neither ours nor ours taken is garbage from the
  // rank: `why` says so and -1 is returned (the caller ends the rank;
  // nothing more is read).
  int withdraw(Shelf* shelf, Matcher& m, int32_t rank, std::string* why);
  // Offers what `m` holds for `rank` (Matcher::shelf_candidates). After
  // withdraw().
  void offer(Shelf* shelf, const Matcher& m, int32_t rank);
  bool offering() const { return !offers_.empty(); }

 private:
  struct Offer {
    uint32_t word;  // the offered state word we stored
    int32_t context, src, tag;
    uint64_t pair_seq;
  };
  std::vector<Offer> offers_;  // entry i's offer
  uint32_t generation_ = 0;
};

}  // namespace bcs
