// `bcs run --slurm` (slurm.cc).
#pragma once

namespace bcs::cli {

// Replaces this process with deploy/slurm/bcs.sbatch and our run arguments
// (without --slurm); returns only on failure, with the exit status to use.
int run_in_slurm_allocation(int argc, char** argv);

}  // namespace bcs::cli
