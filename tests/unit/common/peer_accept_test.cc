// Who accepted a loopback connection, asked right after connect(): the
// node manager checks it before gRPC sends a byte, when the manager may
// not have called accept() yet (peer.h, loopback_server_uids).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "fd.h"
#include "net.h"
#include "peer.h"

namespace {

TEST(PeerAcceptTest, AConnectionNotAcceptedYetIsOwnedByItsListener) {
  bcs::UniqueFd listener(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  ASSERT_GE(listener.get(), 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(listener.get(), reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(listener.get(), 4), 0);
  socklen_t len = sizeof a;
  ASSERT_EQ(::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&a), &len), 0);
  const uint16_t port = ntohs(a.sin_port);
  // Nobody accepts: the server's end of the connection has no inode yet.
  std::string why;
  bcs::UniqueFd c(bcs::connect_tcp("127.0.0.1", port, std::chrono::seconds(5), &why));
  ASSERT_GE(c.get(), 0) << why;
  const auto uids = bcs::loopback_server_uids("127.0.0.1", port);
  ASSERT_FALSE(uids.empty());
  for (uid_t u : uids) EXPECT_EQ(u, ::geteuid());
  // And our end, as the proof of the token names it.
  EXPECT_EQ(bcs::canonical_local_address(c.get()).value_or("").rfind("127.0.0.1:", 0), 0u);
}

TEST(PeerAcceptTest, NoListenerNoConnection) {
  std::string why;
  // Port 1 on loopback: nothing listens there in a test sandbox.
  EXPECT_LT(bcs::connect_tcp("127.0.0.1", 1, std::chrono::seconds(5), &why), 0);
  EXPECT_NE(why.find("cannot connect to 127.0.0.1:1"), std::string::npos) << why;
}

}  // namespace
