// A rank that scribbles over its own part of the job segment (hardening
// stories, hardening_test.cc): after MPI_Init, rank 1 finds the segment in
// its address space (/proc/self/maps: the memfd "bcs-job<N>") and, by the
// mode in argv[1]:
//   head     moves its ring's head 2^40 descriptors past the tail;
//   request  posts a receive naming request slot 2^30;
//   span     posts an eager send whose head stops within its span;
//   layout   overwrites the header's ring and request table sizes (the node
//            manager must not believe them: the job then runs normally).
// (after a first barrier, so that every rank attached to the segment).
// Then every rank does a barrier and a ring exchange and rank 0 prints
// "scribble done". In the first two modes the node manager must end rank 1
// with the reason; the barrier never completes for the others.
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <cstdint>
#include <fstream>
#include <string>

#include "bcs/segment.h"

namespace {

void* segment_base() {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line))
    if (line.find("/memfd:bcs-job") != std::string::npos)
      return reinterpret_cast<void*>(std::stoull(line.substr(0, line.find('-')), nullptr, 16));
  return nullptr;
}

}  // namespace

// Mode "before-init": before MPI_Init, every rank fills the whole segment
// (its fd is BCS_SEGMENT_FD) with a repeated junk word, as a wild program
// could, then calls MPI_Init. Its node manager must report a corrupted
// segment, not an MPI_Abort with a code read back from the junk.
void scribble_before_init() {
  const char* fd_env = std::getenv("BCS_SEGMENT_FD");
  if (!fd_env) return;
  const int fd = std::atoi(fd_env);
  struct stat st {};
  if (fstat(fd, &st) != 0 || st.st_size <= 0) return;
  void* p = mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return;
  auto* w = static_cast<uint32_t*>(p);
  for (size_t i = 0; i < static_cast<size_t>(st.st_size) / 4; ++i) w[i] = 0x6675a817u;
  munmap(p, static_cast<size_t>(st.st_size));
}

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "before-init") scribble_before_init();
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const std::string mode = argc > 1 ? argv[1] : "";
  // Every rank attached first: the header is shared, and a rank that
  // attaches after the scribble would (rightly) refuse the segment.
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 1) {
    void* base = segment_base();
    if (!base) {
      fprintf(stderr, "scribble: no segment mapping found\n");
      MPI_Abort(MPI_COMM_WORLD, 3);
    }
    auto* h = static_cast<bcs::SegmentHeader*>(base);
    bcs::RankView v{};
    for (uint32_t i = 0; i < h->nlocal; ++i) {
      v = bcs::segment_rank_view(base, i);
      if (v.ctl->world_rank == rank) break;
    }
    if (mode == "head") {
      v.ctl->head.store(v.ctl->tail.load() + (uint64_t{1} << 40));
    } else if (mode == "request") {
      bcs::Descriptor d{};
      d.kind = bcs::DescKind::recv;
      d.peer = 0;
      d.request = 1u << 30;
      d.len = 8;
      bcs::ring_try_post(v, d);
    } else if (mode == "span") {
      // An eager send of 1,000 bytes whose head covers its descriptor only.
      bcs::Descriptor d{};
      d.kind = bcs::DescKind::send;
      d.flags = bcs::kDescInline;
      d.peer = 0;
      d.len = d.inline_len = 1000;
      bcs::ring_try_post(v, d);
    } else if (mode == "layout") {
      h->ring_slots = 1u << 30;
      h->request_slots = 7;
      h->nlocal = 1000;
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  int token = rank, got = -1;
  MPI_Sendrecv(&token, 1, MPI_INT, (rank + 1) % size, 5, &got, 1, MPI_INT, (rank + size - 1) % size,
               5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  if (got != (rank + size - 1) % size) MPI_Abort(MPI_COMM_WORLD, 4);
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) printf("scribble done\n");
  MPI_Finalize();
  return 0;
}
