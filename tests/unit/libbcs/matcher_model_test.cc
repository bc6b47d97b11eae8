// MSM matching (matcher.h), as properties: the same descriptors in any
// order give the same matches, and random slices agree with a naive
// reference model that keeps the MPI rules.
#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "bcs/matcher.h"

#include "matcher_helpers.h"

namespace bcs {
namespace {

using namespace matcher_test;

// ---------------------------------------------------------- determinism

struct SliceInput {
  std::vector<RecvDesc> posts;
  std::vector<SendDesc> sends;
};

// A random workload over `nranks` ranks: sends posted in slice i are handed
// to msm(i + 1) (the DEM of the next slice), like the receives and probes.
std::vector<SliceInput> random_workload(uint32_t seed, int nslices, int nranks,
                                        bool with_probes) {
  std::mt19937 rng(seed);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  std::map<std::pair<int, int>, uint64_t> pair_seq;
  uint32_t next_req = 1;
  std::vector<SliceInput> out(static_cast<size_t>(nslices));
  for (int sl = 0; sl < nslices; ++sl) {
    SliceInput& in = out[static_cast<size_t>(sl)];
    for (int r = 0; r < nranks; ++r) {
      for (int k = pick(4); k > 0; --k) {
        const int dst = pick(nranks);
        in.sends.push_back(send(r, dst, pick(3), ++pair_seq[{r, dst}], static_cast<uint64_t>(sl),
                                static_cast<uint64_t>(pick(5) * 100), pick(2)));
      }
      for (int k = pick(4); k > 0; --k) {
        const int src = pick(5) == 0 ? kAnySource : pick(nranks);
        const int tag = pick(5) == 0 ? kAnyTag : pick(3);
        DescKind kind = DescKind::recv;
        if (with_probes && pick(6) == 0) kind = pick(2) ? DescKind::probe : DescKind::iprobe;
        in.posts.push_back(recv(r, src, tag, next_req++, static_cast<uint64_t>(sl),
                                static_cast<uint64_t>(pick(5) * 100), pick(2), kind));
      }
    }
  }
  return out;
}

struct Outcome {
  std::vector<std::string> matches;
  std::vector<std::string> probes;
  size_t unexpected = 0, posted = 0;
  bool operator==(const Outcome&) const = default;
};

Outcome run(const std::vector<SliceInput>& w, std::mt19937* shuffle) {
  Matcher m;
  Outcome o;
  for (size_t i = 0; i < w.size(); ++i) {
    std::vector<SendDesc> sends = w[i].sends;
    if (shuffle) std::shuffle(sends.begin(), sends.end(), *shuffle);
    m.msm(i + 1, w[i].posts, std::move(sends));
    for (auto& s : strs(m.take_matches())) o.matches.push_back(std::move(s));
    for (auto& s : strs(m.take_probe_results())) o.probes.push_back(std::move(s));
  }
  o.unexpected = m.unexpected_count();
  o.posted = m.posted_count();
  return o;
}

TEST(MatcherDeterminismTest, SendOrderNeverChangesTheOutcome) {
  for (uint32_t wseed : {1u, 2u, 3u}) {
    const auto w = random_workload(wseed, 60, 4, /*with_probes=*/true);
    const Outcome ref = run(w, nullptr);
    ASSERT_GT(ref.matches.size(), 50u);  // the workload really matches things
    ASSERT_GT(ref.probes.size(), 5u);
    for (uint32_t seed = 100; seed < 130; ++seed) {
      std::mt19937 rng(seed);
      const Outcome o = run(w, &rng);
      ASSERT_EQ(o.matches, ref.matches) << "workload " << wseed << " shuffle seed " << seed;
      ASSERT_EQ(o.probes, ref.probes) << "workload " << wseed << " shuffle seed " << seed;
      ASSERT_EQ(o.unexpected, ref.unexpected);
      ASSERT_EQ(o.posted, ref.posted);
    }
  }
}

TEST(MatcherDeterminismTest, PostsOfDifferentRanksMayInterleaveFreely) {
  // Only each rank's own post order matters: regrouping the posts by rank
  // (a different interleaving of the same per-rank sequences) must not
  // change any match (results are compared as multisets, since the order
  // of the results of different ranks follows the given interleaving).
  const auto w = random_workload(7, 60, 4, /*with_probes=*/false);
  auto regrouped = w;
  for (auto& in : regrouped)
    std::stable_sort(in.posts.begin(), in.posts.end(),
                     [](const RecvDesc& a, const RecvDesc& b) { return a.rank > b.rank; });
  Outcome a = run(w, nullptr), b = run(regrouped, nullptr);
  std::sort(a.matches.begin(), a.matches.end());
  std::sort(b.matches.begin(), b.matches.end());
  EXPECT_EQ(a, b);
}

// ---------------------------------------------------------- differential

// A deliberately naive reference: flat vectors, explicit keys, linear scans
// for the minimum key. It shares no code with Matcher.
class ReferenceMatcher {
 public:
  struct Pair {
    SendDesc s;
    RecvDesc r;
  };
  std::vector<Pair> slice(const std::vector<RecvDesc>& posts, std::vector<SendDesc> sends) {
    std::vector<Pair> out;
    for (const RecvDesc& r : posts) {
      if (r.kind != DescKind::recv) continue;
      int best = -1;
      for (size_t i = 0; i < unexpected_.size(); ++i) {
        const SendDesc& s = unexpected_[i];
        if (!ok(r, s)) continue;
        if (best < 0 || key(s) < key(unexpected_[static_cast<size_t>(best)])) best = static_cast<int>(i);
      }
      if (best >= 0) {
        out.push_back({unexpected_[static_cast<size_t>(best)], r});
        unexpected_.erase(unexpected_.begin() + best);
      } else {
        posted_.push_back({next_post_++, r});
      }
    }
    std::vector<SendDesc> ordered;
    while (!sends.empty()) {  // selection sort by key: slow and obviously right
      size_t mi = 0;
      for (size_t i = 1; i < sends.size(); ++i)
        if (key(sends[i]) < key(sends[mi])) mi = i;
      ordered.push_back(sends[mi]);
      sends.erase(sends.begin() + static_cast<long>(mi));
    }
    for (const SendDesc& s : ordered) {
      int best = -1;
      for (size_t i = 0; i < posted_.size(); ++i) {
        if (!ok(posted_[i].second, s)) continue;
        if (best < 0 || posted_[i].first < posted_[static_cast<size_t>(best)].first) best = static_cast<int>(i);
      }
      if (best >= 0) {
        out.push_back({s, posted_[static_cast<size_t>(best)].second});
        posted_.erase(posted_.begin() + best);
      } else {
        unexpected_.push_back(s);
      }
    }
    return out;
  }
  size_t unexpected() const { return unexpected_.size(); }
  size_t posted() const { return posted_.size(); }

 private:
  static std::tuple<uint64_t, int32_t, uint64_t, int32_t> key(const SendDesc& s) {
    return {s.slice, s.src, s.pair_seq, s.dst};
  }
  static bool ok(const RecvDesc& r, const SendDesc& s) {
    return r.rank == s.dst && r.context == s.context &&
           (r.src == kAnySource || r.src == s.src) && (r.tag == kAnyTag || r.tag == s.tag);
  }
  std::vector<SendDesc> unexpected_;
  std::vector<std::pair<uint64_t, RecvDesc>> posted_;
  uint64_t next_post_ = 0;
};

TEST(MatcherDifferentialTest, AgreesWithNaiveReferenceAndKeepsMpiRules) {
  const int kRanks = 4, kSlices = 1000;
  const auto w = random_workload(2024, kSlices, kRanks, /*with_probes=*/false);
  Matcher m;
  ReferenceMatcher ref;
  std::mt19937 shuffle(99);

  // Every send / recv by identity, with the order its receiver posted it.
  std::set<std::tuple<int32_t, int32_t, uint64_t>> sends_matched;  // (src, dst, pair_seq)
  std::set<uint32_t> recvs_matched;                                 // request ids are unique
  std::map<uint32_t, uint64_t> recv_order;                          // request -> post index
  std::map<uint32_t, RecvDesc> all_recvs;
  std::vector<SendDesc> all_sends;
  std::vector<Match> all_matches;
  uint64_t post_index = 0;

  for (int i = 0; i < kSlices; ++i) {
    const SliceInput& in = w[static_cast<size_t>(i)];
    for (const RecvDesc& r : in.posts) {
      recv_order[r.request] = post_index++;
      all_recvs[r.request] = r;
    }
    for (const SendDesc& s : in.sends) all_sends.push_back(s);
    std::vector<SendDesc> sends = in.sends;
    std::shuffle(sends.begin(), sends.end(), shuffle);
    m.msm(static_cast<uint64_t>(i + 1), in.posts, sends);
    auto got = m.take_matches();
    auto want = ref.slice(in.posts, in.sends);
    ASSERT_EQ(got.size(), want.size()) << "slice " << i;
    for (size_t k = 0; k < got.size(); ++k) {
      ASSERT_EQ(got[k].send.src, want[k].s.src) << "slice " << i << " match " << k;
      ASSERT_EQ(got[k].send.dst, want[k].s.dst);
      ASSERT_EQ(got[k].send.pair_seq, want[k].s.pair_seq);
      ASSERT_EQ(got[k].recv.request, want[k].r.request);
      ASSERT_EQ(got[k].bytes, std::min(want[k].s.len, want[k].r.cap));
      ASSERT_EQ(got[k].truncated, want[k].s.len > want[k].r.cap);
    }
    ASSERT_EQ(m.unexpected_count(), ref.unexpected());
    ASSERT_EQ(m.posted_count(), ref.posted());
    for (auto& x : got) all_matches.push_back(std::move(x));
  }
  ASSERT_GT(all_matches.size(), 1000u);

  // Properties, independent of the reference.
  for (const Match& x : all_matches) {
    EXPECT_TRUE(desc_matches(x.recv, x.send)) << str(x);
    EXPECT_TRUE(sends_matched.insert({x.send.src, x.send.dst, x.send.pair_seq}).second)
        << "send matched twice: " << str(x);
    EXPECT_TRUE(recvs_matched.insert(x.recv.request).second) << "recv matched twice: " << str(x);
  }
  // Non-overtaking: for two matched sends of one pair, s1 before s2, the
  // receive that got s2 must not be an earlier-posted receive that also
  // accepted s1 (it would have had to take s1).
  std::map<std::pair<int32_t, int32_t>, std::vector<const Match*>> by_pair;
  for (const Match& x : all_matches) by_pair[{x.send.src, x.send.dst}].push_back(&x);
  size_t checked = 0;
  for (auto& [pair, v] : by_pair) {
    std::sort(v.begin(), v.end(),
              [](const Match* a, const Match* b) { return a->send.pair_seq < b->send.pair_seq; });
    for (size_t a = 0; a < v.size(); ++a)
      for (size_t b = a + 1; b < v.size() && b < a + 16; ++b) {
        const Match& m1 = *v[a];
        const Match& m2 = *v[b];
        if (desc_matches(m2.recv, m1.send)) {
          ++checked;
          EXPECT_LT(recv_order[m1.recv.request], recv_order[m2.recv.request])
              << "overtaking: " << str(m1) << " / " << str(m2);
        }
      }
  }
  EXPECT_GT(checked, 100u);
  // Eagerness: nothing left over could have matched something left over.
  std::vector<const SendDesc*> left_sends;
  for (const SendDesc& s : all_sends)
    if (!sends_matched.count({s.src, s.dst, s.pair_seq})) left_sends.push_back(&s);
  EXPECT_EQ(left_sends.size(), m.unexpected_count());
  size_t left_recvs = 0;
  for (const auto& [req, r] : all_recvs) {
    if (recvs_matched.count(req)) continue;
    ++left_recvs;
    for (const SendDesc* s : left_sends)
      EXPECT_FALSE(desc_matches(r, *s)) << "recv " << req << " left unmatched with a match available";
  }
  EXPECT_EQ(left_recvs, m.posted_count());
}

}  // namespace
}  // namespace bcs
