// Internal representation of datatypes, shared by datatype.cc (the table
// and the queries), type_create.cc (the constructors) and pack.cc.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace bcs::shim {

// A contiguous run of bytes of one instance, at `off` from the buffer.
struct TypeBlock {
  int64_t off;
  int64_t len;
};

// `count` consecutive basic elements of predefined type `type`, in pack order.
struct ElemRun {
  MPI_Datatype type;
  int64_t count;
};

// The most blocks one instance of a datatype may have in its list: 256 Mi
// blocks are 4 GiB of rank memory, and describe at least 256 MiB of data
// the program holds (a column of a 2 GiB matrix is 1/8 of that). MPICH's
// types describe themselves as loops instead; a flat list is what the node
// managers read. A type past it (a billion-block vector made only to ask
// its size) is refused before its list is built.
inline constexpr size_t kMaxTypeBlocks = size_t{1} << 28;

struct DType {
  bool live = false;
  bool committed = false;
  bool predefined = false;
  int refs = 0;              // handles held by the user (MPI_Type_free drops one) + contents
  MPI_Datatype handle = MPI_DATATYPE_NULL;
  int64_t size = 0;          // packed bytes
  int64_t lb = 0, ub = 0;    // extent = ub - lb
  int64_t tlb = 0, tub = 0;  // true bounds (of the data bytes)
  bool sticky = false;       // bounds set explicitly (MPI_Type_create_resized) somewhere inside
  int align = 1;             // largest basic alignment inside (struct extent padding)
  std::vector<TypeBlock> blocks;  // one instance, type-map order, adjacent merged
  // More than kMaxTypeBlocks blocks (or element runs) in one instance: the
  // lists are not kept (they would take gigabytes). Size, bounds and element
  // counts stay exact, so queries work; moving or packing it is refused.
  bool too_fragmented = false;
  std::vector<ElemRun> elems;     // one instance
  int64_t nelems = 0;             // basic elements per instance (MPI_Get_elements)
  int dtype = 0;                  // bcs_dtype_t when made of one reducible predefined type
  int64_t nred = 0;               // instances of it per instance of this type
  int dtype_state = 0;            // building: 0 none seen, 1 one dtype, 2 mixed
  bool first = true;              // building: no part appended yet
  int combiner = MPI_COMBINER_NAMED;
  std::vector<int> ints;
  std::vector<MPI_Aint> aints;
  std::vector<MPI_Datatype> types;
  std::string name;

  int64_t extent() const { return ub - lb; }
  // Appends `reps` instances of `t`, the first at byte `disp`, each next
  // one extent(t) further, to the type map being built.
  void append(const DType& t, int64_t disp, int64_t reps);
  // Adds `reps` more instances of t lying inside the bounds already
  // recorded, to a type whose lists are not kept (too_fragmented): only the
  // counts change. Lets a vector of a billion blocks be made in O(1) once
  // it is past the limit.
  void count_more(const DType& t, int64_t reps) {
    size += t.size * reps;
    nelems += t.nelems * reps;
    nred += t.nred * reps;
  }
};

// The datatype of a live handle (predefined or derived), or null.
DType* dtype_of(MPI_Datatype t);
// Registers a new derived type (one reference: the user's) and returns its handle.
MPI_Datatype dtype_add(std::unique_ptr<DType> d);
// Drops a reference; the last one ends the type.
void dtype_release(DType* d);

}  // namespace bcs::shim
