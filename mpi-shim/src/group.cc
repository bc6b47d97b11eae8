// Groups: ordered sets of processes (world ranks), the group algebra of
// MPI 3.1 §6.3, and the handle table. A group shares its member list with
// the communicator it came from (MPI_Comm_group). Results that are empty
// are MPI_GROUP_EMPTY. Group calls have no communicator: their errors go
// through MPI_COMM_WORLD's handler.
#include <algorithm>
#include <vector>

#include "shim.h"

namespace bcs::shim {

int group_index(MPI_Group g) {
  const unsigned idx = static_cast<unsigned>(g) - static_cast<unsigned>(kGroupBase);
  const auto& t = S().groups;
  if (idx >= t.size() || !t[idx].used) return -1;
  return static_cast<int>(idx);
}

MPI_Group group_alloc(MembersPtr m) {
  if (m->size() == 0) return MPI_GROUP_EMPTY;
  Shim& s = S();
  int idx;
  if (!s.free_groups.empty()) {
    idx = s.free_groups.back();
    s.free_groups.pop_back();
  } else {
    idx = static_cast<int>(s.groups.size());
    s.groups.emplace_back();
  }
  s.groups[static_cast<size_t>(idx)] = Group{true, std::move(m)};
  return kGroupBase + idx;
}

namespace {

const Members& members_of(int gi) { return *S().groups[static_cast<size_t>(gi)].m; }

// A group argument: its index, or an MPI_ERR_GROUP raised.
int check_group(const char* fn, MPI_Group g, int* gi) {
  REQUIRE_RUNNING(fn);
  *gi = group_index(g);
  if (*gi < 0)
    return raise_error(kNoComm, fn, MPI_ERR_GROUP, "invalid group 0x%x%s", g,
                       g == MPI_GROUP_NULL ? " (MPI_GROUP_NULL)" : "");
  return MPI_SUCCESS;
}

int null_arg(const char* fn, const char* what) {
  return raise_error(kNoComm, fn, MPI_ERR_ARG, "NULL %s pointer", what);
}

// union / intersection / difference of two groups.
enum class SetOp { unite, intersect, subtract };

int set_op(const char* fn, MPI_Group g1, MPI_Group g2, MPI_Group* out, SetOp op) {
  int a, b;
  if (int e = check_group(fn, g1, &a)) return e;
  if (int e = check_group(fn, g2, &b)) return e;
  if (!out) return null_arg(fn, "newgroup");
  const Members& ma = members_of(a);
  const Members& mb = members_of(b);
  std::vector<int32_t> w;
  for (int32_t x : ma.world) {
    const bool in_b = mb.rank_of(x) >= 0;
    if (op == SetOp::unite || (op == SetOp::intersect) == in_b) w.push_back(x);
  }
  if (op == SetOp::unite)
    for (int32_t x : mb.world)
      if (ma.rank_of(x) < 0) w.push_back(x);
  *out = group_alloc(make_members(std::move(w)));
  return MPI_SUCCESS;
}

// The ranks of incl/excl: n distinct valid ranks of a group of `size`.
int check_ranks(const char* fn, int size, int n, const int* ranks, std::vector<char>* picked) {
  if (n < 0 || n > size)
    return raise_error(kNoComm, fn, MPI_ERR_ARG, "n = %d out of range (group size %d)", n, size);
  if (n > 0 && !ranks) return null_arg(fn, "ranks");
  picked->assign(static_cast<size_t>(size), 0);
  for (int i = 0; i < n; ++i) {
    const int r = ranks[i];
    if (r < 0 || r >= size)
      return raise_error(kNoComm, fn, MPI_ERR_RANK, "ranks[%d] = %d out of range (group size %d)",
                         i, r, size);
    if ((*picked)[static_cast<size_t>(r)])
      return raise_error(kNoComm, fn, MPI_ERR_RANK, "ranks[%d] = %d appears twice", i, r);
    (*picked)[static_cast<size_t>(r)] = 1;
  }
  return MPI_SUCCESS;
}

int incl_excl(const char* fn, MPI_Group g, int n, const int* ranks, MPI_Group* out, bool incl) {
  int gi;
  if (int e = check_group(fn, g, &gi)) return e;
  if (!out) return null_arg(fn, "newgroup");
  const Members& m = members_of(gi);
  std::vector<char> picked;
  if (int e = check_ranks(fn, m.size(), n, ranks, &picked)) return e;
  std::vector<int32_t> w;
  if (incl) {
    for (int i = 0; i < n; ++i) w.push_back(m.world[static_cast<size_t>(ranks[i])]);
  } else {
    for (int r = 0; r < m.size(); ++r)
      if (!picked[static_cast<size_t>(r)]) w.push_back(m.world[static_cast<size_t>(r)]);
  }
  *out = group_alloc(make_members(std::move(w)));
  return MPI_SUCCESS;
}

// The ranks of range triplets (first, last, stride), in order: each a valid
// rank, all distinct. A triplet whose stride points away from last is empty.
int expand_ranges(const char* fn, int size, int n, int ranges[][3], std::vector<int>* out) {
  if (n < 0) return raise_error(kNoComm, fn, MPI_ERR_ARG, "negative n = %d", n);
  if (n > 0 && !ranges) return null_arg(fn, "ranges");
  std::vector<char> seen(static_cast<size_t>(size), 0);
  for (int i = 0; i < n; ++i) {
    const int first = ranges[i][0], last = ranges[i][1], stride = ranges[i][2];
    if (stride == 0)
      return raise_error(kNoComm, fn, MPI_ERR_ARG, "ranges[%d] has stride 0", i);
    for (int r : {first, last})
      if (r < 0 || r >= size)
        return raise_error(kNoComm, fn, MPI_ERR_RANK,
                           "ranges[%d] = (%d, %d, %d): rank %d out of range (group size %d)", i,
                           first, last, stride, r, size);
    for (long long r = first; stride > 0 ? r <= last : r >= last; r += stride) {
      if (seen[static_cast<size_t>(r)])
        return raise_error(kNoComm, fn, MPI_ERR_RANK, "ranges[%d]: rank %lld appears twice", i,
                           r);
      seen[static_cast<size_t>(r)] = 1;
      out->push_back(static_cast<int>(r));
    }
  }
  return MPI_SUCCESS;
}

int range_incl_excl(const char* fn, MPI_Group g, int n, int ranges[][3], MPI_Group* out,
                    bool incl) {
  int gi;
  if (int e = check_group(fn, g, &gi)) return e;
  if (!out) return null_arg(fn, "newgroup");
  const Members& m = members_of(gi);
  std::vector<int> ranks;
  if (int e = expand_ranges(fn, m.size(), n, ranges, &ranks)) return e;
  std::vector<int32_t> w;
  if (incl) {
    for (int r : ranks) w.push_back(m.world[static_cast<size_t>(r)]);
  } else {
    std::vector<char> drop(static_cast<size_t>(m.size()), 0);
    for (int r : ranks) drop[static_cast<size_t>(r)] = 1;
    for (int r = 0; r < m.size(); ++r)
      if (!drop[static_cast<size_t>(r)]) w.push_back(m.world[static_cast<size_t>(r)]);
  }
  *out = group_alloc(make_members(std::move(w)));
  return MPI_SUCCESS;
}

}  // namespace
}  // namespace bcs::shim

using namespace bcs::shim;

extern "C" {

int bcs_impl_Group_size(MPI_Group g, int* size) {
  int gi;
  if (int e = check_group("MPI_Group_size", g, &gi)) return e;
  if (!size) return null_arg("MPI_Group_size", "size");
  *size = members_of(gi).size();
  return MPI_SUCCESS;
}

int bcs_impl_Group_rank(MPI_Group g, int* rank) {
  int gi;
  if (int e = check_group("MPI_Group_rank", g, &gi)) return e;
  if (!rank) return null_arg("MPI_Group_rank", "rank");
  const int r = members_of(gi).rank_of(S().rank);
  *rank = r < 0 ? MPI_UNDEFINED : r;
  return MPI_SUCCESS;
}

int bcs_impl_Group_translate_ranks(MPI_Group g1, int n, const int ranks1[], MPI_Group g2,
                               int ranks2[]) {
  static const char fn[] = "MPI_Group_translate_ranks";
  int a, b;
  if (int e = check_group(fn, g1, &a)) return e;
  if (int e = check_group(fn, g2, &b)) return e;
  if (n < 0) return raise_error(kNoComm, fn, MPI_ERR_ARG, "negative n = %d", n);
  if (n > 0 && (!ranks1 || !ranks2)) return null_arg(fn, "ranks");
  const Members& ma = members_of(a);
  const Members& mb = members_of(b);
  for (int i = 0; i < n; ++i) {
    const int r = ranks1[i];
    if (r == MPI_PROC_NULL) continue;
    if (r < 0 || r >= ma.size())
      return raise_error(kNoComm, fn, MPI_ERR_RANK, "ranks1[%d] = %d out of range (group size %d)",
                         i, r, ma.size());
  }
  for (int i = 0; i < n; ++i) {
    const int r = ranks1[i];
    if (r == MPI_PROC_NULL) {
      ranks2[i] = MPI_PROC_NULL;
      continue;
    }
    const int t = mb.rank_of(ma.world[static_cast<size_t>(r)]);
    ranks2[i] = t < 0 ? MPI_UNDEFINED : t;
  }
  return MPI_SUCCESS;
}

int bcs_impl_Group_compare(MPI_Group g1, MPI_Group g2, int* result) {
  static const char fn[] = "MPI_Group_compare";
  int a, b;
  if (int e = check_group(fn, g1, &a)) return e;
  if (int e = check_group(fn, g2, &b)) return e;
  if (!result) return null_arg(fn, "result");
  const Members& ma = members_of(a);
  const Members& mb = members_of(b);
  if (ma.world == mb.world)
    *result = MPI_IDENT;
  else if (ma.size() == mb.size() && std::all_of(ma.world.begin(), ma.world.end(),
                                                 [&](int32_t w) { return mb.rank_of(w) >= 0; }))
    *result = MPI_SIMILAR;
  else
    *result = MPI_UNEQUAL;
  return MPI_SUCCESS;
}

int bcs_impl_Group_union(MPI_Group g1, MPI_Group g2, MPI_Group* out) {
  return set_op("MPI_Group_union", g1, g2, out, SetOp::unite);
}

int bcs_impl_Group_intersection(MPI_Group g1, MPI_Group g2, MPI_Group* out) {
  return set_op("MPI_Group_intersection", g1, g2, out, SetOp::intersect);
}

int bcs_impl_Group_difference(MPI_Group g1, MPI_Group g2, MPI_Group* out) {
  return set_op("MPI_Group_difference", g1, g2, out, SetOp::subtract);
}

int bcs_impl_Group_incl(MPI_Group g, int n, const int ranks[], MPI_Group* out) {
  return incl_excl("MPI_Group_incl", g, n, ranks, out, true);
}

int bcs_impl_Group_excl(MPI_Group g, int n, const int ranks[], MPI_Group* out) {
  return incl_excl("MPI_Group_excl", g, n, ranks, out, false);
}

int bcs_impl_Group_range_incl(MPI_Group g, int n, int ranges[][3], MPI_Group* out) {
  return range_incl_excl("MPI_Group_range_incl", g, n, ranges, out, true);
}

int bcs_impl_Group_range_excl(MPI_Group g, int n, int ranges[][3], MPI_Group* out) {
  return range_incl_excl("MPI_Group_range_excl", g, n, ranges, out, false);
}

int bcs_impl_Group_free(MPI_Group* g) {
  static const char fn[] = "MPI_Group_free";
  if (!g) {
    REQUIRE_RUNNING(fn);
    return null_arg(fn, "group");
  }
  int gi;
  if (int e = check_group(fn, *g, &gi)) return e;
  if (gi != 0) {  // MPI_GROUP_EMPTY is predefined: only the handle is cleared
    Shim& s = S();
    s.groups[static_cast<size_t>(gi)] = Group{};
    s.free_groups.push_back(gi);
  }
  *g = MPI_GROUP_NULL;
  return MPI_SUCCESS;
}

}  // extern "C"
