// libmpi communicators in singleton mode (a one-member world): making,
// comparing, naming and freeing communicators, using them for everything
// point-to-point and collective that needs no runtime, error handlers per
// communicator, and the error classes of every invalid argument.
// Multi-rank behaviour is covered by tests/programs/comm_basic.c and
// comm_groups.c.
#include <mpi.h>

#include <cstdlib>
#include <deque>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace {

class Comm : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    int init = 0;
    MPI_Initialized(&init);
    if (!init) {
      unsetenv("BCS_SEGMENT_FD");
      unsetenv("BCS_NODE");
      ASSERT_EQ(MPI_Init(nullptr, nullptr), MPI_SUCCESS);
    }
  }
  void SetUp() override {
    ASSERT_EQ(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN), MPI_SUCCESS);
    ASSERT_EQ(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN), MPI_SUCCESS);
  }
  void TearDown() override {
    for (MPI_Comm& c : made_) {
      if (c != MPI_COMM_NULL) {
        EXPECT_EQ(MPI_Comm_free(&c), MPI_SUCCESS);
      }
    }
  }
  // A communicator freed at the end of the test.
  MPI_Comm& keep(MPI_Comm c) {
    made_.push_back(c);
    return made_.back();
  }
  std::deque<MPI_Comm> made_;  // references stay valid as it grows
};

void expect_one_member(MPI_Comm c) {
  int size = -1, rank = -1;
  ASSERT_EQ(MPI_Comm_size(c, &size), MPI_SUCCESS);
  ASSERT_EQ(MPI_Comm_rank(c, &rank), MPI_SUCCESS);
  EXPECT_EQ(size, 1);
  EXPECT_EQ(rank, 0);
}

// Every collective and point-to-point call that works without a runtime.
void expect_usable(MPI_Comm c) {
  expect_one_member(c);
  int v[4] = {1, 2, 3, 4}, r[4] = {0, 0, 0, 0};
  EXPECT_EQ(MPI_Barrier(c), MPI_SUCCESS);
  EXPECT_EQ(MPI_Bcast(v, 4, MPI_INT, 0, c), MPI_SUCCESS);
  EXPECT_EQ(MPI_Allreduce(v, r, 4, MPI_INT, MPI_SUM, c), MPI_SUCCESS);
  EXPECT_EQ(r[3], 4);
  r[0] = 0;
  EXPECT_EQ(MPI_Gather(v + 1, 1, MPI_INT, r, 1, MPI_INT, 0, c), MPI_SUCCESS);
  EXPECT_EQ(r[0], 2);
  EXPECT_EQ(MPI_Alltoall(v + 2, 1, MPI_INT, r, 1, MPI_INT, c), MPI_SUCCESS);
  EXPECT_EQ(r[0], 3);
  MPI_Request req = MPI_REQUEST_NULL;
  EXPECT_EQ(MPI_Ibarrier(c, &req), MPI_SUCCESS);
  EXPECT_EQ(MPI_Wait(&req, MPI_STATUS_IGNORE), MPI_SUCCESS);
  EXPECT_EQ(MPI_Send(v, 1, MPI_INT, MPI_PROC_NULL, 0, c), MPI_SUCCESS);
  MPI_Status st{};
  EXPECT_EQ(MPI_Recv(r, 1, MPI_INT, MPI_PROC_NULL, 0, c, &st), MPI_SUCCESS);
  EXPECT_EQ(st.MPI_SOURCE, MPI_PROC_NULL);
  // A real peer needs the runtime; a bad rank is a bad rank.
  int eh;
  ASSERT_EQ(MPI_Comm_get_errhandler(c, &eh), MPI_SUCCESS);
  if (eh == MPI_ERRORS_RETURN) {
    EXPECT_EQ(MPI_Send(v, 1, MPI_INT, 0, 0, c), MPI_ERR_OTHER);
    EXPECT_EQ(MPI_Send(v, 1, MPI_INT, 1, 0, c), MPI_ERR_RANK);
    EXPECT_EQ(MPI_Bcast(v, 1, MPI_INT, 1, c), MPI_ERR_ROOT);
  }
}

TEST_F(Comm, DupIsCongruentAndUsable) {
  MPI_Comm& d = keep(MPI_COMM_NULL);
  ASSERT_EQ(MPI_Comm_dup(MPI_COMM_WORLD, &d), MPI_SUCCESS);
  ASSERT_NE(d, MPI_COMM_NULL);
  EXPECT_NE(d, MPI_COMM_WORLD);
  EXPECT_NE(d, MPI_COMM_SELF);
  expect_usable(d);
  int cmp = -1;
  EXPECT_EQ(MPI_Comm_compare(d, MPI_COMM_WORLD, &cmp), MPI_SUCCESS);
  EXPECT_EQ(cmp, MPI_CONGRUENT);
  EXPECT_EQ(MPI_Comm_compare(d, d, &cmp), MPI_SUCCESS);
  EXPECT_EQ(cmp, MPI_IDENT);
  EXPECT_EQ(MPI_Comm_compare(MPI_COMM_WORLD, MPI_COMM_SELF, &cmp), MPI_SUCCESS);
  EXPECT_EQ(cmp, MPI_CONGRUENT);  // both are {this process}
  // A dup of a dup, with info, and a non-blocking one (complete at once).
  MPI_Comm& d2 = keep(MPI_COMM_NULL);
  ASSERT_EQ(MPI_Comm_dup_with_info(d, MPI_INFO_NULL, &d2), MPI_SUCCESS);
  expect_usable(d2);
  MPI_Comm& d3 = keep(MPI_COMM_NULL);
  MPI_Request req = MPI_REQUEST_NULL;
  ASSERT_EQ(MPI_Comm_idup(d2, &d3, &req), MPI_SUCCESS);
  int flag = 0;
  ASSERT_EQ(MPI_Test(&req, &flag, MPI_STATUS_IGNORE), MPI_SUCCESS);
  EXPECT_EQ(flag, 1);
  EXPECT_EQ(req, MPI_REQUEST_NULL);
  expect_usable(d3);
  EXPECT_NE(d3, d2);
}

TEST_F(Comm, SplitAndSplitType) {
  MPI_Comm& s = keep(MPI_COMM_NULL);
  ASSERT_EQ(MPI_Comm_split(MPI_COMM_WORLD, 5, -3, &s), MPI_SUCCESS);
  expect_usable(s);
  MPI_Comm none = MPI_COMM_WORLD;
  ASSERT_EQ(MPI_Comm_split(MPI_COMM_WORLD, MPI_UNDEFINED, 0, &none), MPI_SUCCESS);
  EXPECT_EQ(none, MPI_COMM_NULL);
  EXPECT_EQ(MPI_Comm_split(MPI_COMM_WORLD, -7, 0, &none), MPI_ERR_ARG);
  MPI_Comm& t = keep(MPI_COMM_NULL);
  ASSERT_EQ(MPI_Comm_split_type(s, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &t), MPI_SUCCESS);
  expect_usable(t);
  none = MPI_COMM_WORLD;
  ASSERT_EQ(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_UNDEFINED, 0, MPI_INFO_NULL, &none),
            MPI_SUCCESS);
  EXPECT_EQ(none, MPI_COMM_NULL);
  EXPECT_EQ(MPI_Comm_split_type(MPI_COMM_WORLD, 99, 0, MPI_INFO_NULL, &none), MPI_ERR_ARG);
  // Splitting MPI_COMM_SELF works too.
  MPI_Comm& u = keep(MPI_COMM_NULL);
  ASSERT_EQ(MPI_Comm_split(MPI_COMM_SELF, 0, 0, &u), MPI_SUCCESS);
  expect_usable(u);
}

TEST_F(Comm, CreateAndCreateGroup) {
  MPI_Group world, self;
  ASSERT_EQ(MPI_Comm_group(MPI_COMM_WORLD, &world), MPI_SUCCESS);
  ASSERT_EQ(MPI_Comm_group(MPI_COMM_SELF, &self), MPI_SUCCESS);
  MPI_Comm& c = keep(MPI_COMM_NULL);
  ASSERT_EQ(MPI_Comm_create(MPI_COMM_WORLD, world, &c), MPI_SUCCESS);
  expect_usable(c);
  int cmp = -1;
  EXPECT_EQ(MPI_Comm_compare(c, MPI_COMM_WORLD, &cmp), MPI_SUCCESS);
  EXPECT_EQ(cmp, MPI_CONGRUENT);
  MPI_Comm none = MPI_COMM_WORLD;
  ASSERT_EQ(MPI_Comm_create(MPI_COMM_WORLD, MPI_GROUP_EMPTY, &none), MPI_SUCCESS);
  EXPECT_EQ(none, MPI_COMM_NULL);
  MPI_Comm& g = keep(MPI_COMM_NULL);
  ASSERT_EQ(MPI_Comm_create_group(c, self, 12, &g), MPI_SUCCESS);
  expect_usable(g);
  none = MPI_COMM_WORLD;
  ASSERT_EQ(MPI_Comm_create_group(MPI_COMM_WORLD, MPI_GROUP_EMPTY, 0, &none), MPI_SUCCESS);
  EXPECT_EQ(none, MPI_COMM_NULL);
  // Errors: bad group, bad tag, group not a subgroup is impossible here.
  EXPECT_EQ(MPI_Comm_create(MPI_COMM_WORLD, MPI_GROUP_NULL, &none), MPI_ERR_GROUP);
  EXPECT_EQ(MPI_Comm_create_group(MPI_COMM_WORLD, 12345, 0, &none), MPI_ERR_GROUP);
  EXPECT_EQ(MPI_Comm_create_group(MPI_COMM_WORLD, world, -1, &none), MPI_ERR_TAG);
  EXPECT_EQ(MPI_Comm_create(MPI_COMM_NULL, world, &none), MPI_ERR_COMM);
  EXPECT_EQ(MPI_Comm_create(MPI_COMM_WORLD, world, nullptr), MPI_ERR_ARG);
  EXPECT_EQ(MPI_Group_free(&world), MPI_SUCCESS);
  EXPECT_EQ(MPI_Group_free(&self), MPI_SUCCESS);
}

TEST_F(Comm, Free) {
  MPI_Comm d = MPI_COMM_NULL;
  ASSERT_EQ(MPI_Comm_dup(MPI_COMM_WORLD, &d), MPI_SUCCESS);
  const MPI_Comm stale = d;
  ASSERT_EQ(MPI_Comm_free(&d), MPI_SUCCESS);
  EXPECT_EQ(d, MPI_COMM_NULL);
  // The freed handle is no communicator any more (handles are not reused).
  int n;
  EXPECT_EQ(MPI_Comm_size(stale, &n), MPI_ERR_COMM);
  EXPECT_EQ(MPI_Barrier(stale), MPI_ERR_COMM);
  MPI_Comm x = stale;
  EXPECT_EQ(MPI_Comm_free(&x), MPI_ERR_COMM);
  x = MPI_COMM_NULL;
  EXPECT_EQ(MPI_Comm_free(&x), MPI_ERR_COMM);
  EXPECT_EQ(MPI_Comm_free(nullptr), MPI_ERR_ARG);
  x = MPI_COMM_WORLD;
  EXPECT_EQ(MPI_Comm_free(&x), MPI_ERR_COMM);
  EXPECT_EQ(x, MPI_COMM_WORLD);
  x = MPI_COMM_SELF;
  EXPECT_EQ(MPI_Comm_free(&x), MPI_ERR_COMM);
  // Many communicators: dup and free in a loop.
  for (int i = 0; i < 200; ++i) {
    MPI_Comm t;
    ASSERT_EQ(MPI_Comm_dup(i % 2 ? MPI_COMM_SELF : MPI_COMM_WORLD, &t), MPI_SUCCESS);
    int v = i, s = 0;
    ASSERT_EQ(MPI_Allreduce(&v, &s, 1, MPI_INT, MPI_SUM, t), MPI_SUCCESS);
    EXPECT_EQ(s, i);
    ASSERT_EQ(MPI_Comm_free(&t), MPI_SUCCESS);
  }
}

TEST_F(Comm, PendingRequestSurvivesFree) {
  MPI_Comm d;
  ASSERT_EQ(MPI_Comm_dup(MPI_COMM_WORLD, &d), MPI_SUCCESS);
  int v = 3;
  MPI_Request req;
  ASSERT_EQ(MPI_Ibcast(&v, 1, MPI_INT, 0, d, &req), MPI_SUCCESS);
  MPI_Request r2;
  ASSERT_EQ(MPI_Irecv(&v, 1, MPI_INT, MPI_PROC_NULL, 0, d, &r2), MPI_SUCCESS);
  ASSERT_EQ(MPI_Comm_free(&d), MPI_SUCCESS);
  MPI_Status st{};
  EXPECT_EQ(MPI_Wait(&req, MPI_STATUS_IGNORE), MPI_SUCCESS);
  EXPECT_EQ(MPI_Wait(&r2, &st), MPI_SUCCESS);
  EXPECT_EQ(st.MPI_SOURCE, MPI_PROC_NULL);
}

TEST_F(Comm, InvalidArguments) {
  MPI_Comm out;
  MPI_Request req;
  for (MPI_Comm bad : {MPI_COMM_NULL, static_cast<MPI_Comm>(0x44001234), static_cast<MPI_Comm>(7)}) {
    EXPECT_EQ(MPI_Comm_dup(bad, &out), MPI_ERR_COMM);
    EXPECT_EQ(MPI_Comm_idup(bad, &out, &req), MPI_ERR_COMM);
    EXPECT_EQ(MPI_Comm_split(bad, 0, 0, &out), MPI_ERR_COMM);
    EXPECT_EQ(MPI_Comm_split_type(bad, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &out), MPI_ERR_COMM);
    int r;
    EXPECT_EQ(MPI_Comm_compare(bad, MPI_COMM_WORLD, &r), MPI_ERR_COMM);
    EXPECT_EQ(MPI_Comm_compare(MPI_COMM_WORLD, bad, &r), MPI_ERR_COMM);
    MPI_Group g;
    EXPECT_EQ(MPI_Comm_group(bad, &g), MPI_ERR_COMM);
    EXPECT_EQ(MPI_Comm_set_name(bad, "x"), MPI_ERR_COMM);
    EXPECT_EQ(MPI_Comm_test_inter(bad, &r), MPI_ERR_COMM);
  }
  EXPECT_EQ(MPI_Comm_dup(MPI_COMM_WORLD, nullptr), MPI_ERR_ARG);
  EXPECT_EQ(MPI_Comm_split(MPI_COMM_WORLD, 0, 0, nullptr), MPI_ERR_ARG);
  EXPECT_EQ(MPI_Comm_idup(MPI_COMM_WORLD, &out, nullptr), MPI_ERR_REQUEST);
  EXPECT_EQ(MPI_Comm_compare(MPI_COMM_WORLD, MPI_COMM_SELF, nullptr), MPI_ERR_ARG);
  EXPECT_EQ(MPI_Comm_group(MPI_COMM_WORLD, nullptr), MPI_ERR_ARG);
}

TEST_F(Comm, IntercommunicatorArgumentErrors) {
  // Intercommunicators work across processes (prog_intercomm); here only
  // what one process can check.
  int flag = -1, n = -1;
  EXPECT_EQ(MPI_Comm_test_inter(MPI_COMM_WORLD, &flag), MPI_SUCCESS);
  EXPECT_EQ(flag, 0);
  EXPECT_EQ(MPI_Comm_remote_size(MPI_COMM_WORLD, &n), MPI_ERR_COMM);
  MPI_Group g;
  EXPECT_EQ(MPI_Comm_remote_group(MPI_COMM_SELF, &g), MPI_ERR_COMM);
  MPI_Comm out = MPI_COMM_WORLD;
  EXPECT_EQ(MPI_Intercomm_merge(MPI_COMM_WORLD, 0, &out), MPI_ERR_COMM);
  EXPECT_EQ(MPI_Intercomm_create(MPI_COMM_WORLD, 1, MPI_COMM_WORLD, 0, 3, &out), MPI_ERR_RANK);
  EXPECT_EQ(MPI_Intercomm_create(MPI_COMM_WORLD, 0, MPI_COMM_WORLD, 0, -3, &out), MPI_ERR_TAG);
  // The only process is in both groups: not an intercommunicator.
  EXPECT_EQ(MPI_Intercomm_create(MPI_COMM_WORLD, 0, MPI_COMM_WORLD, 0, 3, &out), MPI_ERR_ARG);
  EXPECT_EQ(out, MPI_COMM_NULL);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
  EXPECT_EXIT(MPI_Intercomm_create(MPI_COMM_WORLD, 0, MPI_COMM_WORLD, 0, 3, &out),
              ::testing::ExitedWithCode(MPI_ERR_ARG),
              "MPI_Intercomm_create: MPI_ERR_ARG: the remote leader .* is in the local group");
}

TEST_F(Comm, Names) {
  char name[MPI_MAX_OBJECT_NAME];
  int len = -1;
  ASSERT_EQ(MPI_Comm_get_name(MPI_COMM_WORLD, name, &len), MPI_SUCCESS);
  EXPECT_STREQ(name, "MPI_COMM_WORLD");
  EXPECT_EQ(len, 14);
  ASSERT_EQ(MPI_Comm_get_name(MPI_COMM_SELF, name, &len), MPI_SUCCESS);
  EXPECT_STREQ(name, "MPI_COMM_SELF");
  MPI_Comm& d = keep(MPI_COMM_NULL);
  ASSERT_EQ(MPI_Comm_dup(MPI_COMM_WORLD, &d), MPI_SUCCESS);
  ASSERT_EQ(MPI_Comm_get_name(d, name, &len), MPI_SUCCESS);
  EXPECT_STREQ(name, "");
  EXPECT_EQ(len, 0);
  ASSERT_EQ(MPI_Comm_set_name(d, "solver"), MPI_SUCCESS);
  ASSERT_EQ(MPI_Comm_get_name(d, name, &len), MPI_SUCCESS);
  EXPECT_STREQ(name, "solver");
  EXPECT_EQ(len, 6);
  // A dup has no name; a long name is cut to MPI_MAX_OBJECT_NAME - 1.
  MPI_Comm& d2 = keep(MPI_COMM_NULL);
  ASSERT_EQ(MPI_Comm_dup(d, &d2), MPI_SUCCESS);
  ASSERT_EQ(MPI_Comm_get_name(d2, name, &len), MPI_SUCCESS);
  EXPECT_EQ(len, 0);
  const std::string longer(300, 'x');
  ASSERT_EQ(MPI_Comm_set_name(d2, longer.c_str()), MPI_SUCCESS);
  ASSERT_EQ(MPI_Comm_get_name(d2, name, &len), MPI_SUCCESS);
  EXPECT_EQ(len, MPI_MAX_OBJECT_NAME - 1);
  EXPECT_EQ(std::string(name), longer.substr(0, MPI_MAX_OBJECT_NAME - 1));
  // WORLD can be renamed.
  ASSERT_EQ(MPI_Comm_set_name(MPI_COMM_WORLD, "everyone"), MPI_SUCCESS);
  ASSERT_EQ(MPI_Comm_get_name(MPI_COMM_WORLD, name, &len), MPI_SUCCESS);
  EXPECT_STREQ(name, "everyone");
  ASSERT_EQ(MPI_Comm_set_name(MPI_COMM_WORLD, "MPI_COMM_WORLD"), MPI_SUCCESS);
  EXPECT_EQ(MPI_Comm_set_name(d, nullptr), MPI_ERR_ARG);
  EXPECT_EQ(MPI_Comm_get_name(d, nullptr, &len), MPI_ERR_ARG);
  EXPECT_EQ(MPI_Comm_get_name(d, name, nullptr), MPI_ERR_ARG);
}

TEST_F(Comm, ErrorHandlersArePerCommunicatorAndInherited) {
  // WORLD returns errors (SetUp): a dup inherits that.
  MPI_Comm& d = keep(MPI_COMM_NULL);
  ASSERT_EQ(MPI_Comm_dup(MPI_COMM_WORLD, &d), MPI_SUCCESS);
  MPI_Errhandler h = MPI_ERRHANDLER_NULL;
  ASSERT_EQ(MPI_Comm_get_errhandler(d, &h), MPI_SUCCESS);
  EXPECT_EQ(h, MPI_ERRORS_RETURN);
  int x = 0;
  EXPECT_EQ(MPI_Send(&x, 1, MPI_INT, 4, 0, d), MPI_ERR_RANK);
  // Changing the dup leaves WORLD alone, and the other way round.
  ASSERT_EQ(MPI_Comm_set_errhandler(d, MPI_ERRORS_ARE_FATAL), MPI_SUCCESS);
  ASSERT_EQ(MPI_Comm_get_errhandler(MPI_COMM_WORLD, &h), MPI_SUCCESS);
  EXPECT_EQ(h, MPI_ERRORS_RETURN);
  EXPECT_EQ(MPI_Send(&x, 1, MPI_INT, 4, 0, MPI_COMM_WORLD), MPI_ERR_RANK);
  EXPECT_EXIT(MPI_Send(&x, 1, MPI_INT, 4, 0, d), ::testing::ExitedWithCode(MPI_ERR_RANK),
              "bcs: rank 0: MPI_Send: MPI_ERR_RANK: ");
  // A split of the fatal dup is fatal too.
  MPI_Comm& s = keep(MPI_COMM_NULL);
  ASSERT_EQ(MPI_Comm_split(d, 0, 0, &s), MPI_SUCCESS);
  ASSERT_EQ(MPI_Comm_get_errhandler(s, &h), MPI_SUCCESS);
  EXPECT_EQ(h, MPI_ERRORS_ARE_FATAL);
  EXPECT_EXIT(MPI_Bcast(&x, 1, MPI_INT, 2, s), ::testing::ExitedWithCode(MPI_ERR_ROOT),
              "MPI_Bcast: MPI_ERR_ROOT: root 2 out of range");
  // Errors of a communicator-creating call go through the parent's handler.
  EXPECT_EXIT(MPI_Comm_split(d, -5, 0, &s), ::testing::ExitedWithCode(MPI_ERR_ARG),
              "MPI_Comm_split: MPI_ERR_ARG: invalid color -5");
  EXPECT_EQ(MPI_Comm_set_errhandler(d, MPI_ERRORS_RETURN), MPI_SUCCESS);
}

TEST_F(Comm, AbortOnAnyCommunicator) {
  MPI_Comm& d = keep(MPI_COMM_NULL);
  ASSERT_EQ(MPI_Comm_split(MPI_COMM_WORLD, 1, 0, &d), MPI_SUCCESS);
  EXPECT_EXIT(MPI_Abort(d, 9), ::testing::ExitedWithCode(9), "MPI_Abort called with error code 9");
}

}  // namespace
