// Private to intercoll.cc (blocking collectives on intercommunicators) and
// intercoll_nb.cc (the non-blocking ones): what both need to know about an
// intercommunicator and its arguments.
#pragma once

#include <vector>

#include "shim.h"

namespace bcs::shim::intercoll {

// What one collective call needs to know about its intercommunicator.
struct Inter {
  int ic = kNoComm;
  MPI_Comm shadow = MPI_COMM_NULL;  // p2p to the other group, collective context
  MPI_Comm local = MPI_COMM_NULL;   // this group, rank order
  int rank = 0, size = 0, rsize = 0;
  bool leader() const { return rank == 0; }
};

Inter inter_of(MPI_Comm c);
// An error of an inner call, raised on the user's communicator.
int failed(const Inter& it, const char* fn, int code);
int check_root(const Inter& it, const char* fn, int root);
// One (buffer, count, type) argument that is used.
int check_data(const Inter& it, const char* fn, const char* what, const void* buf, int count,
               MPI_Datatype type);
int check_counts(const Inter& it, const char* fn, const char* what, const int* counts,
                 const int* displs, int n);
MPI_Aint extent_of(MPI_Datatype t);

// Scratch space for `count` instances of `type`, addressed like a user buffer.
class Scratch {
 public:
  Scratch(int count, MPI_Datatype type) {
    if (count <= 0) return;
    MPI_Aint tlb = 0, text = 0;
    PMPI_Type_get_true_extent(type, &tlb, &text);
    bytes_.resize(static_cast<size_t>((count - 1) * extent_of(type) + text));
    lb_ = tlb;
  }
  void* ptr() { return bytes_.empty() ? nullptr : bytes_.data() - lb_; }

 private:
  std::vector<unsigned char> bytes_;
  MPI_Aint lb_ = 0;
};

}  // namespace bcs::shim::intercoll
