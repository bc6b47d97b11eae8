// Collectives as the node managers run them: the state and logic behind the
// paper's collective helper (BBM: barrier, broadcast, gather, scatter,
// allgather, alltoall) and reduce helper (RM: reduce, allreduce,
// reduce-scatter, scan, exscan). Pure logic: rank memory and the network are
// behind narrow interfaces, so a whole cluster of these can run in one test
// process against a serial reference.
//
// How one collective runs (node-hierarchical, the NM is the node leader):
//   DEM  the buffer sender hands each collective descriptor to post(). A
//        collective is identified by (context, sequence number), never by a
//        tag. levels() tells the MM, per context, up to which number every
//        local member has posted; the MM releases the minimum over nodes.
//   BBM/RM begin(): for every collective of the microphase that is released
//        now or still in its rounds, in (context, number) order, read this
//        round's part of the local members' contributions by cross-memory
//        attach (or from the descriptor: application bypass), combine them
//        locally for reductions (in communicator rank order), and build one
//        bundle per peer node with what that node needs. receive(): the
//        bundles of the peers (their number is known up front:
//        expected()). finish(): combine node partials in node-id order,
//        write this round's results into the local members' buffers and,
//        once nothing more is due, complete their requests.
// One network round per microphase: every bundle depends only on local
// data. With up to a handful of node managers per job a direct exchange is
// also the fewest steps (a tree or recursive doubling pays log2(N) rounds
// of wake-ups at 2-20 us each). A collective larger than the per-slice
// budget takes one round per slice, like chunked point-to-point
// (coll_state.h): a node manager never holds more than about a budget per
// collective and peer in memory, and small collectives are not held up.
//
// Determinism: results are combined in a fixed order (members by
// communicator rank within a node, then node partials by node id), so every
// node computes bit-identical floating-point results.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "bcs/bcs.h"
#include "bcs/segment.h"
#include "ports.h"
#include "wire.h"

namespace bcs::nm {

// Which microphase runs a collective kind.
enum class CollPhase : uint8_t { bbm, rm };
CollPhase coll_phase(bcs_coll_t kind);

// Limits on what a rank may ask of its node manager in one collective.
// Sanity bounds only: data moves in rounds of about the budget.
constexpr uint64_t kCollMaxBytes = uint64_t{1} << 40;  // per block and per result
constexpr int32_t kCollMaxMembers = 1 << 16;

class Collectives {
 public:
  // `rank_node`: world rank -> node id; this node is `self`. The world
  // communicator's collective context (kContextWorld + 1) is known from the
  // start; others are added with add_comm(). `budget`: bytes a collective
  // moves per round and node, about (the job's chunk budget; the same on
  // every node of the job).
  Collectives(uint32_t self, std::vector<uint32_t> rank_node, uint64_t budget = kDefaultBudget);
  static constexpr uint64_t kDefaultBudget = uint64_t{2} << 20;
  ~Collectives();
  // Members asleep in MPI copy large pieces only this node's members need
  // themselves (coll_state.h, Piece::in_member); on by default.
  void set_member_copies(bool on);
  Collectives(const Collectives&) = delete;
  Collectives& operator=(const Collectives&) = delete;

  // A communicator: its collective context and its members (world ranks in
  // communicator rank order).
  void add_comm(int32_t context, std::vector<int32_t> members);
  // A communicator a local member registers (bcs_comm_register): checked
  // (members valid and distinct, the rank among them, not a predefined
  // context, the same list as any earlier registration) and added.
  bool register_comm(int32_t world_rank, int32_t context, std::vector<int32_t> members,
                     std::string* why);

  // DEM: a collective descriptor drained from a local rank's ring. Every
  // field is checked first; false (with the reason in *why) means the rank
  // wrote something invalid and nothing was recorded.
  bool post(int32_t world_rank, const Descriptor& d, std::string* why);

  // DEM report: one entry per context with local members.
  std::vector<wire::CollLevel> levels() const;

  // BBM/RM step 1. Runs the local stage of every collective of `phase`
  // released by `release`, and returns the bundle for each peer node.
  struct Outgoing {
    uint32_t node;
    std::vector<uint8_t> bytes;
  };
  std::vector<Outgoing> begin(CollPhase phase, const std::vector<wire::CollRelease>& release,
                              RankMemory& mem);
  // Number of bundles this node receives for the batch begun.
  uint32_t expected() const;
  // Step 2: a peer's bundle. False if it was malformed or not expected
  // (its collectives then fail with an error instead of reading garbage).
  bool receive(uint32_t from, std::span<const uint8_t> bytes);
  // Step 3: writes results and completes the local requests. `lost`: the
  // bundles that never came (their collectives fail).
  struct Done {
    uint32_t collectives = 0;
    uint64_t bytes = 0;
    uint32_t errors = 0;  // collectives that failed (mismatch, copy error, lost bundle)
  };
  Done finish(RankMemory& mem, bool lost = false);

  // Whether every local member of `context` has posted its collective
  // `seq`: drained already, or - for the world ranks in `posted_since`
  // (sorted) - in its ring since. False for a context not known yet.
  bool posted_locally(int32_t context, uint64_t seq, std::span<const int32_t> posted_since) const;
  // The collectives local rank `world_rank` posted and waits in (not
  // complete, not completed by the rank itself), and the local members of
  // each that have not posted it: for a hung job's report.
  struct Waiting {
    int32_t context = 0;
    uint64_t seq = 0;
    bcs_coll_t kind = BCS_COLL_BARRIER;
    std::vector<int32_t> not_posted_here;  // world ranks
  };
  std::vector<Waiting> waiting(int32_t world_rank) const;

  // Collectives posted and not yet complete on this node (all contexts).
  size_t pending() const;
  // Of those, how many are in their rounds (they need the next slices).
  size_t in_rounds() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace bcs::nm
