// Who is at the other end of a connection (daemons/common/peer.h): unix
// sessions with SO_PEERCRED, and socket owners of loopback TCP connections.
#include "peer.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

namespace bcs {
namespace {

using namespace std::chrono_literals;

class PeerTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("bcs-peer-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string path(const std::string& f) const { return (dir_ / f).string(); }
  std::filesystem::path dir_;
};

TEST(Session, IdsAreFreshHexAndThePreambleHasItsFixedLength) {
  auto a = new_session_id(), b = new_session_id();
  EXPECT_EQ(a.size(), kSessionIdChars);
  EXPECT_NE(a, b);
  EXPECT_EQ(a.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_EQ(session_preamble(a).size(), kPreambleBytes);
}

TEST_F(PeerTest, ASessionCarriesIdAndCredentialsAndNotAByteMore) {
  UnixListener l;
  std::string why;
  ASSERT_TRUE(l.open(path("mm.sock"), &why)) << why;
  struct stat st {};
  ASSERT_EQ(stat(path("mm.sock").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0666u);  // anyone may connect
  const std::string id = new_session_id();
  std::thread server([&] {
    pollfd p{l.fd(), POLLIN, 0};
    ASSERT_EQ(poll(&p, 1, 10000), 1);
    UniqueFd c(accept4(l.fd(), nullptr, nullptr, SOCK_CLOEXEC));
    ASSERT_TRUE(c);
    auto cred = socket_peer_cred(c.get());
    ASSERT_TRUE(cred);
    EXPECT_EQ(cred->uid, geteuid());
    EXPECT_EQ(cred->pid, getpid());
    // The preamble and the first bytes of "gRPC" in one write: the client
    // must leave the latter on the socket.
    const std::string out = session_preamble(id) + "PRI *";
    ASSERT_EQ(write(c.get(), out.data(), out.size()), static_cast<ssize_t>(out.size()));
    char buf[8];
    ASSERT_EQ(read(c.get(), buf, 1), 0);  // the client closed
  });
  {
    auto s = connect_unix_session(path("mm.sock"), 10s, &why);
    ASSERT_TRUE(s) << why;
    EXPECT_EQ(s->id, id);
    EXPECT_EQ(s->server.uid, geteuid());
    char rest[5];
    ASSERT_EQ(recv(s->fd.get(), rest, 5, MSG_WAITALL), 5);
    EXPECT_EQ(std::string(rest, 5), "PRI *");
  }
  server.join();
}

TEST_F(PeerTest, ASocketThatSpeaksSomethingElseIsRefused) {
  UnixListener l;
  std::string why;
  ASSERT_TRUE(l.open(path("x.sock"), &why)) << why;
  std::thread server([&] {
    pollfd p{l.fd(), POLLIN, 0};
    ASSERT_EQ(poll(&p, 1, 10000), 1);
    UniqueFd c(accept4(l.fd(), nullptr, nullptr, SOCK_CLOEXEC));
    const std::string out(kPreambleBytes, 'x');
    ASSERT_EQ(write(c.get(), out.data(), out.size()), static_cast<ssize_t>(out.size()));
    char buf[8];
    (void)!read(c.get(), buf, 1);
  });
  EXPECT_FALSE(connect_unix_session(path("x.sock"), 10s, &why));
  EXPECT_NE(why.find("does not speak"), std::string::npos) << why;
  server.join();
}

// A manager that refuses the connection (a user over its session cap) says
// why, and the client reports that reason, not only "closed the
// connection" (issue 42). Control characters in it reach no terminal.
TEST_F(PeerTest, ARefusalReachesTheClientWithItsReason) {
  UnixListener l;
  std::string why;
  ASSERT_TRUE(l.open(path("mm.sock"), &why)) << why;
  const std::string reason =
      "alice already has 64 connections open to this manager, the most one user may have (64)\x1b[2J";
  std::thread server([&] {
    pollfd p{l.fd(), POLLIN, 0};
    ASSERT_EQ(poll(&p, 1, 10000), 1);
    UniqueFd c(accept4(l.fd(), nullptr, nullptr, SOCK_CLOEXEC));
    ASSERT_TRUE(c);
    const std::string out = refusal_preamble(reason);
    ASSERT_EQ(write(c.get(), out.data(), out.size()), static_cast<ssize_t>(out.size()));
    // Closed at once, as the manager does.
  });
  EXPECT_FALSE(connect_unix_session(path("mm.sock"), 10s, &why));
  server.join();
  EXPECT_NE(why.find("refused the connection: alice already has 64 connections open to this "
                     "manager, the most one user may have (64)?[2J"),
            std::string::npos)
      << why;
  // Shorter than a session preamble, longer, and cut at kRefusalMax.
  EXPECT_LT(refusal_preamble("no").size(), kPreambleBytes);
  EXPECT_EQ(refusal_preamble(std::string(4 * kRefusalMax, 'x')).size(), 15 + kRefusalMax + 1);
}

TEST_F(PeerTest, ALiveSocketIsNotTakenOverAStaleOneIsAndTheFileGoesWithItsListener) {
  std::string why;
  {
    UnixListener a;
    ASSERT_TRUE(a.open(path("mm.sock"), &why)) << why;
    UnixListener b;
    EXPECT_FALSE(b.open(path("mm.sock"), &why));
    EXPECT_NE(why.find("already listens"), std::string::npos) << why;
  }
  EXPECT_FALSE(std::filesystem::exists(path("mm.sock")));
  // A socket file whose process died (bound, never removed).
  {
    UniqueFd s(socket(AF_UNIX, SOCK_STREAM, 0));
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::snprintf(a.sun_path, sizeof a.sun_path, "%s", path("mm.sock").c_str());
    ASSERT_EQ(bind(s.get(), reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  }
  UnixListener c;
  EXPECT_TRUE(c.open(path("mm.sock"), &why)) << why;
  // Not a socket: never removed.
  { std::ofstream(path("file")) << "x"; }
  UnixListener d;
  EXPECT_FALSE(d.open(path("file"), &why));
  EXPECT_TRUE(std::filesystem::exists(path("file")));
}

// A loopback TCP connection inside this process.
struct Loop {
  UniqueFd listener, client, server;
  uint16_t server_port = 0, client_port = 0;
  Loop() {
    listener.reset(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (bind(listener.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        listen(listener.get(), 4) != 0 ||
        getsockname(listener.get(), reinterpret_cast<sockaddr*>(&a), &len) != 0)
      return;
    server_port = ntohs(a.sin_port);
    client.reset(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (connect(client.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return;
    server.reset(accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
    sockaddr_in c{};
    len = sizeof c;
    getsockname(client.get(), reinterpret_cast<sockaddr*>(&c), &len);
    client_port = ntohs(c.sin_port);
  }
};

TEST(LoopbackOwner, TheManagerFindsWhoConnected) {
  Loop l;
  ASSERT_TRUE(l.server) << "no loopback TCP here";
  const std::string p = std::to_string(l.client_port);
  EXPECT_EQ(loopback_client_uid("ipv4:127.0.0.1:" + p, l.server_port), geteuid());
  // gRPC's spellings of the same peer.
  EXPECT_EQ(loopback_client_uid("ipv6:[::ffff:127.0.0.1]:" + p, l.server_port), geteuid());
  EXPECT_EQ(loopback_client_uid("ipv6:%5B::ffff:127.0.0.1%5D:" + p, l.server_port), geteuid());
  // Not that connection, not loopback, not an address.
  EXPECT_FALSE(loopback_client_uid("ipv4:127.0.0.1:" + p, l.server_port + 1));
  EXPECT_FALSE(loopback_client_uid("ipv4:10.1.2.3:" + p, l.server_port));
  EXPECT_FALSE(loopback_client_uid("unix:/x", l.server_port));
  EXPECT_FALSE(loopback_client_uid("fd:7", l.server_port));
}

// The kernel's answer for the one socket (sock_diag), which spares the
// manager a walk through every socket of the host on each call: the same
// owner, and nothing for a connection that is not there.
TEST(LoopbackOwner, TheKernelNamesTheOneSocketsOwner) {
  Loop l;
  ASSERT_TRUE(l.server) << "no loopback TCP here";
  const std::string p = std::to_string(l.client_port);
  EXPECT_EQ(loopback_client_uid_by_diag("ipv4:127.0.0.1:" + p, l.server_port), geteuid());
  EXPECT_EQ(loopback_client_uid_by_diag("ipv6:[::ffff:127.0.0.1]:" + p, l.server_port), geteuid());
  EXPECT_FALSE(loopback_client_uid_by_diag("ipv4:127.0.0.1:" + p, l.server_port + 1));
  EXPECT_FALSE(loopback_client_uid_by_diag("ipv4:10.1.2.3:" + p, l.server_port));
  // A dual-stack client (an IPv6 socket reaching 127.0.0.1, as gRPC's
  // are), which the server sees as an IPv4 peer.
  UniqueFd c6(socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in6 to{};
  to.sin6_family = AF_INET6;
  to.sin6_port = htons(l.server_port);
  ASSERT_EQ(inet_pton(AF_INET6, "::ffff:127.0.0.1", &to.sin6_addr), 1);
  if (!c6 || connect(c6.get(), reinterpret_cast<sockaddr*>(&to), sizeof to) != 0)
    GTEST_SKIP() << "no dual-stack sockets here";
  UniqueFd accepted(accept4(l.listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
  sockaddr_in6 me{};
  socklen_t len = sizeof me;
  ASSERT_EQ(getsockname(c6.get(), reinterpret_cast<sockaddr*>(&me), &len), 0);
  EXPECT_EQ(loopback_client_uid_by_diag("ipv4:127.0.0.1:" + std::to_string(ntohs(me.sin6_port)),
                                        l.server_port),
            geteuid());
}

TEST(LoopbackOwner, ANodeManagerFindsWhoAccepted) {
  Loop l;
  ASSERT_TRUE(l.server) << "no loopback TCP here";
  auto uids = loopback_server_uids("127.0.0.1", l.server_port);
  ASSERT_FALSE(uids.empty());
  for (uid_t u : uids) EXPECT_EQ(u, geteuid());
  // Another host's table is not ours to read: nothing is claimed.
  EXPECT_TRUE(loopback_server_uids("example.invalid", l.server_port).empty());
}

TEST(UserName, KnownAndUnknown) {
  EXPECT_EQ(user_name(0), "root");
  EXPECT_EQ(user_name(3999999999u), "uid 3999999999");
}

}  // namespace
}  // namespace bcs
