#include "collectives.h"

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

namespace {

using Bytes = std::vector<uint8_t>;
constexpr int32_t kAny = -1;  // block key: "for every member" / "node partial"

bool rooted(bcs_coll_t k) {
  return k == BCS_COLL_BCAST || k == BCS_COLL_GATHER || k == BCS_COLL_GATHERV ||
         k == BCS_COLL_SCATTER || k == BCS_COLL_SCATTERV || k == BCS_COLL_REDUCE;
}
bool reduction(bcs_coll_t k) { return coll_phase(k) == CollPhase::rm; }

// One local member's part of a collective, as posted.
struct Member {
  int32_t world = 0;
  uint32_t request = 0;
  bool no_complete = false;  // application bypass: the rank completed it itself
  CollArgs a{};
  bool has_inline = false;
  Bytes inl;
  std::vector<uint64_t> scounts, sdispls, rcounts, rdispls;  // read in begin()
};

struct Op {
  int32_t ctx = 0;
  uint64_t seq = 0;
  bcs_coll_t kind = BCS_COLL_BARRIER;
  CollArgs first{};  // the first member's arguments: every other must agree
  std::map<int32_t, Member> members;  // local members, by communicator rank
  int32_t error = 0;
  // Data while it runs: blocks keyed by (source member, destination member),
  // kAny where a block is for everybody; node partials of reductions.
  std::map<std::pair<int32_t, int32_t>, Bytes> blocks;
  std::map<uint32_t, Bytes> partials;
};

struct Ctx {
  std::vector<int32_t> members;        // world ranks, communicator order
  std::map<int32_t, int32_t> crank_of;  // world rank -> communicator rank
  std::vector<uint32_t> nodes;         // sorted, unique
  std::vector<int32_t> local;          // communicator ranks on this node
  std::map<int32_t, uint64_t> posted;  // local communicator rank -> last number posted
  std::map<uint64_t, Op> ops;
};

void fail(Op& op, int32_t e) {
  if (!op.error) op.error = e;
}

}  // namespace

struct Collectives::Impl {
  uint32_t self;
  std::vector<uint32_t> rank_node;
  std::map<int32_t, Ctx> ctxs;
  // The batch begun and not yet finished.
  std::vector<Op*> batch;
  std::set<uint32_t> expect_from, received_from;

  uint32_t node_of(const Ctx& c, int32_t crank) const {
    return rank_node[static_cast<size_t>(c.members[static_cast<size_t>(crank)])];
  }

  // Which peers a node sends to / receives from for one collective: the
  // same rule on every node, from arguments every member agrees on.
  void peers(const Ctx& c, const Op& op, std::set<uint32_t>* to, std::set<uint32_t>* from) const {
    std::set<uint32_t> others;
    for (uint32_t n : c.nodes)
      if (n != self) others.insert(n);
    const uint32_t root_node = rooted(op.kind) ? node_of(c, op.first.root) : self;
    switch (op.kind) {
      case BCS_COLL_BARRIER:
        return;
      case BCS_COLL_BCAST:
      case BCS_COLL_SCATTER:
      case BCS_COLL_SCATTERV:
        if (self == root_node)
          to->insert(others.begin(), others.end());
        else
          from->insert(root_node);
        return;
      case BCS_COLL_GATHER:
      case BCS_COLL_GATHERV:
      case BCS_COLL_REDUCE:
        if (self == root_node)
          from->insert(others.begin(), others.end());
        else
          to->insert(root_node);
        return;
      default:
        to->insert(others.begin(), others.end());
        from->insert(others.begin(), others.end());
        return;
    }
  }

  // The send data of a local member (from its descriptor, or its memory).
  int32_t contribution(RankMemory& mem, const Member& m, uint64_t addr, uint64_t len, Bytes* out) {
    if (m.has_inline && addr == m.a.sendbuf && len <= m.inl.size()) {
      out->assign(m.inl.begin(), m.inl.begin() + static_cast<std::ptrdiff_t>(len));
      return 0;
    }
    out->resize(len);
    return len ? mem.read(m.world, addr, out->data(), len) : 0;
  }

  // Counts are bounded; displacements are not: they are offsets from a
  // buffer in the rank's own address space (negative ones wrap around in
  // uint64 arithmetic, MPI_BOTTOM makes them absolute), and every access is
  // checked by cross-memory attach against that rank's mappings.
  int32_t read_vector(RankMemory& mem, const Member& m, uint64_t addr, size_t n,
                      std::vector<uint64_t>* v, bool counts) {
    if (!addr) return bcs_err_internal;
    v->resize(n);
    if (int32_t e = mem.read(m.world, addr, v->data(), n * sizeof(uint64_t))) return e;
    if (counts)
      for (uint64_t x : *v)
        if (x > kCollMaxBytes) return bcs_err_internal;
    return 0;
  }

  void local_stage(Ctx& c, Op& op, RankMemory& mem, std::map<uint32_t, wire::Writer>& out);
  void finish_op(Ctx& c, Op& op, RankMemory& mem, Done& done);
};

Collectives::Collectives(uint32_t self, std::vector<uint32_t> rank_node)
    : impl_(std::make_unique<Impl>()) {
  impl_->self = self;
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
  if (rooted(kind) && (a.root < 0 || a.root >= n))
    return fail_why("collective root " + std::to_string(a.root) + " out of range");
  uint64_t& last = c.posted[crank];
  if (d.seq != last + 1)
    return fail_why("collective number " + std::to_string(d.seq) + " out of order (expected " +
                    std::to_string(last + 1) + ")");
  if (a.sbytes > kCollMaxBytes / static_cast<uint64_t>(n) ||
      a.rbytes > kCollMaxBytes / static_cast<uint64_t>(n))
    return fail_why("collective block size out of range");
  if (reduction(kind)) {
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
    bool same = f.kind == a.kind && (!rooted(kind) || f.root == a.root);
    if (reduction(kind)) same = same && f.count == a.count && f.op == a.op && f.dtype == a.dtype;
    if (!same) fail(op, bcs_err_coll_mismatch);
  }
  op.members.emplace(crank, std::move(m));
  return true;
}

std::vector<wire::CollLevel> Collectives::levels() const {
  std::vector<wire::CollLevel> out;
  for (const auto& [ctx, c] : impl_->ctxs) {
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
      if (seq > l.level) break;
      uint64_t& first = coll_phase(op.kind) == CollPhase::bbm ? l.first_bbm : l.first_rm;
      if (!first) first = seq;
    }
    out.push_back(l);
  }
  return out;
}

size_t Collectives::pending() const {
  size_t n = 0;
  for (const auto& [ctx, c] : impl_->ctxs) n += c.ops.size();
  return n;
}

// ------------------------------------------------------------ local stage

namespace {

void put_section_head(wire::Writer& w, const Op& op, uint32_t nblocks) {
  w.put(op.ctx);
  w.put(op.seq);
  w.put<uint8_t>(static_cast<uint8_t>(op.kind));
  w.put(op.first.root);
  w.put(op.first.count);
  w.put(op.first.op);
  w.put(op.first.dtype);
  w.put(nblocks);
}

void put_block(wire::Writer& w, int32_t src, int32_t dst, const Bytes& b) {
  w.put(src);
  w.put(dst);
  w.put_bytes(b);
}

}  // namespace

void Collectives::Impl::local_stage(Ctx& c, Op& op, RankMemory& mem,
                                    std::map<uint32_t, wire::Writer>& out) {
  const auto n = static_cast<int32_t>(c.members.size());
  const int32_t root = op.first.root;
  const bool root_local = rooted(op.kind) && node_of(c, root) == self;
  std::set<uint32_t> to, from;
  peers(c, op, &to, &from);
  // Every bundle for this collective gets a section (possibly with no
  // blocks), so that a receiver can tell its peers agree on what runs.
  std::map<uint32_t, std::vector<std::tuple<int32_t, int32_t, const Bytes*>>> sections;
  for (uint32_t p : to) sections[p];
  auto ship = [&](uint32_t node, int32_t src, int32_t dst, const Bytes* b) {
    sections[node].emplace_back(src, dst, b);
  };
  auto err = [&](int32_t e) {
    if (e) fail(op, e);
    return e != 0;
  };

  // Vector arguments, from the members' memory.
  for (auto& [cr, m] : op.members) {
    const bool is_root = cr == root;
    switch (op.kind) {
      case BCS_COLL_GATHERV:
        if (is_root) {
          err(read_vector(mem, m, m.a.rcounts, static_cast<size_t>(n), &m.rcounts, true));
          err(read_vector(mem, m, m.a.rdispls, static_cast<size_t>(n), &m.rdispls, false));
        }
        break;
      case BCS_COLL_SCATTERV:
        if (is_root) {
          err(read_vector(mem, m, m.a.scounts, static_cast<size_t>(n), &m.scounts, true));
          err(read_vector(mem, m, m.a.sdispls, static_cast<size_t>(n), &m.sdispls, false));
        }
        break;
      case BCS_COLL_ALLGATHERV:
        err(read_vector(mem, m, m.a.rcounts, static_cast<size_t>(n), &m.rcounts, true));
        err(read_vector(mem, m, m.a.rdispls, static_cast<size_t>(n), &m.rdispls, false));
        break;
      case BCS_COLL_ALLTOALLV:
        err(read_vector(mem, m, m.a.scounts, static_cast<size_t>(n), &m.scounts, true));
        err(read_vector(mem, m, m.a.sdispls, static_cast<size_t>(n), &m.sdispls, false));
        err(read_vector(mem, m, m.a.rcounts, static_cast<size_t>(n), &m.rcounts, true));
        err(read_vector(mem, m, m.a.rdispls, static_cast<size_t>(n), &m.rdispls, false));
        break;
      case BCS_COLL_REDUCE_SCATTER:
        err(read_vector(mem, m, m.a.rcounts, static_cast<size_t>(n), &m.rcounts, true));
        if (!op.error) {
          uint64_t sum = 0;
          for (uint64_t x : m.rcounts) sum += x;
          if (sum != m.a.count) fail(op, bcs_err_coll_mismatch);
        }
        break;
      default:
        break;
    }
  }

  // MPI_IN_PLACE at a gather/scatter root: the root's own flag decides.
  const bool in_place = root_local && op.members.count(root) &&
                        (op.members.at(root).a.flags & BCS_COLL_IN_PLACE) != 0;
  if (!op.error) switch (op.kind) {
      case BCS_COLL_BARRIER:
        break;
      case BCS_COLL_BCAST:
        if (root_local) {
          const Member& m = op.members.at(root);
          Bytes& b = op.blocks[{root, kAny}];
          err(contribution(mem, m, m.a.sendbuf, m.a.sbytes, &b));
          for (uint32_t p : to) ship(p, root, kAny, &b);
        }
        break;
      case BCS_COLL_GATHER:
      case BCS_COLL_GATHERV:
        for (auto& [cr, m] : op.members) {
          if (cr == root && in_place) continue;
          Bytes& b = op.blocks[{cr, root}];
          err(contribution(mem, m, m.a.sendbuf, m.a.sbytes, &b));
          if (!root_local) ship(node_of(c, root), cr, root, &b);
        }
        break;
      case BCS_COLL_SCATTER:
      case BCS_COLL_SCATTERV:
        if (root_local) {
          const Member& m = op.members.at(root);
          for (int32_t j = 0; j < n && !op.error; ++j) {
            if (j == root && in_place) continue;
            const uint64_t off = op.kind == BCS_COLL_SCATTER ? uint64_t(j) * m.a.sbytes
                                                             : m.sdispls[static_cast<size_t>(j)];
            const uint64_t len = op.kind == BCS_COLL_SCATTER ? m.a.sbytes
                                                             : m.scounts[static_cast<size_t>(j)];
            Bytes& b = op.blocks[{root, j}];
            err(contribution(mem, m, m.a.sendbuf + off, len, &b));
            if (node_of(c, j) != self) ship(node_of(c, j), root, j, &b);
          }
        }
        break;
      case BCS_COLL_ALLGATHER:
      case BCS_COLL_ALLGATHERV:
      case BCS_COLL_SCAN:
      case BCS_COLL_EXSCAN:
        for (auto& [cr, m] : op.members) {
          Bytes& b = op.blocks[{cr, kAny}];
          const uint64_t len = reduction(op.kind)
                                   ? m.a.count * bcs_dtype_size(static_cast<bcs_dtype_t>(m.a.dtype))
                                   : m.a.sbytes;
          err(contribution(mem, m, m.a.sendbuf, len, &b));
          for (uint32_t p : to) ship(p, cr, kAny, &b);
        }
        break;
      case BCS_COLL_ALLTOALL:
      case BCS_COLL_ALLTOALLV:
        for (auto& [cr, m] : op.members) {
          for (int32_t j = 0; j < n && !op.error; ++j) {
            const auto sj = static_cast<size_t>(j);
            const uint64_t off =
                op.kind == BCS_COLL_ALLTOALL ? uint64_t(j) * m.a.sbytes : m.sdispls[sj];
            const uint64_t len = op.kind == BCS_COLL_ALLTOALL ? m.a.sbytes : m.scounts[sj];
            Bytes& b = op.blocks[{cr, j}];
            err(contribution(mem, m, m.a.sendbuf + off, len, &b));
            if (node_of(c, j) != self) ship(node_of(c, j), cr, j, &b);
          }
        }
        break;
      case BCS_COLL_REDUCE:
      case BCS_COLL_ALLREDUCE:
      case BCS_COLL_REDUCE_SCATTER: {
        // The node's partial: local members combined in communicator rank order.
        const auto dt = static_cast<bcs_dtype_t>(op.first.dtype);
        const uint64_t len = op.first.count * bcs_dtype_size(dt);
        Bytes& acc = op.partials[self];
        Bytes tmp;
        bool first = true;
        for (auto& [cr, m] : op.members) {
          if (err(contribution(mem, m, m.a.sendbuf, len, first ? &acc : &tmp))) break;
          if (!first)
            bcs_reduce_local(static_cast<bcs_op_t>(op.first.op), dt, acc.data(), tmp.data(),
                             op.first.count);
          first = false;
        }
        for (uint32_t p : to) ship(p, kAny, kAny, &acc);
        break;
      }
    }

  for (auto& [node, blocks] : sections) {
    wire::Writer& w = out[node];
    put_section_head(w, op, static_cast<uint32_t>(blocks.size()));
    for (auto& [src, dst, b] : blocks) put_block(w, src, dst, *b);
  }
  expect_from.insert(from.begin(), from.end());
}

std::vector<Collectives::Outgoing> Collectives::begin(CollPhase phase,
                                                       const std::vector<wire::CollRelease>& release,
                                                       RankMemory& mem) {
  auto& I = *impl_;
  I.batch.clear();
  I.expect_from.clear();
  I.received_from.clear();
  std::map<uint32_t, wire::Writer> out;
  std::vector<std::pair<Ctx*, Op*>> ops;
  for (const auto& r : release) {
    auto it = I.ctxs.find(r.context);
    if (it == I.ctxs.end()) continue;
    for (auto& [seq, op] : it->second.ops) {
      if (seq > r.level) break;
      if (coll_phase(op.kind) == phase) ops.emplace_back(&it->second, &op);
    }
  }
  for (auto& [c, op] : ops) {
    I.local_stage(*c, *op, mem, out);
    I.batch.push_back(op);
  }
  std::vector<Outgoing> res;
  for (auto& [node, w] : out) {
    // Bundle = number of sections, then the sections.
    wire::Writer head;
    uint32_t nsec = 0;
    // Count sections by re-walking the batch is awkward; prefix a count
    // computed from the peers rule instead.
    for (Op* op : I.batch) {
      const Ctx& c = I.ctxs.at(op->ctx);
      std::set<uint32_t> to, from;
      I.peers(c, *op, &to, &from);
      if (to.count(node)) ++nsec;
    }
    head.put(nsec);
    auto& hb = head.bytes();
    hb.insert(hb.end(), w.bytes().begin(), w.bytes().end());
    res.push_back({node, std::move(hb)});
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
  struct Block {
    int32_t src, dst;
    std::span<const uint8_t> data;
  };
  struct Section {
    Op* op;
    std::vector<Block> blocks;
  };
  std::vector<Section> secs;
  try {
    wire::Reader r(bytes);
    const auto nsec = r.get<uint32_t>();
    if (nsec > I.batch.size()) return false;
    for (uint32_t s = 0; s < nsec; ++s) {
      const auto ctx = r.get<int32_t>();
      const auto seq = r.get<uint64_t>();
      const auto kind = r.get<uint8_t>();
      const auto root = r.get<int32_t>();
      const auto count = r.get<uint64_t>();
      const auto op_ = r.get<uint8_t>();
      const auto dtype = r.get<uint8_t>();
      const auto nblocks = r.get<uint32_t>();
      Op* op = nullptr;
      for (Op* o : I.batch)
        if (o->ctx == ctx && o->seq == seq) op = o;
      if (!op) return false;
      const CollArgs& f = op->first;
      bool same = f.kind == kind && (!rooted(op->kind) || f.root == root);
      if (reduction(op->kind)) same = same && f.count == count && f.op == op_ && f.dtype == dtype;
      if (!same) fail(*op, bcs_err_coll_mismatch);
      const auto n = static_cast<int32_t>(I.ctxs.at(ctx).members.size());
      if (nblocks > static_cast<uint64_t>(n) * static_cast<uint64_t>(n)) return false;
      Section sec{op, {}};
      for (uint32_t b = 0; b < nblocks; ++b) {
        Block bl;
        bl.src = r.get<int32_t>();
        bl.dst = r.get<int32_t>();
        bl.data = r.get_bytes();
        if (bl.src < kAny || bl.src >= n || bl.dst < kAny || bl.dst >= n) return false;
        sec.blocks.push_back(bl);
      }
      secs.push_back(std::move(sec));
    }
    if (!r.done()) return false;
  } catch (const std::exception&) {
    return false;
  }
  for (auto& s : secs)
    for (auto& b : s.blocks) {
      Bytes v(b.data.begin(), b.data.end());
      if (b.src == kAny)
        s.op->partials[from] = std::move(v);
      else
        s.op->blocks[{b.src, b.dst}] = std::move(v);
    }
  return true;
}

// ------------------------------------------------------------ results

void Collectives::Impl::finish_op(Ctx& c, Op& op, RankMemory& mem, Done& done) {
  const auto n = static_cast<int32_t>(c.members.size());
  const int32_t root = op.first.root;
  const bool in_place = rooted(op.kind) && op.members.count(root) &&
                        (op.members.at(root).a.flags & BCS_COLL_IN_PLACE) != 0;
  std::map<int32_t, int32_t> member_err;  // communicator rank -> error
  // Writes `b` into member m's buffer at `off`, at most `cap` bytes.
  auto put = [&](const Member& m, int32_t cr, uint64_t off, uint64_t cap, const Bytes* b) {
    if (!b) {
      member_err.emplace(cr, bcs_err_peer_gone);  // its data never came
      return;
    }
    const uint64_t len = std::min<uint64_t>(b->size(), cap);
    if (len) {
      if (int32_t e = mem.write(m.world, m.a.recvbuf + off, b->data(), len)) {
        member_err.emplace(cr, e);
        return;
      }
      done.bytes += len;
    }
    if (b->size() > cap) member_err.emplace(cr, bcs_err_truncate);
  };
  auto block = [&](int32_t src, int32_t dst) -> const Bytes* {
    auto it = op.blocks.find({src, dst});
    return it == op.blocks.end() ? nullptr : &it->second;
  };
  // Reductions: node partials combined in node-id order, so every node gets
  // the same bits.
  auto combine = [&](Bytes* out) {
    const auto dt = static_cast<bcs_dtype_t>(op.first.dtype);
    bool first = true;
    for (uint32_t node : c.nodes) {
      auto it = op.partials.find(node);
      const uint64_t len = op.first.count * bcs_dtype_size(dt);
      if (it == op.partials.end() || it->second.size() != len) return false;
      if (first)
        *out = it->second;
      else
        bcs_reduce_local(static_cast<bcs_op_t>(op.first.op), dt, out->data(), it->second.data(),
                         op.first.count);
      first = false;
    }
    return true;
  };

  if (!op.error) switch (op.kind) {
      case BCS_COLL_BARRIER:
        break;
      case BCS_COLL_BCAST:
        for (auto& [cr, m] : op.members)
          if (cr != root) put(m, cr, 0, m.a.rbytes, block(root, kAny));
        break;
      case BCS_COLL_GATHER:
      case BCS_COLL_GATHERV:
        if (auto it = op.members.find(root); it != op.members.end()) {
          const Member& m = it->second;
          for (int32_t i = 0; i < n; ++i) {
            if (i == root && in_place) continue;
            const auto si = static_cast<size_t>(i);
            const bool v = op.kind == BCS_COLL_GATHERV;
            put(m, root, v ? m.rdispls[si] : uint64_t(i) * m.a.rbytes, v ? m.rcounts[si] : m.a.rbytes,
                block(i, root));
          }
        }
        break;
      case BCS_COLL_SCATTER:
      case BCS_COLL_SCATTERV:
        for (auto& [cr, m] : op.members)
          if (!(cr == root && in_place)) put(m, cr, 0, m.a.rbytes, block(root, cr));
        break;
      case BCS_COLL_ALLGATHER:
      case BCS_COLL_ALLGATHERV:
        for (auto& [cr, m] : op.members)
          for (int32_t i = 0; i < n; ++i) {
            const auto si = static_cast<size_t>(i);
            const bool v = op.kind == BCS_COLL_ALLGATHERV;
            put(m, cr, v ? m.rdispls[si] : uint64_t(i) * m.a.rbytes, v ? m.rcounts[si] : m.a.rbytes,
                block(i, kAny));
          }
        break;
      case BCS_COLL_ALLTOALL:
      case BCS_COLL_ALLTOALLV:
        for (auto& [cr, m] : op.members)
          for (int32_t i = 0; i < n; ++i) {
            const auto si = static_cast<size_t>(i);
            const bool v = op.kind == BCS_COLL_ALLTOALLV;
            put(m, cr, v ? m.rdispls[si] : uint64_t(i) * m.a.rbytes, v ? m.rcounts[si] : m.a.rbytes,
                block(i, cr));
          }
        break;
      case BCS_COLL_REDUCE:
      case BCS_COLL_ALLREDUCE:
      case BCS_COLL_REDUCE_SCATTER: {
        const bool here = op.kind != BCS_COLL_REDUCE || op.members.count(root);
        if (!here) break;
        Bytes result;
        if (!combine(&result)) {
          fail(op, bcs_err_peer_gone);
          break;
        }
        const size_t es = bcs_dtype_size(static_cast<bcs_dtype_t>(op.first.dtype));
        for (auto& [cr, m] : op.members) {
          if (op.kind == BCS_COLL_REDUCE && cr != root) continue;
          if (op.kind == BCS_COLL_REDUCE_SCATTER) {
            uint64_t off = 0;
            for (int32_t i = 0; i < cr; ++i) off += m.rcounts[static_cast<size_t>(i)];
            const uint64_t len = m.rcounts[static_cast<size_t>(cr)] * es;
            Bytes part(result.begin() + static_cast<std::ptrdiff_t>(off * es),
                       result.begin() + static_cast<std::ptrdiff_t>(off * es + len));
            put(m, cr, 0, len, &part);
          } else {
            put(m, cr, 0, result.size(), &result);
          }
        }
        break;
      }
      case BCS_COLL_SCAN:
      case BCS_COLL_EXSCAN: {
        // Every contribution is here: prefixes in communicator rank order.
        const auto dt = static_cast<bcs_dtype_t>(op.first.dtype);
        const uint64_t len = op.first.count * bcs_dtype_size(dt);
        Bytes acc;
        for (int32_t i = 0; i < n; ++i) {
          const Bytes* x = block(i, kAny);
          if (!x || x->size() != len) {
            fail(op, bcs_err_peer_gone);
            break;
          }
          auto me = op.members.find(i);
          if (op.kind == BCS_COLL_EXSCAN && me != op.members.end() && i > 0)
            put(me->second, i, 0, len, &acc);
          if (i == 0)
            acc = *x;
          else
            bcs_reduce_local(static_cast<bcs_op_t>(op.first.op), dt, acc.data(), x->data(),
                             op.first.count);
          if (op.kind == BCS_COLL_SCAN && me != op.members.end()) put(me->second, i, 0, len, &acc);
        }
        break;
      }
    }

  bool any_err = op.error != 0;
  for (auto& [cr, m] : op.members) {
    int32_t e = op.error;
    if (!e)
      if (auto it = member_err.find(cr); it != member_err.end()) e = it->second;
    any_err = any_err || e != 0;
    if (!m.no_complete) mem.complete(m.world, m.request, e);
  }
  done.collectives++;
  if (any_err) done.errors++;
}

Collectives::Done Collectives::finish(RankMemory& mem, bool lost) {
  (void)lost;  // a lost bundle shows up as missing blocks/partials
  auto& I = *impl_;
  Done done;
  for (Op* op : I.batch) {
    Ctx& c = I.ctxs.at(op->ctx);
    I.finish_op(c, *op, mem, done);
  }
  for (Op* op : I.batch) I.ctxs.at(op->ctx).ops.erase(op->seq);
  I.batch.clear();
  I.expect_from.clear();
  I.received_from.clear();
  return done;
}

}  // namespace bcs::nm
