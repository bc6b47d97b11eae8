// A channel to the machine manager over TCP on a socket the caller connects
// itself, so that it knows its own end of the connection and can check who
// accepted it before gRPC sends a byte; with the cluster's token, whoever
// answers must first prove it holds the token (proof.h), and only the
// proof, never the token, is sent. Used by the node manager and the CLI.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "net.h"

namespace bcs {

struct ManagerChannel {
  std::shared_ptr<grpc::Channel> channel;
  std::string local;  // our end of the connection (canonical_local_address)
  std::string proof;  // the metadata value of kProofMetadata; "" without a token
  std::chrono::steady_clock::time_point proven_at{};
};

// Connects to `where` (TCP; `target` names it for gRPC's messages), runs
// `before(fd)` (a check of who accepted: "" to go on, else why not) and,
// with a non-empty `token`, the proof. nullopt and *why when any of it
// fails; *why then says what to configure, and *reached whether the
// connection was made (a refusal of who answered) or not.
std::optional<ManagerChannel> open_manager_channel(
    const Endpoint& where, const std::string& target, const std::string& token,
    const grpc::ChannelArguments& args, std::chrono::milliseconds limit,
    const std::function<std::string(int fd)>& before, std::string* why,
    bool* reached = nullptr);

// Runs the proof again on `c`'s connection (a cookie lives kCookieLifetime):
// "" when done, else why.
std::string prove_manager(ManagerChannel& c, const std::string& token,
                          std::chrono::milliseconds limit);

}  // namespace bcs
