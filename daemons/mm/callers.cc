#include "callers.h"

#include <fcntl.h>
#include <grpcpp/server_posix.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

namespace bcs::mm {

std::string Caller::describe() const {
  const std::string who = user_name(uid) + " (uid " + std::to_string(uid) + ")";
  switch (via) {
    case Via::unix_socket: return who + " over the unix socket";
    case Via::tcp_loopback: return who + " over TCP on loopback";
    case Via::tcp_token: return who + " by the cluster token";
    case Via::tcp_munge: return who + " by a munge credential";
    case Via::unknown: break;
  }
  return "an unidentified caller";
}

bool UnixSessions::open(const std::string& path, std::string* why) {
  if (!listener_.open(path, why)) return false;
  stop_.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!stop_) {
    if (why) *why = std::string("eventfd: ") + std::strerror(errno);
    return false;
  }
  return true;
}

void UnixSessions::serve(grpc::Server* server) {
  thread_ = std::thread([this, server] { accept_loop(server); });
}

void UnixSessions::stop() {
  if (stop_) {
    uint64_t one = 1;
    [[maybe_unused]] auto n = ::write(stop_.get(), &one, sizeof one);
  }
  if (thread_.joinable()) thread_.join();
}

void UnixSessions::sweep_locked() {
  for (auto it = sessions_.begin(); it != sessions_.end();) {
    struct stat st {};
    if (::fstat(it->second.fd, &st) != 0 || st.st_ino != it->second.ino)
      it = sessions_.erase(it);
    else
      ++it;
  }
}

void UnixSessions::accept_loop(grpc::Server* server) {
  pthread_setname_np(pthread_self(), "bcs-unix");
  for (;;) {
    pollfd fds[2] = {{listener_.fd(), POLLIN, 0}, {stop_.get(), POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      spdlog::error("unix socket: poll: {}", std::strerror(errno));
      return;
    }
    if (fds[1].revents) return;
    UniqueFd c(::accept4(listener_.fd(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (!c) continue;  // EAGAIN, ECONNABORTED, EMFILE: keep serving the others
    auto cred = socket_peer_cred(c.get());
    struct stat st {};
    const std::string id = new_session_id();
    if (!cred || id.empty() || ::fstat(c.get(), &st) != 0) continue;
    {
      std::lock_guard lk(mu_);
      sweep_locked();
      int mine = 0;
      for (auto& [k, s] : sessions_) mine += s.cred.uid == cred->uid;
      if (mine >= kPerUser || sessions_.size() >= kTotal) {
        // Said to the one refused, not only in this log: connect_unix_session
        // reads the reason and bcs prints it.
        const std::string why =
            mine >= kPerUser
                ? user_name(cred->uid) + " already has " + std::to_string(mine) +
                      " connections open to this manager, the most one user may have (" +
                      std::to_string(kPerUser) + "); try again when some of them have ended"
                : "the manager has " + std::to_string(sessions_.size()) +
                      " connections open, the most it takes (" + std::to_string(kTotal) +
                      "); try again later";
        spdlog::warn("unix socket: refusing a connection of {} (pid {}): {}",
                     user_name(cred->uid), cred->pid, why);
        // A fresh socket's buffer takes the few hundred bytes; the client
        // sent nothing yet, so closing does not reset what it is to read.
        const std::string no = refusal_preamble(why);
        [[maybe_unused]] auto n = ::write(c.get(), no.data(), no.size());
        continue;
      }
      // The preamble goes out before gRPC owns the socket; 48 bytes always
      // fit into a fresh socket's buffer.
      const std::string pre = session_preamble(id);
      if (::write(c.get(), pre.data(), pre.size()) != static_cast<ssize_t>(pre.size())) continue;
      sessions_[id] = Session{*cred, c.get(), st.st_ino};
    }
    spdlog::debug("unix socket: {} (pid {}) connected", user_name(cred->uid), cred->pid);
    grpc::AddInsecureChannelFromFd(server, c.release());
  }
}

std::optional<PeerCred> UnixSessions::find(const std::string& peer, const std::string& id) {
  if (peer.rfind("fd:", 0) != 0 || id.size() != kSessionIdChars) return std::nullopt;
  char* end = nullptr;
  const long fd = std::strtol(peer.c_str() + 3, &end, 10);
  if (*end || fd < 0) return std::nullopt;
  std::lock_guard lk(mu_);
  auto it = sessions_.find(id);
  if (it == sessions_.end() || it->second.fd != fd) return std::nullopt;
  // Still the same connection (gRPC keeps the fd open while the call is
  // served; this guards against anything else).
  struct stat st {};
  if (::fstat(static_cast<int>(fd), &st) != 0 || st.st_ino != it->second.ino) return std::nullopt;
  return it->second.cred;
}

}  // namespace bcs::mm
