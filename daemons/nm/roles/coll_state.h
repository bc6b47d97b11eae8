// Private to collectives.cc and coll_rounds.cc: the state of the
// collectives a node manager runs, and the rounds they are cut into.
//
// Rounds. A collective moves at most about one chunk budget per node and
// microphase, like point-to-point: it runs in rounds, one per run of its
// microphase, until every byte is through. In round r a block of B bytes
// (one source member's data for one destination, or for everybody) moves
// its bytes [r*W, min(B, (r+1)*W)), where W is the op's window:
//   - BBM kinds: the sender's budget divided among the blocks it reads. A
//     piece carries its offset, so the receiver needs no W of its own.
//   - reductions, scan and exscan: a window of elements every node derives
//     from the count and the (job-wide) budget alone, so that node partials
//     of the same elements meet.
// Who talks to whom stays decided locally: round 0 follows the peers rule
// (every peer gets a section, possibly empty); each section says whether
// the sender has more for that receiver, and a receiver expects a section
// in round r+1 exactly from the peers that said so in round r. A node is
// done with a collective when it has read everything it sends and expects
// nothing more; only then are its members' requests completed. While any
// node is still in a round of a collective it reports it busy, and the MM
// runs that microphase again (daemons/mm/slice_plan.cc).
#pragma once

#include <map>
#include <set>
#include <vector>

#include "collectives.h"

namespace bcs::nm {

using Bytes = std::vector<uint8_t>;
constexpr int32_t kAny = -1;  // block key: "for every member" / "node partial"
// Pieces from this size on that only this node's members need are read by
// the members themselves (Piece::in_member): below it, waking a member to
// copy costs more than the node's two copies.
constexpr uint64_t kMemberCopyMin = 128u << 10;

bool coll_rooted(bcs_coll_t k);
inline bool coll_reduction(bcs_coll_t k) { return coll_phase(k) == CollPhase::rm; }
// Scan and exscan move every member's contribution (their blocks are keyed
// like allgather's) but in element windows like a reduction.
inline bool coll_scan(bcs_coll_t k) { return k == BCS_COLL_SCAN || k == BCS_COLL_EXSCAN; }

// One local member's part of a collective, as posted.
struct Member {
  int32_t world = 0;
  uint32_t request = 0;
  bool no_complete = false;  // application bypass: the rank completed it itself
  CollArgs a{};
  bool has_inline = false;
  Bytes inl;
  std::vector<uint64_t> scounts, sdispls, rcounts, rdispls;  // read when the op starts
};

// A piece of a block: its bytes [off, off + data.size()), or, for a piece
// that only this node's members need (`in_member`), where they still are:
// `ref_len` bytes at `ref_addr` of the source member (`src`, a local
// member). The members then read such a piece themselves, in parallel
// (copy orders, segment.h), instead of the node manager reading it and
// writing it into each of them.
struct Piece {
  int32_t src = 0, dst = 0;
  uint64_t off = 0;
  Bytes data;
  bool in_member = false;
  uint64_t ref_addr = 0, ref_len = 0;
};

struct Op {
  int32_t ctx = 0;
  uint64_t seq = 0;
  bcs_coll_t kind = BCS_COLL_BARRIER;
  CollArgs first{};                   // the first member's arguments: every other must agree
  std::map<int32_t, Member> members;  // local members, by communicator rank
  int32_t error = 0;
  std::map<int32_t, int32_t> member_err;  // communicator rank -> its own error (truncation, ...)

  // Rounds.
  bool started = false;
  uint32_t round = 0;
  uint64_t window = 0;          // bytes per block (BBM kinds) or elements (RM kinds) per round
  bool more_local = false;      // this node reads or writes more in a later round
  std::set<uint32_t> to;        // peers that get a section this round
  std::set<uint32_t> from;      // peers whose section is due this round
  std::set<uint32_t> got_from;  // ... and came
  std::set<uint32_t> from_more; // ... and said they have more
  // This round's data: pieces for local members (read here or received),
  // node partials of a reduction's element window [e0, e1).
  std::vector<Piece> pieces;
  std::map<uint32_t, Bytes> partials;
  uint64_t e0 = 0, e1 = 0;
  std::set<std::pair<int32_t, int32_t>> seen;  // blocks with at least one piece
};

struct Ctx {
  std::vector<int32_t> members;         // world ranks, communicator order
  std::map<int32_t, int32_t> crank_of;  // world rank -> communicator rank
  std::vector<uint32_t> nodes;          // sorted, unique
  std::vector<int32_t> local;           // communicator ranks on this node
  std::map<int32_t, uint64_t> posted;   // local communicator rank -> last number posted
  std::map<uint64_t, Op> ops;
};

// Appends a section (one op's round for one peer: head, then `body` with
// `npieces` pieces) to a bundle.
void coll_put_section(wire::Writer& w, const Op& op, bool more, uint32_t npieces,
                      wire::Writer& body);

inline void coll_fail(Op& op, int32_t e) {
  if (!op.error) op.error = e;
}

struct Collectives::Impl {
  uint32_t self = 0;
  bool member_copies = true;
  uint64_t budget = 0;
  std::vector<uint32_t> rank_node;
  std::map<int32_t, Ctx> ctxs;
  // The contexts with collectives posted and not complete, in context order.
  // Per-slice work walks these only: a job that made and freed 100,000
  // communicators keeps their registrations, and walking all of them every
  // slice made each slice slower than the last.
  std::set<int32_t> busy;
  // The microphase begun and not yet finished: its ops and its peers.
  std::vector<Op*> batch;
  std::set<uint32_t> expect_from, received_from;

  uint32_t node_of(const Ctx& c, int32_t crank) const {
    return rank_node[static_cast<size_t>(c.members[static_cast<size_t>(crank)])];
  }
  bool in_place_root(const Op& op) const;
  void peers(const Ctx& c, const Op& op, std::set<uint32_t>* to, std::set<uint32_t>* from) const;
  int32_t contribution(RankMemory& mem, const Member& m, uint64_t addr, uint64_t len, Bytes* out);

  // coll_rounds.cc. start(): vector arguments, peers and window (round 0).
  // stage(): reads this round's data and appends one section per peer in
  // op.to to `out` (counting sections in `nsec`). write(): puts this
  // round's data into the local members' buffers. complete(): completes
  // the members' requests once the node is done with the op.
  void start(Ctx& c, Op& op, RankMemory& mem);
  void stage(Ctx& c, Op& op, RankMemory& mem, std::map<uint32_t, wire::Writer>& out,
             std::map<uint32_t, uint32_t>& nsec);
  void write(Ctx& c, Op& op, RankMemory& mem, Done& done);
  // write()'s copies of pieces still in a member's memory into member `cr`
  // (world rank `world`) at `dst`: by the members themselves, with copy
  // orders (segment.h), where they sleep in MPI; the rest by the node.
  struct MemberCopy {
    int32_t cr;
    int32_t world;
    uint64_t dst, len;
    size_t piece;
  };
  void copy_by_members(Op& op, RankMemory& mem, std::vector<MemberCopy>& copies, Done& done);
  void complete(Ctx& c, Op& op, RankMemory& mem, Done& done);
};

}  // namespace bcs::nm
