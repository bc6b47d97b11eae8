// Who is at the other end of a control-plane connection, on one host.
//
// gRPC 1.51 tells a server nothing about the user behind a connection: its
// AuthContext is empty for insecure and for unix-socket ("local")
// credentials, and no API exposes the socket. So the daemons find out
// themselves (docs/architecture.md, "Who may talk to the daemons"):
//
//  - Unix socket: the machine manager accepts connections on its --socket
//    itself, reads the client's credentials with SO_PEERCRED, writes a
//    session preamble (a random session id) and only then hands the socket
//    to gRPC (AddInsecureChannelFromFd). The client reads the preamble from
//    the raw socket, builds its channel on that fd
//    (CreateInsecureChannelFromFd) and sends the session id with every call.
//    The manager trusts a call's session only if it also arrived on that
//    very connection (gRPC names it "fd:N" as its peer). The client, too,
//    learns the server's credentials from SO_PEERCRED: a node manager
//    refuses a manager that runs as another user.
//  - TCP on loopback: the kernel's socket table (/proc/net/tcp, tcp6) holds
//    the owner uid of every socket on this host; the client's end of the
//    connection (found by its address and port) tells the manager who
//    connected, and the server's end tells a node manager who accepted.
//  - TCP from another host: nothing; only the proof of the shared token
//    counts (proof.h), or TLS.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fd.h"

namespace bcs {

struct PeerCred {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
};

// SO_PEERCRED of a connected unix socket.
std::optional<PeerCred> socket_peer_cred(int fd);

// ---------------------------------------------------------------- sessions
// The preamble a manager writes on an accepted unix connection before any
// gRPC byte: "BCS-MM-SESSION " + 32 hex digits + "\n", fixed length.
inline constexpr size_t kSessionIdChars = 32;
inline constexpr size_t kPreambleBytes = 15 + kSessionIdChars + 1;
// The gRPC metadata key that carries the session id back.
inline constexpr const char* kSessionMetadata = "bcs-session";

// A fresh random session id (getrandom), kSessionIdChars hex digits.
std::string new_session_id();
std::string session_preamble(const std::string& id);
// What a manager writes instead when it refuses the connection (a user over
// the session cap): "BCS-MM-REFUSED " + reason + "\n", the reason cut to
// kRefusalMax bytes and its control characters replaced. Then it closes the
// connection; connect_unix_session reports the reason, so the person refused
// reads why and not only that the connection closed.
inline constexpr size_t kRefusalMax = 512;
std::string refusal_preamble(const std::string& reason);

// A listening unix socket at `path` (mode 0666: any local user may connect;
// who they are is read from the connection). A stale socket file nobody
// listens on is replaced; a live one is an error. The file is removed when
// the object goes.
class UnixListener {
 public:
  UnixListener() = default;
  ~UnixListener();
  UnixListener(const UnixListener&) = delete;
  UnixListener& operator=(const UnixListener&) = delete;
  bool open(const std::string& path, std::string* why);
  int fd() const { return fd_.get(); }
  const std::string& path() const { return path_; }

 private:
  UniqueFd fd_;
  std::string path_;
  ino_t ino_ = 0;
};

// Connects to the manager's unix socket `path`, reads its preamble (at most
// `limit`), and returns the connected socket, the session id and the
// manager's credentials. The socket stays blocking, as gRPC wants it given.
struct UnixSession {
  UniqueFd fd;
  std::string id;
  PeerCred server;
};
std::optional<UnixSession> connect_unix_session(const std::string& path,
                                                std::chrono::milliseconds limit,
                                                std::string* why);

// ------------------------------------------------------------ TCP on loopback
// The owner uid of the *client's* socket of a loopback TCP connection to
// our `server_port`, given the client's address as gRPC prints it
// ("ipv4:127.0.0.1:54321", "ipv6:[::1]:54321", "ipv6:%5B::1%5D:54321").
// nullopt if the peer is not on loopback or its socket is not found.
std::optional<uid_t> loopback_client_uid(const std::string& grpc_peer, uint16_t server_port);
// Its first look alone: the kernel's sock_diag lookup of that one socket,
// with the server at the loopback address of the client's family (nullopt
// where that does not find it; loopback_client_uid then reads the whole
// table).
std::optional<uid_t> loopback_client_uid_by_diag(const std::string& grpc_peer,
                                                 uint16_t server_port);

// The owner uids of the *server's* sockets of this process's established
// TCP connections to `ip`:`port` (the manager's accepted sockets; for a
// connection not accepted yet, the sockets listening on that port, which
// will accept it). Empty if none is found; every element must be the
// expected uid.
std::vector<uid_t> loopback_server_uids(const std::string& host, uint16_t port);

// ----------------------------------------------------- one connection's ends
// A TCP address in one spelling whatever the socket's family: "1.2.3.4:5"
// for IPv4 (also when an IPv6 socket holds ::ffff:1.2.3.4), "[::1]:5"
// otherwise. For a gRPC peer URI ("ipv4:1.2.3.4:5", "ipv6:%5B::1%5D:5"), and
// for the local end of a connected socket (getsockname). nullopt for
// anything that is not TCP/IP.
std::optional<std::string> canonical_grpc_peer(const std::string& grpc_peer);
std::optional<std::string> canonical_local_address(int fd);

// "root", "alice", or "uid 1234" when there is no such user.
std::string user_name(uid_t uid);

}  // namespace bcs
