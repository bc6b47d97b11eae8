// Who is calling from another host: a munge credential (the mechanism Slurm
// sites already run; docs/architecture.md, "Who may talk to the daemons").
// The client asks its host's munged for a credential naming its uid and gid
// and sends it with each call; the manager has its own munged decode it.
// munged checks the shared key, the time to live and that no credential is
// decoded twice, so every call carries a fresh one.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>

namespace bcs {

inline constexpr const char* kMungeMetadata = "bcs-munge";
// munged's socket when MUNGE_OPT_SOCKET is not set (Debian's default).
inline constexpr const char* kMungeDefaultSocket = "/run/munge/munge.socket.2";

// A fresh credential for this process's uid and gid from the munged at
// `socket`; nullopt with `why` when munged refuses or is not there.
std::optional<std::string> munge_credential(const std::string& socket, std::string* why);

struct MungeIdentity {
  uid_t uid = 0;
  gid_t gid = 0;
};

// Decodes `cred` with the munged at `socket`: whose it is, or nullopt with
// `why` (bad key, expired, replayed, malformed, munged unreachable).
std::optional<MungeIdentity> munge_verify(const std::string& cred, const std::string& socket,
                                          std::string* why);

}  // namespace bcs
