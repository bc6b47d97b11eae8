#include "net.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <fcntl.h>
#include <poll.h>
#include <cerrno>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "fd.h"

namespace bcs {
namespace {

bool all_digits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  return true;
}

// One resolved address (numeric only for literals; names via getaddrinfo).
bool resolve(const std::string& host, sockaddr_storage* out, socklen_t* len) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  if (::getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0 || !res) return false;
  // Prefer IPv4: the UCX TCP transport prefers it too (UCX_TCP_AF_PRIO).
  const addrinfo* pick = res;
  for (const addrinfo* a = res; a; a = a->ai_next)
    if (a->ai_family == AF_INET) {
      pick = a;
      break;
    }
  std::memcpy(out, pick->ai_addr, pick->ai_addrlen);
  *len = pick->ai_addrlen;
  ::freeaddrinfo(res);
  return true;
}

bool same_ip(const sockaddr* a, const sockaddr* b) {
  if (a->sa_family != b->sa_family) return false;
  if (a->sa_family == AF_INET)
    return reinterpret_cast<const sockaddr_in*>(a)->sin_addr.s_addr ==
           reinterpret_cast<const sockaddr_in*>(b)->sin_addr.s_addr;
  if (a->sa_family == AF_INET6)
    return std::memcmp(&reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr,
                       &reinterpret_cast<const sockaddr_in6*>(b)->sin6_addr,
                       sizeof(in6_addr)) == 0;
  return false;
}

bool is_loopback_sockaddr(const sockaddr* a) {
  if (a->sa_family == AF_INET)
    return (ntohl(reinterpret_cast<const sockaddr_in*>(a)->sin_addr.s_addr) >> 24) == 127;
  if (a->sa_family == AF_INET6) {
    const auto& v6 = reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr;
    if (IN6_IS_ADDR_LOOPBACK(&v6)) return true;
    return IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127;
  }
  return false;
}

// The interface holding `addr` (loopback addresses: the loopback interface).
std::optional<std::string> interface_holding(const sockaddr* addr) {
  ifaddrs* ifs = nullptr;
  if (::getifaddrs(&ifs) != 0) return std::nullopt;
  std::optional<std::string> found;
  const bool loop = is_loopback_sockaddr(addr);
  for (ifaddrs* i = ifs; i && !found; i = i->ifa_next) {
    if (!i->ifa_addr || !(i->ifa_flags & IFF_UP)) continue;
    if (loop ? (i->ifa_flags & IFF_LOOPBACK) != 0 : same_ip(i->ifa_addr, addr))
      found = i->ifa_name;
  }
  ::freeifaddrs(ifs);
  return found;
}

}  // namespace

std::optional<Endpoint> parse_endpoint(std::string_view s, std::string* why) {
  auto fail = [&](std::string m) -> std::optional<Endpoint> {
    if (why) *why = std::move(m);
    return std::nullopt;
  };
  Endpoint e;
  if (s.rfind("unix:", 0) == 0) {
    std::string_view p = s.substr(5);
    if (p.rfind("//", 0) == 0) p.remove_prefix(2);
    if (p.empty()) return fail("'" + std::string(s) + "': no socket path after unix:");
    // sun_path holds 108 bytes including the terminating NUL.
    if (p.size() > 107) return fail("'" + std::string(s) + "': socket path longer than 107 bytes");
    e.is_unix = true;
    e.path = std::string(p);
    return e;
  }
  size_t colon = s.rfind(':');
  if (colon == std::string_view::npos) return fail("'" + std::string(s) + "': expected HOST:PORT");
  std::string_view host = s.substr(0, colon), port = s.substr(colon + 1);
  if (!host.empty() && host.front() == '[') {
    if (host.size() < 2 || host.back() != ']')
      return fail("'" + std::string(s) + "': unbalanced [ ] around the IPv6 address");
    host = host.substr(1, host.size() - 2);
  } else if (host.find(':') != std::string_view::npos) {
    return fail("'" + std::string(s) + "': write an IPv6 address as [ADDR]:PORT");
  }
  if (host.empty()) return fail("'" + std::string(s) + "': no host before the port");
  if (!all_digits(port) || port.size() > 5 || std::strtoul(std::string(port).c_str(), nullptr, 10) > 65535)
    return fail("'" + std::string(s) + "' is not HOST:PORT with a port from 0 to 65535");
  e.host = std::string(host);
  e.port = static_cast<uint16_t>(std::strtoul(std::string(port).c_str(), nullptr, 10));
  return e;
}

bool is_loopback_host(std::string_view host) {
  if (host == "localhost" || host == "ip6-localhost") return true;
  std::string h(host);
  in_addr a4{};
  if (::inet_pton(AF_INET, h.c_str(), &a4) == 1) return (ntohl(a4.s_addr) >> 24) == 127;
  in6_addr a6{};
  if (::inet_pton(AF_INET6, h.c_str(), &a6) == 1)
    return IN6_IS_ADDR_LOOPBACK(&a6) || (IN6_IS_ADDR_V4MAPPED(&a6) && a6.s6_addr[12] == 127);
  return false;
}

bool is_wildcard_host(std::string_view host) {
  return host.empty() || host == "0.0.0.0" || host == "::" || host == "[::]" || host == "*";
}

std::optional<std::string> interface_of_local_address(const std::string& host) {
  sockaddr_storage ss{};
  socklen_t len = 0;
  if (!resolve(host, &ss, &len)) return std::nullopt;
  return interface_holding(reinterpret_cast<const sockaddr*>(&ss));
}

std::optional<std::string> interface_toward(const std::string& host) {
  sockaddr_storage ss{};
  socklen_t len = 0;
  if (!resolve(host, &ss, &len)) return std::nullopt;
  if (is_loopback_sockaddr(reinterpret_cast<const sockaddr*>(&ss)))
    return interface_holding(reinterpret_cast<const sockaddr*>(&ss));
  // A connected UDP socket sends nothing; it only asks the routing table
  // which source address (and so which interface) reaches `host`.
  UniqueFd s(::socket(ss.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!s) return std::nullopt;
  if (ss.ss_family == AF_INET)
    reinterpret_cast<sockaddr_in*>(&ss)->sin_port = htons(9);
  else
    reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port = htons(9);
  if (::connect(s.get(), reinterpret_cast<const sockaddr*>(&ss), len) != 0) return std::nullopt;
  sockaddr_storage local{};
  socklen_t llen = sizeof local;
  if (::getsockname(s.get(), reinterpret_cast<sockaddr*>(&local), &llen) != 0) return std::nullopt;
  return interface_holding(reinterpret_cast<const sockaddr*>(&local));
}

namespace {
std::optional<std::string> env_devices() {
  const char* e = std::getenv("UCX_NET_DEVICES");
  if (e && *e) return std::string();  // the operator's choice stands
  return std::nullopt;
}
}  // namespace

std::optional<std::string> fabric_devices_for_listen(const Endpoint& listen,
                                                     const std::string& explicit_if,
                                                     std::string* why) {
  if (!explicit_if.empty()) return explicit_if;
  if (auto e = env_devices()) return e;
  if (listen.is_unix) return interface_of_local_address("127.0.0.1");
  if (is_wildcard_host(listen.host)) return std::string();
  auto i = interface_of_local_address(listen.host);
  if (!i && why) *why = "no network interface of this host holds " + listen.host;
  return i;
}

std::optional<std::string> fabric_devices_for_manager(const Endpoint& manager,
                                                      const std::string& explicit_if,
                                                      std::string* why) {
  if (!explicit_if.empty()) return explicit_if;
  if (auto e = env_devices()) return e;
  if (manager.is_unix) return interface_of_local_address("127.0.0.1");
  auto i = interface_toward(manager.host);
  if (!i && why) *why = "no network interface of this host reaches " + manager.host;
  return i;
}

int connect_tcp(const std::string& host, uint16_t port, std::chrono::milliseconds limit,
                std::string* why) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const std::string service = std::to_string(port);
  if (int e = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &res); e != 0) {
    *why = "cannot resolve " + host + ": " + gai_strerror(e);
    return -1;
  }
  const auto deadline = std::chrono::steady_clock::now() + limit;
  std::string last = "no address";
  for (addrinfo* ai = res; ai; ai = ai->ai_next) {
    UniqueFd fd(::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
                         ai->ai_protocol));
    if (fd.get() < 0) {
      last = std::strerror(errno);
      continue;
    }
    int r = ::connect(fd.get(), ai->ai_addr, ai->ai_addrlen);
    if (r != 0 && errno == EINPROGRESS) {
      pollfd p{fd.get(), POLLOUT, 0};
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      r = ::poll(&p, 1, static_cast<int>(std::max<long long>(0, left.count())));
      if (r == 0) {
        last = "timed out";
        continue;
      }
      int err = 0;
      socklen_t len = sizeof err;
      if (r < 0 || ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
      if (err != 0) {
        last = std::strerror(err);
        continue;
      }
    } else if (r != 0) {
      last = std::strerror(errno);
      continue;
    }
    // gRPC wants a blocking socket; small control messages go at once.
    ::fcntl(fd.get(), F_SETFL, ::fcntl(fd.get(), F_GETFL) & ~O_NONBLOCK);
    int one = 1;
    ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    ::freeaddrinfo(res);
    return fd.release();
  }
  ::freeaddrinfo(res);
  *why = "cannot connect to " + host + ":" + service + ": " + last;
  return -1;
}

}  // namespace bcs
