// Collective helper (CH, BBM) and reduce helper (RH, RM): one exchange
// round of collective data between the node managers. The logic of what
// is read, sent, combined and written is in collectives.h; this role moves
// the bundles: one to each peer that needs data from this node, and exactly
// as many received as collectives.h expects.
#pragma once

#include "collectives.h"
#include "ports.h"
#include "wire.h"

namespace bcs::nm {

class CollectiveHelper {
 public:
  // `phase`: CollPhase::bbm for the collective helper, ::rm for the reduce helper.
  static wire::Report run(const wire::Strobe& s, CollPhase phase, Collectives& coll,
                          LocalRanks& ranks, Net& net);
};

}  // namespace bcs::nm
