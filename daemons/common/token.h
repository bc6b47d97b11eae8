// The shared token of a cluster (the control plane's credential until the
// deployment brings per-user ones). It never appears on a command line,
// where every user of the host can read it (ps, /proc/PID/cmdline): it comes
// from a file (--token-file) or from the environment (BCS_TOKEN), and it is
// compared in constant time.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace bcs {

// The gRPC metadata key that carries it.
inline constexpr const char* kTokenMetadata = "bcs-token";
// The environment variable that may hold it.
inline constexpr const char* kTokenEnv = "BCS_TOKEN";

// The token from `file` if given (it must not be readable by group or
// others; surrounding whitespace, such as the final newline, is dropped),
// else from $BCS_TOKEN, else "" (no token). nullopt and *why on error.
std::optional<std::string> load_token(const std::string& file, std::string* why);

// a == b, in time that depends only on the lengths, never on where the
// first difference is (an attacker timing replies learns nothing).
bool tokens_equal(std::string_view a, std::string_view b);

// The message for `--token VALUE`, which is refused.
inline constexpr const char* kTokenOnCommandLine =
    "--token on the command line is visible to every user of the host; "
    "use --token-file FILE (mode 600) or the BCS_TOKEN environment variable";

}  // namespace bcs
