// The rank-side BCS API (bcs.h / api.cc) against an in-process fake node
// manager (fake_nm.h). Each test builds a fresh segment, attaches with
// bcs_init through the real environment protocol and finalizes at the end
// (bcs_init may run again after bcs_finalize).
//
// Blocking calls are exercised with the fake NM on a strobe thread whose
// progress is gated on the rank having announced that it sleeps
// (RankControl::waiting), which proves the futex wake path rather than luck.
// A broken wake-up would hang: ctest's TIMEOUT bounds every test.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cstdint>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <memory>
#include <numeric>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "bcs/bcs.h"
#include "bcs/segment.h"
#include "bcs/shelf.h"
#include "api_fixture.h"
#include "fake_nm.h"

namespace bcs::apitest {
namespace {

TEST_F(ApiTest, InitWithoutEnvironmentIsNotInit) {
  clear_env();
  EXPECT_EQ(bcs_init(), BCS_ERR_NOT_INIT);
  EXPECT_EQ(bcs_initialized(), 0);
  EXPECT_EQ(bcs_send(nullptr, 0, 0, 0, kContextWorld, BCS_BLOCKING, nullptr), BCS_ERR_NOT_INIT);
}

TEST_F(ApiTest, InitRejectsBadSegment) {
  FakeSegment bad_magic(1, 1, 8, 8);
  bad_magic.header()->magic = 0;
  bad_magic.export_env(0, 0);
  EXPECT_EQ(bcs_init(), BCS_ERR_INTERNAL);

  FakeSegment wrong_size(2, 1, 8, 8);
  wrong_size.export_env(0, 0);
  setenv("BCS_SIZE", "3", 1);
  EXPECT_EQ(bcs_init(), BCS_ERR_INTERNAL);

  FakeSegment wrong_rank(2, 1, 8, 8);
  wrong_rank.export_env(0, 1);  // slot 0 was created for world rank 0
  EXPECT_EQ(bcs_init(), BCS_ERR_INTERNAL);
  EXPECT_EQ(bcs_initialized(), 0);
}

TEST_F(ApiTest, InitPublishesStateAndFinalizeMarksIt) {
  attach(4);
  EXPECT_EQ(bcs_initialized(), 1);
  EXPECT_EQ(bcs_world_rank(), 0);
  EXPECT_EQ(bcs_world_size(), 4);
  EXPECT_EQ(bcs_slice_ns(), 500'000u);
  EXPECT_EQ(view_.ctl->mpi_state.load(), static_cast<uint32_t>(MpiState::initialized));
  // The fd was consumed: children of the rank must not inherit the segment.
  EXPECT_EQ(getenv("BCS_SEGMENT_FD"), nullptr);
  EXPECT_EQ(bcs_finalize(), BCS_OK);
  EXPECT_EQ(view_.ctl->mpi_state.load(), static_cast<uint32_t>(MpiState::finalized));
  EXPECT_EQ(bcs_initialized(), 0);
}

TEST_F(ApiTest, InlineSendCompletesAtPostAndCarriesTheBytes) {
  attach(2);
  auto buf = pattern(kInlineMax, 3);
  const auto expect = buf;
  bcs_request_t req = BCS_REQUEST_NULL;
  ASSERT_EQ(bcs_send(buf.data(), buf.size(), 1, 17, kContextWorld, BCS_NONBLOCKING, &req), BCS_OK);
  std::fill(buf.begin(), buf.end(), 0);  // the buffer is reusable at once
  int flag = 0;
  bcs_msg_status_t st{};
  ASSERT_EQ(bcs_test(&req, BCS_NONBLOCKING, &flag, &st), BCS_OK);
  EXPECT_EQ(flag, 1);  // no NM step happened
  EXPECT_EQ(req, BCS_REQUEST_NULL);
  EXPECT_EQ(st.bytes, kInlineMax);

  nm_->step();
  auto seen = nm_->seen();
  ASSERT_EQ(seen.size(), 1u);
  const Descriptor& d = seen[0];
  EXPECT_EQ(d.kind, DescKind::send);
  EXPECT_TRUE(d.flags & kDescInline);
  EXPECT_EQ(d.peer, 1);
  EXPECT_EQ(d.tag, 17);
  EXPECT_EQ(d.context, kContextWorld);
  EXPECT_EQ(d.len, kInlineMax);
  EXPECT_EQ(d.inline_len, kInlineMax);
  EXPECT_EQ(d.seq, 1u);
  EXPECT_EQ(0, std::memcmp(d.payload, expect.data(), kInlineMax));
}

TEST_F(ApiTest, LargeSendWaitsForTheNodeManager) {
  attach(2);
  auto buf = pattern(kInlineSpanMax + 1, 5);
  bcs_request_t req = BCS_REQUEST_NULL;
  ASSERT_EQ(bcs_send(buf.data(), buf.size(), 1, 0, kContextWorld, BCS_NONBLOCKING, &req), BCS_OK);
  int flag = 1;
  ASSERT_EQ(bcs_test(&req, BCS_NONBLOCKING, &flag, nullptr), BCS_OK);
  EXPECT_EQ(flag, 0);
  EXPECT_NE(req, BCS_REQUEST_NULL);
  nm_->step();
  auto seen = nm_->seen();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_FALSE(seen[0].flags & kDescInline);
  EXPECT_EQ(seen[0].addr, reinterpret_cast<uintptr_t>(buf.data()));
  EXPECT_EQ(seen[0].len, buf.size());
  // The NM read the data: it completes the send.
  request_complete(view_, seen[0].request, bcs_err_none, 0, 0, buf.size());
  ASSERT_EQ(bcs_test(&req, BCS_NONBLOCKING, &flag, nullptr), BCS_OK);
  EXPECT_EQ(flag, 1);
  EXPECT_EQ(req, BCS_REQUEST_NULL);
}

// The MMDS's message flows: each send posted and each receive taken back
// completed is told to the observer with the pair number that joins them.
std::vector<std::tuple<int, int32_t, uint64_t, uint64_t>> g_flows;
void note_flow(int is_send, int32_t peer, uint64_t seq, uint64_t bytes) {
  g_flows.emplace_back(is_send, peer, seq, bytes);
}

TEST_F(ApiTest, TheMessageObserverSeesBothEndsOfEachMessage) {
  attach(2);
  g_flows.clear();
  bcs_set_msg_observer(note_flow);
  char small[8] = {}, into[64] = {};
  ASSERT_EQ(bcs_send(small, sizeof small, 1, 0, kContextWorld, BCS_BLOCKING, nullptr), BCS_OK);
  ASSERT_EQ(bcs_send(small, sizeof small, 1, 0, kContextWorld, BCS_BLOCKING, nullptr), BCS_OK);
  bcs_request_t req = BCS_REQUEST_NULL;
  ASSERT_EQ(bcs_recv(into, sizeof into, 1, 5, kContextWorld, BCS_NONBLOCKING, &req, nullptr), BCS_OK);
  nm_->step();
  auto seen = nm_->seen();
  ASSERT_EQ(seen.size(), 3u);
  // Rank 1's third send to us took it.
  request_complete(view_, seen[2].request, bcs_err_none, 1, 5, 16, 0, 3);
  int flag = 0;
  ASSERT_EQ(bcs_test(&req, BCS_NONBLOCKING, &flag, nullptr), BCS_OK);
  ASSERT_EQ(flag, 1);
  bcs_set_msg_observer(nullptr);
  ASSERT_EQ(bcs_send(small, sizeof small, 1, 0, kContextWorld, BCS_BLOCKING, nullptr), BCS_OK);
  using F = std::tuple<int, int32_t, uint64_t, uint64_t>;
  EXPECT_EQ(g_flows, (std::vector<F>{{1, 1, 1, 8}, {1, 1, 2, 8}, {0, 1, 3, 16}}));
}

// Record and replay's slice schedule: the node manager's drain notes reach
// the observer from inside the rank's next post (so none can be lapped) or
// when the observer is taken away, in order and once each.
std::vector<std::pair<uint64_t, uint64_t>> g_drains;
void note_drain(uint64_t slice, uint64_t count) { g_drains.emplace_back(slice, count); }
std::atomic<uint64_t> g_alarm{0};
std::atomic<int> g_alarms{0};
void on_alarm(uint64_t now) {
  g_alarm = now;
  ++g_alarms;
}

TEST_F(ApiTest, DrainNotesReachTheObserverInOrderOnce) {
  attach(2);
  g_drains.clear();
  bcs_set_drain_observer(note_drain);
  EXPECT_EQ(view_.ctl->note_drains.load(), 1u);  // the NM is asked for notes
  // What bcs-nm's NmJob::note_drain does: the note, then the head (release).
  auto nm_notes = [&](uint64_t slice, uint64_t count) {
    const uint64_t h = view_.ctl->drain_head.load();
    view_.drains[h % 64] = DrainNote{slice, count};
    view_.ctl->drain_head.store(h + 1, std::memory_order_release);
  };
  nm_notes(1, 2);
  nm_notes(3, 1);
  EXPECT_TRUE(g_drains.empty());  // nothing is read behind the program's back
  char small[8] = {};
  ASSERT_EQ(bcs_send(small, sizeof small, 1, 0, kContextWorld, BCS_BLOCKING, nullptr), BCS_OK);
  using D = std::pair<uint64_t, uint64_t>;
  EXPECT_EQ(g_drains, (std::vector<D>{{1, 2}, {3, 1}}));
  ASSERT_EQ(bcs_send(small, sizeof small, 1, 0, kContextWorld, BCS_BLOCKING, nullptr), BCS_OK);
  EXPECT_EQ(g_drains.size(), 2u);
  nm_notes(4, 5);
  bcs_set_drain_observer(nullptr);  // hands over what is left first
  EXPECT_EQ(g_drains, (std::vector<D>{{1, 2}, {3, 1}, {4, 5}}));
  EXPECT_EQ(view_.ctl->note_drains.load(), 0u);
  nm_notes(5, 1);
  ASSERT_EQ(bcs_send(small, sizeof small, 1, 0, kContextWorld, BCS_BLOCKING, nullptr), BCS_OK);
  EXPECT_EQ(g_drains.size(), 3u);
}

// bcs replay --until-slice: the alarm rings once, in the first call that
// posts from its slice on; a rank asleep in a wait rings it when its node
// manager wakes it for that slice (RankControl::wake_at_slice).
TEST_F(ApiTest, TheSliceAlarmRingsOnceFromItsSliceOn) {
  attach(2);
  g_alarm = 0;
  g_alarms = 0;
  bcs_set_slice_alarm(5, on_alarm);
  EXPECT_EQ(view_.ctl->wake_at_slice.load(), 5u);
  char small[8] = {};
  seg_->header()->job_slice.store(4);
  ASSERT_EQ(bcs_send(small, sizeof small, 1, 0, kContextWorld, BCS_BLOCKING, nullptr), BCS_OK);
  EXPECT_EQ(g_alarms.load(), 0);
  EXPECT_EQ(bcs_job_slice(), 4u);
  seg_->header()->job_slice.store(6);
  ASSERT_EQ(bcs_send(small, sizeof small, 1, 0, kContextWorld, BCS_BLOCKING, nullptr), BCS_OK);
  EXPECT_EQ(g_alarms.load(), 1);
  EXPECT_EQ(g_alarm.load(), 6u);
  EXPECT_EQ(view_.ctl->wake_at_slice.load(), 0u);
  ASSERT_EQ(bcs_send(small, sizeof small, 1, 0, kContextWorld, BCS_BLOCKING, nullptr), BCS_OK);
  EXPECT_EQ(g_alarms.load(), 1);

  // Asleep in a blocking receive: the "NM" moves to slice 9 and wakes the
  // rank (as NmJob::begin_slice does); the alarm rings inside the wait,
  // then the receive completes as usual.
  bcs_set_slice_alarm(9, on_alarm);
  std::thread nm([&] {
    while (!view_.ctl->waiting.load()) std::this_thread::yield();
    nm_->step();
    seg_->header()->job_slice.store(9);
    rank_wake(view_);
    while (g_alarms.load() < 2) std::this_thread::yield();
    request_complete(view_, nm_->seen().back().request, bcs_err_none, 1, 3, 0, 0, 1, 9);
  });
  bcs_msg_status_t st{};
  EXPECT_EQ(bcs_recv(small, sizeof small, 1, 3, kContextWorld, BCS_BLOCKING, nullptr, &st), BCS_OK);
  nm.join();
  EXPECT_EQ(g_alarms.load(), 2);
  EXPECT_EQ(g_alarm.load(), 9u);
  EXPECT_EQ(st.slice, 9u);  // the slice it completed in
}

// A non-contiguous buffer goes to the node manager as its block list (the
// rank does not pack); a small one is gathered into the descriptor.
TEST_F(ApiTest, LayoutsPostTheBlockListOrGatherSmallMessages) {
  attach(2);
  std::vector<uint8_t> buf(4096);
  for (size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<uint8_t>(i);
  const bcs_block_t blocks[2] = {{0, 3}, {10, 5}};
  bcs_layout_t big{blocks, 2, 100, 32}, small{blocks, 2, 2, 32}, bad{blocks, 0, 1, 32};
  bcs_request_t a = BCS_REQUEST_NULL, b = BCS_REQUEST_NULL, c = BCS_REQUEST_NULL;
  ASSERT_EQ(bcs_send_layout(buf.data(), &big, 1, 0, kContextWorld, 0, BCS_NONBLOCKING, &a), BCS_OK);
  ASSERT_EQ(bcs_send_layout(buf.data(), &small, 1, 0, kContextWorld, 0, BCS_NONBLOCKING, &b),
            BCS_OK);
  ASSERT_EQ(bcs_recv_layout(buf.data(), &big, 1, 0, kContextWorld, BCS_NONBLOCKING, &c, nullptr),
            BCS_OK);
  EXPECT_EQ(bcs_send_layout(buf.data(), &bad, 1, 0, kContextWorld, 0, BCS_NONBLOCKING, &a),
            BCS_ERR_ARG);
  nm_->step();
  auto seen = nm_->seen();
  ASSERT_EQ(seen.size(), 3u);
  for (size_t k : {size_t{0}, size_t{2}}) {
    EXPECT_EQ(seen[k].flags, kDescLayout);
    EXPECT_EQ(seen[k].addr, reinterpret_cast<uintptr_t>(buf.data()));
    EXPECT_EQ(seen[k].len, 800u) << "packed bytes";
    LayoutRef ref;
    std::memcpy(&ref, seen[k].payload, sizeof ref);
    EXPECT_EQ(ref.blocks, reinterpret_cast<uintptr_t>(blocks));
    EXPECT_EQ(ref.nblocks, 2u);
    EXPECT_EQ(ref.count, 100u);
    EXPECT_EQ(ref.extent, 32);
  }
  EXPECT_EQ(seen[1].flags, kDescInline);
  ASSERT_EQ(seen[1].inline_len, 16u);
  const uint8_t want[16] = {0, 1, 2, 10, 11, 12, 13, 14, 32, 33, 34, 42, 43, 44, 45, 46};
  EXPECT_EQ(0, std::memcmp(seen[1].payload, want, 16));
}

TEST_F(ApiTest, BlockingRecvIsWokenByCompletion) {
  attach(1);
  const auto msg = pattern(5000, 9);
  bcs_request_t sreq = BCS_REQUEST_NULL;
  ASSERT_EQ(bcs_send(msg.data(), msg.size(), 0, 4, kContextWorld, BCS_NONBLOCKING, &sreq), BCS_OK);
  start_nm_when_rank_waits();
  std::vector<uint8_t> in(8000, 0);
  bcs_msg_status_t st{};
  ASSERT_EQ(bcs_recv(in.data(), in.size(), BCS_ANY_SOURCE, BCS_ANY_TAG, kContextWorld,
                     BCS_BLOCKING, nullptr, &st),
            BCS_OK);
  EXPECT_EQ(st.source, 0);
  EXPECT_EQ(st.tag, 4);
  EXPECT_EQ(st.bytes, msg.size());
  EXPECT_EQ(st.error, BCS_OK);
  EXPECT_TRUE(std::equal(msg.begin(), msg.end(), in.begin()));
  EXPECT_EQ(view_.ctl->waiting.load(), 0u);
  // The send was completed by the same NM step.
  ASSERT_EQ(bcs_test(&sreq, BCS_BLOCKING, nullptr, nullptr), BCS_OK);
  EXPECT_EQ(sreq, BCS_REQUEST_NULL);
}

// bcs_init maps the rank's own area (ring, requests, landings) at once, so
// that its first posts take no page faults (several microseconds each on a
// virtual machine). The fake node manager allocated none of the ring's or
// landings' pages; mincore, through the fake's own mapping of the same
// memfd, says which the rank's populate allocated.
TEST_F(ApiTest, InitMapsTheRanksOwnAreaAtOnce) {
#ifndef MADV_POPULATE_WRITE
  GTEST_SKIP() << "no MADV_POPULATE_WRITE in these headers";
#endif
  attach(1, 1024, 4096);
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  auto absent_in = [&](const void* p, size_t len, size_t* pages) {
    const auto from = reinterpret_cast<uintptr_t>(p) & ~(page - 1);
    const size_t n = (reinterpret_cast<uintptr_t>(p) + len - from + page - 1) / page;
    std::vector<unsigned char> in(n);
    if (mincore(reinterpret_cast<void*>(from), n * page, in.data()) != 0) return n;
    *pages += n;
    return static_cast<size_t>(std::count_if(in.begin(), in.end(), [](unsigned char c) { return !(c & 1); }));
  };
  size_t pages = 0;
  size_t absent = absent_in(view_.ring, size_t{1024} * kDescriptorSize, &pages);
  absent += absent_in(view_.landing, size_t{4096} * kLandingMax, &pages);
  EXPECT_GT(pages, 200u);
  EXPECT_EQ(absent, 0u) << "of " << pages << " pages";
}

TEST_F(ApiTest, BlockingSendWaitsForCompletion) {
  attach(1);
  const auto msg = pattern(kInlineSpanMax + 1, 1);
  std::vector<uint8_t> in(kInlineSpanMax + 1);
  bcs_request_t rreq = BCS_REQUEST_NULL;
  ASSERT_EQ(bcs_recv(in.data(), in.size(), 0, 8, kContextWorld, BCS_NONBLOCKING, &rreq, nullptr),
            BCS_OK);
  start_nm_when_rank_waits();
  ASSERT_EQ(bcs_send(msg.data(), msg.size(), 0, 8, kContextWorld, BCS_BLOCKING, nullptr), BCS_OK);
  nm_->stop();
  int flag = 0;
  bcs_msg_status_t st{};
  ASSERT_EQ(bcs_test(&rreq, BCS_NONBLOCKING, &flag, &st), BCS_OK);
  EXPECT_EQ(flag, 1);
  EXPECT_EQ(in, msg);
}

TEST_F(ApiTest, TruncationIsReportedWithTheBytesDelivered) {
  attach(1);
  const auto msg = pattern(300, 2);
  bcs_request_t sreq;
  ASSERT_EQ(bcs_send(msg.data(), msg.size(), 0, 1, kContextWorld, BCS_NONBLOCKING, &sreq), BCS_OK);
  start_nm_when_rank_waits();
  std::vector<uint8_t> in(100);
  bcs_msg_status_t st{};
  EXPECT_EQ(bcs_recv(in.data(), in.size(), 0, 1, kContextWorld, BCS_BLOCKING, nullptr, &st),
            BCS_ERR_TRUNCATE);
  EXPECT_EQ(st.error, BCS_ERR_TRUNCATE);
  EXPECT_EQ(st.bytes, 100u);
  EXPECT_TRUE(std::equal(in.begin(), in.end(), msg.begin()));
  EXPECT_EQ(bcs_test(&sreq, BCS_BLOCKING, nullptr, nullptr), BCS_OK);
}

TEST_F(ApiTest, FullRingMakesSendWaitAndLosesNothing) {
  attach(2, /*ring_slots=*/4);
  std::array<int, 6> vals{};
  std::iota(vals.begin(), vals.end(), 100);
  std::array<bcs_request_t, 6> reqs{};
  for (int i = 0; i < 4; ++i)
    ASSERT_EQ(bcs_send(&vals[i], sizeof(int), 1, i, kContextWorld, BCS_NONBLOCKING, &reqs[i]),
              BCS_OK);
  EXPECT_EQ(view_.ctl->head.load() - view_.ctl->tail.load(), 4u);  // full
  // The NM only drains once the rank sleeps: the 5th post must wait for it.
  start_nm_when_rank_waits();
  ASSERT_EQ(bcs_send(&vals[4], sizeof(int), 1, 4, kContextWorld, BCS_NONBLOCKING, &reqs[4]),
            BCS_OK);
  ASSERT_EQ(bcs_send(&vals[5], sizeof(int), 1, 5, kContextWorld, BCS_BLOCKING, nullptr), BCS_OK);
  nm_->stop();
  nm_->step();
  auto seen = nm_->seen();
  ASSERT_EQ(seen.size(), 6u);
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(seen[i].seq, static_cast<uint64_t>(i + 1));
    EXPECT_EQ(seen[i].tag, i);
    int v;
    std::memcpy(&v, seen[i].payload, sizeof v);
    EXPECT_EQ(v, vals[i]);
  }
  int flag = 0;
  ASSERT_EQ(bcs_testall(5, reqs.data(), BCS_NONBLOCKING, &flag, nullptr), BCS_OK);
  EXPECT_EQ(flag, 1);
}

TEST_F(ApiTest, TestallAndTestany) {
  attach(1);
  std::array<int, 3> in{};
  std::array<bcs_request_t, 3> reqs{};
  for (int i = 0; i < 3; ++i)
    ASSERT_EQ(bcs_recv(&in[i], sizeof(int), BCS_ANY_SOURCE, i + 1, kContextWorld, BCS_NONBLOCKING,
                       &reqs[i], nullptr),
              BCS_OK);
  int index = 7, flag = 7;
  bcs_msg_status_t st{};
  ASSERT_EQ(bcs_testany(3, reqs.data(), BCS_NONBLOCKING, &index, &flag, &st), BCS_OK);
  EXPECT_EQ(flag, 0);
  EXPECT_EQ(index, -1);

  const int two = 22;
  ASSERT_EQ(bcs_send(&two, sizeof two, 0, 2, kContextWorld, BCS_BLOCKING, nullptr), BCS_OK);
  nm_->step();
  ASSERT_EQ(bcs_testany(3, reqs.data(), BCS_NONBLOCKING, &index, &flag, &st), BCS_OK);
  EXPECT_EQ(flag, 1);
  EXPECT_EQ(index, 1);
  EXPECT_EQ(st.tag, 2);
  EXPECT_EQ(in[1], 22);
  EXPECT_EQ(reqs[1], BCS_REQUEST_NULL);

  // Not all complete: nothing is freed.
  std::array<bcs_msg_status_t, 3> sts{};
  ASSERT_EQ(bcs_testall(3, reqs.data(), BCS_NONBLOCKING, &flag, sts.data()), BCS_OK);
  EXPECT_EQ(flag, 0);
  EXPECT_NE(reqs[0], BCS_REQUEST_NULL);
  EXPECT_NE(reqs[2], BCS_REQUEST_NULL);

  const int one = 11, three = 33;
  ASSERT_EQ(bcs_send(&three, sizeof three, 0, 3, kContextWorld, BCS_BLOCKING, nullptr), BCS_OK);
  ASSERT_EQ(bcs_send(&one, sizeof one, 0, 1, kContextWorld, BCS_BLOCKING, nullptr), BCS_OK);
  start_nm_when_rank_waits();
  ASSERT_EQ(bcs_testall(3, reqs.data(), BCS_BLOCKING, &flag, sts.data()), BCS_OK);
  EXPECT_EQ(flag, 1);
  for (auto r : reqs) EXPECT_EQ(r, BCS_REQUEST_NULL);
  EXPECT_EQ(sts[0].tag, 1);
  EXPECT_EQ(sts[1].source, BCS_ANY_SOURCE);  // was already NULL: empty status
  EXPECT_EQ(sts[1].bytes, 0u);
  EXPECT_EQ(sts[2].tag, 3);
  EXPECT_EQ(in[0], 11);
  EXPECT_EQ(in[2], 33);

  // All NULL: complete at once, no index.
  ASSERT_EQ(bcs_testany(3, reqs.data(), BCS_BLOCKING, &index, &flag, &st), BCS_OK);
  EXPECT_EQ(flag, 1);
  EXPECT_EQ(index, -1);
}

TEST_F(ApiTest, IprobeKeepsOneOutstandingAndReportsTheLastAnswer) {
  attach(1);
  int flag = 7;
  bcs_msg_status_t st{};
  ASSERT_EQ(bcs_probe(0, 5, kContextWorld, BCS_NONBLOCKING, &flag, &st), BCS_OK);
  EXPECT_EQ(flag, 0);
  EXPECT_EQ(posted(), 1u);
  // Still pending: no new descriptor.
  ASSERT_EQ(bcs_probe(0, 5, kContextWorld, BCS_NONBLOCKING, &flag, &st), BCS_OK);
  EXPECT_EQ(flag, 0);
  EXPECT_EQ(posted(), 1u);
  // A different key is a different iprobe.
  ASSERT_EQ(bcs_probe(0, 6, kContextWorld, BCS_NONBLOCKING, &flag, &st), BCS_OK);
  EXPECT_EQ(posted(), 2u);

  nm_->step();  // answers: not found
  ASSERT_EQ(bcs_probe(0, 5, kContextWorld, BCS_NONBLOCKING, &flag, &st), BCS_OK);
  EXPECT_EQ(flag, 0);
  EXPECT_EQ(posted(), 3u);  // asked again

  std::vector<uint8_t> msg(42, 1);
  ASSERT_EQ(bcs_send(msg.data(), msg.size(), 0, 5, kContextWorld, BCS_BLOCKING, nullptr), BCS_OK);
  nm_->step();  // answers: found
  ASSERT_EQ(bcs_probe(0, 5, kContextWorld, BCS_NONBLOCKING, &flag, &st), BCS_OK);
  EXPECT_EQ(flag, 1);
  EXPECT_EQ(st.source, 0);
  EXPECT_EQ(st.tag, 5);
  EXPECT_EQ(st.bytes, 42u);
  const uint64_t before = posted();
  ASSERT_EQ(bcs_probe(0, 5, kContextWorld, BCS_NONBLOCKING, &flag, &st), BCS_OK);
  EXPECT_EQ(flag, 0);  // a found answer is consumed; a new question goes out
  EXPECT_EQ(posted(), before + 1);
  auto seen = nm_->seen();
  for (const auto& d : seen) {
    if (d.kind != DescKind::send) {
      EXPECT_EQ(d.kind, DescKind::iprobe);
    }
  }
}

// A receive that takes its message from the unexpected shelf makes the
// answers of earlier non-blocking probes out of date: one that said
// "found" must not say it again for a message the program already has (a
// replay story's MPI_Iprobe loop then waited forever for it).
TEST_F(ApiTest, AReceiveFromTheShelfForgetsWhatEarlierProbesFound) {
  attach(1);
  int flag = 0;
  bcs_msg_status_t st{};
  ASSERT_EQ(bcs_probe(0, 5, kContextWorld, BCS_NONBLOCKING, &flag, &st), BCS_OK);
  EXPECT_EQ(flag, 0);
  const int32_t v = 77;
  ASSERT_EQ(bcs_send(&v, sizeof v, 0, 5, kContextWorld, BCS_BLOCKING, nullptr), BCS_OK);
  nm_->step();  // the probe's answer: found
  // The node manager's buffer receiver offers the send on the shelf.
  Matcher m;
  SendDesc s;
  s.src = 0;
  s.dst = 0;
  s.tag = 5;
  s.context = kContextWorld;
  s.pair_seq = 1;
  s.slice = 1;
  s.len = sizeof v;
  s.is_inline = true;
  s.payload.resize(sizeof v);
  std::memcpy(s.payload.data(), &v, sizeof v);
  m.msm(1, {}, {s});
  ShelfKeeper keeper;
  keeper.offer(view_.shelf, m, 0);
  int32_t got = 0;
  ASSERT_EQ(bcs_recv(&got, sizeof got, 0, 5, kContextWorld, BCS_BLOCKING, nullptr, &st), BCS_OK);
  EXPECT_EQ(got, v);
  EXPECT_EQ(view_.shelf->count.load(), 1u);
  // Nothing waits now: the probe asks again instead of repeating "found".
  const uint64_t before = posted();
  ASSERT_EQ(bcs_probe(0, 5, kContextWorld, BCS_NONBLOCKING, &flag, &st), BCS_OK);
  EXPECT_EQ(flag, 0);
  EXPECT_EQ(posted(), before + 1);
}

// The same without the shelf: a probe's kept "found" goes out of date once
// a receive that could take its message is posted, wherever the receive
// gets it from.
TEST_F(ApiTest, AReceivePostedAfterAProbeWasAnsweredForgetsThatAnswer) {
  attach(1);
  int flag = 0;
  bcs_msg_status_t st{};
  ASSERT_EQ(bcs_probe(0, 5, kContextWorld, BCS_NONBLOCKING, &flag, &st), BCS_OK);
  ASSERT_EQ(bcs_probe(0, 6, kContextWorld, BCS_NONBLOCKING, &flag, &st), BCS_OK);
  EXPECT_EQ(flag, 0);
  const int32_t a = 1, b = 2;
  ASSERT_EQ(bcs_send(&a, sizeof a, 0, 5, kContextWorld, BCS_BLOCKING, nullptr), BCS_OK);
  ASSERT_EQ(bcs_send(&b, sizeof b, 0, 6, kContextWorld, BCS_BLOCKING, nullptr), BCS_OK);
  nm_->step();  // both probes' answer: found
  int32_t got = 0;
  bcs_request_t r = BCS_REQUEST_NULL;
  ASSERT_EQ(bcs_recv(&got, sizeof got, 0, 5, kContextWorld, BCS_NONBLOCKING, &r, nullptr), BCS_OK);
  nm_->step();
  ASSERT_EQ(bcs_test(&r, BCS_BLOCKING, nullptr, nullptr), BCS_OK);
  EXPECT_EQ(got, a);
  // Tag 5's answer named the message just received: asked again.
  const uint64_t before = posted();
  ASSERT_EQ(bcs_probe(0, 5, kContextWorld, BCS_NONBLOCKING, &flag, &st), BCS_OK);
  EXPECT_EQ(flag, 0);
  EXPECT_EQ(posted(), before + 1);
  // Tag 6's still stands: the receive could not have taken its message.
  ASSERT_EQ(bcs_probe(0, 6, kContextWorld, BCS_NONBLOCKING, &flag, &st), BCS_OK);
  EXPECT_EQ(flag, 1);
  EXPECT_EQ(st.tag, 6);
}

// Each polled key keeps a slot for its next answer, but answered probes of
// other keys give theirs back when the table is full: probing many distinct
// tags never starves sends and receives.
TEST_F(ApiTest, AnsweredIprobesGiveTheirSlotsBackWhenTheTableIsFull) {
  attach(1, 64, /*request_slots=*/8);
  int flag = -1;
  for (int32_t tag = 0; tag < 8; ++tag)
    ASSERT_EQ(bcs_probe(0, tag, kContextWorld, BCS_NONBLOCKING, &flag, nullptr), BCS_OK);
  const int v = 3;
  bcs_request_t req;
  // All 8 slots wait for the node manager's answers: nothing can be freed.
  EXPECT_EQ(bcs_send(&v, sizeof v, 0, 1, kContextWorld, BCS_NONBLOCKING, &req),
            BCS_ERR_NO_RESOURCES);
  nm_->step();  // answers them all: not found
  ASSERT_EQ(bcs_send(&v, sizeof v, 0, 1, kContextWorld, BCS_NONBLOCKING, &req), BCS_OK);
  ASSERT_EQ(bcs_test(&req, BCS_BLOCKING, nullptr, nullptr), BCS_OK);
  // Many more keys than slots, answered slice by slice: never refused.
  for (int32_t tag = 100; tag < 200; ++tag) {
    ASSERT_EQ(bcs_probe(0, tag, kContextWorld, BCS_NONBLOCKING, &flag, nullptr), BCS_OK) << tag;
    if (tag % 4 == 3) nm_->step();
  }
}

TEST_F(ApiTest, BlockingProbe) {
  attach(1);
  std::vector<uint8_t> msg(300, 2);
  bcs_request_t sreq;
  ASSERT_EQ(bcs_send(msg.data(), msg.size(), 0, 9, kContextWorld, BCS_NONBLOCKING, &sreq), BCS_OK);
  start_nm_when_rank_waits();
  bcs_msg_status_t st{};
  ASSERT_EQ(bcs_probe(BCS_ANY_SOURCE, BCS_ANY_TAG, kContextWorld, BCS_BLOCKING, nullptr, &st),
            BCS_OK);
  EXPECT_EQ(st.tag, 9);
  EXPECT_EQ(st.bytes, 300u);
  std::vector<uint8_t> in(st.bytes);
  ASSERT_EQ(bcs_recv(in.data(), in.size(), st.source, st.tag, kContextWorld, BCS_BLOCKING,
                     nullptr, nullptr),
            BCS_OK);
  EXPECT_EQ(in, msg);
  EXPECT_EQ(bcs_test(&sreq, BCS_BLOCKING, nullptr, nullptr), BCS_OK);
}

TEST_F(ApiTest, BarrierDescriptorsCountPerContext) {
  attach(2);
  start_nm_when_rank_waits();
  ASSERT_EQ(bcs_barrier(kContextWorld + 1, BCS_BLOCKING, nullptr), BCS_OK);
  ASSERT_EQ(bcs_barrier(kContextWorld + 1, BCS_BLOCKING, nullptr), BCS_OK);
  ASSERT_EQ(bcs_barrier(kContextWorld + 5, BCS_BLOCKING, nullptr), BCS_OK);
  // Back on the first context: its count goes on (the last context's
  // counter is cached; switching must not restart or share it).
  ASSERT_EQ(bcs_barrier(kContextWorld + 1, BCS_BLOCKING, nullptr), BCS_OK);
  nm_->stop();
  // A one-rank context completes at once and posts nothing.
  const uint64_t head = posted();
  bcs_request_t req;
  ASSERT_EQ(bcs_barrier(kContextSelf + 1, BCS_NONBLOCKING, &req), BCS_OK);
  EXPECT_EQ(posted(), head);
  int flag = 0;
  ASSERT_EQ(bcs_test(&req, BCS_NONBLOCKING, &flag, nullptr), BCS_OK);
  EXPECT_EQ(flag, 1);

  auto seen = nm_->seen();
  ASSERT_EQ(seen.size(), 4u);
  EXPECT_EQ(seen[0].kind, DescKind::coll);
  EXPECT_EQ(seen[0].context, kContextWorld + 1);
  EXPECT_EQ(seen[0].seq, 1u);
  EXPECT_EQ(seen[1].seq, 2u);
  EXPECT_EQ(seen[2].context, kContextWorld + 5);
  EXPECT_EQ(seen[2].seq, 1u);
  EXPECT_EQ(seen[3].context, kContextWorld + 1);
  EXPECT_EQ(seen[3].seq, 3u);
}

// kNmAsymmetricFence: the node manager pays for the ordering (membarrier)
// when it raises kNmParked, and a post, which then has no fence of its own,
// still reads the flag and rings. Without the flag, the rank fences itself
// and rings the same way.
TEST_F(ApiTest, APostRingsAParkedNodeWithOrWithoutTheNodeManagersBarrier) {
  for (const bool asymmetric : {true, false}) {
    SCOPED_TRACE(asymmetric ? "asymmetric" : "fenced");
    if (asymmetric && !segment_membarrier_supported()) continue;  // the kernel has none
    seg_ = std::make_unique<FakeSegment>(2, 1, 64, 64);
    SegmentHeader* h = seg_->header();
    h->nm_flags.store(asymmetric ? kNmAsymmetricFence : 0);
    seg_->export_env(0, 0);
    ASSERT_EQ(bcs_init(), BCS_OK);
    h->nm_flags.store(h->nm_flags.load() | kNmParked);
    if (asymmetric) {
      ASSERT_TRUE(segment_membarrier());
    }
    const uint32_t bell = h->bell.load();
    bcs_request_t req;
    ASSERT_EQ(bcs_barrier(kContextWorld + 1, BCS_NONBLOCKING, &req), BCS_OK);
    EXPECT_NE(h->bell.load(), bell) << "a post to a parked node did not ring";
    // Not parked: a post rings nothing.
    h->nm_flags.store(h->nm_flags.load() & ~kNmParked);
    const uint32_t quiet = h->bell.load();
    bcs_request_t req2;
    ASSERT_EQ(bcs_barrier(kContextWorld + 1, BCS_NONBLOCKING, &req2), BCS_OK);
    EXPECT_EQ(h->bell.load(), quiet);
    ASSERT_EQ(bcs_finalize(), BCS_OK);
    seg_.reset();
    clear_env();
  }
}

// On a lease (kNmBellOnPost) the post that makes a collective's local
// members all posted rings: each rank publishes the last collective it
// posted (RankControl::coll_posted), and reads its local peers' words.
TEST_F(ApiTest, TheLastLocalPostOfACollectiveRingsOnALease) {
  // Ranks 0 and 1 on this node, rank 2 elsewhere; we are rank 0.
  seg_ = std::make_unique<FakeSegment>(3, 2, 64, 64);
  SegmentHeader* h = seg_->header();
  RankControl* peer = seg_->view(1).ctl;
  RankControl* self = seg_->view(0).ctl;
  seg_->export_env(0, 0);
  ASSERT_EQ(bcs_init(), BCS_OK);
  const int32_t world = kContextWorld + 1;
  auto rings = [&](bool lease) {
    h->nm_flags.store(lease ? kNmBellOnPost : 0);
    const uint32_t bell = h->bell.load();
    bcs_request_t req;
    EXPECT_EQ(bcs_barrier(world, BCS_NONBLOCKING, &req), BCS_OK);
    return h->bell.load() != bell;
  };
  EXPECT_FALSE(rings(true)) << "rank 1 has not posted barrier 1";
  EXPECT_EQ(self->coll_posted.load(), segment_coll_word(world, 1));
  peer->coll_posted.store(segment_coll_word(world, 2));
  EXPECT_TRUE(rings(true)) << "rank 1 posted barrier 2 already";
  EXPECT_FALSE(rings(false)) << "not on a lease";  // barrier 3
  EXPECT_FALSE(rings(true)) << "rank 1 is at barrier 2, this is barrier 4";
  peer->coll_posted.store(segment_coll_word(world + 4, 9));
  EXPECT_FALSE(rings(true)) << "rank 1's last collective is on another context";
  peer->coll_posted.store(segment_coll_word(world, 9));
  EXPECT_TRUE(rings(true)) << "rank 1 is ahead";  // barrier 6
  EXPECT_EQ(self->coll_posted.load(), segment_coll_word(world, 6));
  // A communicator of ranks 0 and 2: no other member here, every post is
  // the last local one.
  const int32_t members[] = {0, 2};
  ASSERT_EQ(bcs_comm_register(kContextWorld + 9, 2, members), BCS_OK);
  h->nm_flags.store(kNmBellOnPost);
  const uint32_t bell = h->bell.load();
  bcs_request_t req;
  ASSERT_EQ(bcs_barrier(kContextWorld + 9, BCS_NONBLOCKING, &req), BCS_OK);
  EXPECT_NE(h->bell.load(), bell);
  h->nm_flags.store(0);
  ASSERT_EQ(bcs_finalize(), BCS_OK);
  seg_.reset();
  clear_env();
}

TEST_F(ApiTest, ArgumentErrorsPostNothing) {
  attach(2);
  int v = 0;
  bcs_request_t r;
  EXPECT_EQ(bcs_send(&v, sizeof v, 2, 0, kContextWorld, BCS_NONBLOCKING, &r), BCS_ERR_ARG);
  EXPECT_EQ(bcs_send(&v, sizeof v, -1, 0, kContextWorld, BCS_NONBLOCKING, &r), BCS_ERR_ARG);
  EXPECT_EQ(bcs_send(&v, sizeof v, 1, -1, kContextWorld, BCS_NONBLOCKING, &r), BCS_ERR_ARG);
  EXPECT_EQ(bcs_send(nullptr, 4, 1, 0, kContextWorld, BCS_NONBLOCKING, &r), BCS_ERR_ARG);
  EXPECT_EQ(bcs_send(&v, sizeof v, 1, 0, kContextWorld, BCS_NONBLOCKING, nullptr), BCS_ERR_ARG);
  EXPECT_EQ(bcs_recv(&v, sizeof v, 5, 0, kContextWorld, BCS_NONBLOCKING, &r, nullptr), BCS_ERR_ARG);
  r = 12345;
  EXPECT_EQ(bcs_test(&r, BCS_NONBLOCKING, nullptr, nullptr), BCS_ERR_ARG);
  r = 3;  // in range but free
  EXPECT_EQ(bcs_test(&r, BCS_NONBLOCKING, nullptr, nullptr), BCS_ERR_ARG);
  EXPECT_EQ(posted(), 0u);
  // A NULL request is complete with an empty status.
  r = BCS_REQUEST_NULL;
  int flag = 0;
  bcs_msg_status_t st{1, 2, 3, 4, 5, 6};
  EXPECT_EQ(bcs_test(&r, BCS_BLOCKING, &flag, &st), BCS_OK);
  EXPECT_EQ(flag, 1);
  EXPECT_EQ(st.source, BCS_ANY_SOURCE);
  EXPECT_EQ(st.bytes, 0u);
}

TEST_F(ApiTest, AbortRecordsTheCodeInTheSegmentAndExits) {
  attach(1);
  // The death test's child shares the MAP_SHARED segment with this process.
  EXPECT_EXIT(bcs_abort(7), ::testing::ExitedWithCode(7), "");
  EXPECT_EQ(view_.ctl->aborted.load(), 1u);
  EXPECT_EQ(view_.ctl->abort_code.load(), 7);
  // Exit status is the low byte; a code whose low byte is 0 still fails.
  EXPECT_EXIT(bcs_abort(256), ::testing::ExitedWithCode(1), "");
  EXPECT_EQ(view_.ctl->abort_code.load(), 256);
}

}  // namespace
}  // namespace bcs::apitest
