// The Ousterhout matrix of gang scheduling (issue 43, step 2): rows are
// time slots (the multiprogramming level, bcs-mm --mpl), columns node
// managers; a job holds one row on each of its nodes. One row is active
// per quantum; at a quantum's end the next row with a job becomes active,
// at one slice boundary on every node. A pure structure, unit-tested
// without a cluster (tests/unit/mm/matrix_test.cc); the strobe sender owns
// it.
//
// Slot unification: during a quantum, a job of another row runs too when
// none of its nodes is used by a job of the active row (or by another job
// already chosen to run), so no node idles while a job could run on it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace bcs::mm {

class Matrix {
 public:
  explicit Matrix(uint32_t rows) : rows_(rows ? rows : 1) {}

  uint32_t rows() const { return static_cast<uint32_t>(rows_.size()); }
  // The first row (from the active one on, so a new job runs as soon as
  // possible) where every one of `nodes` is free and not in `reserved`
  // (the nodes queued jobs ahead of it wait for); the job is placed there.
  // None: it waits.
  std::optional<uint32_t> place(uint64_t job, const std::vector<uint32_t>& nodes,
                                const std::set<uint32_t>& reserved = {});
  // The job leaves the matrix (ended); false if it was not in it.
  bool remove(uint64_t job);
  // Its row, if placed.
  std::optional<uint32_t> row_of(uint64_t job) const;
  uint32_t active() const { return active_; }
  // The quantum ended: the next row that holds a job becomes active (the
  // same one if it is the only one). Returns whether the row changed.
  bool rotate();
  // Jobs that may run in the active row's quantum: every job of the active
  // row, then (slot unification) jobs of the other rows, in row order from
  // the active one on, whose nodes no job chosen before uses. Their node
  // sets are pairwise disjoint.
  std::vector<uint64_t> runnable() const;
  // Every job placed, by row.
  const std::map<uint64_t, std::vector<uint32_t>>& jobs_of_row(uint32_t row) const {
    return rows_.at(row).jobs;
  }
  // Which job holds `node` in `row` (0: free).
  uint64_t at(uint32_t row, uint32_t node) const;
  bool empty() const;

 private:
  struct Row {
    std::map<uint64_t, std::vector<uint32_t>> jobs;  // job -> its nodes
    std::map<uint32_t, uint64_t> held;               // node -> job
  };
  std::vector<Row> rows_;
  uint32_t active_ = 0;
};

}  // namespace bcs::mm
