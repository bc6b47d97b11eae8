// What one round of a collective reads, ships and writes on one node
// (coll_state.h says how a collective is cut into rounds).
#include <algorithm>
#include <cstring>

#include "coll_state.h"

namespace bcs::nm {

bool coll_rooted(bcs_coll_t k) {
  return k == BCS_COLL_BCAST || k == BCS_COLL_GATHER || k == BCS_COLL_GATHERV ||
         k == BCS_COLL_SCATTER || k == BCS_COLL_SCATTERV || k == BCS_COLL_REDUCE;
}

namespace {

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

bool vkind(bcs_coll_t k) {
  return k == BCS_COLL_GATHERV || k == BCS_COLL_SCATTERV || k == BCS_COLL_ALLGATHERV ||
         k == BCS_COLL_ALLTOALLV;
}

// Where block i lands in a receiving member's buffer: offset and capacity.
std::pair<uint64_t, uint64_t> recv_slot(bcs_coll_t kind, const Member& m, int32_t i) {
  const auto si = static_cast<size_t>(i);
  if (vkind(kind)) return {m.rdispls[si], m.rcounts[si]};
  return {uint64_t(static_cast<uint32_t>(i)) * m.a.rbytes, m.a.rbytes};
}

size_t elem_size(const Op& op) { return bcs_dtype_size(static_cast<bcs_dtype_t>(op.first.dtype)); }

}  // namespace

bool Collectives::Impl::in_place_root(const Op& op) const {
  if (!coll_rooted(op.kind)) return false;
  auto it = op.members.find(op.first.root);
  return it != op.members.end() && (it->second.a.flags & BCS_COLL_IN_PLACE) != 0;
}

// Which peers a node sends to / receives from in round 0 of a collective:
// the same rule on every node, from arguments every member agrees on.
void Collectives::Impl::peers(const Ctx& c, const Op& op, std::set<uint32_t>* to,
                              std::set<uint32_t>* from) const {
  std::set<uint32_t> others;
  for (uint32_t n : c.nodes)
    if (n != self) others.insert(n);
  const uint32_t root_node = coll_rooted(op.kind) ? node_of(c, op.first.root) : self;
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
int32_t Collectives::Impl::contribution(RankMemory& mem, const Member& m, uint64_t addr,
                                        uint64_t len, Bytes* out) {
  if (m.has_inline && addr >= m.a.sendbuf && addr - m.a.sendbuf <= m.inl.size() &&
      len <= m.inl.size() - (addr - m.a.sendbuf)) {
    const auto off = static_cast<std::ptrdiff_t>(addr - m.a.sendbuf);
    out->assign(m.inl.begin() + off, m.inl.begin() + off + static_cast<std::ptrdiff_t>(len));
    return 0;
  }
  out->resize(len);
  return len ? mem.read(m.world, addr, out->data(), len) : 0;
}

void Collectives::Impl::start(Ctx& c, Op& op, RankMemory& mem) {
  op.started = true;
  op.round = 0;
  const auto n = static_cast<size_t>(c.members.size());
  const int32_t root = op.first.root;
  auto err = [&](int32_t e) {
    if (e) coll_fail(op, e);
  };
  // Vector arguments, from the members' memory.
  for (auto& [cr, m] : op.members) {
    const bool is_root = cr == root;
    switch (op.kind) {
      case BCS_COLL_GATHERV:
        if (is_root) {
          err(read_vector(mem, m, m.a.rcounts, n, &m.rcounts, true));
          err(read_vector(mem, m, m.a.rdispls, n, &m.rdispls, false));
        }
        break;
      case BCS_COLL_SCATTERV:
        if (is_root) {
          err(read_vector(mem, m, m.a.scounts, n, &m.scounts, true));
          err(read_vector(mem, m, m.a.sdispls, n, &m.sdispls, false));
        }
        break;
      case BCS_COLL_ALLGATHERV:
        err(read_vector(mem, m, m.a.rcounts, n, &m.rcounts, true));
        err(read_vector(mem, m, m.a.rdispls, n, &m.rdispls, false));
        break;
      case BCS_COLL_ALLTOALLV:
        err(read_vector(mem, m, m.a.scounts, n, &m.scounts, true));
        err(read_vector(mem, m, m.a.sdispls, n, &m.sdispls, false));
        err(read_vector(mem, m, m.a.rcounts, n, &m.rcounts, true));
        err(read_vector(mem, m, m.a.rdispls, n, &m.rdispls, false));
        break;
      case BCS_COLL_REDUCE_SCATTER:
        err(read_vector(mem, m, m.a.rcounts, n, &m.rcounts, true));
        if (!op.error) {
          uint64_t sum = 0;
          for (uint64_t x : m.rcounts) sum += x;
          if (sum != m.a.count) coll_fail(op, bcs_err_coll_mismatch);
        }
        break;
      default:
        break;
    }
  }
  peers(c, op, &op.to, &op.from);
  // The window. Reductions: elements, the same on every node. Others: the
  // budget shared by the blocks this node reads each round.
  if (coll_reduction(op.kind)) {
    op.window = std::max<uint64_t>(1, budget / std::max<size_t>(1, elem_size(op)));
    return;
  }
  const bool root_local = coll_rooted(op.kind) && op.members.count(root);
  uint64_t blocks = 0;
  switch (op.kind) {
    case BCS_COLL_BCAST:
      blocks = root_local ? 1 : 0;
      break;
    case BCS_COLL_SCATTER:
    case BCS_COLL_SCATTERV:
      blocks = root_local ? n : 0;
      break;
    case BCS_COLL_ALLTOALL:
    case BCS_COLL_ALLTOALLV:
      blocks = op.members.size() * n;
      break;
    default:
      blocks = op.members.size();
      break;
  }
  op.window = std::max<uint64_t>(1, budget / std::max<uint64_t>(1, blocks));
}

void Collectives::Impl::stage(Ctx& c, Op& op, RankMemory& mem,
                              std::map<uint32_t, wire::Writer>& out,
                              std::map<uint32_t, uint32_t>& nsec) {
  const auto n = static_cast<int32_t>(c.members.size());
  const int32_t root = op.first.root;
  const bool in_place = in_place_root(op);
  struct Section {
    uint32_t npieces = 0;
    wire::Writer body;
  };
  std::map<uint32_t, Section> sec;
  for (uint32_t p : op.to) sec[p];
  std::set<uint32_t> next_to;
  op.more_local = false;
  const uint64_t r = op.round;

  // Ships a piece to the peers among `dests` (self: kept for local members).
  auto ship = [&](int32_t src, int32_t dst, uint64_t off, Bytes&& data,
                  const std::set<uint32_t>& dests, bool more) {
    for (uint32_t node : dests) {
      if (node == self) {
        op.more_local = op.more_local || more;
        continue;
      }
      auto it = sec.find(node);
      if (it == sec.end()) continue;  // cannot happen: a block's nodes are peers of round 0
      wire::Writer& w = it->second.body;
      w.put(src);
      w.put(dst);
      w.put(off);
      w.put_bytes(data);
      it->second.npieces++;
      if (more) next_to.insert(node);
    }
    if (dests.count(self)) {
      op.seen.insert({src, dst});
      op.pieces.push_back({src, dst, off, std::move(data)});
    }
  };
  // Members asleep in MPI may copy pieces themselves (Piece::in_member).
  const bool members_copy = member_copies && dynamic_cast<LocalRanks*>(&mem) != nullptr;
  // A block of `len` bytes at `addr` of member m: this round's piece.
  auto block = [&](const Member& m, int32_t src, int32_t dst, uint64_t addr, uint64_t len,
                   const std::set<uint32_t>& dests) {
    if (op.error) return;
    const uint64_t lo = r * op.window;
    if (r > 0 && lo >= len) return;
    const uint64_t hi = std::min(len, lo + op.window);
    // Only this node's members need it: they read it themselves (write()),
    // so the node reads it only if they cannot.
    if (members_copy && dests.size() == 1 && dests.count(self) && !m.has_inline &&
        hi - lo >= kMemberCopyMin) {
      op.more_local = op.more_local || hi < len;
      op.seen.insert({src, dst});
      Piece p{src, dst, lo, {}};  // `src` is m's communicator rank
      p.in_member = true;
      p.ref_addr = addr + lo;
      p.ref_len = hi - lo;
      op.pieces.push_back(std::move(p));
      return;
    }
    Bytes b;
    if (int32_t e = contribution(mem, m, addr + lo, hi - lo, &b)) {
      coll_fail(op, e);
      return;
    }
    ship(src, dst, lo, std::move(b), dests, hi < len);
  };
  std::set<uint32_t> everyone(c.nodes.begin(), c.nodes.end());
  auto node_set = [&](uint32_t node) { return std::set<uint32_t>{node}; };

  if (!op.error) switch (op.kind) {
      case BCS_COLL_BARRIER:
        break;
      case BCS_COLL_BCAST:
        if (auto it = op.members.find(root); it != op.members.end()) {
          std::set<uint32_t> dests = op.to;
          if (op.members.size() > 1) dests.insert(self);
          block(it->second, root, kAny, it->second.a.sendbuf, it->second.a.sbytes, dests);
        }
        break;
      case BCS_COLL_GATHER:
      case BCS_COLL_GATHERV:
        for (auto& [cr, m] : op.members) {
          if (cr == root && in_place) continue;
          block(m, cr, root, m.a.sendbuf, m.a.sbytes, node_set(node_of(c, root)));
        }
        break;
      case BCS_COLL_SCATTER:
      case BCS_COLL_SCATTERV:
        if (auto it = op.members.find(root); it != op.members.end()) {
          const Member& m = it->second;
          for (int32_t j = 0; j < n && !op.error; ++j) {
            if (j == root && in_place) continue;
            const auto sj = static_cast<size_t>(j);
            const bool v = op.kind == BCS_COLL_SCATTERV;
            const uint64_t off = v ? m.sdispls[sj] : uint64_t(static_cast<uint32_t>(j)) * m.a.sbytes;
            block(m, root, j, m.a.sendbuf + off, v ? m.scounts[sj] : m.a.sbytes,
                  node_set(node_of(c, j)));
          }
        }
        break;
      case BCS_COLL_ALLGATHER:
      case BCS_COLL_ALLGATHERV:
        for (auto& [cr, m] : op.members) block(m, cr, kAny, m.a.sendbuf, m.a.sbytes, everyone);
        break;
      case BCS_COLL_ALLTOALL:
      case BCS_COLL_ALLTOALLV:
        for (auto& [cr, m] : op.members)
          for (int32_t j = 0; j < n && !op.error; ++j) {
            const auto sj = static_cast<size_t>(j);
            const bool v = op.kind == BCS_COLL_ALLTOALLV;
            const uint64_t off = v ? m.sdispls[sj] : uint64_t(static_cast<uint32_t>(j)) * m.a.sbytes;
            block(m, cr, j, m.a.sendbuf + off, v ? m.scounts[sj] : m.a.sbytes,
                  node_set(node_of(c, j)));
          }
        break;
      case BCS_COLL_SCAN:
      case BCS_COLL_EXSCAN:
      case BCS_COLL_REDUCE:
      case BCS_COLL_ALLREDUCE:
      case BCS_COLL_REDUCE_SCATTER: {
        // This round's element window, the same on every node.
        const size_t es = elem_size(op);
        op.e0 = std::min(op.first.count, r * op.window);
        op.e1 = std::min(op.first.count, op.e0 + op.window);
        const bool more = op.e1 < op.first.count;
        const uint64_t off = op.e0 * es, len = (op.e1 - op.e0) * es;
        if (coll_scan(op.kind)) {
          // Every member's window goes to every node.
          for (auto& [cr, m] : op.members) {
            Bytes b;
            if (int32_t e = contribution(mem, m, m.a.sendbuf + off, len, &b)) {
              coll_fail(op, e);
              break;
            }
            ship(cr, kAny, off, std::move(b), everyone, more);
          }
          break;
        }
        // The node's partial: local members combined in communicator rank order.
        const auto dt = static_cast<bcs_dtype_t>(op.first.dtype);
        Bytes acc, tmp;
        bool first = true;
        for (auto& [cr, m] : op.members) {
          if (int32_t e = contribution(mem, m, m.a.sendbuf + off, len, first ? &acc : &tmp)) {
            coll_fail(op, e);
            break;
          }
          if (!first)
            bcs_reduce_local(static_cast<bcs_op_t>(op.first.op), dt, acc.data(), tmp.data(),
                             op.e1 - op.e0);
          first = false;
        }
        if (op.error) break;
        for (uint32_t p : op.to) {
          wire::Writer& w = sec[p].body;
          w.put(kAny);
          w.put(kAny);
          w.put(off);
          w.put_bytes(acc);
          sec[p].npieces++;
          if (more) next_to.insert(p);
        }
        op.more_local = more;
        op.partials[self] = std::move(acc);
        break;
      }
    }
  // A failed op tells its peers and stops sending; it still listens to
  // the peers that have more for it, so that nobody waits in vain.
  if (op.error) {
    next_to.clear();
    op.more_local = false;
  }
  for (auto& [node, s] : sec) {
    coll_put_section(out[node], op, next_to.count(node) != 0, s.npieces, s.body);
    nsec[node]++;
  }
  op.to = std::move(next_to);
}

void Collectives::Impl::write(Ctx& c, Op& op, RankMemory& mem, Done& done) {
  if (op.error) return;
  const auto n = static_cast<int32_t>(c.members.size());
  const int32_t root = op.first.root;
  const bool in_place = in_place_root(op);
  // Writes `len` bytes at `off` of a slot of `cap` bytes at `base` of the
  // member's receive buffer; what does not fit is a truncation.
  auto put = [&](const Member& m, int32_t cr, uint64_t base, uint64_t cap, uint64_t off,
                 const uint8_t* data, uint64_t len) {
    const uint64_t fit = off >= cap ? 0 : std::min(len, cap - off);
    if (fit) {
      if (int32_t e = mem.write(m.world, m.a.recvbuf + base + off, data, fit)) {
        op.member_err.emplace(cr, e);
        return;
      }
      done.bytes += fit;
    }
    if (fit < len) op.member_err.emplace(cr, bcs_err_truncate);
  };

  if (!coll_reduction(op.kind)) {
    // Pieces still in a member's memory (Piece::in_member): the copies into
    // each member, made by the members themselves where they can.
    std::vector<MemberCopy> copies;
    for (size_t pi = 0; pi < op.pieces.size(); ++pi) {
      const Piece& p = op.pieces[pi];
      auto to_member = [&](int32_t cr, int32_t slot) {
        auto it = op.members.find(cr);
        if (it == op.members.end()) return;
        const Member& m = it->second;
        uint64_t base = 0, cap = m.a.rbytes;
        if (slot >= 0) std::tie(base, cap) = recv_slot(op.kind, m, slot);
        if (!p.in_member) {
          put(m, cr, base, cap, p.off, p.data.data(), p.data.size());
          return;
        }
        const uint64_t fit = p.off >= cap ? 0 : std::min(p.ref_len, cap - p.off);
        if (fit) copies.push_back({cr, m.world, m.a.recvbuf + base + p.off, fit, pi});
        if (fit < p.ref_len) op.member_err.emplace(cr, bcs_err_truncate);
      };
      switch (op.kind) {
        case BCS_COLL_BCAST:
          if (p.src == root && p.dst == kAny)
            for (auto& [cr, m] : op.members)
              if (cr != root) to_member(cr, -1);
          break;
        case BCS_COLL_GATHER:
        case BCS_COLL_GATHERV:
          if (p.dst == root && p.src >= 0 && !(p.src == root && in_place)) to_member(root, p.src);
          break;
        case BCS_COLL_SCATTER:
        case BCS_COLL_SCATTERV:
          if (p.src == root && p.dst >= 0 && !(p.dst == root && in_place)) to_member(p.dst, -1);
          break;
        case BCS_COLL_ALLGATHER:
        case BCS_COLL_ALLGATHERV:
          if (p.dst == kAny && p.src >= 0)
            for (auto& [cr, m] : op.members) to_member(cr, p.src);
          break;
        case BCS_COLL_ALLTOALL:
        case BCS_COLL_ALLTOALLV:
          if (p.src >= 0 && p.dst >= 0) to_member(p.dst, p.src);
          break;
        default:
          break;
      }
    }
    copy_by_members(op, mem, copies, done);
    return;
  }

  const auto dt = static_cast<bcs_dtype_t>(op.first.dtype);
  const auto rop = static_cast<bcs_op_t>(op.first.op);
  const size_t es = elem_size(op);
  const uint64_t cnt = op.e1 - op.e0, len = cnt * es, off = op.e0 * es;

  if (coll_scan(op.kind)) {
    // Every contribution to the window is here: prefixes in communicator
    // rank order.
    std::vector<const Bytes*> x(static_cast<size_t>(n), nullptr);
    for (const Piece& p : op.pieces)
      if (p.src >= 0 && p.off == off && p.data.size() == len) x[static_cast<size_t>(p.src)] = &p.data;
    Bytes acc;
    for (int32_t i = 0; i < n; ++i) {
      const Bytes* xi = x[static_cast<size_t>(i)];
      if (!xi) {
        coll_fail(op, bcs_err_peer_gone);
        return;
      }
      auto me = op.members.find(i);
      if (op.kind == BCS_COLL_EXSCAN && me != op.members.end() && i > 0)
        put(me->second, i, 0, op.first.count * es, off, acc.data(), len);
      if (i == 0)
        acc = *xi;
      else
        bcs_reduce_local(rop, dt, acc.data(), xi->data(), cnt);
      if (op.kind == BCS_COLL_SCAN && me != op.members.end())
        put(me->second, i, 0, op.first.count * es, off, acc.data(), len);
    }
    return;
  }

  if (op.kind == BCS_COLL_REDUCE && !op.members.count(root)) return;
  // Node partials combined in node-id order, so every node gets the same bits.
  Bytes result;
  bool first = true;
  for (uint32_t node : c.nodes) {
    auto it = op.partials.find(node);
    if (it == op.partials.end() || it->second.size() != len) {
      coll_fail(op, bcs_err_peer_gone);
      return;
    }
    if (first)
      result = std::move(it->second);
    else
      bcs_reduce_local(rop, dt, result.data(), it->second.data(), cnt);
    first = false;
  }
  for (auto& [cr, m] : op.members) {
    if (op.kind == BCS_COLL_REDUCE && cr != root) continue;
    if (op.kind == BCS_COLL_REDUCE_SCATTER) {
      // The member's share [lo, hi) of the whole vector, met with the window.
      uint64_t lo = 0;
      for (int32_t i = 0; i < cr; ++i) lo += m.rcounts[static_cast<size_t>(i)];
      const uint64_t hi = lo + m.rcounts[static_cast<size_t>(cr)];
      const uint64_t a = std::max(lo, op.e0), b = std::min(hi, op.e1);
      if (a < b)
        put(m, cr, 0, (hi - lo) * es, (a - lo) * es, result.data() + (a - op.e0) * es, (b - a) * es);
    } else {
      put(m, cr, 0, op.first.count * es, off, result.data(), len);
    }
  }
}

void Collectives::Impl::copy_by_members(Op& op, RankMemory& mem, std::vector<MemberCopy>& copies,
                                         Done& done) {
  // 0: to do, 1: copied by its member, 2: the node copies it.
  std::vector<uint8_t> how(copies.size(), 0);
  if (auto* ranks = dynamic_cast<LocalRanks*>(&mem)) {
    // In waves: each member holds at most kDmaSlots orders, and every member
    // copies at once; the node waits for a wave, then posts the next.
    for (;;) {
      std::map<int32_t, std::vector<size_t>> wave;  // member (world rank) -> copies, post order
      for (size_t i = 0; i < copies.size(); ++i) {
        if (how[i]) continue;
        const MemberCopy& k = copies[i];
        const Piece& p = op.pieces[k.piece];
        const int32_t from = op.members.at(p.src).world;
        auto& mine = wave[k.world];
        if (mine.size() >= kDmaSlots) continue;
        // A member holding the DMA helper's pieces ahead is left to it; a
        // piece already where it goes (in place) is the node's no-op.
        const uint32_t pid = ranks->pid_of(from);
        if ((mine.empty() && ranks->copy_orders_pending(k.world)) ||
            (from == k.world && p.ref_addr == k.dst) || !pid ||
            !ranks->post_copy(pid, k.world, p.ref_addr, k.dst, k.len, CopyHelp::none)) {
          how[i] = 2;
          continue;
        }
        mine.push_back(i);
      }
      bool any = false;
      for (auto& [world, idx] : wave)
        for (size_t i : idx) {
          any = true;
          // A copy that failed or was taken back is the node's: reading and
          // writing apart, it also says whose buffer was bad.
          if (ranks->await_copy(world) == 0) {
            how[i] = 1;
            done.bytes += copies[i].len;
          } else {
            how[i] = 2;
          }
        }
      if (!any) break;
    }
  }
  for (size_t i = 0; i < copies.size() && !op.error; ++i) {
    if (how[i] == 1) continue;
    const MemberCopy& k = copies[i];
    Piece& p = op.pieces[k.piece];
    if (p.in_member) {  // read once, for every member the node copies it into
      if (int32_t e = contribution(mem, op.members.at(p.src), p.ref_addr, p.ref_len, &p.data)) {
        coll_fail(op, e);
        return;
      }
      p.in_member = false;
    }
    if (int32_t e = mem.write(k.world, k.dst, p.data.data(), k.len)) {
      op.member_err.emplace(k.cr, e);
      continue;
    }
    done.bytes += k.len;
  }
}

void Collectives::Impl::complete(Ctx& c, Op& op, RankMemory& mem, Done& done) {
  const auto n = static_cast<int32_t>(c.members.size());
  const int32_t root = op.first.root;
  const bool in_place = in_place_root(op);
  // Every block a local member receives must have come (a lost peer's did
  // not), even when it was empty.
  auto need = [&](int32_t src, int32_t dst, int32_t cr) {
    if (!op.seen.count({src, dst})) op.member_err.emplace(cr, bcs_err_peer_gone);
  };
  if (!op.error) switch (op.kind) {
      case BCS_COLL_BCAST:
        for (auto& [cr, m] : op.members)
          if (cr != root) need(root, kAny, cr);
        break;
      case BCS_COLL_GATHER:
      case BCS_COLL_GATHERV:
        if (op.members.count(root))
          for (int32_t i = 0; i < n; ++i)
            if (!(i == root && in_place)) need(i, root, root);
        break;
      case BCS_COLL_SCATTER:
      case BCS_COLL_SCATTERV:
        for (auto& [cr, m] : op.members)
          if (!(cr == root && in_place)) need(root, cr, cr);
        break;
      case BCS_COLL_ALLGATHER:
      case BCS_COLL_ALLGATHERV:
        for (auto& [cr, m] : op.members)
          for (int32_t i = 0; i < n; ++i) need(i, kAny, cr);
        break;
      case BCS_COLL_ALLTOALL:
      case BCS_COLL_ALLTOALLV:
        for (auto& [cr, m] : op.members)
          for (int32_t i = 0; i < n; ++i) need(i, cr, cr);
        break;
      default:
        break;
    }
  bool any_err = op.error != 0;
  for (auto& [cr, m] : op.members) {
    int32_t e = op.error;
    if (!e)
      if (auto it = op.member_err.find(cr); it != op.member_err.end()) e = it->second;
    any_err = any_err || e != 0;
    if (!m.no_complete) mem.complete(m.world, m.request, e);
  }
  done.collectives++;
  if (any_err) done.errors++;
}

}  // namespace bcs::nm
