// Process topologies (MPI-3.1 chapter 7): MPI_Dims_create, Cartesian and
// graph topologies, distributed graphs, and the queries on them.
//
// A topology is a communicator made like MPI_Comm_split (one collective,
// a fresh context id pair) with an immutable Topology attached; MPI_Comm_dup
// shares it. `reorder` is accepted and ignored: rank i of the new
// communicator is rank i of the old one. bcs places ranks on node managers
// in blocks already (consecutive ranks share a node), which is what a
// reordering for a Cartesian grid would mostly aim for.
//
// MPI_Dist_graph_create (each process names arbitrary edges) routes every
// edge to both of its ends with one allgather of counts and one allgatherv
// of edges over the old communicator; each process keeps its own in- and
// out-edges in the order MPI prescribes (by the rank that named the edge,
// then in the order it named them).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "shim.h"

namespace bcs::shim {
namespace {

// ------------------------------------------------------------ helpers

int topo_of(const char* fn, MPI_Comm c, int kind, int* comm, const Topology** t) {
  REQUIRE_RUNNING(fn);
  *comm = comm_index(c);
  if (*comm == kNoComm) return raise_error(kNoComm, fn, MPI_ERR_COMM, "invalid communicator 0x%x", c);
  const TopologyPtr& tp = comm_at(*comm).topo;
  if (!tp || (kind != MPI_UNDEFINED && tp->kind != kind))
    return raise_error(*comm, fn, MPI_ERR_TOPOLOGY, "the communicator has no %s topology",
                       kind == MPI_CART    ? "Cartesian"
                       : kind == MPI_GRAPH ? "graph"
                       : kind == MPI_DIST_GRAPH ? "distributed graph"
                                                : "");
  *t = tp.get();
  return MPI_SUCCESS;
}

int64_t grid_size(const std::vector<int>& dims) {
  int64_t n = 1;
  for (int d : dims) n *= d;
  return n;
}

// Row-major coordinates of `rank` in `dims` (the last dimension varies fastest).
void coords_of(const std::vector<int>& dims, int rank, int* coords) {
  for (size_t i = dims.size(); i-- > 0;) {
    coords[i] = rank % dims[i];
    rank /= dims[i];
  }
}

// The rank at `coords`, wrapping periodic dimensions; -1 if off the grid.
int rank_at(const Topology& t, const int* coords) {
  int r = 0;
  for (size_t i = 0; i < t.dims.size(); ++i) {
    int c = coords[i];
    const int d = t.dims[i];
    if (c < 0 || c >= d) {
      if (!t.periods[i]) return -1;
      c = ((c % d) + d) % d;
    }
    r = r * d + c;
  }
  return r;
}

// A new communicator over the first `members` ranks of `parent` (in order)
// with topology `t`; the others get MPI_COMM_NULL.
int make_topo_comm(const char* fn, int parent, int members, TopologyPtr t, MPI_Comm* out) {
  const int me = comm_rank(parent);
  if (int e = comm_split(fn, parent, me < members ? 0 : kNoColour, me, out)) return e;
  if (*out != MPI_COMM_NULL) comm_at(comm_index(*out)).topo = std::move(t);
  return MPI_SUCCESS;
}

// Balanced factorisation for MPI_Dims_create: `n` into `k` factors in
// non-increasing order, as close to each other as possible. Among the
// factorisations with the smallest spread (largest - smallest) it takes the
// one whose smallest factor is largest, then whose second smallest is, and
// so on: the choice MPICH makes (checked against its 75,000 reference cases).
// Exhaustive over the divisors of n (at most 240 below 10^6), pruned by the
// spread found so far.
struct Factoring {
  std::vector<int64_t> divisors;  // of n, descending
  std::vector<int> best, cur;
  bool found = false;

  bool better(const std::vector<int>& a) const {
    if (!found) return true;
    const int sa = a.front() - a.back(), sb = best.front() - best.back();
    if (sa != sb) return sa < sb;
    return std::lexicographical_compare(best.rbegin(), best.rend(), a.rbegin(), a.rend());
  }
  void search(int64_t n, int k, int64_t cap) {
    if (k == 1) {
      if (n > cap) return;
      cur.push_back(static_cast<int>(n));
      if (better(cur)) {
        best = cur;
        found = true;
      }
      cur.pop_back();
      return;
    }
    for (int64_t f : divisors) {
      if (f > cap || n % f) continue;
      // f is the largest of the k factors left: f^k >= n, or no smaller f works.
      int64_t p = 1;
      for (int i = 0; i < k && p < n; ++i) p *= f;
      if (p < n) break;
      if (found && !cur.empty() && cur.front() - f > best.front() - best.back()) break;
      cur.push_back(static_cast<int>(f));
      search(n / f, k - 1, f);
      cur.pop_back();
    }
  }
  void run(int64_t n, int k) {
    for (int64_t d = 1; d * d <= n; ++d)
      if (n % d == 0) {
        divisors.push_back(d);
        if (d != n / d) divisors.push_back(n / d);
      }
    std::sort(divisors.rbegin(), divisors.rend());
    search(n, k, n);
  }
};

}  // namespace

bool topo_neighbours(int comm, std::vector<int>* in, std::vector<int>* out) {
  const Comm& c = comm_at(comm);
  if (!c.topo) return false;
  const Topology& t = *c.topo;
  in->clear();
  out->clear();
  switch (t.kind) {
    case MPI_CART: {
      std::vector<int> co(t.dims.size());
      coords_of(t.dims, c.rank, co.data());
      for (size_t d = 0; d < t.dims.size(); ++d) {
        for (int disp : {-1, +1}) {
          co[d] += disp;
          const int r = rank_at(t, co.data());
          co[d] -= disp;
          in->push_back(r < 0 ? MPI_PROC_NULL : r);
        }
      }
      *out = *in;
      return true;
    }
    case MPI_GRAPH: {
      const int lo = c.rank == 0 ? 0 : t.index[static_cast<size_t>(c.rank) - 1];
      const int hi = t.index[static_cast<size_t>(c.rank)];
      in->assign(t.edges.begin() + lo, t.edges.begin() + hi);
      *out = *in;
      return true;
    }
    case MPI_DIST_GRAPH:
      *in = t.sources;
      *out = t.dests;
      return true;
  }
  return false;
}

}  // namespace bcs::shim

using namespace bcs::shim;

extern "C" {

// ------------------------------------------------------------ Dims_create

int bcs_impl_Dims_create(int nnodes, int ndims, int dims[]) {
  static const char fn[] = "MPI_Dims_create";
  if (nnodes <= 0) return raise_error(kNoComm, fn, MPI_ERR_ARG, "nnodes %d (must be > 0)", nnodes);
  if (ndims < 0) return raise_error(kNoComm, fn, MPI_ERR_DIMS, "ndims %d (must be >= 0)", ndims);
  if (ndims > 0 && !dims) return raise_error(kNoComm, fn, MPI_ERR_ARG, "NULL dims");
  int64_t fixed = 1;
  int free = 0;
  for (int i = 0; i < ndims; ++i) {
    if (dims[i] < 0)
      return raise_error(kNoComm, fn, MPI_ERR_DIMS, "dims[%d] = %d (must be >= 0)", i, dims[i]);
    if (dims[i] == 0)
      ++free;
    else
      fixed *= dims[i];
  }
  if (nnodes % fixed != 0)
    return raise_error(kNoComm, fn, MPI_ERR_DIMS,
                       "the fixed entries of dims multiply to %lld, which does not divide "
                       "nnodes %d",
                       static_cast<long long>(fixed), nnodes);
  const int64_t rest = nnodes / fixed;
  if (free == 0) {
    if (rest != 1)
      return raise_error(kNoComm, fn, MPI_ERR_DIMS,
                         "dims has no free entry and multiplies to %lld, not nnodes %d",
                         static_cast<long long>(fixed), nnodes);
    return MPI_SUCCESS;
  }
  Factoring f;
  f.run(rest, free);
  size_t k = 0;
  for (int i = 0; i < ndims; ++i)
    if (dims[i] == 0) dims[i] = f.best[k++];
  return MPI_SUCCESS;
}

// ------------------------------------------------------------ Cartesian

int bcs_impl_Cart_create(MPI_Comm old_comm, int ndims, const int dims[], const int periods[],
                     int reorder, MPI_Comm* comm_cart) {
  static const char fn[] = "MPI_Cart_create";
  (void)reorder;  // see the top of this file
  REQUIRE_RUNNING(fn);
  const int parent = comm_index(old_comm);
  if (parent == kNoComm)
    return raise_error(kNoComm, fn, MPI_ERR_COMM, "invalid communicator 0x%x", old_comm);
  if (!comm_cart) return raise_error(parent, fn, MPI_ERR_ARG, "NULL comm_cart");
  *comm_cart = MPI_COMM_NULL;  // what a failed call leaves (as MPI_Comm_dup's)
  if (ndims < 0) return raise_error(parent, fn, MPI_ERR_DIMS, "ndims %d (must be >= 0)", ndims);
  if (ndims > 0 && (!dims || !periods))
    return raise_error(parent, fn, MPI_ERR_ARG, "NULL dims or periods");
  auto t = std::make_shared<Topology>();
  t->kind = MPI_CART;
  for (int i = 0; i < ndims; ++i) {
    if (dims[i] <= 0)
      return raise_error(parent, fn, MPI_ERR_DIMS, "dims[%d] = %d (must be > 0)", i, dims[i]);
    t->dims.push_back(dims[i]);
    t->periods.push_back(periods[i] ? 1 : 0);
  }
  const int64_t n = grid_size(t->dims);
  if (n > comm_size(parent))
    return raise_error(parent, fn, MPI_ERR_TOPOLOGY,
                       "the grid has %lld processes, the communicator only %d",
                       static_cast<long long>(n), comm_size(parent));
  return make_topo_comm(fn, parent, static_cast<int>(n), std::move(t), comm_cart);
}

int bcs_impl_Cartdim_get(MPI_Comm comm, int* ndims) {
  int ci;
  const Topology* t;
  if (int e = topo_of("MPI_Cartdim_get", comm, MPI_CART, &ci, &t)) return e;
  if (!ndims) return raise_error(ci, "MPI_Cartdim_get", MPI_ERR_ARG, "NULL ndims");
  *ndims = static_cast<int>(t->dims.size());
  return MPI_SUCCESS;
}

int bcs_impl_Cart_get(MPI_Comm comm, int maxdims, int dims[], int periods[], int coords[]) {
  static const char fn[] = "MPI_Cart_get";
  int ci;
  const Topology* t;
  if (int e = topo_of(fn, comm, MPI_CART, &ci, &t)) return e;
  const int nd = static_cast<int>(t->dims.size());
  if (maxdims < nd)
    return raise_error(ci, fn, MPI_ERR_ARG, "maxdims %d is less than the %d dimensions", maxdims,
                       nd);
  if (nd > 0 && (!dims || !periods || !coords))
    return raise_error(ci, fn, MPI_ERR_ARG, "NULL dims, periods or coords");
  for (int i = 0; i < nd; ++i) {
    dims[i] = t->dims[static_cast<size_t>(i)];
    periods[i] = t->periods[static_cast<size_t>(i)];
  }
  coords_of(t->dims, comm_rank(ci), coords);
  return MPI_SUCCESS;
}

int bcs_impl_Cart_rank(MPI_Comm comm, const int coords[], int* rank) {
  static const char fn[] = "MPI_Cart_rank";
  int ci;
  const Topology* t;
  if (int e = topo_of(fn, comm, MPI_CART, &ci, &t)) return e;
  if (!rank || (!coords && !t->dims.empty()))
    return raise_error(ci, fn, MPI_ERR_ARG, "NULL coords or rank");
  const int r = rank_at(*t, coords);
  if (r < 0) {
    size_t i = 0;
    while (i < t->dims.size() && coords[i] >= 0 && coords[i] < t->dims[i]) ++i;
    return raise_error(ci, fn, MPI_ERR_ARG,
                       "coords[%zu] = %d is outside non-periodic dimension %zu of size %d", i,
                       coords[i], i, t->dims[i]);
  }
  *rank = r;
  return MPI_SUCCESS;
}

int bcs_impl_Cart_coords(MPI_Comm comm, int rank, int maxdims, int coords[]) {
  static const char fn[] = "MPI_Cart_coords";
  int ci;
  const Topology* t;
  if (int e = topo_of(fn, comm, MPI_CART, &ci, &t)) return e;
  const int nd = static_cast<int>(t->dims.size());
  if (rank < 0 || rank >= grid_size(t->dims))
    return raise_error(ci, fn, MPI_ERR_RANK, "rank %d is not in the grid", rank);
  if (maxdims < nd)
    return raise_error(ci, fn, MPI_ERR_ARG, "maxdims %d is less than the %d dimensions", maxdims,
                       nd);
  if (nd > 0 && !coords) return raise_error(ci, fn, MPI_ERR_ARG, "NULL coords");
  coords_of(t->dims, rank, coords);
  return MPI_SUCCESS;
}

int bcs_impl_Cart_shift(MPI_Comm comm, int direction, int disp, int* rank_source, int* rank_dest) {
  static const char fn[] = "MPI_Cart_shift";
  int ci;
  const Topology* t;
  if (int e = topo_of(fn, comm, MPI_CART, &ci, &t)) return e;
  const int nd = static_cast<int>(t->dims.size());
  if (direction < 0 || direction >= nd)
    return raise_error(ci, fn, MPI_ERR_ARG, "direction %d (the grid has %d dimensions)",
                       direction, nd);
  if (!rank_source || !rank_dest)
    return raise_error(ci, fn, MPI_ERR_ARG, "NULL rank_source or rank_dest");
  std::vector<int> co(static_cast<size_t>(nd));
  coords_of(t->dims, comm_rank(ci), co.data());
  const size_t d = static_cast<size_t>(direction);
  const int here = co[d];
  // Compute in 64 bits: disp may be any int.
  auto at = [&](int64_t c) {
    const int64_t n = t->dims[d];
    if (c < 0 || c >= n) {
      if (!t->periods[d]) return static_cast<int>(MPI_PROC_NULL);
      c = ((c % n) + n) % n;
    }
    co[d] = static_cast<int>(c);
    const int r = rank_at(*t, co.data());
    co[d] = here;
    return r;
  };
  *rank_dest = at(static_cast<int64_t>(here) + disp);
  *rank_source = at(static_cast<int64_t>(here) - disp);
  return MPI_SUCCESS;
}

int bcs_impl_Cart_sub(MPI_Comm comm, const int remain_dims[], MPI_Comm* new_comm) {
  static const char fn[] = "MPI_Cart_sub";
  int ci;
  const Topology* t;
  if (int e = topo_of(fn, comm, MPI_CART, &ci, &t)) return e;
  const size_t nd = t->dims.size();
  if (!new_comm || (nd > 0 && !remain_dims))
    return raise_error(ci, fn, MPI_ERR_ARG, "NULL remain_dims or new_comm");
  *new_comm = MPI_COMM_NULL;  // what a failed call leaves
  std::vector<int> co(nd);
  coords_of(t->dims, comm_rank(ci), co.data());
  // Colour: my coordinates in the dropped dimensions; key: in the kept ones.
  int64_t colour = 0, key = 0;
  auto sub = std::make_shared<Topology>();
  sub->kind = MPI_CART;
  for (size_t i = 0; i < nd; ++i) {
    if (remain_dims[i]) {
      key = key * t->dims[i] + co[i];
      sub->dims.push_back(t->dims[i]);
      sub->periods.push_back(t->periods[i]);
    } else {
      colour = colour * t->dims[i] + co[i];
    }
  }
  if (int e = comm_split(fn, ci, colour, static_cast<int>(key), new_comm)) return e;
  comm_at(comm_index(*new_comm)).topo = std::move(sub);
  return MPI_SUCCESS;
}

int bcs_impl_Cart_map(MPI_Comm comm, int ndims, const int dims[], const int periods[], int* newrank) {
  static const char fn[] = "MPI_Cart_map";
  REQUIRE_RUNNING(fn);
  const int ci = comm_index(comm);
  if (ci == kNoComm) return raise_error(kNoComm, fn, MPI_ERR_COMM, "invalid communicator 0x%x", comm);
  if (ndims < 0) return raise_error(ci, fn, MPI_ERR_DIMS, "ndims %d (must be >= 0)", ndims);
  if (!newrank || (ndims > 0 && (!dims || !periods)))
    return raise_error(ci, fn, MPI_ERR_ARG, "NULL dims, periods or newrank");
  int64_t n = 1;
  for (int i = 0; i < ndims; ++i) {
    if (dims[i] <= 0)
      return raise_error(ci, fn, MPI_ERR_DIMS, "dims[%d] = %d (must be > 0)", i, dims[i]);
    n *= dims[i];
  }
  if (n > comm_size(ci))
    return raise_error(ci, fn, MPI_ERR_TOPOLOGY, "the grid has %lld processes, the communicator %d",
                       static_cast<long long>(n), comm_size(ci));
  *newrank = comm_rank(ci) < n ? comm_rank(ci) : MPI_UNDEFINED;
  return MPI_SUCCESS;
}

// ------------------------------------------------------------ graphs

namespace {

// Checks MPI_Graph_create / MPI_Graph_map's (index, edges) for nnodes nodes.
int check_graph(const char* fn, int ci, int nnodes, const int index[], const int edges[]) {
  if (nnodes < 0) return raise_error(ci, fn, MPI_ERR_ARG, "nnodes %d (must be >= 0)", nnodes);
  if (nnodes > comm_size(ci))
    return raise_error(ci, fn, MPI_ERR_TOPOLOGY, "the graph has %d nodes, the communicator %d",
                       nnodes, comm_size(ci));
  if (nnodes == 0) return MPI_SUCCESS;
  if (!index) return raise_error(ci, fn, MPI_ERR_ARG, "NULL index");
  for (int i = 0; i < nnodes; ++i)
    if (index[i] < (i ? index[i - 1] : 0))
      return raise_error(ci, fn, MPI_ERR_ARG, "index[%d] = %d is not monotone", i, index[i]);
  if (index[nnodes - 1] > 0 && !edges) return raise_error(ci, fn, MPI_ERR_ARG, "NULL edges");
  for (int i = 0; i < index[nnodes - 1]; ++i)
    if (edges[i] < 0 || edges[i] >= nnodes)
      return raise_error(ci, fn, MPI_ERR_ARG, "edges[%d] = %d names no node of the graph", i,
                         edges[i]);
  return MPI_SUCCESS;
}

}  // namespace

int bcs_impl_Graph_create(MPI_Comm comm_old, int nnodes, const int index[], const int edges[],
                      int reorder, MPI_Comm* comm_graph) {
  static const char fn[] = "MPI_Graph_create";
  (void)reorder;
  REQUIRE_RUNNING(fn);
  const int parent = comm_index(comm_old);
  if (parent == kNoComm)
    return raise_error(kNoComm, fn, MPI_ERR_COMM, "invalid communicator 0x%x", comm_old);
  if (!comm_graph) return raise_error(parent, fn, MPI_ERR_ARG, "NULL comm_graph");
  *comm_graph = MPI_COMM_NULL;  // what a failed call leaves
  if (int e = check_graph(fn, parent, nnodes, index, edges)) return e;
  auto t = std::make_shared<Topology>();
  t->kind = MPI_GRAPH;
  if (nnodes > 0) {
    t->index.assign(index, index + nnodes);
    t->edges.assign(edges, edges + index[nnodes - 1]);
  }
  return make_topo_comm(fn, parent, nnodes, std::move(t), comm_graph);
}

int bcs_impl_Graphdims_get(MPI_Comm comm, int* nnodes, int* nedges) {
  int ci;
  const Topology* t;
  if (int e = topo_of("MPI_Graphdims_get", comm, MPI_GRAPH, &ci, &t)) return e;
  if (!nnodes || !nedges)
    return raise_error(ci, "MPI_Graphdims_get", MPI_ERR_ARG, "NULL nnodes or nedges");
  *nnodes = static_cast<int>(t->index.size());
  *nedges = static_cast<int>(t->edges.size());
  return MPI_SUCCESS;
}

int bcs_impl_Graph_get(MPI_Comm comm, int maxindex, int maxedges, int index[], int edges[]) {
  static const char fn[] = "MPI_Graph_get";
  int ci;
  const Topology* t;
  if (int e = topo_of(fn, comm, MPI_GRAPH, &ci, &t)) return e;
  if (maxindex < 0 || maxedges < 0 || (maxindex > 0 && !index) || (maxedges > 0 && !edges))
    return raise_error(ci, fn, MPI_ERR_ARG, "bad maxindex/maxedges or NULL arrays");
  // MPI: the first maxindex / maxedges entries.
  std::copy_n(t->index.begin(), std::min<size_t>(t->index.size(), static_cast<size_t>(maxindex)),
              index);
  std::copy_n(t->edges.begin(), std::min<size_t>(t->edges.size(), static_cast<size_t>(maxedges)),
              edges);
  return MPI_SUCCESS;
}

int bcs_impl_Graph_neighbors_count(MPI_Comm comm, int rank, int* nneighbors) {
  static const char fn[] = "MPI_Graph_neighbors_count";
  int ci;
  const Topology* t;
  if (int e = topo_of(fn, comm, MPI_GRAPH, &ci, &t)) return e;
  if (rank < 0 || rank >= static_cast<int>(t->index.size()))
    return raise_error(ci, fn, MPI_ERR_RANK, "rank %d is not a node of the graph", rank);
  if (!nneighbors) return raise_error(ci, fn, MPI_ERR_ARG, "NULL nneighbors");
  const size_t r = static_cast<size_t>(rank);
  *nneighbors = t->index[r] - (r ? t->index[r - 1] : 0);
  return MPI_SUCCESS;
}

int bcs_impl_Graph_neighbors(MPI_Comm comm, int rank, int maxneighbors, int neighbors[]) {
  static const char fn[] = "MPI_Graph_neighbors";
  int ci;
  const Topology* t;
  if (int e = topo_of(fn, comm, MPI_GRAPH, &ci, &t)) return e;
  if (rank < 0 || rank >= static_cast<int>(t->index.size()))
    return raise_error(ci, fn, MPI_ERR_RANK, "rank %d is not a node of the graph", rank);
  if (maxneighbors < 0 || (maxneighbors > 0 && !neighbors))
    return raise_error(ci, fn, MPI_ERR_ARG, "bad maxneighbors or NULL neighbors");
  const size_t r = static_cast<size_t>(rank);
  const int lo = r ? t->index[r - 1] : 0;
  const int n = std::min(t->index[r] - lo, maxneighbors);
  std::copy_n(t->edges.begin() + lo, n, neighbors);
  return MPI_SUCCESS;
}

int bcs_impl_Graph_map(MPI_Comm comm, int nnodes, const int index[], const int edges[], int* newrank) {
  static const char fn[] = "MPI_Graph_map";
  REQUIRE_RUNNING(fn);
  const int ci = comm_index(comm);
  if (ci == kNoComm) return raise_error(kNoComm, fn, MPI_ERR_COMM, "invalid communicator 0x%x", comm);
  if (!newrank) return raise_error(ci, fn, MPI_ERR_ARG, "NULL newrank");
  if (int e = check_graph(fn, ci, nnodes, index, edges)) return e;
  *newrank = comm_rank(ci) < nnodes ? comm_rank(ci) : MPI_UNDEFINED;
  return MPI_SUCCESS;
}

// ------------------------------------------------------------ distributed graphs

namespace {

bool unweighted(const int* w) { return w == MPI_UNWEIGHTED; }

int check_ranks(const char* fn, int ci, const char* what, int n, const int* r) {
  if (n > 0 && !r) return raise_error(ci, fn, MPI_ERR_ARG, "NULL %s", what);
  for (int i = 0; i < n; ++i)
    if (r[i] < 0 || r[i] >= comm_size(ci))
      return raise_error(ci, fn, MPI_ERR_RANK, "%s[%d] = %d is not a rank of the communicator",
                         what, i, r[i]);
  return MPI_SUCCESS;
}

int check_weights(const char* fn, int ci, const char* what, int n, const int* w) {
  if (unweighted(w) || w == MPI_WEIGHTS_EMPTY) return MPI_SUCCESS;
  if (n > 0 && !w) return raise_error(ci, fn, MPI_ERR_ARG, "NULL %s", what);
  for (int i = 0; i < n; ++i)
    if (w[i] < 0)
      return raise_error(ci, fn, MPI_ERR_ARG, "%s[%d] = %d (weights are >= 0)", what, i, w[i]);
  return MPI_SUCCESS;
}

std::vector<int> weights_of(int n, const int* w) {
  if (unweighted(w) || w == MPI_WEIGHTS_EMPTY || n == 0) return std::vector<int>(static_cast<size_t>(n), 1);
  return std::vector<int>(w, w + n);
}

int check_dist_args(const char* fn, MPI_Comm c, MPI_Info info, MPI_Comm* out, int* parent) {
  REQUIRE_RUNNING(fn);
  *parent = comm_index(c);
  if (*parent == kNoComm)
    return raise_error(kNoComm, fn, MPI_ERR_COMM, "invalid communicator 0x%x", c);
  if (!out) return raise_error(*parent, fn, MPI_ERR_ARG, "NULL newcomm");
  *out = MPI_COMM_NULL;  // what a failed call leaves
  if (int e = check_info(*parent, fn, info)) return e;
  return MPI_SUCCESS;
}

}  // namespace

int bcs_impl_Dist_graph_create_adjacent(MPI_Comm comm_old, int indegree, const int sources[],
                                    const int sourceweights[], int outdegree,
                                    const int destinations[], const int destweights[],
                                    MPI_Info info, int reorder, MPI_Comm* comm_dist_graph) {
  static const char fn[] = "MPI_Dist_graph_create_adjacent";
  (void)reorder;
  int parent;
  if (int e = check_dist_args(fn, comm_old, info, comm_dist_graph, &parent)) return e;
  if (indegree < 0 || outdegree < 0)
    return raise_error(parent, fn, MPI_ERR_ARG, "negative degree (in %d, out %d)", indegree,
                       outdegree);
  if (int e = check_ranks(fn, parent, "sources", indegree, sources)) return e;
  if (int e = check_ranks(fn, parent, "destinations", outdegree, destinations)) return e;
  if (int e = check_weights(fn, parent, "sourceweights", indegree, sourceweights)) return e;
  if (int e = check_weights(fn, parent, "destweights", outdegree, destweights)) return e;
  auto t = std::make_shared<Topology>();
  t->kind = MPI_DIST_GRAPH;
  t->sources.assign(sources, sources + indegree);
  t->dests.assign(destinations, destinations + outdegree);
  t->sweights = weights_of(indegree, sourceweights);
  t->dweights = weights_of(outdegree, destweights);
  t->weighted = !unweighted(sourceweights) && !unweighted(destweights);
  return make_topo_comm(fn, parent, comm_size(parent), std::move(t), comm_dist_graph);
}

int bcs_impl_Dist_graph_create(MPI_Comm comm_old, int n, const int nodes[], const int degrees[],
                           const int targets[], const int weights[], MPI_Info info, int reorder,
                           MPI_Comm* newcomm) {
  static const char fn[] = "MPI_Dist_graph_create";
  (void)reorder;
  int parent;
  if (int e = check_dist_args(fn, comm_old, info, newcomm, &parent)) return e;
  if (n < 0) return raise_error(parent, fn, MPI_ERR_ARG, "n %d (must be >= 0)", n);
  if (int e = check_ranks(fn, parent, "nodes", n, nodes)) return e;
  if (n > 0 && !degrees) return raise_error(parent, fn, MPI_ERR_ARG, "NULL degrees");
  int64_t total = 0;
  for (int i = 0; i < n; ++i) {
    if (degrees[i] < 0)
      return raise_error(parent, fn, MPI_ERR_ARG, "degrees[%d] = %d", i, degrees[i]);
    total += degrees[i];
  }
  if (total > INT32_MAX / 3) return raise_error(parent, fn, MPI_ERR_ARG, "too many edges");
  if (int e = check_ranks(fn, parent, "targets", static_cast<int>(total), targets)) return e;
  if (int e = check_weights(fn, parent, "weights", static_cast<int>(total), weights)) return e;
  const bool has_w = !unweighted(weights) && weights != MPI_WEIGHTS_EMPTY;
  // My edges as (source, target, weight) triples, in the order I name them.
  std::vector<int32_t> mine;
  mine.reserve(static_cast<size_t>(total) * 3);
  for (int i = 0, k = 0; i < n; ++i)
    for (int j = 0; j < degrees[i]; ++j, ++k) {
      mine.push_back(nodes[i]);
      mine.push_back(targets[k]);
      mine.push_back(has_w ? weights[k] : 1);
    }
  // Every process's edge count, then every edge (gathered in rank order).
  const int np = comm_size(parent);
  const uint64_t my_bytes = mine.size() * sizeof(int32_t);
  auto counts = std::make_shared<CollData>();
  counts->rcounts.resize(static_cast<size_t>(np));
  {
    bcs_coll_args_t a{};
    a.kind = BCS_COLL_ALLGATHER;
    a.sendbuf = &my_bytes;
    a.sbytes = sizeof my_bytes;
    a.recvbuf = counts->rcounts.data();
    a.rbytes = sizeof(uint64_t);
    if (int e = run_coll(fn, parent, a, nullptr, nullptr)) return e;
  }
  auto d = std::make_shared<CollData>();
  d->rcounts = counts->rcounts;
  d->rdispls.resize(static_cast<size_t>(np));
  uint64_t off = 0;
  for (int i = 0; i < np; ++i) {
    d->rdispls[static_cast<size_t>(i)] = off;
    off += d->rcounts[static_cast<size_t>(i)];
  }
  std::vector<int32_t> all(off / sizeof(int32_t));
  {
    bcs_coll_args_t a{};
    a.kind = BCS_COLL_ALLGATHERV;
    a.sendbuf = mine.data();
    a.sbytes = my_bytes;
    a.recvbuf = all.data();
    a.rcounts = d->rcounts.data();
    a.rdispls = d->rdispls.data();
    if (int e = run_coll(fn, parent, a, d, nullptr)) return e;
  }
  // Weighted unless every process said MPI_UNWEIGHTED: agree on it.
  int32_t any_unweighted = unweighted(weights) ? 1 : 0, agreed = 0;
  {
    bcs_coll_args_t a{};
    a.kind = BCS_COLL_ALLREDUCE;
    a.sendbuf = &any_unweighted;
    a.recvbuf = &agreed;
    a.sbytes = a.rbytes = sizeof agreed;
    a.count = 1;
    a.op = BCS_OP_MAX;
    a.dtype = BCS_DT_INT32;
    if (int e = run_coll(fn, parent, a, nullptr, nullptr)) return e;
  }
  auto t = std::make_shared<Topology>();
  t->kind = MPI_DIST_GRAPH;
  t->weighted = agreed == 0;
  const int me = comm_rank(parent);
  for (size_t e = 0; e + 2 < all.size(); e += 3) {
    if (all[e + 1] == me) {
      t->sources.push_back(all[e]);
      t->sweights.push_back(all[e + 2]);
    }
    if (all[e] == me) {
      t->dests.push_back(all[e + 1]);
      t->dweights.push_back(all[e + 2]);
    }
  }
  return make_topo_comm(fn, parent, np, std::move(t), newcomm);
}

int bcs_impl_Dist_graph_neighbors_count(MPI_Comm comm, int* inneighbors, int* outneighbors,
                                    int* weighted) {
  static const char fn[] = "MPI_Dist_graph_neighbors_count";
  int ci;
  const Topology* t;
  if (int e = topo_of(fn, comm, MPI_DIST_GRAPH, &ci, &t)) return e;
  if (!inneighbors || !outneighbors || !weighted)
    return raise_error(ci, fn, MPI_ERR_ARG, "NULL argument");
  *inneighbors = static_cast<int>(t->sources.size());
  *outneighbors = static_cast<int>(t->dests.size());
  *weighted = t->weighted ? 1 : 0;
  return MPI_SUCCESS;
}

int bcs_impl_Dist_graph_neighbors(MPI_Comm comm, int maxindegree, int sources[], int sourceweights[],
                              int maxoutdegree, int destinations[], int destweights[]) {
  static const char fn[] = "MPI_Dist_graph_neighbors";
  int ci;
  const Topology* t;
  if (int e = topo_of(fn, comm, MPI_DIST_GRAPH, &ci, &t)) return e;
  const int in = static_cast<int>(t->sources.size()), out = static_cast<int>(t->dests.size());
  if (maxindegree < in || maxoutdegree < out)
    return raise_error(ci, fn, MPI_ERR_ARG,
                       "room for %d in- and %d out-neighbours, the process has %d and %d",
                       maxindegree, maxoutdegree, in, out);
  if ((in > 0 && !sources) || (out > 0 && !destinations))
    return raise_error(ci, fn, MPI_ERR_ARG, "NULL sources or destinations");
  std::copy(t->sources.begin(), t->sources.end(), sources);
  std::copy(t->dests.begin(), t->dests.end(), destinations);
  if (t->weighted) {
    if (sourceweights && !unweighted(sourceweights) && sourceweights != MPI_WEIGHTS_EMPTY)
      std::copy(t->sweights.begin(), t->sweights.end(), sourceweights);
    if (destweights && !unweighted(destweights) && destweights != MPI_WEIGHTS_EMPTY)
      std::copy(t->dweights.begin(), t->dweights.end(), destweights);
  }
  return MPI_SUCCESS;
}

int bcs_impl_Topo_test(MPI_Comm comm, int* status) {
  static const char fn[] = "MPI_Topo_test";
  REQUIRE_RUNNING(fn);
  const int ci = comm_index(comm);
  if (ci == kNoComm) return raise_error(kNoComm, fn, MPI_ERR_COMM, "invalid communicator 0x%x", comm);
  if (!status) return raise_error(ci, fn, MPI_ERR_ARG, "NULL status");
  const TopologyPtr& t = comm_at(ci).topo;
  *status = t ? t->kind : MPI_UNDEFINED;
  return MPI_SUCCESS;
}

}  // extern "C"
