#include "peer.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <poll.h>
#include <pwd.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace bcs {
namespace {

constexpr const char* kPreamblePrefix = "BCS-MM-SESSION ";
// As long as kPreamblePrefix: the first 15 bytes tell which one came.
constexpr const char* kRefusalPrefix = "BCS-MM-REFUSED ";
static_assert(std::char_traits<char>::length(kRefusalPrefix) ==
              std::char_traits<char>::length(kPreamblePrefix));

// Printable ASCII only: a reason is printed on the refused user's terminal.
std::string printable(std::string s) {
  for (char& c : s)
    if (c < 0x20 || c > 0x7e) c = '?';
  return s;
}

// ------------------------------------------------------ the kernel's TCP table
struct Addr {
  unsigned char ip[16] = {};  // IPv4 as ::ffff:a.b.c.d
  uint16_t port = 0;
  bool operator==(const Addr& o) const {
    return port == o.port && std::memcmp(ip, o.ip, 16) == 0;
  }
};

const unsigned char kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};  // ::ffff:a.b.c.d

bool loopback(const Addr& a) {
  static const unsigned char v6lo[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  return std::memcmp(a.ip, v6lo, 16) == 0 ||
         (std::memcmp(a.ip, kMapped, 12) == 0 && a.ip[12] == 127);
}

void set_v4(Addr* a, const void* four) {
  std::memset(a->ip, 0, 10);
  a->ip[10] = a->ip[11] = 0xff;
  std::memcpy(a->ip + 12, four, 4);
}

struct TcpSock {
  Addr local, remote;
  unsigned state = 0;
  uid_t uid = 0;
  unsigned long inode = 0;
};
constexpr unsigned kEstablished = 1;
constexpr unsigned kListen = 10;

// 0.0.0.0 (as ::ffff:0.0.0.0) or ::: a listener on every address.
bool any_address(const Addr& a) {
  static const unsigned char zero[16] = {};
  return std::memcmp(a.ip, zero, 16) == 0 ||
         (std::memcmp(a.ip, kMapped, 12) == 0 && std::memcmp(a.ip + 12, zero, 4) == 0);
}

// "0100007F:1F90": the address as 32-bit words in host order, the port in hex.
bool parse_addr(const std::string& s, Addr* a) {
  size_t colon = s.find(':');
  if (colon == std::string::npos) return false;
  const std::string hex = s.substr(0, colon);
  a->port = static_cast<uint16_t>(std::strtoul(s.c_str() + colon + 1, nullptr, 16));
  if (hex.size() != 8 && hex.size() != 32) return false;
  unsigned char b[16];
  for (size_t w = 0; w < hex.size() / 8; ++w) {
    uint32_t word = static_cast<uint32_t>(std::strtoul(hex.substr(w * 8, 8).c_str(), nullptr, 16));
    std::memcpy(b + 4 * w, &word, 4);
  }
  if (hex.size() == 8)
    set_v4(a, b);
  else
    std::memcpy(a->ip, b, 16);
  return true;
}

std::vector<TcpSock> tcp_table() {
  std::vector<TcpSock> v;
  for (const char* file : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream f(file);
    std::string line;
    std::getline(f, line);  // header
    while (std::getline(f, line)) {
      std::istringstream is(line);
      std::string slot, local, remote, state, queues, timer, retr, uid, timeout, inode;
      if (!(is >> slot >> local >> remote >> state >> queues >> timer >> retr >> uid >> timeout >>
            inode))
        continue;
      TcpSock t;
      if (!parse_addr(local, &t.local) || !parse_addr(remote, &t.remote)) continue;
      t.state = static_cast<unsigned>(std::strtoul(state.c_str(), nullptr, 16));
      t.uid = static_cast<uid_t>(std::strtoul(uid.c_str(), nullptr, 10));
      t.inode = std::strtoul(inode.c_str(), nullptr, 10);
      v.push_back(t);
    }
  }
  return v;
}

// Address and port of a gRPC peer URI.
bool parse_grpc_peer(std::string p, Addr* a) {
  auto unescape = [](std::string s) {
    std::string out;
    for (size_t i = 0; i < s.size(); ++i) {
      if (s[i] == '%' && i + 2 < s.size()) {
        out += static_cast<char>(std::strtoul(s.substr(i + 1, 2).c_str(), nullptr, 16));
        i += 2;
      } else {
        out += s[i];
      }
    }
    return out;
  };
  bool v6;
  if (p.rfind("ipv4:", 0) == 0) {
    v6 = false;
    p = p.substr(5);
  } else if (p.rfind("ipv6:", 0) == 0) {
    v6 = true;
    p = unescape(p.substr(5));
  } else {
    return false;
  }
  size_t colon = p.rfind(':');
  if (colon == std::string::npos) return false;
  std::string host = p.substr(0, colon);
  a->port = static_cast<uint16_t>(std::strtoul(p.c_str() + colon + 1, nullptr, 10));
  if (!host.empty() && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  if (!v6) {
    in_addr v4{};
    if (inet_pton(AF_INET, host.c_str(), &v4) != 1) return false;
    set_v4(a, &v4);
    return true;
  }
  in6_addr x{};
  if (inet_pton(AF_INET6, host.c_str(), &x) != 1) return false;
  std::memcpy(a->ip, &x, 16);
  return true;
}

// The owner of the established TCP socket whose local end is `local` and
// whose remote end is the loopback address of its family at `port`, asked
// of the kernel's sock_diag: a hash lookup of one socket, where
// /proc/net/tcp walks every socket of the host (4 ms per call on a test
// machine with a few thousand, on every gRPC call the manager identifies).
// nullopt when there is no such socket or the kernel does not answer.
std::optional<uid_t> diag_socket_uid_in(const Addr& local, uint16_t port, bool v4) {
  const int fd = ::socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
  if (fd < 0) return std::nullopt;
  // The kernel answers at once, found or not; a gRPC thread never waits
  // longer than this for it anyway.
  const timeval limit{1, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
  struct {
    nlmsghdr nlh;
    inet_diag_req_v2 r;
  } req{};
  req.nlh.nlmsg_len = sizeof req;
  req.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  req.nlh.nlmsg_flags = NLM_F_REQUEST;  // one socket, not a dump
  req.r.sdiag_family = v4 ? AF_INET : AF_INET6;
  req.r.sdiag_protocol = IPPROTO_TCP;
  req.r.idiag_states = 1u << kEstablished;
  req.r.id.idiag_sport = htons(local.port);
  req.r.id.idiag_dport = htons(port);
  if (v4) {
    std::memcpy(req.r.id.idiag_src, local.ip + 12, 4);
    const uint32_t lo = htonl(INADDR_LOOPBACK);
    std::memcpy(req.r.id.idiag_dst, &lo, 4);
  } else if (std::memcmp(local.ip, kMapped, 12) == 0) {  // a v6 socket reaching 127.0.0.1
    std::memcpy(req.r.id.idiag_src, local.ip, 16);
    std::memcpy(req.r.id.idiag_dst, kMapped, 12);
    const uint32_t lo = htonl(INADDR_LOOPBACK);
    std::memcpy(reinterpret_cast<unsigned char*>(req.r.id.idiag_dst) + 12, &lo, 4);
  } else {
    std::memcpy(req.r.id.idiag_src, local.ip, 16);
    std::memcpy(req.r.id.idiag_dst, &in6addr_loopback, 16);
  }
  req.r.id.idiag_cookie[0] = req.r.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  std::optional<uid_t> uid;
  alignas(nlmsghdr) char buf[8192];
  if (::sendto(fd, &req, sizeof req, 0, reinterpret_cast<sockaddr*>(&kernel), sizeof kernel) ==
      static_cast<ssize_t>(sizeof req)) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    const auto* h = reinterpret_cast<const nlmsghdr*>(buf);
    if (n > 0 && NLMSG_OK(h, static_cast<unsigned>(n)) && h->nlmsg_type == SOCK_DIAG_BY_FAMILY &&
        h->nlmsg_len >= NLMSG_LENGTH(sizeof(inet_diag_msg))) {
      const auto* m = static_cast<const inet_diag_msg*>(NLMSG_DATA(h));
      // The kernel's answer, checked as the table's would be: the same
      // connection, established, a socket still open.
      const size_t alen = v4 ? 4 : 16;
      if (m->idiag_state == kEstablished && m->idiag_inode != 0 &&
          m->id.idiag_sport == req.r.id.idiag_sport && m->id.idiag_dport == req.r.id.idiag_dport &&
          std::memcmp(m->id.idiag_src, req.r.id.idiag_src, alen) == 0 &&
          std::memcmp(m->id.idiag_dst, req.r.id.idiag_dst, alen) == 0)
        uid = m->idiag_uid;
    }
  }
  ::close(fd);
  return uid;
}

// An IPv4 client's socket may be of either family (a dual-stack client
// socket holds ::ffff:127.0.0.1).
std::optional<uid_t> diag_socket_uid(const Addr& local, uint16_t port) {
  const bool v4 = std::memcmp(local.ip, kMapped, 12) == 0;
  if (auto uid = diag_socket_uid_in(local, port, v4)) return uid;
  return v4 ? diag_socket_uid_in(local, port, false) : std::nullopt;
}

std::set<unsigned long> own_socket_inodes() {
  std::set<unsigned long> s;
  DIR* d = ::opendir("/proc/self/fd");
  if (!d) return s;
  while (dirent* e = ::readdir(d)) {
    char path[300], target[64];
    std::snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
    ssize_t n = ::readlink(path, target, sizeof target - 1);
    if (n <= 0) continue;
    target[n] = 0;
    unsigned long ino;
    if (std::sscanf(target, "socket:[%lu]", &ino) == 1) s.insert(ino);
  }
  ::closedir(d);
  return s;
}

sockaddr_un unix_addr(const std::string& path) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::strncpy(a.sun_path, path.c_str(), sizeof a.sun_path - 1);
  return a;
}

}  // namespace

std::optional<PeerCred> socket_peer_cred(int fd) {
  ucred c{};
  socklen_t len = sizeof c;
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &c, &len) != 0 || len != sizeof c)
    return std::nullopt;
  return PeerCred{c.pid, c.uid, c.gid};
}

std::string new_session_id() {
  unsigned char raw[kSessionIdChars / 2];
  size_t got = 0;
  while (got < sizeof raw) {
    ssize_t n = ::getrandom(raw + got, sizeof raw - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return {};
    got += static_cast<size_t>(n);
  }
  static const char* hexd = "0123456789abcdef";
  std::string s;
  for (unsigned char b : raw) {
    s += hexd[b >> 4];
    s += hexd[b & 15];
  }
  return s;
}

std::string session_preamble(const std::string& id) { return kPreamblePrefix + id + "\n"; }

std::string refusal_preamble(const std::string& reason) {
  return kRefusalPrefix + printable(reason.substr(0, kRefusalMax)) + "\n";
}

UnixListener::~UnixListener() {
  if (!fd_) return;
  // Remove the file only if it is still ours (not replaced by a newer manager).
  struct stat st {};
  if (::lstat(path_.c_str(), &st) == 0 && st.st_ino == ino_) ::unlink(path_.c_str());
}

bool UnixListener::open(const std::string& path, std::string* why) {
  auto fail = [&](std::string m) {
    if (why) *why = std::move(m);
    return false;
  };
  if (path.empty() || path.size() >= sizeof(sockaddr_un{}.sun_path))
    return fail("socket path '" + path + "' is empty or too long");
  const sockaddr_un addr = unix_addr(path);
  // The directory: created if missing (world-traversable, writable only by us).
  if (auto slash = path.find_last_of('/'); slash != std::string::npos && slash > 0) {
    const std::string dir = path.substr(0, slash);
    if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST)
      return fail("cannot create " + dir + ": " + std::strerror(errno));
  }
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) return fail(path + " exists and is not a socket");
    UniqueFd probe(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (probe && ::connect(probe.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0)
      return fail("another process already listens on " + path);
    ::unlink(path.c_str());  // stale: its manager is gone
  }
  UniqueFd s(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!s) return fail(std::string("socket: ") + std::strerror(errno));
  if (::bind(s.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0)
    return fail("cannot bind " + path + ": " + std::strerror(errno));
  // Anyone may connect: who they are is read from the connection.
  if (::chmod(path.c_str(), 0666) != 0 || ::listen(s.get(), 128) != 0 ||
      ::lstat(path.c_str(), &st) != 0) {
    const int e = errno;
    ::unlink(path.c_str());
    return fail("cannot listen on " + path + ": " + std::strerror(e));
  }
  fd_ = std::move(s);
  path_ = path;
  ino_ = st.st_ino;
  return true;
}

std::optional<UnixSession> connect_unix_session(const std::string& path,
                                                std::chrono::milliseconds limit,
                                                std::string* why) {
  auto fail = [&](std::string m) -> std::optional<UnixSession> {
    if (why) *why = std::move(m);
    return std::nullopt;
  };
  if (path.size() >= sizeof(sockaddr_un{}.sun_path)) return fail("socket path too long");
  UnixSession s;
  s.fd.reset(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!s.fd) return fail(std::string("socket: ") + std::strerror(errno));
  const sockaddr_un addr = unix_addr(path);
  if (::connect(s.fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0)
    return fail("cannot connect to " + path + ": " + std::strerror(errno));
  // Exactly the preamble, never a byte more: what follows is the server's
  // HTTP/2 preface, which belongs to gRPC. A refusal instead is read to its
  // newline (or the manager's close): nothing follows it.
  const std::string prefix = kPreamblePrefix;
  constexpr size_t head = std::char_traits<char>::length(kPreamblePrefix);
  char buf[head + kRefusalMax + 1];
  size_t got = 0, want = kPreambleBytes;
  bool refused = false;
  const auto deadline = std::chrono::steady_clock::now() + limit;
  auto refusal = [&] {
    std::string reason(buf + head, got - head);
    if (!reason.empty() && reason.back() == '\n') reason.pop_back();
    return fail("the manager at " + path + " refused the connection: " +
                (reason.empty() ? std::string("it gave no reason") : printable(reason)));
  };
  while (got < want) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - std::chrono::steady_clock::now())
                    .count();
    if (left <= 0)
      return refused ? refusal() : fail("the manager at " + path + " sent no session preamble");
    pollfd p{s.fd.get(), POLLIN, 0};
    int r = ::poll(&p, 1, static_cast<int>(left));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) continue;
    ssize_t n = ::read(s.fd.get(), buf + got, want - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (refused) return refusal();
      return fail("the manager at " + path + " closed the connection");
    }
    got += static_cast<size_t>(n);
    if (!refused && got >= head && std::string_view(buf, head) == kRefusalPrefix) {
      refused = true;
      want = sizeof buf;
    }
    if (refused && std::string_view(buf + head, got - head).find('\n') != std::string_view::npos)
      return refusal();
  }
  if (refused) return refusal();
  const std::string pre(buf, kPreambleBytes);
  if (pre.compare(0, prefix.size(), prefix) != 0 || pre.back() != '\n')
    return fail(path + " does not speak the bcs manager protocol");
  s.id = pre.substr(prefix.size(), kSessionIdChars);
  auto cred = socket_peer_cred(s.fd.get());
  if (!cred) return fail(std::string("SO_PEERCRED: ") + std::strerror(errno));
  s.server = *cred;
  return s;
}

std::optional<uid_t> loopback_client_uid(const std::string& grpc_peer, uint16_t server_port) {
  Addr client;
  if (!parse_grpc_peer(grpc_peer, &client) || !loopback(client)) return std::nullopt;
  // The client's socket by its four addresses first (the server at the
  // loopback address of the client's family), then the whole table (a
  // server reached at another loopback address, or no sock_diag).
  if (auto uid = diag_socket_uid(client, server_port)) return uid;
  for (const TcpSock& t : tcp_table())
    if (t.state == kEstablished && t.inode != 0 && t.local == client &&
        t.remote.port == server_port && loopback(t.remote))
      return t.uid;
  return std::nullopt;
}

std::optional<uid_t> loopback_client_uid_by_diag(const std::string& grpc_peer,
                                                 uint16_t server_port) {
  Addr client;
  if (!parse_grpc_peer(grpc_peer, &client) || !loopback(client)) return std::nullopt;
  return diag_socket_uid(client, server_port);
}

std::vector<uid_t> loopback_server_uids(const std::string& host, uint16_t port) {
  std::vector<uid_t> uids;
  // Only loopback: another host's socket table is not ours to read.
  in_addr v4{};
  in6_addr v6{};
  const bool literal = inet_pton(AF_INET, host.c_str(), &v4) == 1 ||
                       inet_pton(AF_INET6, host.c_str(), &v6) == 1;
  if (!literal && host != "localhost") return uids;
  const auto mine = own_socket_inodes();
  const auto table = tcp_table();
  for (const TcpSock& t : table) {
    if (t.state != kEstablished || !mine.count(t.inode) || t.remote.port != port ||
        !loopback(t.remote))
      continue;
    bool found = false;
    for (const TcpSock& s : table)
      if (s.state == kEstablished && s.inode != 0 && s.local == t.remote && s.remote == t.local) {
        uids.push_back(s.uid);
        found = true;
      }
    // Not accepted yet (a connection still in the accept queue has no
    // inode): who will accept it is whoever listens on that address and
    // port, or on the wildcard address of its family.
    if (!found)
      for (const TcpSock& s : table)
        if (s.state == kListen && s.inode != 0 && s.local.port == port &&
            (std::memcmp(s.local.ip, t.remote.ip, 16) == 0 || any_address(s.local)))
          uids.push_back(s.uid);
  }
  return uids;
}

namespace {
std::string format_addr(const Addr& a) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (std::memcmp(a.ip, kMapped, 12) == 0) {
    inet_ntop(AF_INET, a.ip + 12, buf, sizeof buf);
    return std::string(buf) + ":" + std::to_string(a.port);
  }
  inet_ntop(AF_INET6, a.ip, buf, sizeof buf);
  return "[" + std::string(buf) + "]:" + std::to_string(a.port);
}
}  // namespace

std::optional<std::string> canonical_grpc_peer(const std::string& grpc_peer) {
  Addr a;
  if (!parse_grpc_peer(grpc_peer, &a)) return std::nullopt;
  return format_addr(a);
}

std::optional<std::string> canonical_local_address(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return std::nullopt;
  Addr a;
  if (ss.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&ss);
    set_v4(&a, &in->sin_addr);
    a.port = ntohs(in->sin_port);
  } else if (ss.ss_family == AF_INET6) {
    const auto* in = reinterpret_cast<const sockaddr_in6*>(&ss);
    std::memcpy(a.ip, &in->sin6_addr, 16);
    a.port = ntohs(in->sin6_port);
  } else {
    return std::nullopt;
  }
  return format_addr(a);
}

std::string user_name(uid_t uid) {
  passwd pw{}, *res = nullptr;
  char buf[4096];
  if (::getpwuid_r(uid, &pw, buf, sizeof buf, &res) == 0 && res) return pw.pw_name;
  return "uid " + std::to_string(uid);
}

}  // namespace bcs
