// Proving the cluster's shared token without sending it (issue 42;
// docs/architecture.md, "Who may talk to the daemons").
//
// A node manager or a client that holds the token asks whoever answers at
// the manager's address to prove it holds the token too, before anything
// secret or any job crosses the connection; and it proves itself the same
// way. Nothing on the wire reveals the token: each side sends an HMAC-SHA256
// over it, never the token.
//
//   caller  -> Auth.Prove{nonce}                   (a fresh random nonce)
//   manager -> {cookie, seen, proof}
//      seen   = the caller's address:port as the manager sees this connection
//      cookie = time, random, HMAC(token, "cookie", time, random, seen)
//      proof  = HMAC(token, "manager", nonce, cookie, seen)
//   caller checks seen == its own end of the connection and the proof, then
//   sends on every later call "bcs-proof: cookie:HMAC(token, "caller", cookie)".
//
// The manager keeps no state: a cookie is valid for kCookieLifetime, and
// only on a connection from `seen` (the caller's address and port, which no
// other socket can hold while this connection lives). Binding both proofs to
// the connection's address defeats a relay: a fake manager that forwards
// the nonce to the real one gets a proof for its own connection, which the
// caller refuses. What it does not defeat is an attacker who can read and
// rewrite packets on the path (plain TCP): there TLS is the answer
// (--tls-cert / --tls-ca), and with TLS the certificate proves the manager.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace bcs {

// The metadata key of the caller's proof ("cookie:mac").
inline constexpr const char* kProofMetadata = "bcs-proof";
// How long a cookie stays valid; callers prove again well before (Connection).
inline constexpr std::chrono::hours kCookieLifetime{12};

struct ManagerProof {
  std::string cookie, seen, proof;
};

// HMAC-SHA256 over the length-prefixed `parts`, keyed by `token`, as hex.
std::string token_mac(std::string_view token, std::initializer_list<std::string_view> parts);

// A fresh random nonce (128 bits, hex).
std::string new_nonce();

// The manager's side: the answer to Prove{nonce} from `grpc_peer` (as
// gRPC names the caller: "ipv4:1.2.3.4:5678"). nullopt and *why for a
// caller that is not on TCP or a nonce that is not 32 hex digits.
std::optional<ManagerProof> answer_prove(const std::string& token, const std::string& nonce,
                                         const std::string& grpc_peer, std::string* why,
                                         std::chrono::system_clock::time_point now =
                                             std::chrono::system_clock::now());

// The manager's side: does `metadata` ("cookie:mac") prove the token for a
// call that came from `grpc_peer`?
bool proof_accepted(const std::string& token, std::string_view metadata,
                    const std::string& grpc_peer,
                    std::chrono::system_clock::time_point now = std::chrono::system_clock::now());

// The caller's side: "" if `p` proves that the manager holds `token` on this
// very connection (`local`: the caller's end, canonical_local_address()),
// else what is wrong, for a message that names the manager.
std::string check_manager_proof(const std::string& token, const std::string& nonce,
                                const std::string& local, const ManagerProof& p);

// The caller's side: the metadata value that proves the caller (after
// check_manager_proof passed).
std::string caller_proof(const std::string& token, const std::string& cookie);

}  // namespace bcs
