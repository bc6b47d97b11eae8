// TLS for the control plane (gRPC): the PEM files the daemons and the CLI
// read. The machine manager serves with a certificate and its key
// (--tls-cert, --tls-key); node managers and clients verify it against a CA
// certificate (--tls-ca or $BCS_TLS_CA). Without them the control plane is
// plain TCP: fine on loopback, and on a private network only with the
// shared token (token.h), which then travels in clear.
#pragma once

#include <string>

namespace bcs {

// The environment variable naming the CA file of clients and node managers.
inline constexpr const char* kTlsCaEnv = "BCS_TLS_CA";

// The contents of a PEM file (at most 1 MiB, must contain "-----BEGIN").
// False and *why on error.
bool read_pem(const std::string& path, std::string* out, std::string* why);

}  // namespace bcs
