// bcs: the manager CLI (run / attach / jobs / kill / stats / trace / plot). See README.md.
#include <iostream>
#include <variant>

#include "commands.h"
#include "jobdir.h"
#include "options.h"
#include "slurm.h"

int main(int argc, char** argv) {
  using namespace bcs::cli;
  ParseResult parsed = parse_args(argc, argv, std::cout, std::cerr);
  if (const int* code = std::get_if<int>(&parsed)) return *code;
  if (const auto* run = std::get_if<RunOptions>(&std::get<Command>(parsed)); run && run->slurm)
    return run_in_slurm_allocation(argc, argv);
  return std::visit(
      [](const auto& o) -> int {
        using T = std::decay_t<decltype(o)>;
        if constexpr (std::is_same_v<T, RunOptions>) return run_job(o);
        else if constexpr (std::is_same_v<T, JobsOptions>) return list_jobs(o);
        else if constexpr (std::is_same_v<T, KillOptions>) return kill_job(o);
        else if constexpr (std::is_same_v<T, AttachOptions>) return attach_job(o);
        else if constexpr (std::is_same_v<T, StatsOptions>) return show_stats(o);
        else if constexpr (std::is_same_v<T, MonitorOptions>) return follow_slices(o);
        else if constexpr (std::is_same_v<T, ReplayOptions>) return replay_job(o);
        else return export_any(o);
      },
      std::get<Command>(parsed));
}
