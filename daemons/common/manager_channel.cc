// A proven channel to the machine manager (manager_channel.h).
#include "manager_channel.h"

#include <grpcpp/create_channel_posix.h>
#include <unistd.h>

#include "bcs.grpc.pb.h"
#include "peer.h"
#include "proof.h"

namespace bcs {

std::string prove_manager(ManagerChannel& c, const std::string& token,
                          std::chrono::milliseconds limit) {
  auto stub = v1::Auth::NewStub(c.channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + limit);
  v1::ProveRequest req;
  const std::string nonce = new_nonce();
  req.set_nonce(nonce);
  v1::ProveReply rep;
  const grpc::Status st = stub->Prove(&ctx, req, &rep);
  if (!st.ok()) {
    switch (st.error_code()) {
      case grpc::StatusCode::FAILED_PRECONDITION:
        return "it has no token, but we have one: give the manager the cluster's token too "
               "(bcs-mm --token-file)";
      case grpc::StatusCode::UNIMPLEMENTED:
        return "it does not answer the proof of the token: it is not a bcs manager, or an "
               "older one";
      default:
        return "the proof of the token failed: " + st.error_message();
    }
  }
  ManagerProof p{rep.cookie(), rep.seen(), rep.proof()};
  if (std::string bad = check_manager_proof(token, nonce, c.local, p); !bad.empty()) return bad;
  c.proof = caller_proof(token, p.cookie);
  c.proven_at = std::chrono::steady_clock::now();
  return {};
}

std::optional<ManagerChannel> open_manager_channel(
    const Endpoint& where, const std::string& target, const std::string& token,
    const grpc::ChannelArguments& args, std::chrono::milliseconds limit,
    const std::function<std::string(int fd)>& before, std::string* why, bool* reached) {
  if (reached) *reached = false;
  const int fd = connect_tcp(where.host, where.port, limit, why);
  if (fd < 0) return std::nullopt;
  if (reached) *reached = true;
  ManagerChannel c;
  auto local = canonical_local_address(fd);
  if (!local) {
    ::close(fd);
    *why = "cannot tell this end of the connection to " + target;
    return std::nullopt;
  }
  c.local = *local;
  if (before) {
    if (std::string bad = before(fd); !bad.empty()) {
      ::close(fd);
      *why = bad;
      return std::nullopt;
    }
  }
  grpc::ChannelArguments a = args;
  c.channel = grpc::CreateCustomInsecureChannelFromFd(target, fd, a);  // owns fd now
  if (!token.empty())
    if (std::string bad = prove_manager(c, token, limit); !bad.empty()) {
      *why = "the manager at " + target + ": " + bad;
      return std::nullopt;
    }
  return c;
}

}  // namespace bcs
