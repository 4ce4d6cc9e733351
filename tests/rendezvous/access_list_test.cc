#include "rendezvous/access_list.h"

#include <arpa/inet.h>

#include <doctest/doctest.h>

#include "discovery/network.h"

namespace etrun::rendezvous {
namespace {

uint32_t Ip(const char* text) {
  struct in_addr a;
  REQUIRE(inet_pton(AF_INET, text, &a) == 1);
  return ntohl(a.s_addr);
}

TEST_CASE("CIDRs parse, mask their host bits and contain what they should") {
  Cidr c;
  std::string err;
  REQUIRE(ParseCidr("10.1.2.3/16", &c, &err));
  CHECK(c.network == Ip("10.1.0.0"));
  CHECK(c.prefix == 16);
  CHECK(c.Contains(Ip("10.1.255.9")));
  CHECK_FALSE(c.Contains(Ip("10.2.0.1")));
  REQUIRE(ParseCidr("0.0.0.0/0", &c, &err));
  CHECK(c.Contains(Ip("203.0.113.5")));
  REQUIRE(ParseCidr("192.168.1.7", &c, &err));  // a bare address is a /32
  CHECK(c.Contains(Ip("192.168.1.7")));
  CHECK_FALSE(c.Contains(Ip("192.168.1.8")));
  for (const char* bad : {"10.0.0.0/", "10.0.0.0/-1", "10.0.0.0/33", "10.0.0.0/8x", "10.0.0/8",
                          "", "host/8", "::1/128"}) {
    CAPTURE(bad);
    CHECK_FALSE(ParseCidr(bad, &c, &err));
    CHECK(err.find(bad) != std::string::npos);
  }
}

TEST_CASE("the access list admits this machine, job hosts and allowed networks only") {
  Cidr lab;
  std::string err;
  REQUIRE(ParseCidr("10.20.0.0/16", &lab, &err));
  AccessList access({"192.0.2.10"}, {lab});
  CHECK(access.Allows(Ip("127.0.0.1")));   // always: ranks on this machine
  CHECK(access.Allows(Ip("192.0.2.10")));  // an address of this machine
  CHECK(access.Allows(Ip("10.20.3.4")));   // --rendezvous-allow
  CHECK_FALSE(access.Allows(Ip("127.0.0.2")));  // another loopback "host" is not this machine
  CHECK_FALSE(access.Allows(Ip("198.51.100.1")));
  access.Admit(discovery::ResolveIPv4("198.51.100.1"));
  CHECK(access.Allows(Ip("198.51.100.1")));
  CHECK_FALSE(discovery::ResolveIPv4("localhost").empty());  // names are resolved
  CHECK(discovery::ResolveIPv4("no-such-host.invalid").empty());
}

}  // namespace
}  // namespace etrun::rendezvous
