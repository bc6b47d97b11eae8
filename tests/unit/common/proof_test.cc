// The proof of the token (daemons/common/proof.h): each side proves it holds
// the token without sending it, bound to one connection's address.
#include "proof.h"

#include <gtest/gtest.h>

#include "peer.h"

namespace {

using namespace std::chrono_literals;

const std::string kToken = "the-clusters-token";
const std::string kPeer = "ipv4:10.1.2.3:40000";  // the caller, as the manager's gRPC names it
const std::string kLocal = "10.1.2.3:40000";      // the same end, as the caller sees it

TEST(ProofTest, EachSideProvesTheTokenForOneConnection) {
  const std::string nonce = bcs::new_nonce();
  std::string why;
  auto p = bcs::answer_prove(kToken, nonce, kPeer, &why);
  ASSERT_TRUE(p) << why;
  EXPECT_EQ(p->seen, kLocal);
  EXPECT_EQ(bcs::check_manager_proof(kToken, nonce, kLocal, *p), "");
  const std::string md = bcs::caller_proof(kToken, p->cookie);
  EXPECT_TRUE(bcs::proof_accepted(kToken, md, kPeer));
  // Nothing sent either way holds the token.
  for (const std::string& sent : {p->cookie, p->proof, p->seen, md})
    EXPECT_EQ(sent.find(kToken), std::string::npos) << sent;
}

TEST(ProofTest, AManagerWithoutTheTokenIsRefused) {
  const std::string nonce = bcs::new_nonce();
  std::string why;
  auto p = bcs::answer_prove("another-token", nonce, kPeer, &why);
  ASSERT_TRUE(p) << why;
  EXPECT_NE(bcs::check_manager_proof(kToken, nonce, kLocal, *p).find("does not prove"),
            std::string::npos);
  // Nor is a proof made for another nonce (a recorded answer replayed).
  auto q = bcs::answer_prove(kToken, bcs::new_nonce(), kPeer, &why);
  ASSERT_TRUE(q);
  EXPECT_NE(bcs::check_manager_proof(kToken, nonce, kLocal, *q), "");
}

TEST(ProofTest, AProofRelayedFromAnotherConnectionIsRefused) {
  // A fake manager forwards our nonce to the real one from its own socket:
  // the answer is for the fake's address, not ours.
  const std::string nonce = bcs::new_nonce();
  std::string why;
  auto p = bcs::answer_prove(kToken, nonce, "ipv4:10.1.2.3:40001", &why);
  ASSERT_TRUE(p) << why;
  EXPECT_NE(bcs::check_manager_proof(kToken, nonce, kLocal, *p).find("relays"),
            std::string::npos);
  // And a caller's proof is good on its own connection only.
  auto mine = bcs::answer_prove(kToken, nonce, kPeer, &why);
  ASSERT_TRUE(mine);
  const std::string md = bcs::caller_proof(kToken, mine->cookie);
  EXPECT_FALSE(bcs::proof_accepted(kToken, md, "ipv4:10.1.2.3:40001"));
  EXPECT_FALSE(bcs::proof_accepted(kToken, md, "ipv4:10.9.9.9:40000"));
}

TEST(ProofTest, ACookieExpiresAndCannotBeForged) {
  const auto t0 = std::chrono::system_clock::now();
  std::string why;
  auto p = bcs::answer_prove(kToken, bcs::new_nonce(), kPeer, &why, t0);
  ASSERT_TRUE(p) << why;
  const std::string md = bcs::caller_proof(kToken, p->cookie);
  EXPECT_TRUE(bcs::proof_accepted(kToken, md, kPeer, t0 + 1h));
  EXPECT_FALSE(bcs::proof_accepted(kToken, md, kPeer, t0 + bcs::kCookieLifetime + 1min));
  EXPECT_FALSE(bcs::proof_accepted(kToken, md, kPeer, t0 - 2min));  // issued "in the future"
  // A cookie whose time was moved on without the manager's MAC over it
  // (a caller stretching its lifetime): refused.
  std::string moved = p->cookie;
  moved[18] = moved[18] == '0' ? '1' : '0';
  EXPECT_FALSE(bcs::proof_accepted(kToken, bcs::caller_proof(kToken, moved), kPeer, t0));
  // The token itself, or nothing, is no proof.
  EXPECT_FALSE(bcs::proof_accepted(kToken, kToken, kPeer));
  EXPECT_FALSE(bcs::proof_accepted(kToken, "", kPeer));
  EXPECT_FALSE(bcs::proof_accepted(kToken, md + "x", kPeer));
  EXPECT_FALSE(bcs::proof_accepted(kToken, std::string(200, ':'), kPeer));
  EXPECT_FALSE(bcs::proof_accepted("", md, kPeer));  // a manager without a token accepts none
}

TEST(ProofTest, OnlyTcpCallersAndWellFormedNoncesGetAnAnswer) {
  std::string why;
  EXPECT_FALSE(bcs::answer_prove(kToken, "short", kPeer, &why));
  EXPECT_FALSE(bcs::answer_prove(kToken, std::string(32, 'G'), kPeer, &why));
  EXPECT_FALSE(bcs::answer_prove(kToken, bcs::new_nonce(), "fd:7", &why));
  EXPECT_FALSE(bcs::answer_prove(kToken, bcs::new_nonce(), "unix:/run/x", &why));
}

TEST(ProofTest, AddressesHaveOneSpellingWhateverTheFamily) {
  EXPECT_EQ(bcs::canonical_grpc_peer("ipv4:127.0.0.1:80"), "127.0.0.1:80");
  EXPECT_EQ(bcs::canonical_grpc_peer("ipv6:[::ffff:127.0.0.1]:80"), "127.0.0.1:80");
  EXPECT_EQ(bcs::canonical_grpc_peer("ipv6:%5B::ffff:10.0.0.1%5D:81"), "10.0.0.1:81");
  EXPECT_EQ(bcs::canonical_grpc_peer("ipv6:%5B::1%5D:7"), "[::1]:7");
  EXPECT_FALSE(bcs::canonical_grpc_peer("fd:3"));
  EXPECT_FALSE(bcs::canonical_grpc_peer("ipv4:nonsense:1"));
}

}  // namespace
