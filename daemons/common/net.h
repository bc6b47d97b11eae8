// Addresses of the control plane and where the fabric may listen.
//
// Every listener of a daemon binds where it was told: the gRPC server on its
// --listen address, and the UCX worker (whose TCP transport opens one
// listening socket per network device it uses) only on the network device
// that carries the control-plane address. A loopback control plane thus
// keeps the whole daemon on loopback. See docs/architecture.md, "Who may
// talk to the daemons".
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace bcs {

// "HOST:PORT", "[V6]:PORT" or "unix:PATH" (also "unix://PATH").
struct Endpoint {
  bool is_unix = false;
  std::string host;  // without brackets; empty for unix
  uint16_t port = 0;
  std::string path;  // unix socket path
};

// Parses an address; nullopt (and *why) when it is malformed: no port, a
// port that is not a number in 0..65535, an empty host or path.
std::optional<Endpoint> parse_endpoint(std::string_view s, std::string* why = nullptr);

// A blocking TCP socket connected to `host`:`port` (a name or a literal;
// each resolved address in turn), within `limit`; -1 and *why on failure.
// The daemons and the CLI connect themselves, rather than let gRPC do it,
// when they must know their end of the connection or check who accepted
// it before a byte of gRPC is sent (proof.h, peer.h), and then hand the
// socket to gRPC (CreateCustomInsecureChannelFromFd).
int connect_tcp(const std::string& host, uint16_t port, std::chrono::milliseconds limit,
                std::string* why);

// The host names a loopback address: 127.0.0.0/8, ::1, ::ffff:127.x.y.z or
// "localhost".
bool is_loopback_host(std::string_view host);
// The host is a wildcard (0.0.0.0, ::, [::], empty): every interface.
bool is_wildcard_host(std::string_view host);

// The network interface that holds the local address `host` (a literal IP
// or a name resolved locally); loopback addresses give the loopback
// interface. nullopt if no interface holds it.
std::optional<std::string> interface_of_local_address(const std::string& host);

// The network interface this host would use to reach `host` (the source
// address the kernel picks for it, then the interface holding that address).
std::optional<std::string> interface_toward(const std::string& host);

// What the UCX worker of a daemon may listen on (the value for UCX's
// NET_DEVICES), derived from where the daemon's control plane is:
//  - `explicit_if` if given (--fabric-interface);
//  - "" (do not restrict) if UCX_NET_DEVICES is set in the environment: the
//    operator chose the devices;
//  - for a listening manager: the interface of its --listen host, "" for a
//    wildcard listen address (every interface was asked for);
//  - for a node manager: the interface toward its manager; the loopback
//    interface for a loopback or unix-socket manager.
// nullopt (and *why) if the interface cannot be determined.
std::optional<std::string> fabric_devices_for_listen(const Endpoint& listen,
                                                     const std::string& explicit_if,
                                                     std::string* why);
std::optional<std::string> fabric_devices_for_manager(const Endpoint& manager,
                                                      const std::string& explicit_if,
                                                      std::string* why);

}  // namespace bcs
