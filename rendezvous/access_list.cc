#include "rendezvous/access_list.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <charconv>

namespace etrun::rendezvous {

namespace {

bool ParseAddress(const std::string& text, uint32_t* out) {
  struct in_addr a;
  if (inet_pton(AF_INET, text.c_str(), &a) != 1) return false;
  *out = ntohl(a.s_addr);
  return true;
}

uint32_t Mask(int prefix) { return prefix == 0 ? 0 : ~uint32_t{0} << (32 - prefix); }

std::set<uint32_t> ParseAddresses(const std::vector<std::string>& texts) {
  std::set<uint32_t> out;
  uint32_t a;
  for (const std::string& text : texts) {
    if (ParseAddress(text, &a)) out.insert(a);
  }
  return out;
}

}  // namespace

bool Cidr::Contains(uint32_t address) const { return (address & Mask(prefix)) == network; }

bool ParseCidr(const std::string& text, Cidr* out, std::string* err) {
  size_t slash = text.find('/');
  std::string address = text.substr(0, slash);
  uint32_t a = 0;
  if (!ParseAddress(address, &a)) {
    *err = "'" + text + "' is not an IPv4 network: use a.b.c.d/n, e.g. 10.0.0.0/8";
    return false;
  }
  int prefix = 32;
  if (slash != std::string::npos) {
    const char* begin = text.data() + slash + 1;
    const char* end = text.data() + text.size();
    auto [ptr, ec] = std::from_chars(begin, end, prefix);
    if (begin == end || ec != std::errc() || ptr != end || prefix < 0 || prefix > 32) {
      *err = "'" + text + "' has a bad prefix length: use 0 to 32, e.g. 10.0.0.0/8";
      return false;
    }
  }
  out->prefix = prefix;
  out->network = a & Mask(prefix);
  return true;
}

AccessList::AccessList(const std::vector<std::string>& local_addresses, std::vector<Cidr> allowed)
    : addresses_(ParseAddresses(local_addresses)), local_(addresses_), allowed_(std::move(allowed)) {
  addresses_.insert(0x7f000001);  // 127.0.0.1
}

void AccessList::Admit(const std::vector<uint32_t>& addresses) {
  std::lock_guard<std::mutex> lock(mu_);
  addresses_.insert(addresses.begin(), addresses.end());
}

bool AccessList::Allows(uint32_t address) const {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (addresses_.count(address) != 0) return true;
  }
  for (const Cidr& c : allowed_) {
    if (c.Contains(address)) return true;
  }
  return false;
}

bool AccessList::IsThisMachine(uint32_t address) const {
  return (address >> 24) == 127 || local_.count(address) != 0;
}

}  // namespace etrun::rendezvous
