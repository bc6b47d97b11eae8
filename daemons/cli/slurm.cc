// `bcs run --slurm`: a bcs cluster on the nodes of the Slurm allocation this
// runs in, for one job. deploy/slurm/bcs.sbatch already does exactly that
// (manager on the first node, a node manager per node as srun steps, ranks
// placed as Slurm allocated the tasks, daemons stopped at the end), so bcs
// runs it with the rest of its own arguments instead of doing it twice.
#include "slurm.h"

#include <limits.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cluster.h"

namespace bcs::cli {

int run_in_slurm_allocation(int argc, char** argv) {
  auto say = [](const std::string& m) { std::fprintf(stderr, "bcs: %s\n", m.c_str()); };
  const char* job = std::getenv("SLURM_JOB_ID");
  const char* nodes = std::getenv("SLURM_JOB_NODELIST");
  if (!job || !*job || !nodes || !*nodes) {
    say("run --slurm: not inside a Slurm allocation (no SLURM_JOB_ID / SLURM_JOB_NODELIST): "
        "run it from sbatch or salloc");
    return 2;
  }
  // Our own directory: bcs-mm and bcs-nm are beside us; the script is in
  // ../share/bcs/slurm (installed, and mirrored into the build tree).
  char self[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) {
    say("run --slurm: cannot find my own executable");
    return 1;
  }
  std::string dir(self, static_cast<size_t>(n));
  dir.erase(dir.find_last_of('/'));
  const std::string script = dir + "/../share/bcs/slurm/bcs.sbatch";
  if (::access(script.c_str(), R_OK) != 0) {
    say("run --slurm: " + script + " is missing (" + std::strerror(errno) + ")");
    return 1;
  }
  // argv: bcs run [OPTIONS] PROGRAM [ARGS]; the first --slurm is ours (the
  // options precede the program), everything else goes to the script's
  // `bcs run --manager ... --hostfile ...`.
  std::vector<std::string> args{"/bin/bash", script};
  bool dropped = false;
  for (int i = 2; i < argc; ++i) {
    if (!dropped && std::strcmp(argv[i], "--slurm") == 0) {
      dropped = true;
      continue;
    }
    args.emplace_back(argv[i]);
  }
  ::setenv("BCS_BIN", dir.c_str(), 1);
  std::vector<char*> cargv;
  for (auto& a : args) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  ::execv(cargv[0], cargv.data());
  say("run --slurm: cannot run " + script + ": " + std::strerror(errno));
  return 1;
}

}  // namespace bcs::cli
