// Who calls the machine manager (see daemons/common/peer.h for how it is
// found out) and the unix-socket sessions that tell it.
#pragma once

#include <grpcpp/grpcpp.h>
#include <sys/types.h>

#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "fd.h"
#include "peer.h"

namespace bcs::mm {

struct Caller {
  enum class Via {
    unknown,       // not identified: refused everything but the monitor
    unix_socket,   // SO_PEERCRED of its connection to --socket
    tcp_loopback,  // owner of its socket in the kernel's TCP table
    tcp_token,     // presented the cluster token: the daemons' user
    tcp_munge,     // a munge credential (any host of the munge realm)
  };
  Via via = Via::unknown;
  uid_t uid = 0;
  gid_t gid = 0;
  std::string why;  // unknown: why, when there is more to say
  bool known() const { return via != Via::unknown; }
  // "alice (uid 1000) over the unix socket"
  std::string describe() const;
};

// The manager's unix socket (--socket): accepts connections itself, reads
// each client's credentials, writes the session preamble and hands the
// connection to the gRPC server. Calls are then matched back to their
// connection by session id *and* gRPC's peer name "fd:N".
class UnixSessions {
 public:
  UnixSessions() = default;
  ~UnixSessions() { stop(); }
  UnixSessions(const UnixSessions&) = delete;
  UnixSessions& operator=(const UnixSessions&) = delete;

  // Listens on `path` (see UnixListener). False and *why on failure.
  bool open(const std::string& path, std::string* why);
  // Starts accepting, handing every connection to `server`.
  void serve(grpc::Server* server);
  // Stops accepting (before the server shuts down); removes the socket.
  void stop();
  const std::string& path() const { return listener_.path(); }

  // The credentials of the session `id`, if the call arrived on its
  // connection (`peer` is ServerContext::peer(), "fd:N").
  std::optional<PeerCred> find(const std::string& peer, const std::string& id);

  // Connections one user may hold at once (a user cannot starve others).
  static constexpr int kPerUser = 64;
  static constexpr size_t kTotal = 4096;

 private:
  struct Session {
    PeerCred cred;
    int fd = -1;
    ino_t ino = 0;
  };
  void accept_loop(grpc::Server* server);
  void sweep_locked();  // drops sessions whose connection gRPC has closed

  UnixListener listener_;
  UniqueFd stop_;
  std::thread thread_;
  std::mutex mu_;
  std::map<std::string, Session> sessions_;  // by id
};

}  // namespace bcs::mm
