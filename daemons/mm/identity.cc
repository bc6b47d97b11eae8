// Who is calling the manager, and what they may touch (docs/architecture.md,
// "Who may talk to the daemons"): the token, the unix socket's session,
// the owner of a loopback socket, a munge credential.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

#include "manager.h"
#include "munge_auth.h"
#include "peer.h"
#include "proof.h"
#include "token.h"

namespace bcs::mm {

bool Manager::authorized(grpc::ServerContext* ctx) const {
  if (cfg_.token.empty()) return true;
  // The unix socket identifies its callers by SO_PEERCRED; the token is
  // for TCP.
  if (ctx->peer().rfind("fd:", 0) == 0) return true;
  auto md = ctx->client_metadata();
  // A munge credential stands instead of the token; identify() decodes it
  // (once: munged refuses a credential decoded twice).
  if (!cfg_.munge_socket.empty() && md.find(kMungeMetadata) != md.end()) return true;
  // A proof of the token (proof.h): what node managers and clients that
  // hold the token send on plain TCP, instead of the token itself.
  if (auto p = md.find(kProofMetadata); p != md.end())
    return proof_accepted(cfg_.token, std::string_view(p->second.data(), p->second.size()),
                          ctx->peer());
  auto it = md.find(kTokenMetadata);
  return it != md.end() &&
         tokens_equal(std::string_view(it->second.data(), it->second.size()), cfg_.token);
}

grpc::Status Manager::unauthenticated() const {
  return {grpc::StatusCode::UNAUTHENTICATED,
          cfg_.munge_socket.empty()
              ? "bad or missing bcs-token"
              : "bad or missing bcs-token (a user on another host: BCS_AUTH=munge)"};
}

grpc::Status Manager::unidentified(const Caller& who) const {
  return {grpc::StatusCode::UNAUTHENTICATED,
          who.why.empty() ? "cannot tell who you are: connect on loopback or through the "
                            "manager's unix socket, or from another host with munge "
                            "(BCS_AUTH=munge)"
                          : who.why};
}

// Who is calling (docs/architecture.md, "Who may talk to the daemons").
Caller Manager::identify(grpc::ServerContext* ctx) {
  Caller c;
  const std::string peer = ctx->peer();
  if (peer.rfind("fd:", 0) == 0) {  // a connection we accepted on the unix socket
    const auto& md = ctx->client_metadata();
    auto it = md.find(kSessionMetadata);
    if (it == md.end()) return c;
    if (auto cred = unix_.find(peer, std::string(it->second.data(), it->second.size()))) {
      c.via = Caller::Via::unix_socket;
      c.uid = cred->uid;
      c.gid = cred->gid;
    }
    return c;
  }
  // TCP. A munge credential names its user on any host of the realm.
  if (!cfg_.munge_socket.empty()) {
    const auto& md = ctx->client_metadata();
    if (auto it = md.find(kMungeMetadata); it != md.end()) {
      const std::string cred(it->second.data(), it->second.size());
      const std::string key = peer + '\n' + cred;
      const auto now = std::chrono::steady_clock::now();
      {
        std::lock_guard lk(munge_mu_);
        if (auto s = munge_seen_.find(key); s != munge_seen_.end() && s->second.second > now)
          return s->second.first;
      }
      if (auto id = munge_verify(cred, cfg_.munge_socket, &c.why)) {
        c.via = Caller::Via::tcp_munge;
        c.uid = id->uid;
        c.gid = id->gid;
        std::lock_guard lk(munge_mu_);
        std::erase_if(munge_seen_, [&](const auto& e) { return e.second.second <= now; });
        if (munge_seen_.size() >= 4096) munge_seen_.erase(munge_seen_.begin());
        munge_seen_[key] = {c, now + std::chrono::minutes(5)};
      }
      return c;
    }
  }
  // With a token configured every other TCP caller has presented it
  // (authorized()), and the token is the daemons' user's credential.
  if (!cfg_.token.empty()) {
    c.via = Caller::Via::tcp_token;
    c.uid = self_uid_;
    c.gid = self_gid_;
    return c;
  }
  // Without one the manager listens on loopback only: the kernel knows who
  // owns the client's socket.
  if (auto uid = loopback_client_uid(peer, tcp_port_.load())) {
    c.via = Caller::Via::tcp_loopback;
    c.uid = *uid;
    c.gid = *uid == self_uid_ ? self_gid_ : 0;  // only the daemons' user may launch over TCP
  }
  return c;
}

grpc::Status Manager::prove(grpc::ServerContext* ctx, const v1::ProveRequest& req,
                            v1::ProveReply* rep) const {
  if (cfg_.token.empty())
    return {grpc::StatusCode::FAILED_PRECONDITION,
            "this manager has no token (bcs-mm --token-file): nothing to prove"};
  std::string why;
  auto p = answer_prove(cfg_.token, req.nonce(), ctx->peer(), &why);
  if (!p) return {grpc::StatusCode::INVALID_ARGUMENT, why};
  rep->set_cookie(p->cookie);
  rep->set_seen(p->seen);
  rep->set_proof(p->proof);
  return grpc::Status::OK;
}

std::string Manager::may_touch(const Caller& c, const Job& j) const {
  if (!c.known()) return "the caller could not be identified";
  if (c.uid == j.uid || is_admin(c)) return {};
  return "job " + std::to_string(j.id) + " belongs to " + user_name(j.uid);
}

}  // namespace bcs::mm
