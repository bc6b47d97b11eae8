// The CLI's side of the machine manager: connecting (token, unix-socket
// session, TLS), describing its errors, and the Monitor calls the job
// directory and the statistics commands share.
#pragma once

#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bcs.grpc.pb.h"
#include "bcs/emds.h"
#include "bcs/export.h"
#include "bcs/mmds.h"
#include "manager_channel.h"
#include "peer.h"
#include "munge_auth.h"
#include "proof.h"
#include "token.h"

namespace bcs::cli {

namespace pb = bcs::v1;

// Slices saved into a job directory: the paper's EMDS window.
constexpr uint32_t kJobDirSlices = 10000;
constexpr auto kRpcDeadline = std::chrono::seconds(10);

// "bcs: MSG" on stderr.
void say(const std::string& msg);
std::string code_name(grpc::StatusCode c);
std::string describe(const grpc::Status& s);

// A channel to the machine manager and what every call on it carries.
// The token itself is sent only inside TLS, whose certificate proved the
// manager first; on plain TCP the manager proves it holds the token and we
// send our proof (proof.h), renewed well within a cookie's lifetime.
struct Connection {
  std::shared_ptr<grpc::Channel> channel;
  std::string token;    // the cluster's shared token, "" for none
  bool send_token = false;  // TLS: the token as metadata
  mutable std::optional<ManagerChannel> proven;  // plain TCP with a token
  std::string session;  // unix socket: the session id the manager gave us
  std::string munge_socket;  // BCS_AUTH=munge: a fresh credential per call from here

  void prepare(grpc::ClientContext& ctx,
               std::optional<std::chrono::milliseconds> deadline = std::nullopt) const {
    if (send_token && !token.empty()) ctx.AddMetadata(kTokenMetadata, token);
    if (proven) {
      // A call after hours (Kill at the end of a long job) proves again
      // first; if that fails, the manager's refusal of the old one says so.
      if (std::chrono::steady_clock::now() - proven->proven_at > std::chrono::hours(1))
        prove_manager(*proven, token, kRpcDeadline);
      ctx.AddMetadata(kProofMetadata, proven->proof);
    }
    if (!session.empty()) ctx.AddMetadata(kSessionMetadata, session);
    if (!munge_socket.empty()) {
      // munged refuses a credential decoded twice: one per call. Without
      // one (munged went away since connect) the manager says who it
      // cannot identify.
      std::string why;
      if (auto cred = munge_credential(munge_socket, &why)) ctx.AddMetadata(kMungeMetadata, *cred);
    }
    if (deadline) ctx.set_deadline(std::chrono::system_clock::now() + *deadline);
  }
};

// nullopt after saying why (bad token file).
std::optional<Connection> connect_manager(const std::string& addr, const std::string& token_file);

// A signal-safe way to be interrupted: SIGINT/SIGTERM/SIGHUP are blocked in
// every thread (gRPC's included, as they inherit the mask) and read from a
// signalfd by the watcher, which can then make RPCs - impossible in a handler.
class SignalBlock {
 public:
  SignalBlock() {
    sigemptyset(&set_);
    sigaddset(&set_, SIGINT);
    sigaddset(&set_, SIGTERM);
    sigaddset(&set_, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &set_, &old_);
    fd_ = ::signalfd(-1, &set_, SFD_CLOEXEC | SFD_NONBLOCK);
  }
  ~SignalBlock() {
    if (fd_ >= 0) ::close(fd_);
  }
  SignalBlock(const SignalBlock&) = delete;
  SignalBlock& operator=(const SignalBlock&) = delete;
  int fd() const { return fd_; }
  // The pending signal number, or 0.
  int take() {
    signalfd_siginfo si;
    ssize_t n = ::read(fd_, &si, sizeof si);
    return n == static_cast<ssize_t>(sizeof si) ? static_cast<int>(si.ssi_signo) : 0;
  }

 private:
  sigset_t set_, old_;
  int fd_ = -1;
};

// One Monitor call for a job directory: the reply, or nothing (said once).
template <class Reply, class Call>
bool fetch_for_job_dir(const std::string& addr, const std::string& token_file, Reply* rep,
                       Call&& call) {
  auto conn = connect_manager(addr, token_file);
  if (!conn) return false;
  auto stub = pb::Monitor::NewStub(conn->channel);
  grpc::ClientContext ctx;
  conn->prepare(ctx, kRpcDeadline);
  if (grpc::Status st = call(*stub, ctx, rep); !st.ok()) {
    // NOT_FOUND: nothing recorded (a node without slices, BCS_EMDS=off).
    if (st.error_code() != grpc::StatusCode::NOT_FOUND)
      say("cannot read the job's statistics: " + describe(st));
    return false;
  }
  return true;
}


template <class Fn>
int with_manager_errors(const std::string& addr, Fn&& fn) {
  grpc::Status st = fn();
  if (st.ok()) return 0;
  say("machine manager at " + addr + ": " + describe(st));
  return 1;
}

// One call of the Monitor service; the manager's error, if any, said.
template <class Call>
int monitor_call(const std::string& manager, const std::string& token_file, Call&& call) {
  auto conn = connect_manager(manager, token_file);
  if (!conn) return 1;
  auto stub = pb::Monitor::NewStub(conn->channel);
  return with_manager_errors(manager, [&] {
    grpc::ClientContext ctx;
    conn->prepare(ctx, kRpcDeadline);
    return call(*stub, ctx);
  });
}


// The manager's slice series (its last `last` slices; with a job, that
// job's last, from its own window), for a job directory.
std::vector<monitor::SliceRecord> fetch_slices(const std::string& addr, const std::string& token_file,
                                               uint32_t last, uint64_t job = 0);
// A job's slices (job 0: every slice kept) and `nodes`' local series of the
// same job (job 0: over the same slice numbers), each node's only if it has
// some. Jobs run side by side: each file then holds exactly the job's rows.
void fetch_job_series(const std::string& addr, const std::string& token_file, uint64_t job,
                      const std::vector<std::string>& nodes, std::vector<monitor::SliceRecord>* slices,
                      monitor::NodeSeriesList* series);
// The MMDS reports the manager kept for a job (with their distributions;
// with `events`, asked rank by rank, their calls and messages too). Returns
// the exit status, after saying why when not 0.
int fetch_job_reports(const std::string& manager, const std::string& token_file, uint64_t job,
                      bool events, std::vector<monitor::RankReport>* ranks);
// A node's local series from the manager (empty if it has none).
std::vector<monitor::LocalSliceRecord> fetch_node_slices(const std::string& addr,
                                                         const std::string& token_file,
                                                         const std::string& node);

}  // namespace bcs::cli
