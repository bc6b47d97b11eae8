#include "collectives.h"

#include "coll_state.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <set>

namespace bcs::nm {

CollPhase coll_phase(bcs_coll_t kind) {
  switch (kind) {
    case BCS_COLL_REDUCE:
    case BCS_COLL_ALLREDUCE:
    case BCS_COLL_REDUCE_SCATTER:
    case BCS_COLL_SCAN:
    case BCS_COLL_EXSCAN:
      return CollPhase::rm;
    default:
      return CollPhase::bbm;
  }
}

Collectives::Collectives(uint32_t self, std::vector<uint32_t> rank_node, uint64_t budget)
    : impl_(std::make_unique<Impl>()) {
  impl_->self = self;
  impl_->budget = budget ? budget : kDefaultBudget;
  impl_->rank_node = std::move(rank_node);
  std::vector<int32_t> world(impl_->rank_node.size());
  std::iota(world.begin(), world.end(), 0);
  add_comm(kContextWorld + 1, std::move(world));
}

Collectives::~Collectives() = default;

void Collectives::add_comm(int32_t context, std::vector<int32_t> members) {
  Ctx c;
  c.members = std::move(members);
  std::set<uint32_t> nodes;
  for (size_t i = 0; i < c.members.size(); ++i) {
    const int32_t w = c.members[i];
    c.crank_of[w] = static_cast<int32_t>(i);
    const uint32_t n = impl_->rank_node.at(static_cast<size_t>(w));
    nodes.insert(n);
    if (n == impl_->self) {
      c.local.push_back(static_cast<int32_t>(i));
      c.posted[static_cast<int32_t>(i)] = 0;
    }
  }
  c.nodes.assign(nodes.begin(), nodes.end());
  impl_->ctxs[context] = std::move(c);
}

void Collectives::set_member_copies(bool on) { impl_->member_copies = on; }

bool Collectives::posted_locally(int32_t context, uint64_t seq,
                                 std::span<const int32_t> posted_since) const {
  const auto it = impl_->ctxs.find(context);
  if (it == impl_->ctxs.end() || it->second.local.empty()) return false;
  const Ctx& c = it->second;
  for (const int32_t crank : c.local) {
    const auto p = c.posted.find(crank);
    if (p != c.posted.end() && p->second >= seq) continue;
    const int32_t w = c.members[static_cast<size_t>(crank)];
    if (!std::binary_search(posted_since.begin(), posted_since.end(), w)) return false;
  }
  return true;
}

bool Collectives::register_comm(int32_t world_rank, int32_t context, std::vector<int32_t> members,
                                std::string* why) {
  if (context <= kContextSelf + 1) {
    *why = "registers predefined communicator context " + std::to_string(context);
    return false;
  }
  const auto n = static_cast<int32_t>(impl_->rank_node.size());
  std::set<int32_t> seen;
  for (int32_t m : members)
    if (m < 0 || m >= n || !seen.insert(m).second) {
      *why = "communicator " + std::to_string(context) + " names invalid or repeated rank " +
             std::to_string(m);
      return false;
    }
  if (!seen.count(world_rank)) {
    *why = "registers communicator " + std::to_string(context) + " it is not a member of";
    return false;
  }
  if (auto it = impl_->ctxs.find(context); it != impl_->ctxs.end()) {
    if (it->second.members != members) {
      *why = "registers communicator " + std::to_string(context) +
             " with members that differ from another member's";
      return false;
    }
    return true;
  }
  add_comm(context, std::move(members));
  return true;
}

bool Collectives::post(int32_t world_rank, const Descriptor& d, std::string* why) {
  auto fail_why = [&](std::string s) {
    *why = std::move(s);
    return false;
  };
  auto it = impl_->ctxs.find(d.context);
  if (it == impl_->ctxs.end())
    return fail_why("collective on unknown communicator context " + std::to_string(d.context));
  Ctx& c = it->second;
  auto cr = c.crank_of.find(world_rank);
  if (cr == c.crank_of.end())
    return fail_why("collective on context " + std::to_string(d.context) +
                    " it is not a member of");
  const int32_t crank = cr->second;
  CollArgs a;
  std::memcpy(&a, d.payload, sizeof a);
  const auto kind = static_cast<bcs_coll_t>(a.kind);
  const auto n = static_cast<int32_t>(c.members.size());
  if (a.kind < BCS_COLL_BARRIER || a.kind > BCS_COLL_EXSCAN)
    return fail_why("invalid collective kind " + std::to_string(a.kind));
  if (a.comm_size != n)
    return fail_why("collective names " + std::to_string(a.comm_size) +
                    " members, the communicator has " + std::to_string(n));
  if (coll_rooted(kind) && (a.root < 0 || a.root >= n))
    return fail_why("collective root " + std::to_string(a.root) + " out of range");
  uint64_t& last = c.posted[crank];
  if (d.seq != last + 1)
    return fail_why("collective number " + std::to_string(d.seq) + " out of order (expected " +
                    std::to_string(last + 1) + ")");
  if (a.sbytes > kCollMaxBytes / static_cast<uint64_t>(n) ||
      a.rbytes > kCollMaxBytes / static_cast<uint64_t>(n))
    return fail_why("collective block size out of range");
  if (coll_reduction(kind)) {
    const size_t es = bcs_dtype_size(static_cast<bcs_dtype_t>(a.dtype));
    if (!es || !bcs_op_supported(static_cast<bcs_op_t>(a.op), static_cast<bcs_dtype_t>(a.dtype)))
      return fail_why("invalid reduction op/type " + std::to_string(a.op) + "/" +
                      std::to_string(a.dtype));
    if (a.count > kCollMaxBytes / es) return fail_why("reduction count out of range");
  }
  const bool inl = (d.flags & kDescInline) != 0;
  if (inl && (d.inline_len > kCollInlineMax || d.inline_len != a.sbytes))
    return fail_why("collective inline length " + std::to_string(d.inline_len) + " invalid");
  if (d.request >= 1u << 24) return fail_why("request index out of range");

  last = d.seq;
  impl_->busy.insert(d.context);
  Op& op = c.ops[d.seq];
  Member m;
  m.world = world_rank;
  m.request = d.request;
  m.no_complete = (d.flags & kDescNoComplete) != 0;
  a.comm_rank = crank;  // never trust the rank's idea of it
  m.a = a;
  if (inl) {
    m.has_inline = true;
    m.inl.assign(d.payload + kCollInlineOffset, d.payload + kCollInlineOffset + d.inline_len);
  }
  if (op.members.empty()) {
    op.ctx = d.context;
    op.seq = d.seq;
    op.kind = kind;
    op.first = a;
  } else {
    const CollArgs& f = op.first;
    bool same = f.kind == a.kind && (!coll_rooted(kind) || f.root == a.root);
    if (coll_reduction(kind)) same = same && f.count == a.count && f.op == a.op && f.dtype == a.dtype;
    if (!same) coll_fail(op, bcs_err_coll_mismatch);
  }
  op.members.emplace(crank, std::move(m));
  return true;
}

std::vector<wire::CollLevel> Collectives::levels() const {
  std::vector<wire::CollLevel> out;
  for (const int32_t ctx : impl_->busy) {
    const Ctx& c = impl_->ctxs.at(ctx);
    // Only contexts with work waiting: a node with nothing posted on a
    // context could only hold it back, and that is what its silence does
    // (the MM releases a context only when every node hosting members
    // reported it). So idle communicators cost nothing per slice.
    if (c.local.empty() || c.ops.empty()) continue;
    wire::CollLevel l;
    l.context = ctx;
    l.nodes = static_cast<uint32_t>(c.nodes.size());
    l.level = UINT64_MAX;
    for (const auto& [crank, seq] : c.posted) l.level = std::min(l.level, seq);
    for (const auto& [seq, op] : c.ops) {
      // A collective in its rounds keeps its microphase running, whatever
      // the levels say (coll_state.h).
      if (op.started) {
        (coll_phase(op.kind) == CollPhase::bbm ? l.busy_bbm : l.busy_rm)++;
        continue;
      }
      if (seq > l.level) continue;
      uint64_t& first = coll_phase(op.kind) == CollPhase::bbm ? l.first_bbm : l.first_rm;
      if (!first) first = seq;
    }
    out.push_back(l);
  }
  return out;
}

std::vector<Collectives::Waiting> Collectives::waiting(int32_t world_rank) const {
  std::vector<Waiting> out;
  for (const auto& [id, c] : impl_->ctxs) {
    auto cr = c.crank_of.find(world_rank);
    if (cr == c.crank_of.end()) continue;
    for (const auto& [seq, op] : c.ops) {
      auto m = op.members.find(cr->second);
      if (m == op.members.end() || m->second.no_complete) continue;
      Waiting w{id, seq, op.kind, {}};
      for (int32_t l : c.local)
        if (!op.members.count(l)) w.not_posted_here.push_back(c.members[static_cast<size_t>(l)]);
      out.push_back(std::move(w));
    }
  }
  return out;
}

size_t Collectives::pending() const {
  size_t n = 0;
  for (const int32_t ctx : impl_->busy) n += impl_->ctxs.at(ctx).ops.size();
  return n;
}

size_t Collectives::in_rounds() const {
  size_t n = 0;
  for (const int32_t ctx : impl_->busy)
    for (const auto& [seq, op] : impl_->ctxs.at(ctx).ops) n += op.started;
  return n;
}

// ------------------------------------------------------------ one round

namespace {

// A section: one collective's round, for one peer.
struct SectionHead {
  int32_t ctx;
  uint64_t seq;
  uint8_t kind;
  int32_t root;
  uint64_t count;
  uint8_t op;
  uint8_t dtype;
  uint32_t round;
  uint8_t more;   // the sender has more for this receiver in the next round
  int32_t error;  // the sender's op failed: the receiver's fails too
  uint32_t npieces;
};

SectionHead read_head(wire::Reader& r) {
  SectionHead h{};
  h.ctx = r.get<int32_t>();
  h.seq = r.get<uint64_t>();
  h.kind = r.get<uint8_t>();
  h.root = r.get<int32_t>();
  h.count = r.get<uint64_t>();
  h.op = r.get<uint8_t>();
  h.dtype = r.get<uint8_t>();
  h.round = r.get<uint32_t>();
  h.more = r.get<uint8_t>();
  h.error = r.get<int32_t>();
  h.npieces = r.get<uint32_t>();
  return h;
}

}  // namespace

void coll_put_section(wire::Writer& w, const Op& op, bool more, uint32_t npieces,
                      wire::Writer& body) {
  w.put(op.ctx);
  w.put(op.seq);
  w.put<uint8_t>(static_cast<uint8_t>(op.kind));
  w.put(op.first.root);
  w.put(op.first.count);
  w.put(op.first.op);
  w.put(op.first.dtype);
  w.put(op.round);
  w.put<uint8_t>(more ? 1 : 0);
  w.put(op.error);
  w.put(npieces);
  auto& b = w.bytes();
  b.insert(b.end(), body.bytes().begin(), body.bytes().end());
}

std::vector<Collectives::Outgoing> Collectives::begin(CollPhase phase,
                                                       const std::vector<wire::CollRelease>& release,
                                                       RankMemory& mem) {
  auto& I = *impl_;
  I.batch.clear();
  I.expect_from.clear();
  I.received_from.clear();
  std::map<int32_t, uint64_t> rel;
  for (const auto& r : release) rel[r.context] = r.level;
  // In (context, number) order: collectives in their rounds, and those
  // released now.
  std::vector<std::pair<Ctx*, Op*>> ops;
  for (const int32_t ctx : I.busy) {
    Ctx& c = I.ctxs.at(ctx);
    auto it = rel.find(ctx);
    for (auto& [seq, op] : c.ops) {
      if (coll_phase(op.kind) != phase) continue;
      if (op.started || (it != rel.end() && seq <= it->second)) ops.emplace_back(&c, &op);
    }
  }
  std::map<uint32_t, wire::Writer> out;
  std::map<uint32_t, uint32_t> nsec;
  for (auto& [c, op] : ops) {
    if (!op->started) I.start(*c, *op, mem);
    I.stage(*c, *op, mem, out, nsec);
    I.expect_from.insert(op->from.begin(), op->from.end());
    I.batch.push_back(op);
  }
  std::vector<Outgoing> res;
  for (auto& [node, w] : out) {
    // Bundle = number of sections, then the sections.
    wire::Writer bundle;
    bundle.put(nsec[node]);
    auto& b = bundle.bytes();
    b.insert(b.end(), w.bytes().begin(), w.bytes().end());
    res.push_back({node, std::move(b)});
  }
  return res;
}

uint32_t Collectives::expected() const { return static_cast<uint32_t>(impl_->expect_from.size()); }

bool Collectives::receive(uint32_t from, std::span<const uint8_t> bytes) {
  auto& I = *impl_;
  if (!I.expect_from.count(from) || I.received_from.count(from)) return false;
  I.received_from.insert(from);
  // Parse everything first: a malformed bundle changes nothing but the
  // collectives it was meant for, which then fail for want of their data.
  struct Section {
    Op* op;
    SectionHead h;
    std::vector<Piece> pieces;
  };
  std::vector<Section> secs;
  try {
    wire::Reader r(bytes);
    const auto nsec = r.get<uint32_t>();
    if (nsec > I.batch.size()) return false;
    for (uint32_t s = 0; s < nsec; ++s) {
      Section sec{nullptr, read_head(r), {}};
      const SectionHead& h = sec.h;
      for (Op* o : I.batch)
        if (o->ctx == h.ctx && o->seq == h.seq) sec.op = o;
      // A section from a peer this op expects nothing from this round, or
      // of another round, or twice: the peers disagree on the protocol.
      if (!sec.op || !sec.op->from.count(from) || sec.op->got_from.count(from) ||
          h.round != sec.op->round)
        return false;
      for (const Section& o : secs)
        if (o.op == sec.op) return false;
      const auto n = static_cast<int32_t>(I.ctxs.at(h.ctx).members.size());
      if (h.npieces > static_cast<uint64_t>(n) * static_cast<uint64_t>(n)) return false;
      for (uint32_t b = 0; b < h.npieces; ++b) {
        Piece p;
        p.src = r.get<int32_t>();
        p.dst = r.get<int32_t>();
        p.off = r.get<uint64_t>();
        auto d = r.get_bytes();
        if (p.src < kAny || p.src >= n || p.dst < kAny || p.dst >= n ||
            p.off > kCollMaxBytes || d.size() > kCollMaxBytes)
          return false;
        p.data.assign(d.begin(), d.end());
        sec.pieces.push_back(std::move(p));
      }
      secs.push_back(std::move(sec));
    }
    if (!r.done()) return false;
  } catch (const std::exception&) {
    return false;
  }
  for (auto& s : secs) {
    Op& op = *s.op;
    const CollArgs& f = op.first;
    const SectionHead& h = s.h;
    bool same = f.kind == h.kind && (!coll_rooted(op.kind) || f.root == h.root);
    if (coll_reduction(op.kind))
      same = same && f.count == h.count && f.op == h.op && f.dtype == h.dtype;
    if (!same) coll_fail(op, bcs_err_coll_mismatch);
    if (h.error) coll_fail(op, h.error);
    op.got_from.insert(from);
    if (h.more) op.from_more.insert(from);
    for (auto& p : s.pieces) {
      op.seen.insert({p.src, p.dst});
      if (coll_reduction(op.kind) && !coll_scan(op.kind)) {
        // A node partial: exactly this round's window.
        if (p.src != kAny || p.off != op.e0 * bcs_dtype_size(static_cast<bcs_dtype_t>(f.dtype))) {
          coll_fail(op, bcs_err_coll_mismatch);
          continue;
        }
        op.partials[from] = std::move(p.data);
      } else {
        op.pieces.push_back(std::move(p));
      }
    }
  }
  return true;
}

Collectives::Done Collectives::finish(RankMemory& mem, bool lost) {
  (void)lost;  // a lost bundle shows up as a section that did not come
  auto& I = *impl_;
  Done done;
  for (Op* op : I.batch) {
    Ctx& c = I.ctxs.at(op->ctx);
    // A peer whose section did not come: its data is lost, and it will not
    // say whether more would come. The op fails here and expects no more.
    bool missing = false;
    for (uint32_t p : op->from)
      if (!op->got_from.count(p)) missing = true;
    if (missing) {
      coll_fail(*op, bcs_err_peer_gone);
      op->from_more.clear();
    }
    I.write(c, *op, mem, done);
    op->pieces.clear();
    op->partials.clear();
    op->from = std::move(op->from_more);
    op->from_more.clear();
    op->got_from.clear();
    op->round++;
    if (!op->more_local && op->from.empty() && op->to.empty()) {
      I.complete(c, *op, mem, done);
      const int32_t ctx = op->ctx;
      c.ops.erase(op->seq);  // `op` is gone
      if (c.ops.empty()) I.busy.erase(ctx);
    }
  }
  I.batch.clear();
  I.expect_from.clear();
  I.received_from.clear();
  return done;
}

}  // namespace bcs::nm
