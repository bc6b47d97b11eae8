// bcs run --record / --replay and bcs replay: the job side of record and
// replay (the ranks' side is mpi-shim/src/replay.cc). A recording is a
// directory: header.rec, the job as bcs ran it, and rank<R>.rec per rank.
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <algorithm>
#include <map>
#include <string>

#include "bcs/record.h"
#include "commands.h"
#include "manager_client.h"
#include "units.h"

#ifndef BCS_VERSION
#define BCS_VERSION "unknown"
#endif

namespace bcs::cli {

namespace fs = std::filesystem;

namespace {

std::string header_path(const std::string& dir) { return dir + "/header.rec"; }

std::string absolute(const std::string& p) {
  std::error_code ec;
  const fs::path a = fs::absolute(p, ec);
  return ec ? p : a.lexically_normal().string();
}

// The program as the ranks will find it from anywhere: absolute when it
// names a file (has a '/'), else a name looked up in PATH as before.
std::string program_for_header(const std::string& program) {
  if (program.find('/') == std::string::npos) return program;
  char real[PATH_MAX];
  return ::realpath(program.c_str(), real) ? std::string(real) : absolute(program);
}

bool read_header(const std::string& dir, record::File* f) {
  std::string err;
  if (!record::read_file(header_path(dir), f, &err)) {
    say("cannot replay: " + err);
    return false;
  }
  if (f->header.rank != -1) {
    say("cannot replay: " + header_path(dir) + " is a rank's file, not the job's header");
    return false;
  }
  return true;
}

int print_info(const std::string& dir, const record::File& job) {
  const record::Header& h = job.header;
  std::printf("recording %s\n", dir.c_str());
  std::printf("  program  %s", h.program.c_str());
  for (const auto& a : h.args) std::printf(" %s", a.c_str());
  std::printf("\n  ranks    %u\n  nodes    %u\n  slice    %s\n  bcs      %s\n", h.size, h.nodes,
              h.slice_ns ? format_duration(h.slice_ns).c_str() : "(the manager's)", h.version.c_str());
  int rc = 0;
  for (uint32_t r = 0; r < h.size; ++r) {
    const std::string path = dir + "/rank" + std::to_string(r) + ".rec";
    record::File f;
    std::string err;
    if (!record::read_file(path, &f, &err)) {
      std::printf("  rank %u: %s\n", r, err.c_str());
      rc = 1;
      continue;
    }
    std::map<std::string, uint64_t> by_kind;
    uint64_t total = 0;
    // The slice schedule: descriptors taken, in how many slices, first/last.
    uint64_t taken = 0, slices = 0, first = 0, last = 0;
    for (const auto& e : f.events) {
      if (e.kind == record::Kind::drain) {
        std::vector<record::Drain> notes;
        record::drains_of(e, &notes);  // checked when read
        for (const auto& d : notes) {
          taken += d.count;
          ++slices;
          if (!first || d.slice < first) first = d.slice;
          last = std::max(last, d.slice);
        }
        continue;
      }
      by_kind[record::kind_name(e.kind)] += e.repeat;
      total += e.repeat;
      if (e.slice) last = std::max(last, e.slice);
    }
    std::printf("  rank %u: %llu events", r, static_cast<unsigned long long>(total));
    const char* sep = " (";
    for (const auto& [k, n] : by_kind) {
      std::printf("%s%s %llu", sep, k.c_str(), static_cast<unsigned long long>(n));
      sep = ", ";
    }
    std::printf("%s; executable %016llx\n", total == 0 ? "" : ")",
                static_cast<unsigned long long>(f.header.exe_hash));
    if (slices)
      std::printf("          its ring gave %llu descriptors in %llu slices (%llu to %llu)\n",
                  static_cast<unsigned long long>(taken), static_cast<unsigned long long>(slices),
                  static_cast<unsigned long long>(first), static_cast<unsigned long long>(last));
  }
  return rc;
}

}  // namespace

bool record_prepare(RunOptions* o) {
  if (!o->record_dir.empty()) {
    const std::string dir = absolute(o->record_dir);
    std::error_code ec;
    if (fs::exists(dir, ec) && !fs::is_empty(dir, ec)) {
      say("--record " + o->record_dir + ": exists and is not empty (a recording is never overwritten)");
      return false;
    }
    if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
      say("--record " + o->record_dir + ": " + std::strerror(errno));
      return false;
    }
    record::Header h;
    h.rank = -1;
    h.size = o->nranks;
    h.program = program_for_header(o->program);
    h.args = o->args;
    h.nodes = o->effective_nodes();
    h.slice_ns = o->slice_ns;
    h.version = BCS_VERSION;
    std::string bytes;
    record::append_header(h, &bytes);
    std::ofstream out(header_path(dir), std::ios::binary);
    out << bytes;
    out.close();
    if (!out) {
      say("--record: cannot write " + header_path(dir));
      return false;
    }
    o->env_set.push_back("BCS_RECORD=" + dir);
    if (o->record_wtime) o->env_set.push_back("BCS_RECORD_WTIME=1");
  }
  if (!o->replay_dir.empty()) {
    const std::string dir = absolute(o->replay_dir);
    record::File job;
    if (!read_header(dir, &job)) return false;
    if (job.header.size != o->nranks) {
      say("--replay " + o->replay_dir + ": recorded with " + std::to_string(job.header.size) +
          " ranks, this run has " + std::to_string(o->nranks));
      return false;
    }
    o->env_set.push_back("BCS_REPLAY=" + dir);
  }
  return true;
}

int replay_job(const ReplayOptions& o) {
  record::File job;
  if (!read_header(o.dir, &job)) return 1;
  if (o.info) return print_info(o.dir, job);
  const record::Header& h = job.header;
  RunOptions r;
  r.nranks = h.size;
  r.nodes = o.nodes ? *o.nodes : h.nodes ? std::optional<uint32_t>(h.nodes) : std::nullopt;
  const uint64_t slice = !o.slice.empty() ? *parse_duration_ns(o.slice) : h.slice_ns;
  if (slice) {
    r.slice_ns = slice;
    r.slice = format_duration(slice);
  }
  r.program = h.program;
  r.args = h.args;
  r.replay_dir = o.dir;
  r.timeout = o.timeout;
  r.timeout_ns = o.timeout_ns;
  r.manager = o.manager;
  r.token_file = o.token_file;
  r.label = o.label;
  if (o.stop_rank) {
    if (*o.stop_rank >= h.size) {
      say("--stop-rank " + std::to_string(*o.stop_rank) + ": the recording has ranks 0 to " +
          std::to_string(h.size - 1));
      return 2;
    }
    r.env_set.push_back("BCS_STOP_RANK=" + std::to_string(*o.stop_rank));
  }
  if (o.until_slice) r.env_set.push_back("BCS_UNTIL_SLICE=" + std::to_string(o.until_slice));
  return run_job(r);
}

}  // namespace bcs::cli
