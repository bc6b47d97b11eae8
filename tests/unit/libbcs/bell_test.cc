// Which calls ring the node manager's doorbell (SegmentHeader::bell), and
// when (segment.h, kNm*): the rank side against a fake segment.
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "bcs/bcs.h"
#include "bcs/segment.h"
#include "api_fixture.h"
#include "fake_nm.h"

namespace bcs::apitest {
namespace {

// Whether thread `tid` of this process sleeps (state S: in the futex, past
// its decision to ring).
bool thread_sleeps(pid_t tid) {
  FILE* f = std::fopen(("/proc/self/task/" + std::to_string(tid) + "/stat").c_str(), "r");
  if (!f) return false;
  char buf[512] = {};
  const size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  const char* paren = std::strrchr(buf, ')');
  return n > 0 && paren && paren[1] == ' ' && paren[2] == 'S';
}

// On a node's lease (kNmBellOnAnyBlock) a rank that starts waiting rings
// only if the node would start a slice for it: here when a send to it is
// already posted, or the node holds one it took from a ring before
// (RankControl::held_sends), or every local rank is blocked; not while its
// peer still computes with nothing posted to it (a halo's first rank done).
TEST_F(ApiTest, AWaitRingsALeasedNodeOnlyWhenASliceIsOwedToIt) {
  seg_ = std::make_unique<FakeSegment>(2, 2, 64, 64);
  SegmentHeader* h = seg_->header();
  RankView self = seg_->view(0), peer = seg_->view(1);
  seg_->export_env(0, 0);
  ASSERT_EQ(bcs_init(), BCS_OK);
  h->nm_flags.store(kNmBellOnBlock | kNmBellOnAnyBlock);
  const pid_t me = static_cast<pid_t>(syscall(SYS_gettid));
  // Blocks in a receive from rank 1; `nm` plays the node: it waits until
  // the rank sleeps (or rings), notes whether it rang, completes it.
  auto recv_rings = [&](bool expect_ring) {
    const uint32_t bell = h->bell.load();
    bool rang = false;
    std::thread nm([&] {
      while (!self.ctl->waiting.load() || !thread_sleeps(me)) {
        if (expect_ring && h->bell.load() != bell) break;
        std::this_thread::yield();
      }
      rang = h->bell.load() != bell;
      const uint64_t head = self.ctl->head.load();
      request_complete(self, self.ring[(head - 1) & (self.ring_slots - 1)].request, bcs_err_none, 1,
                       0, 0, 0, 1, 1);
    });
    int v = 0;
    EXPECT_EQ(bcs_recv(&v, sizeof v, 1, 0, kContextWorld, BCS_BLOCKING, nullptr, nullptr), BCS_OK);
    nm.join();
    return rang;
  };
  EXPECT_FALSE(recv_rings(false)) << "rank 1 computes and has posted nothing to rank 0";
  Descriptor d{};
  d.kind = DescKind::send;
  d.peer = 0;
  ASSERT_TRUE(ring_try_post(peer, d));
  EXPECT_TRUE(recv_rings(true)) << "rank 1's send to rank 0 waits in its ring";
  ring_drain(peer, [](const Descriptor&) {});
  EXPECT_FALSE(recv_rings(false)) << "the node took that send";
  self.ctl->held_sends.store(1);
  EXPECT_TRUE(recv_rings(true)) << "the node holds sends to rank 0 that no receive took";
  self.ctl->held_sends.store(0);
  peer.ctl->waiting.store(1);
  EXPECT_TRUE(recv_rings(true)) << "rank 1 is blocked too";
  peer.ctl->waiting.store(0);
  h->nm_flags.store(0);
  ASSERT_EQ(bcs_finalize(), BCS_OK);
  seg_.reset();
  clear_env();
}

// A node on its lease with nothing to do sleeps through the periods
// (kNmBellOnWork) and asks for a ring after work a period's slice would do:
// a send that is not inline (a transfer to start), a synchronous send (to
// be matched), a receive while the node holds sends to the rank, a
// non-blocking probe, a cancel, a poll that found nothing. Not an inline
// send (complete already) or a receive with nothing held for it: their
// slice comes when a rank blocks or polls.
TEST_F(ApiTest, ANodeSleepingThroughThePeriodsIsRungOnlyForWorkASliceWouldDo) {
  attach(2);
  SegmentHeader* h = seg_->header();
  std::vector<uint8_t> big(kInlineSpanMax + 1, 7), eager(kInlineSpanMax, 7);
  int v = 0;
  bcs_request_t r = -1;
  // Posts with `flags` up, then says whether the bell rang.
  auto rings = [&](uint32_t flags, auto&& call) {
    h->nm_flags.store(flags);
    const uint32_t bell = h->bell.load();
    call();
    h->nm_flags.store(0);
    return h->bell.load() != bell;
  };
  for (const uint32_t flags : {kNmBellOnWork, 0u}) {
    const bool on = flags != 0;
    SCOPED_TRACE(on ? "kNmBellOnWork" : "no flag");
    EXPECT_FALSE(rings(flags, [&] {
      EXPECT_EQ(bcs_send(&v, sizeof v, 1, 0, kContextWorld, BCS_NONBLOCKING, &r), BCS_OK);
    })) << "an inline send";
    EXPECT_FALSE(rings(flags, [&] {
      EXPECT_EQ(bcs_send(eager.data(), eager.size(), 1, 0, kContextWorld, BCS_NONBLOCKING, &r),
                BCS_OK);
    })) << "an eager send";
    EXPECT_EQ(rings(flags, [&] {
                EXPECT_EQ(bcs_send(big.data(), big.size(), 1, 0, kContextWorld, BCS_NONBLOCKING,
                                   &r),
                          BCS_OK);
              }),
              on)
        << "a send past the eager size";
    EXPECT_EQ(rings(flags, [&] {
                EXPECT_EQ(bcs_ssend(&v, sizeof v, 1, 0, kContextWorld, BCS_NONBLOCKING, &r),
                          BCS_OK);
              }),
              on)
        << "a synchronous send";
    EXPECT_FALSE(rings(flags, [&] {
      EXPECT_EQ(bcs_recv(&v, sizeof v, 1, 1, kContextWorld, BCS_NONBLOCKING, &r, nullptr),
                BCS_OK);
    })) << "a receive, nothing held for it";
    int flag = 1;
    EXPECT_EQ(rings(flags,
                    [&] {
                      EXPECT_EQ(bcs_test(&r, BCS_NONBLOCKING, &flag, nullptr), BCS_OK);
                      EXPECT_EQ(flag, 0);
                    }),
              on)
        << "a poll that found nothing";
    EXPECT_EQ(rings(flags, [&] { EXPECT_EQ(bcs_cancel(r), BCS_OK); }), on) << "a cancel";
    view_.ctl->held_sends.store(1);
    EXPECT_EQ(rings(flags,
                    [&] {
                      EXPECT_EQ(bcs_recv(&v, sizeof v, 1, 2, kContextWorld, BCS_NONBLOCKING, &r,
                                         nullptr),
                                BCS_OK);
                    }),
              on)
        << "a receive while the node holds sends to the rank";
    view_.ctl->held_sends.store(0);
    EXPECT_EQ(rings(flags,
                    [&] {
                      EXPECT_EQ(bcs_probe(1, 3, kContextWorld, BCS_NONBLOCKING, &flag, nullptr),
                                BCS_OK);
                    }),
              on)
        << "a non-blocking probe";
    ring_drain(view_, [](const Descriptor&) {});
  }
}

// A call that blocks right after its post (MPI_Recv, a large MPI_Send)
// rings such a node once, from its wait, not from the post and again from
// the wait: each ring is a wake-up of the node.
TEST_F(ApiTest, ABlockingCallRingsASleepingNodeOnceFromItsWait) {
  seg_ = std::make_unique<FakeSegment>(2, 2, 64, 64);
  SegmentHeader* h = seg_->header();
  RankView self = seg_->view(0);
  seg_->export_env(0, 0);
  ASSERT_EQ(bcs_init(), BCS_OK);
  h->nm_flags.store(kNmBellOnBlock | kNmBellOnAnyBlock | kNmBellOnWork);
  const pid_t me = static_cast<pid_t>(syscall(SYS_gettid));
  // `call` blocks; `nm` waits until the rank sleeps, counts the rings,
  // completes the request the rank posted last.
  auto rings = [&](auto&& call) {
    const uint32_t bell = h->bell.load();
    uint32_t rang = 0;
    std::thread nm([&] {
      while (!self.ctl->waiting.load() || !thread_sleeps(me)) std::this_thread::yield();
      rang = h->bell.load() - bell;
      const uint64_t head = self.ctl->head.load();
      request_complete(self, self.ring[(head - 1) & (self.ring_slots - 1)].request, bcs_err_none, 1,
                       0, 0, 0, 1, 1);
    });
    call();
    nm.join();
    return rang;
  };
  self.ctl->held_sends.store(1);
  int v = 0;
  EXPECT_EQ(rings([&] {
              EXPECT_EQ(bcs_recv(&v, sizeof v, 1, 0, kContextWorld, BCS_BLOCKING, nullptr, nullptr),
                        BCS_OK);
            }),
            1u)
      << "a blocking receive while the node holds sends to the rank";
  self.ctl->held_sends.store(0);
  std::vector<uint8_t> big(kInlineSpanMax + 1, 7);
  EXPECT_EQ(rings([&] {
              EXPECT_EQ(bcs_send(big.data(), big.size(), 1, 0, kContextWorld, BCS_BLOCKING, nullptr),
                        BCS_OK);
            }),
            1u)
      << "a blocking send past the eager size";
  h->nm_flags.store(0);
  ASSERT_EQ(bcs_finalize(), BCS_OK);
  seg_.reset();
  clear_env();
}

// On a node's lease a rank on a CPU of its own spins before it sleeps even
// when every local rank waits and its own wait rang (rank.h, wait_until):
// the slice it rang for usually completes it within its spin. The spin is
// bounded and rings nothing more: the rank rings once, then sleeps once its
// spin is up, and the node that completes it then still wakes it.
TEST_F(ApiTest, OnALeaseAWaitThatRangSpinsAWhileThenSleepsWithoutRingingAgain) {
  cpu_set_t all, one;
  ASSERT_EQ(sched_getaffinity(0, sizeof all, &all), 0);
  if (CPU_COUNT(&all) < 2) GTEST_SKIP() << "2 local ranks need 2 CPUs to spin";
  CPU_ZERO(&one);
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &all)) {
      CPU_SET(c, &one);
      break;
    }
  // Bound to one CPU, as the node manager binds ranks that do not
  // outnumber the CPUs: bcs_init then gives its waits a spin. Unbound
  // again however the test ends (the next tests' bcs_init must not spin).
  ASSERT_EQ(sched_setaffinity(0, sizeof one, &one), 0);
  struct Unbind {
    cpu_set_t all;
    ~Unbind() { sched_setaffinity(0, sizeof all, &all); }
  } unbind{all};
  seg_ = std::make_unique<FakeSegment>(2, 2, 64, 64);
  SegmentHeader* h = seg_->header();
  RankView self = seg_->view(0), peer = seg_->view(1);
  seg_->export_env(0, 0);
  ASSERT_EQ(bcs_init(), BCS_OK);
  h->nm_flags.store(kNmBellOnBlock | kNmBellOnAnyBlock | kNmBellOnPost);
  peer.ctl->waiting.store(1);  // every local rank waits once this one does
  self.ctl->held_sends.store(1);  // and the node holds a send for it: a slice is owed
  const pid_t me = static_cast<pid_t>(syscall(SYS_gettid));
  const uint32_t bell = h->bell.load();
  uint32_t rang_before_sleep = 0;
  std::thread nm([&] {
    // The ring comes first; the sleep after the spin (a spin that never
    // ended would leave this loop, and the test, to its timeout).
    while (h->bell.load() == bell) std::this_thread::yield();
    while (!thread_sleeps(me)) std::this_thread::yield();
    rang_before_sleep = h->bell.load() - bell;
    const uint64_t head = self.ctl->head.load();
    request_complete(self, self.ring[(head - 1) & (self.ring_slots - 1)].request, bcs_err_none, 4,
                     0, 0, 0, 1, 1);
  });
  int v = 0;
  EXPECT_EQ(bcs_recv(&v, sizeof v, 1, 0, kContextWorld, BCS_BLOCKING, nullptr, nullptr), BCS_OK);
  nm.join();
  EXPECT_EQ(rang_before_sleep, 1u) << "one ring for the wait, none for its spin or its sleep";
  EXPECT_EQ(h->bell.load() - bell, 1u);
  EXPECT_EQ(self.ctl->waiting.load(), 0u);
  peer.ctl->waiting.store(0);
  self.ctl->held_sends.store(0);
  h->nm_flags.store(0);
  ASSERT_EQ(bcs_finalize(), BCS_OK);
  seg_.reset();
  clear_env();
}

}  // namespace
}  // namespace bcs::apitest
