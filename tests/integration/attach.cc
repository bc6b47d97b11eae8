// it_attach ADDR JOBID: attaches to a job the way `bcs run` does (Jobs.Attach)
// and prints what it gets: "output: ..." for each piece of output, then
// "status CODE: MESSAGE". Exit 0 if the call succeeded. The stories run it
// as another user to check that a job's output is its owner's (with
// BCS_AUTH=munge like `bcs`, from another host).
#include <grpcpp/create_channel_posix.h>
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "bcs.grpc.pb.h"
#include "munge_auth.h"
#include "net.h"
#include "peer.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: it_attach ADDR JOBID\n");
    return 2;
  }
  const std::string addr = argv[1];
  std::string session, why;
  std::shared_ptr<grpc::Channel> ch;
  auto where = bcs::parse_endpoint(addr, &why);
  if (!where) {
    std::fprintf(stderr, "%s\n", why.c_str());
    return 2;
  }
  if (where->is_unix) {
    auto us = bcs::connect_unix_session(where->path, std::chrono::seconds(10), &why);
    if (!us) {
      std::fprintf(stderr, "%s\n", why.c_str());
      return 2;
    }
    session = us->id;
    ch = grpc::CreateInsecureChannelFromFd(addr, us->fd.release());
  } else {
    ch = grpc::CreateChannel(addr, grpc::InsecureChannelCredentials());
  }
  auto stub = bcs::v1::Jobs::NewStub(ch);
  grpc::ClientContext ctx;
  if (!session.empty()) ctx.AddMetadata(bcs::kSessionMetadata, session);
  // BCS_AUTH=munge: a credential from $BCS_MUNGE_SOCKET, as `bcs` sends.
  if (const char* auth = std::getenv("BCS_AUTH"); auth && std::string(auth) == "munge") {
    const char* sock = std::getenv("BCS_MUNGE_SOCKET");
    auto cred = bcs::munge_credential(sock ? sock : bcs::kMungeDefaultSocket, &why);
    if (!cred) {
      std::fprintf(stderr, "%s\n", why.c_str());
      return 2;
    }
    ctx.AddMetadata(bcs::kMungeMetadata, *cred);
  }
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  bcs::v1::AttachRequest req;
  req.set_job_id(std::strtoull(argv[2], nullptr, 10));
  auto reader = stub->Attach(&ctx, req);
  bcs::v1::JobEvent ev;
  while (reader->Read(&ev))
    if (ev.has_output()) std::printf("output: %s\n", ev.output().data().c_str());
  auto st = reader->Finish();
  std::printf("status %d: %s\n", static_cast<int>(st.error_code()), st.error_message().c_str());
  return st.ok() ? 0 : 1;
}
