// The CLI's side of the machine manager (manager_client.h).
#include "manager_client.h"

#include <algorithm>
#include <cstdlib>

#include <grpcpp/create_channel_posix.h>

#include "bcs/service.h"
#include "net.h"
#include "output.h"
#include "peer.h"
#include "tls.h"

namespace bcs::cli {

void say(const std::string& msg) { write_all(2, "bcs: " + msg + "\n"); }

std::string code_name(grpc::StatusCode c) {
  switch (c) {
    case grpc::StatusCode::OK: return "OK";
    case grpc::StatusCode::CANCELLED: return "CANCELLED";
    case grpc::StatusCode::UNKNOWN: return "UNKNOWN";
    case grpc::StatusCode::INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case grpc::StatusCode::DEADLINE_EXCEEDED: return "DEADLINE_EXCEEDED";
    case grpc::StatusCode::NOT_FOUND: return "NOT_FOUND";
    case grpc::StatusCode::ALREADY_EXISTS: return "ALREADY_EXISTS";
    case grpc::StatusCode::PERMISSION_DENIED: return "PERMISSION_DENIED";
    case grpc::StatusCode::RESOURCE_EXHAUSTED: return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::FAILED_PRECONDITION: return "FAILED_PRECONDITION";
    case grpc::StatusCode::ABORTED: return "ABORTED";
    case grpc::StatusCode::OUT_OF_RANGE: return "OUT_OF_RANGE";
    case grpc::StatusCode::UNIMPLEMENTED: return "UNIMPLEMENTED";
    case grpc::StatusCode::INTERNAL: return "INTERNAL";
    case grpc::StatusCode::UNAVAILABLE: return "UNAVAILABLE";
    case grpc::StatusCode::DATA_LOSS: return "DATA_LOSS";
    case grpc::StatusCode::UNAUTHENTICATED: return "UNAUTHENTICATED";
    default: return "code " + std::to_string(static_cast<int>(c));
  }
}

std::string describe(const grpc::Status& s) {
  return s.error_message().empty() ? code_name(s.error_code())
                                   : code_name(s.error_code()) + ": " + s.error_message();
}

std::optional<Connection> connect_manager(const std::string& addr, const std::string& token_file) {
  Connection c;
  std::string why;
  auto token = load_token(token_file, &why);
  if (!token) {
    say(why);
    return std::nullopt;
  }
  c.token = *token;
  if (auto where = parse_endpoint(addr); where && where->is_unix) {
    // The manager learns who we are from this very socket (peer.h): the job
    // runs as us.
    auto us = connect_unix_session(where->path, kRpcDeadline, &why);
    if (!us) {
      say("cannot reach the machine manager: " + why);
      return std::nullopt;
    }
    c.session = us->id;
    c.channel = grpc::CreateInsecureChannelFromFd(addr, us->fd.release());
    return c;
  }
  // From another host a user proves who they are with munge (the manager
  // runs with --munge): BCS_AUTH=munge, munged at $BCS_MUNGE_SOCKET or
  // Debian's default socket.
  if (const char* auth = std::getenv("BCS_AUTH"); auth && *auth) {
    if (std::string(auth) != "munge") {
      say(std::string("BCS_AUTH=") + auth + ": unknown (the one there is: munge)");
      return std::nullopt;
    }
    const char* sock = std::getenv("BCS_MUNGE_SOCKET");
    c.munge_socket = sock && *sock ? sock : kMungeDefaultSocket;
    if (!munge_credential(c.munge_socket, &why)) {  // says now what every call would meet
      say("BCS_AUTH=munge: " + why);
      return std::nullopt;
    }
  }
  // TLS when $BCS_TLS_CA names the CA of the manager's certificate (a
  // manager started with --tls-cert); else plain TCP: the default is
  // loopback, anything else a private network guarded by the token.
  if (const char* ca = std::getenv(kTlsCaEnv); ca && *ca) {
    grpc::SslCredentialsOptions ssl;
    if (!read_pem(ca, &ssl.pem_root_certs, &why)) {
      say(std::string(kTlsCaEnv) + ": " + why);
      return std::nullopt;
    }
    c.channel = grpc::CreateChannel(addr, grpc::SslCredentials(ssl));
    c.send_token = true;
    return c;
  }
  if (!c.token.empty()) {
    // Whoever answers proves it holds the token before anything is sent:
    // the program, its arguments and environment, and never the token.
    auto where = parse_endpoint(addr, &why);
    if (!where) {
      say("--manager " + why);
      return std::nullopt;
    }
    bool reached = false;
    auto mc = open_manager_channel(*where, addr, c.token, grpc::ChannelArguments(), kRpcDeadline,
                                   nullptr, &why, &reached);
    if (!mc) {
      say(reached ? "refusing " + why : "cannot reach the machine manager: " + why);
      return std::nullopt;
    }
    c.channel = mc->channel;
    c.proven = std::move(mc);
    return c;
  }
  c.channel = grpc::CreateChannel(addr, grpc::InsecureChannelCredentials());
  return c;
}

// The manager's slice series (its last `last` slices; of `job` only, from
// that job's own window, unless 0), for a job directory.
std::vector<monitor::SliceRecord> fetch_slices(const std::string& addr, const std::string& token_file,
                                               uint32_t last, uint64_t job) {
  std::vector<monitor::SliceRecord> out;
  pb::SlicesReply rep;
  if (!fetch_for_job_dir(addr, token_file, &rep, [&](pb::Monitor::Stub& st, grpc::ClientContext& c, auto* r) {
        pb::SlicesRequest req;
        req.set_last(last);
        req.set_job_id(job);
        return st.Slices(&c, req, r);
      }))
    return out;
  // A manager from before SlicesRequest.job_id answers with every job's.
  for (const auto& s : rep.slices())
    if (!job || s.job_id() == job) out.push_back(monitor::slice_from_proto(s));
  return out;
}

// A node's local series from the manager (empty if it has none).
std::vector<monitor::LocalSliceRecord> fetch_node_slices(const std::string& addr,
                                                         const std::string& token_file,
                                                         const std::string& node) {
  std::vector<monitor::LocalSliceRecord> out;
  pb::NodeSlicesReply rep;
  if (!fetch_for_job_dir(addr, token_file, &rep, [&](pb::Monitor::Stub& st, grpc::ClientContext& c, auto* r) {
        pb::NodeSlicesRequest req;
        req.set_node(node);
        req.set_last(kJobDirSlices);
        return st.NodeSlices(&c, req, r);
      }))
    return out;
  for (const auto& s : rep.slices()) {
    monitor::LocalSliceRecord r;
    std::string why;
    if (monitor::local_from_proto(s, &r, &why)) out.push_back(r);
  }
  return out;
}


void fetch_job_series(const std::string& addr, const std::string& token_file, uint64_t job,
                      const std::vector<std::string>& nodes, std::vector<monitor::SliceRecord>* slices,
                      monitor::NodeSeriesList* series) {
  *slices = fetch_slices(addr, token_file, kJobDirSlices, job);
  // The slice numbers the job used: what an older node manager's records
  // (which name no job) are matched by.
  uint64_t lo = UINT64_MAX, hi = 0;
  for (const auto& s : *slices) {
    lo = std::min(lo, s.slice);
    hi = std::max(hi, s.slice);
  }
  for (const auto& node : nodes) {
    // A node runs one job at a time, but other jobs ran on it before and
    // after this one (and beside it, elsewhere): its records of this job,
    // by the job they name. Job 0 (a private cluster's only job): the
    // records over the slices kept.
    std::vector<monitor::LocalSliceRecord> mine;
    for (const auto& l : fetch_node_slices(addr, token_file, node)) {
      const bool in_range = l.slice >= lo && l.slice <= hi;
      if (job ? l.job == job || (l.job == 0 && in_range) : in_range) mine.push_back(l);
    }
    if (!mine.empty()) series->emplace_back(node, std::move(mine));
  }
}

// The MMDS reports the manager kept for a job: with their distributions,
// and with `events` their calls and messages too, asked for rank by rank
// (each can be a megabyte). Returns the exit status after saying why.
int fetch_job_reports(const std::string& manager, const std::string& token_file, uint64_t job,
                      bool events, std::vector<monitor::RankReport>* ranks) {
  auto ask = [&](const std::vector<uint32_t>& which, bool with_events, pb::JobStatsReply* rep) {
    return monitor_call(manager, token_file, [&](pb::Monitor::Stub& stub, grpc::ClientContext& ctx) {
      pb::JobStatsRequest req;
      req.set_job_id(job);
      req.set_detail(true);
      req.set_events(with_events);
      for (uint32_t r : which) req.add_ranks(r);
      return stub.JobStats(&ctx, req, rep);
    });
  };
  pb::JobStatsReply rep;
  if (int rc = ask({}, false, &rep)) return rc;
  for (const auto& m : rep.ranks()) {
    pb::JobStatsReply one;
    const pb::MmdsSummary* use = &m;
    if (events && m.has_report()) {
      if (int rc = ask({m.rank()}, true, &one)) return rc;
      if (one.ranks_size() == 1) use = &one.ranks(0);
    }
    monitor::RankReport r;
    std::string why;
    if (!monitor::mmds_from_proto(*use, &r, &why)) {
      say("job " + std::to_string(job) + ": a bad summary from the manager: " + why);
      return 1;
    }
    if (!r.full) r.size = static_cast<int>(rep.nranks());
    ranks->push_back(std::move(r));
  }
  return 0;
}

}  // namespace bcs::cli
