// Proving the cluster's token without sending it (proof.h).
#include "proof.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sys/random.h>

#include <cstdio>
#include <vector>

#include "peer.h"
#include "token.h"

namespace bcs {
namespace {

std::string hex(const unsigned char* p, size_t n) {
  static const char* d = "0123456789abcdef";
  std::string s(2 * n, '0');
  for (size_t i = 0; i < n; ++i) {
    s[2 * i] = d[p[i] >> 4];
    s[2 * i + 1] = d[p[i] & 15];
  }
  return s;
}

bool is_hex(std::string_view s, size_t n) {
  if (s.size() != n) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

// Cookie: "v1.<seconds, 16 hex>.<random, 32 hex>.<mac, 64 hex>".
constexpr size_t kCookieChars = 3 + 16 + 1 + 32 + 1 + 64;

std::string cookie_mac(std::string_view token, std::string_view secs, std::string_view rnd,
                       std::string_view seen) {
  return token_mac(token, {"bcs-cookie", secs, rnd, seen});
}

}  // namespace

std::string token_mac(std::string_view token, std::initializer_list<std::string_view> parts) {
  // Length-prefixed, so that no two different lists of parts are the same
  // bytes ("ab","c" vs "a","bc").
  std::string msg;
  for (std::string_view p : parts) {
    char len[24];
    std::snprintf(len, sizeof len, "%zu:", p.size());
    msg += len;
    msg += p;
  }
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  HMAC(EVP_sha256(), token.data(), static_cast<int>(token.size()),
       reinterpret_cast<const unsigned char*>(msg.data()), msg.size(), out, &n);
  return hex(out, n);
}

std::string new_nonce() {
  unsigned char b[16];
  size_t got = 0;
  while (got < sizeof b) {
    ssize_t r = ::getrandom(b + got, sizeof b - got, 0);
    if (r > 0) got += static_cast<size_t>(r);
  }
  return hex(b, sizeof b);
}

std::optional<ManagerProof> answer_prove(const std::string& token, const std::string& nonce,
                                         const std::string& grpc_peer, std::string* why,
                                         std::chrono::system_clock::time_point now) {
  if (!is_hex(nonce, 32)) {
    *why = "the nonce must be 32 lowercase hex digits";
    return std::nullopt;
  }
  auto seen = canonical_grpc_peer(grpc_peer);
  if (!seen) {
    *why = "a proof is for TCP connections (this one is " + grpc_peer + ")";
    return std::nullopt;
  }
  char secs[17];
  std::snprintf(secs, sizeof secs, "%016llx",
                static_cast<unsigned long long>(
                    std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch())
                        .count()));
  const std::string rnd = new_nonce();
  ManagerProof p;
  p.seen = *seen;
  p.cookie = std::string("v1.") + secs + "." + rnd + "." + cookie_mac(token, secs, rnd, p.seen);
  p.proof = token_mac(token, {"bcs-manager", nonce, p.cookie, p.seen});
  return p;
}

bool proof_accepted(const std::string& token, std::string_view metadata,
                    const std::string& grpc_peer, std::chrono::system_clock::time_point now) {
  if (token.empty()) return false;
  const size_t colon = metadata.find(':');
  if (colon != kCookieChars || metadata.size() != kCookieChars + 1 + 64) return false;
  const std::string_view cookie = metadata.substr(0, colon), mac = metadata.substr(colon + 1);
  if (cookie.substr(0, 3) != "v1." || cookie[19] != '.' || cookie[52] != '.') return false;
  const std::string_view secs = cookie.substr(3, 16), rnd = cookie.substr(20, 32),
                         cmac = cookie.substr(53, 64);
  if (!is_hex(secs, 16) || !is_hex(rnd, 32) || !is_hex(cmac, 64) || !is_hex(mac, 64)) return false;
  const auto seen = canonical_grpc_peer(grpc_peer);
  if (!seen) return false;
  // The cookie is ours, for this connection's address...
  if (!tokens_equal(cmac, cookie_mac(token, secs, rnd, *seen))) return false;
  // ... and recent (a little clock step forward is forgiven).
  const long long issued = std::stoll(std::string(secs), nullptr, 16);
  const long long t =
      std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch()).count();
  if (issued > t + 60 || t - issued > std::chrono::seconds(kCookieLifetime).count()) return false;
  // ... and the caller holds the token.
  return tokens_equal(metadata, caller_proof(token, std::string(cookie)));
}

std::string check_manager_proof(const std::string& token, const std::string& nonce,
                                const std::string& local, const ManagerProof& p) {
  if (p.seen != local)
    return "it saw this connection come from " + (p.seen.empty() ? "nowhere" : p.seen) +
           ", but it leaves here from " + local +
           ": something relays it (or NAT rewrites it); across such a network use TLS "
           "(bcs-mm --tls-cert/--tls-key, and --tls-ca or $BCS_TLS_CA here)";
  if (p.cookie.size() != kCookieChars ||
      !tokens_equal(p.proof, token_mac(token, {"bcs-manager", nonce, p.cookie, p.seen})))
    return "it does not prove that it holds the cluster's token: it is not the cluster's "
           "manager, or its token differs from ours";
  return {};
}

std::string caller_proof(const std::string& token, const std::string& cookie) {
  return cookie + ":" + token_mac(token, {"bcs-caller", cookie});
}

}  // namespace bcs
