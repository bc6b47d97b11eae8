// TwoHosts: two "hosts" for the integration stories (run_test.cc,
// hardening_test.cc).
#pragma once

#include <unistd.h>

#include <chrono>
#include <string>
#include <vector>

#include "harness.h"

namespace bcs::test {

// Two "hosts": network namespaces joined by a veth pair (10.77.x.1 <-> .2).
// The manager listens on host A's address (not loopback, so a token is
// required); node manager a runs on host A, node manager b on host B. UCX
// is forced onto TCP over the veth (the namespaces share /dev/shm, so
// without UCX_TLS=tcp it would take the shared-memory shortcut).
class TwoHosts {
 public:
  TwoHosts() {
    const std::string tag = std::to_string(getpid() % 100000);
    a_ = "bcs-it-a-" + tag;
    b_ = "bcs-it-b-" + tag;
    subnet_ = "10.77." + std::to_string(getpid() % 250) + ".";
    ok_ = sh({"ip", "netns", "add", a_}) && sh({"ip", "netns", "add", b_}) &&
          sh({"ip", "link", "add", "bcsit" + tag, "type", "veth", "peer", "name", "bcsjt" + tag}) &&
          sh({"ip", "link", "set", "bcsit" + tag, "netns", a_}) &&
          sh({"ip", "link", "set", "bcsjt" + tag, "netns", b_}) &&
          sh({"ip", "-n", a_, "link", "set", "bcsit" + tag, "name", "bcs0"}) &&
          sh({"ip", "-n", b_, "link", "set", "bcsjt" + tag, "name", "bcs0"}) &&
          sh({"ip", "-n", a_, "addr", "add", subnet_ + "1/24", "dev", "bcs0"}) &&
          sh({"ip", "-n", b_, "addr", "add", subnet_ + "2/24", "dev", "bcs0"}) &&
          sh({"ip", "-n", a_, "link", "set", "bcs0", "up"}) &&
          sh({"ip", "-n", b_, "link", "set", "bcs0", "up"}) &&
          sh({"ip", "-n", a_, "link", "set", "lo", "up"}) &&
          sh({"ip", "-n", b_, "link", "set", "lo", "up"});
  }
  ~TwoHosts() {
    // Deleting a namespace deletes its end of the veth, and with it the pair.
    sh({"ip", "netns", "del", a_});
    sh({"ip", "netns", "del", b_});
  }
  bool ok() const { return ok_; }
  std::string addr_a() const { return subnet_ + "1"; }
  std::vector<std::string> on(bool host_a, std::vector<std::string> argv) const {
    std::vector<std::string> v{"/usr/sbin/ip", "netns", "exec", host_a ? a_ : b_};
    v.insert(v.end(), argv.begin(), argv.end());
    return v;
  }

 private:
  static bool sh(std::vector<std::string> argv) {
    argv[0] = "/usr/sbin/" + argv[0];
    return bcs::test::run(argv, std::chrono::seconds(30)).status == 0;
  }
  std::string a_, b_, subnet_;
  bool ok_ = false;
};

}  // namespace bcs::test
