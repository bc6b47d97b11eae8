// libmpi communicator attributes in singleton mode: keyvals, set/get/
// delete, the predefined attributes, copy callbacks on MPI_Comm_dup and
// delete callbacks on MPI_Comm_free / MPI_Comm_delete_attr / replacement,
// their order, failing callbacks, and the MPI-1 names.
#include <mpi.h>

#include <cstdlib>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "singleton.h"

namespace {

class Attr : public SingletonMpi {
 protected:
  void SetUp() override {
    SingletonMpi::SetUp();
    ASSERT_EQ(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN), MPI_SUCCESS);
    log().clear();
  }
 public:
  // What the callbacks did, in order: "copy:<tag>", "delete:<tag>".
  static std::vector<std::string>& log() {
    static std::vector<std::string> l;
    return l;
  }
};

// extra_state of the logging callbacks: a tag and what to return.
struct Extra {
  const char* tag;
  int copy_result = MPI_SUCCESS;
  int delete_result = MPI_SUCCESS;
};

int log_copy(MPI_Comm, int, void* extra, void* in, void* out, int* flag) {
  auto* x = static_cast<Extra*>(extra);
  Attr::log().push_back(std::string("copy:") + x->tag);
  if (x->copy_result != MPI_SUCCESS) return x->copy_result;
  *static_cast<void**>(out) = static_cast<char*>(in) + 1;
  *flag = 1;
  return MPI_SUCCESS;
}

int log_delete(MPI_Comm, int, void*, void* extra) {
  auto* x = static_cast<Extra*>(extra);
  Attr::log().push_back(std::string("delete:") + x->tag);
  return x->delete_result;
}

void* get(MPI_Comm c, int kv, int* flag) {
  void* v = nullptr;
  EXPECT_EQ(MPI_Comm_get_attr(c, kv, &v, flag), MPI_SUCCESS);
  return v;
}

TEST_F(Attr, Predefined) {
  struct {
    int key;
    int value;
  } cases[] = {{MPI_TAG_UB, (1 << 30) - 1}, {MPI_HOST, MPI_PROC_NULL}, {MPI_IO, MPI_ANY_SOURCE},
               {MPI_WTIME_IS_GLOBAL, 0},    {MPI_UNIVERSE_SIZE, 1},     {MPI_APPNUM, 0}};
  MPI_Comm d;
  ASSERT_EQ(MPI_Comm_dup(MPI_COMM_WORLD, &d), MPI_SUCCESS);
  for (MPI_Comm c : {MPI_COMM_WORLD, MPI_COMM_SELF, d})
    for (const auto& k : cases) {
      int flag = 0;
      void* v = get(c, k.key, &flag);
      ASSERT_EQ(flag, 1) << std::hex << k.key;
      EXPECT_EQ(*static_cast<int*>(v), k.value) << std::hex << k.key;
      // Read-only.
      EXPECT_EQ(MPI_Comm_set_attr(c, k.key, nullptr), MPI_ERR_KEYVAL);
      EXPECT_EQ(MPI_Comm_delete_attr(c, k.key), MPI_ERR_KEYVAL);
      int kv = k.key;
      EXPECT_EQ(MPI_Comm_free_keyval(&kv), MPI_ERR_KEYVAL);
    }
  ASSERT_EQ(MPI_Comm_free(&d), MPI_SUCCESS);
}

TEST_F(Attr, SetGetDelete) {
  Extra x{"a"};
  int kv = MPI_KEYVAL_INVALID;
  ASSERT_EQ(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, log_delete, &kv, &x), MPI_SUCCESS);
  EXPECT_NE(kv, MPI_KEYVAL_INVALID);
  int flag = -1;
  get(MPI_COMM_WORLD, kv, &flag);
  EXPECT_EQ(flag, 0);
  static char v1, v2;
  ASSERT_EQ(MPI_Comm_set_attr(MPI_COMM_WORLD, kv, &v1), MPI_SUCCESS);
  EXPECT_EQ(get(MPI_COMM_WORLD, kv, &flag), &v1);
  EXPECT_EQ(flag, 1);
  get(MPI_COMM_SELF, kv, &flag);  // per communicator
  EXPECT_EQ(flag, 0);
  // Replacing deletes the old value first.
  ASSERT_EQ(MPI_Comm_set_attr(MPI_COMM_WORLD, kv, &v2), MPI_SUCCESS);
  EXPECT_EQ(get(MPI_COMM_WORLD, kv, &flag), &v2);
  EXPECT_EQ(log(), std::vector<std::string>{"delete:a"});
  ASSERT_EQ(MPI_Comm_delete_attr(MPI_COMM_WORLD, kv), MPI_SUCCESS);
  get(MPI_COMM_WORLD, kv, &flag);
  EXPECT_EQ(flag, 0);
  EXPECT_EQ(log().size(), 2u);
  // Deleting what is not there does nothing.
  EXPECT_EQ(MPI_Comm_delete_attr(MPI_COMM_WORLD, kv), MPI_SUCCESS);
  EXPECT_EQ(log().size(), 2u);
  ASSERT_EQ(MPI_Comm_free_keyval(&kv), MPI_SUCCESS);
  EXPECT_EQ(kv, MPI_KEYVAL_INVALID);
}

TEST_F(Attr, DupCopiesAndFreeDeletesInReverseOrder) {
  Extra a{"a"}, b{"b"}, c{"c"};
  int ka, kb, kc, kd;
  ASSERT_EQ(MPI_Comm_create_keyval(log_copy, log_delete, &ka, &a), MPI_SUCCESS);
  ASSERT_EQ(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, log_delete, &kb, &b), MPI_SUCCESS);
  ASSERT_EQ(MPI_Comm_create_keyval(MPI_COMM_DUP_FN, log_delete, &kc, &c), MPI_SUCCESS);
  ASSERT_EQ(MPI_Comm_create_keyval(MPI_COMM_DUP_FN, MPI_COMM_NULL_DELETE_FN, &kd, nullptr),
            MPI_SUCCESS);
  MPI_Comm base, copy;
  ASSERT_EQ(MPI_Comm_dup(MPI_COMM_SELF, &base), MPI_SUCCESS);
  static char va, vb, vc, vd;
  // Set in the order c, a, b, d.
  ASSERT_EQ(MPI_Comm_set_attr(base, kc, &vc), MPI_SUCCESS);
  ASSERT_EQ(MPI_Comm_set_attr(base, ka, &va), MPI_SUCCESS);
  ASSERT_EQ(MPI_Comm_set_attr(base, kb, &vb), MPI_SUCCESS);
  ASSERT_EQ(MPI_Comm_set_attr(base, kd, &vd), MPI_SUCCESS);
  ASSERT_EQ(MPI_Comm_dup(base, &copy), MPI_SUCCESS);
  EXPECT_EQ(log(), std::vector<std::string>{"copy:a"});
  int flag = 0;
  EXPECT_EQ(get(copy, ka, &flag), &va + 1);
  EXPECT_EQ(flag, 1);
  get(copy, kb, &flag);
  EXPECT_EQ(flag, 0);  // MPI_COMM_NULL_COPY_FN
  EXPECT_EQ(get(copy, kc, &flag), &vc);
  EXPECT_EQ(get(copy, kd, &flag), &vd);
  log().clear();
  // A freed keyval still has its callbacks run on the attributes using it.
  ASSERT_EQ(MPI_Comm_free_keyval(&kc), MPI_SUCCESS);
  EXPECT_EQ(MPI_Comm_get_attr(copy, kc, &flag, &flag), MPI_ERR_KEYVAL);
  ASSERT_EQ(MPI_Comm_free(&copy), MPI_SUCCESS);
  EXPECT_EQ(log(), (std::vector<std::string>{"delete:a", "delete:c"}));
  log().clear();
  ASSERT_EQ(MPI_Comm_free(&base), MPI_SUCCESS);
  EXPECT_EQ(log(), (std::vector<std::string>{"delete:b", "delete:a", "delete:c"}));
  for (int* k : {&ka, &kb, &kd}) ASSERT_EQ(MPI_Comm_free_keyval(k), MPI_SUCCESS);
}

TEST_F(Attr, FailingCallbacks) {
  Extra x{"x"};
  x.copy_result = MPI_ERR_OTHER;
  x.delete_result = MPI_ERR_ARG;
  int kv;
  ASSERT_EQ(MPI_Comm_create_keyval(log_copy, log_delete, &kv, &x), MPI_SUCCESS);
  MPI_Comm base, copy = MPI_COMM_WORLD;
  ASSERT_EQ(MPI_Comm_dup(MPI_COMM_WORLD, &base), MPI_SUCCESS);
  static char v;
  ASSERT_EQ(MPI_Comm_set_attr(base, kv, &v), MPI_SUCCESS);
  // A failing copy callback fails the dup.
  EXPECT_EQ(MPI_Comm_dup(base, &copy), MPI_ERR_OTHER);
  EXPECT_EQ(copy, MPI_COMM_NULL);
  // A failing delete callback fails delete_attr, replacement and free; the
  // attribute and the communicator stay.
  EXPECT_EQ(MPI_Comm_delete_attr(base, kv), MPI_ERR_ARG);
  EXPECT_EQ(MPI_Comm_set_attr(base, kv, nullptr), MPI_ERR_ARG);
  int flag = 0;
  EXPECT_EQ(get(base, kv, &flag), &v);
  EXPECT_EQ(MPI_Comm_free(&base), MPI_ERR_ARG);
  EXPECT_NE(base, MPI_COMM_NULL);
  int size = 0;
  EXPECT_EQ(MPI_Comm_size(base, &size), MPI_SUCCESS);
  x.delete_result = MPI_SUCCESS;
  EXPECT_EQ(MPI_Comm_free(&base), MPI_SUCCESS);
  EXPECT_EQ(MPI_Comm_free_keyval(&kv), MPI_SUCCESS);
}

TEST_F(Attr, InvalidKeyvals) {
  int flag;
  void* v;
  for (int bad : {MPI_KEYVAL_INVALID, 0, 12345, 0x24001000}) {
    EXPECT_EQ(MPI_Comm_get_attr(MPI_COMM_WORLD, bad, &v, &flag), MPI_ERR_KEYVAL) << bad;
    EXPECT_EQ(MPI_Comm_set_attr(MPI_COMM_WORLD, bad, nullptr), MPI_ERR_KEYVAL) << bad;
    EXPECT_EQ(MPI_Comm_delete_attr(MPI_COMM_WORLD, bad), MPI_ERR_KEYVAL) << bad;
    int k = bad;
    EXPECT_EQ(MPI_Comm_free_keyval(&k), MPI_ERR_KEYVAL) << bad;
  }
  int kv;
  ASSERT_EQ(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &kv, nullptr),
            MPI_SUCCESS);
  const int stale = kv;
  ASSERT_EQ(MPI_Comm_free_keyval(&kv), MPI_SUCCESS);
  EXPECT_EQ(MPI_Comm_set_attr(MPI_COMM_WORLD, stale, nullptr), MPI_ERR_KEYVAL);
  EXPECT_EQ(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, nullptr, nullptr),
            MPI_ERR_ARG);
  EXPECT_EQ(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, nullptr, &flag), MPI_ERR_ARG);
  EXPECT_EQ(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &v, nullptr), MPI_ERR_ARG);
  EXPECT_EQ(MPI_Comm_get_attr(MPI_COMM_NULL, MPI_TAG_UB, &v, &flag), MPI_ERR_COMM);
  EXPECT_EQ(MPI_Comm_set_attr(MPI_COMM_NULL, MPI_TAG_UB, &v), MPI_ERR_COMM);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
  EXPECT_EXIT(MPI_Comm_set_attr(MPI_COMM_WORLD, 12345, nullptr),
              ::testing::ExitedWithCode(MPI_ERR_KEYVAL),
              "MPI_Comm_set_attr: MPI_ERR_KEYVAL: invalid attribute key");
  int cls = -1;
  char s[MPI_MAX_ERROR_STRING];
  int len = 0;
  EXPECT_EQ(MPI_Error_class(MPI_ERR_KEYVAL, &cls), MPI_SUCCESS);
  EXPECT_EQ(cls, MPI_ERR_KEYVAL);
  EXPECT_EQ(MPI_Error_string(MPI_ERR_KEYVAL, s, &len), MPI_SUCCESS);
  EXPECT_EQ(std::string(s).find("MPI_ERR_KEYVAL"), 0u);
}

TEST_F(Attr, Mpi1Names) {
  Extra x{"old"};
  int kv;
  ASSERT_EQ(MPI_Keyval_create(MPI_DUP_FN, log_delete, &kv, &x), MPI_SUCCESS);
  static char v;
  ASSERT_EQ(MPI_Attr_put(MPI_COMM_SELF, kv, &v), MPI_SUCCESS);
  int flag = 0;
  void* got = nullptr;
  ASSERT_EQ(MPI_Attr_get(MPI_COMM_SELF, kv, &got, &flag), MPI_SUCCESS);
  EXPECT_EQ(flag, 1);
  EXPECT_EQ(got, &v);
  MPI_Comm d;
  ASSERT_EQ(MPI_Comm_dup(MPI_COMM_SELF, &d), MPI_SUCCESS);
  ASSERT_EQ(MPI_Attr_get(d, kv, &got, &flag), MPI_SUCCESS);
  EXPECT_EQ(got, &v);
  ASSERT_EQ(MPI_Attr_delete(d, kv), MPI_SUCCESS);
  ASSERT_EQ(MPI_Attr_delete(MPI_COMM_SELF, kv), MPI_SUCCESS);
  EXPECT_EQ(log(), (std::vector<std::string>{"delete:old", "delete:old"}));
  ASSERT_EQ(MPI_Comm_free(&d), MPI_SUCCESS);
  ASSERT_EQ(MPI_Keyval_free(&kv), MPI_SUCCESS);
  EXPECT_EQ(kv, MPI_KEYVAL_INVALID);
  int nkv;
  ASSERT_EQ(MPI_Keyval_create(MPI_NULL_COPY_FN, MPI_NULL_DELETE_FN, &nkv, nullptr), MPI_SUCCESS);
  ASSERT_EQ(MPI_Keyval_free(&nkv), MPI_SUCCESS);
}

// Datatype attributes (MPI_Type_create_keyval ...): the same rules, on any
// valid datatype; the callbacks get the datatype handle.
MPI_Datatype& deleted_on() {
  static MPI_Datatype t = MPI_DATATYPE_NULL;
  return t;
}

int type_delete(MPI_Datatype t, int, void*, void* extra) {
  deleted_on() = t;
  return log_delete(MPI_COMM_NULL, 0, nullptr, extra);
}

TEST_F(Attr, DatatypeAttributes) {
  Extra x{"type"};
  int kv;
  ASSERT_EQ(MPI_Type_create_keyval(MPI_TYPE_NULL_COPY_FN, type_delete, &kv, &x), MPI_SUCCESS);
  static char v1, v2;
  int flag = -1;
  void* got = nullptr;
  ASSERT_EQ(MPI_Type_get_attr(MPI_INT, kv, &got, &flag), MPI_SUCCESS);
  EXPECT_EQ(flag, 0);
  ASSERT_EQ(MPI_Type_set_attr(MPI_INT, kv, &v1), MPI_SUCCESS);
  ASSERT_EQ(MPI_Type_set_attr(MPI_DOUBLE, kv, &v2), MPI_SUCCESS);
  ASSERT_EQ(MPI_Type_get_attr(MPI_INT, kv, &got, &flag), MPI_SUCCESS);
  EXPECT_EQ(flag, 1);
  EXPECT_EQ(got, &v1);
  ASSERT_EQ(MPI_Type_get_attr(MPI_DOUBLE, kv, &got, &flag), MPI_SUCCESS);
  EXPECT_EQ(got, &v2);
  // Replacing runs the delete callback on the old value.
  ASSERT_EQ(MPI_Type_set_attr(MPI_INT, kv, &v2), MPI_SUCCESS);
  EXPECT_EQ(log(), (std::vector<std::string>{"delete:type"}));
  EXPECT_EQ(deleted_on(), MPI_INT);
  ASSERT_EQ(MPI_Type_delete_attr(MPI_DOUBLE, kv), MPI_SUCCESS);
  EXPECT_EQ(deleted_on(), MPI_DOUBLE);
  ASSERT_EQ(MPI_Type_get_attr(MPI_DOUBLE, kv, &got, &flag), MPI_SUCCESS);
  EXPECT_EQ(flag, 0);
  // Keyvals have a kind: a datatype key is no communicator key and back.
  int ckv;
  ASSERT_EQ(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &ckv, nullptr),
            MPI_SUCCESS);
  EXPECT_EQ(MPI_Comm_set_attr(MPI_COMM_SELF, kv, &v1), MPI_ERR_KEYVAL);
  EXPECT_EQ(MPI_Comm_get_attr(MPI_COMM_SELF, kv, &got, &flag), MPI_ERR_KEYVAL);
  EXPECT_EQ(MPI_Type_set_attr(MPI_INT, ckv, &v1), MPI_ERR_KEYVAL);
  EXPECT_EQ(MPI_Type_get_attr(MPI_INT, MPI_TAG_UB, &got, &flag), MPI_ERR_KEYVAL);
  EXPECT_EQ(MPI_Comm_free_keyval(&kv), MPI_ERR_KEYVAL);
  EXPECT_EQ(MPI_Type_free_keyval(&ckv), MPI_ERR_KEYVAL);
  ASSERT_EQ(MPI_Comm_free_keyval(&ckv), MPI_SUCCESS);
  // Invalid datatypes and arguments.
  EXPECT_EQ(MPI_Type_set_attr(MPI_DATATYPE_NULL, kv, &v1), MPI_ERR_TYPE);
  EXPECT_EQ(MPI_Type_get_attr(static_cast<MPI_Datatype>(0x4c0fffff), kv, &got, &flag),
            MPI_ERR_TYPE);
  EXPECT_EQ(MPI_Type_delete_attr(MPI_DATATYPE_NULL, kv), MPI_ERR_TYPE);
  EXPECT_EQ(MPI_Type_get_attr(MPI_INT, kv, nullptr, &flag), MPI_ERR_ARG);
  EXPECT_EQ(MPI_Type_create_keyval(MPI_TYPE_NULL_COPY_FN, MPI_TYPE_NULL_DELETE_FN, nullptr,
                                   nullptr),
            MPI_ERR_ARG);
  // A freed keyval is no longer usable, but the attribute that uses it
  // still deletes with its callback.
  ASSERT_EQ(MPI_Type_free_keyval(&kv), MPI_SUCCESS);
  EXPECT_EQ(kv, MPI_KEYVAL_INVALID);
  log().clear();
  EXPECT_EQ(MPI_Type_get_attr(MPI_INT, kv, &got, &flag), MPI_ERR_KEYVAL);
}

// MPI_Finalize deletes MPI_COMM_SELF's attributes first, last set first,
// then MPI_COMM_WORLD's. Runs in a fresh process: exits 42 when right.
void finalize_order() {
  unsetenv("BCS_SEGMENT_FD");
  if (MPI_Init(nullptr, nullptr) != MPI_SUCCESS) std::exit(101);
  static Extra s1{"s1"}, s2{"s2"}, w1{"w1"};
  int k1, k2, k3;
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, log_delete, &k1, &s1);
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, log_delete, &k2, &s2);
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, log_delete, &k3, &w1);
  MPI_Comm_set_attr(MPI_COMM_WORLD, k3, nullptr);
  MPI_Comm_set_attr(MPI_COMM_SELF, k1, nullptr);
  MPI_Comm_set_attr(MPI_COMM_SELF, k2, nullptr);
  if (MPI_Finalize() != MPI_SUCCESS) std::exit(102);
  const std::vector<std::string> want{"delete:s2", "delete:s1", "delete:w1"};
  std::exit(Attr::log() == want ? 42 : 103);
}

TEST(AttrFinalize, SelfThenWorldInReverseOrder) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(finalize_order(), ::testing::ExitedWithCode(42), "");
}

}  // namespace
