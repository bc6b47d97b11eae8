// Control-plane addresses and the fabric's network device (daemons/common/net.h).
#include "net.h"

#include <gtest/gtest.h>
#include <stdlib.h>

namespace bcs {
namespace {

TEST(Endpoint, HostAndPort) {
  auto e = parse_endpoint("127.0.0.1:7600");
  ASSERT_TRUE(e);
  EXPECT_FALSE(e->is_unix);
  EXPECT_EQ(e->host, "127.0.0.1");
  EXPECT_EQ(e->port, 7600);
  e = parse_endpoint("[::1]:0");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->host, "::1");
  EXPECT_EQ(e->port, 0);
  e = parse_endpoint("node7:65535");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->port, 65535);
}

TEST(Endpoint, PortsOutOfRangeAreRefusedNotWrapped) {
  // 70000 mod 65536 is 4464: it must be refused, not bound.
  std::string why;
  EXPECT_FALSE(parse_endpoint("127.0.0.1:70000", &why));
  EXPECT_NE(why.find("0 to 65535"), std::string::npos) << why;
  EXPECT_FALSE(parse_endpoint("127.0.0.1:65536"));
  EXPECT_FALSE(parse_endpoint("127.0.0.1:-1"));
  EXPECT_FALSE(parse_endpoint("127.0.0.1:"));
  EXPECT_FALSE(parse_endpoint("127.0.0.1:12ab"));
  EXPECT_FALSE(parse_endpoint("127.0.0.1"));
  EXPECT_FALSE(parse_endpoint(":7600"));
  EXPECT_FALSE(parse_endpoint("::1:7600"));  // IPv6 needs brackets
  EXPECT_FALSE(parse_endpoint("[::1:7600"));
  EXPECT_FALSE(parse_endpoint("127.0.0.1:0000000080"));
}

TEST(Endpoint, UnixSockets) {
  auto e = parse_endpoint("unix:/run/bcs/mm.sock");
  ASSERT_TRUE(e);
  EXPECT_TRUE(e->is_unix);
  EXPECT_EQ(e->path, "/run/bcs/mm.sock");
  e = parse_endpoint("unix:///tmp/x");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->path, "/tmp/x");
  EXPECT_FALSE(parse_endpoint("unix:"));
  EXPECT_FALSE(parse_endpoint("unix:/" + std::string(200, 'x')));
}

TEST(Endpoint, LoopbackAndWildcard) {
  EXPECT_TRUE(is_loopback_host("127.0.0.1"));
  EXPECT_TRUE(is_loopback_host("127.3.2.1"));
  EXPECT_TRUE(is_loopback_host("::1"));
  EXPECT_TRUE(is_loopback_host("::ffff:127.0.0.1"));
  EXPECT_TRUE(is_loopback_host("localhost"));
  EXPECT_FALSE(is_loopback_host("10.0.0.1"));
  EXPECT_FALSE(is_loopback_host("0.0.0.0"));
  EXPECT_FALSE(is_loopback_host("128.0.0.1"));
  EXPECT_TRUE(is_wildcard_host("0.0.0.0"));
  EXPECT_TRUE(is_wildcard_host("::"));
  EXPECT_FALSE(is_wildcard_host("127.0.0.1"));
}

class FabricDevices : public testing::Test {
 protected:
  void SetUp() override {
    if (const char* e = getenv("UCX_NET_DEVICES")) saved_ = e;
    unsetenv("UCX_NET_DEVICES");
    auto lo = interface_of_local_address("127.0.0.1");
    if (!lo) GTEST_SKIP() << "this host has no loopback interface up";
    lo_ = *lo;
  }
  void TearDown() override {
    if (saved_) setenv("UCX_NET_DEVICES", saved_->c_str(), 1);
  }
  std::optional<std::string> saved_;
  std::string lo_;
};

TEST_F(FabricDevices, ALoopbackControlPlaneKeepsTheFabricOnLoopback) {
  std::string why;
  EXPECT_EQ(fabric_devices_for_listen(*parse_endpoint("127.0.0.1:0"), "", &why), lo_);
  EXPECT_EQ(fabric_devices_for_listen(*parse_endpoint("localhost:7600"), "", &why), lo_);
  EXPECT_EQ(fabric_devices_for_manager(*parse_endpoint("127.0.0.1:7600"), "", &why), lo_);
  EXPECT_EQ(fabric_devices_for_manager(*parse_endpoint("unix:/tmp/mm.sock"), "", &why), lo_);
}

TEST_F(FabricDevices, AWildcardListenIsEveryDeviceOnPurpose) {
  std::string why;
  EXPECT_EQ(fabric_devices_for_listen(*parse_endpoint("0.0.0.0:7600"), "", &why), "");
}

TEST_F(FabricDevices, TheOperatorsChoiceWins) {
  std::string why;
  EXPECT_EQ(fabric_devices_for_listen(*parse_endpoint("127.0.0.1:0"), "eth9", &why), "eth9");
  setenv("UCX_NET_DEVICES", "mlx5_0:1", 1);
  EXPECT_EQ(fabric_devices_for_listen(*parse_endpoint("127.0.0.1:0"), "", &why), "");
  EXPECT_EQ(fabric_devices_for_manager(*parse_endpoint("127.0.0.1:1"), "", &why), "");
}

TEST_F(FabricDevices, AnAddressNoInterfaceHoldsIsAnError) {
  std::string why;
  // 192.0.2.0/24 is TEST-NET-1; 203.0.113.77 (TEST-NET-3) is on no interface here.
  auto d = fabric_devices_for_listen(*parse_endpoint("203.0.113.77:7600"), "", &why);
  if (d) GTEST_SKIP() << "this host holds 203.0.113.77";
  EXPECT_NE(why.find("203.0.113.77"), std::string::npos);
}

}  // namespace
}  // namespace bcs
