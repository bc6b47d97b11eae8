// A fake machine manager, as a hostile local user would write one (issue
// 42): it listens where the real manager should be, logs everything it
// receives (every call's peer and metadata, every message) to --log, and
// tries what a manager can do: it answers a node manager's Session with a
// Welcome and a StartJob as root that would create --marker, answers a
// proof of the token with junk, and takes any Launch. The identity stories
// assert that the log holds no secret and the marker never appears.
//
//   it_fake_manager --listen HOST:PORT --log FILE --marker PATH
// Writes its port on fd 3 once listening; exits on SIGTERM.
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <mutex>
#include <string>

#include "bcs.grpc.pb.h"

namespace {

namespace pb = bcs::v1;

std::mutex log_mu;
std::ofstream log_file;

void log_call(grpc::ServerContext* ctx, const std::string& what) {
  std::lock_guard lk(log_mu);
  log_file << "call " << what << " from " << ctx->peer() << "\n";
  for (const auto& [k, v] : ctx->client_metadata())
    log_file << "  metadata " << std::string(k.data(), k.size()) << "="
             << std::string(v.data(), v.size()) << "\n";
  log_file.flush();
}

void log_msg(const google::protobuf::Message& m) {
  std::lock_guard lk(log_mu);
  log_file << "  message " << m.ShortDebugString() << "\n";
  log_file.flush();
}

std::string marker;

class Auth final : public pb::Auth::Service {
  grpc::Status Prove(grpc::ServerContext* ctx, const pb::ProveRequest* req,
                     pb::ProveReply* rep) override {
    log_call(ctx, "Auth.Prove");
    log_msg(*req);
    // It cannot compute a proof without the token: it makes one up.
    rep->set_cookie("v1." + std::string(16, '0') + "." + std::string(32, 'a') + "." +
                    std::string(64, 'b'));
    std::string peer = ctx->peer();
    if (peer.rfind("ipv4:", 0) == 0) peer = peer.substr(5);
    rep->set_seen(peer);
    rep->set_proof(std::string(64, 'c'));
    return grpc::Status::OK;
  }
};

class Nodes final : public pb::NodeControl::Service {
  grpc::Status Session(grpc::ServerContext* ctx,
                       grpc::ServerReaderWriter<pb::ManagerMsg, pb::NodeMsg>* s) override {
    log_call(ctx, "NodeControl.Session");
    pb::NodeMsg in;
    pb::ManagerMsg w;
    w.mutable_welcome()->set_node_id(1);
    s->Write(w);
    pb::ManagerMsg job;
    auto* sj = job.mutable_start_job();
    sj->set_job_id(1);
    sj->set_program("/usr/bin/touch");
    sj->add_args(marker);
    sj->set_cwd("/");
    sj->set_nranks(1);
    sj->add_rank_node(1);
    sj->set_uid(0);
    sj->set_gid(0);
    s->Write(job);
    while (s->Read(&in)) log_msg(in);
    return grpc::Status::OK;
  }
};

class Jobs final : public pb::Jobs::Service {
  grpc::Status Launch(grpc::ServerContext* ctx, const pb::LaunchRequest* req,
                      pb::LaunchReply* rep) override {
    log_call(ctx, "Jobs.Launch");
    log_msg(*req);
    rep->set_job_id(1);
    return grpc::Status::OK;
  }
  grpc::Status List(grpc::ServerContext* ctx, const pb::ListRequest*, pb::ListReply*) override {
    log_call(ctx, "Jobs.List");
    return grpc::Status::OK;
  }
};

}  // namespace

int main(int argc, char** argv) {
  std::string listen, log_path;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--listen") listen = argv[i + 1];
    if (a == "--log") log_path = argv[i + 1];
    if (a == "--marker") marker = argv[i + 1];
  }
  if (listen.empty() || log_path.empty() || marker.empty()) {
    std::fprintf(stderr, "usage: it_fake_manager --listen HOST:PORT --log FILE --marker PATH\n");
    return 2;
  }
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  log_file.open(log_path, std::ios::app);
  if (!log_file) {
    std::perror(log_path.c_str());
    return 1;
  }
  Auth auth;
  Nodes nodes;
  Jobs jobs;
  int port = 0;
  grpc::ServerBuilder b;
  b.AddListeningPort(listen, grpc::InsecureServerCredentials(), &port);
  b.RegisterService(&auth);
  b.RegisterService(&nodes);
  b.RegisterService(&jobs);
  auto server = b.BuildAndStart();
  if (!server || port == 0) {
    std::fprintf(stderr, "it_fake_manager: cannot listen on %s\n", listen.c_str());
    return 1;
  }
  const std::string line = std::to_string(port) + "\n";
  if (::write(3, line.data(), line.size()) < 0) { /* no ready fd: fine */ }
  ::close(3);
  int sig = 0;
  sigwait(&set, &sig);
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  return 0;
}
