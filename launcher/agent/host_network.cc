#include "launcher/agent/host_network.h"

#include <net/if.h>

namespace etrun::launcher::agent {

namespace {

bool IsIpv4(const std::string& text) {
  int dots = 0;
  for (char c : text) {
    if (c == '.') {
      ++dots;
    } else if (c < '0' || c > '9') {
      return false;
    }
  }
  return dots == 3 && !text.empty();
}

}  // namespace

HostView RealHostView() {
  HostView view;
  view.interfaces = [] { return discovery::LocalInterfaces(); };
  view.route = [](const std::string& ipv4, std::string* nic, std::string* source) {
    return discovery::RouteTowardIpv4(ipv4, discovery::LocalInterfaces(), nic, source);
  };
  view.has_interface = [](const std::string& name) { return if_nametoindex(name.c_str()) != 0; };
  return view;
}

HostNetworkFinder::HostNetworkFinder(std::string host, std::string ssh_connection, HostView view)
    : host_(std::move(host)), view_(std::move(view)) {
  std::string client = ssh_connection.substr(0, ssh_connection.find(' '));
  if (IsIpv4(client)) ssh_client_ = client;
}

bool HostNetworkFinder::Vars(const HostNetwork& net, bool use_ssh_connection,
                             std::vector<std::string>* vars, std::string* err) {
  if (!net.require_interface.empty()) {
    auto found = interfaces_.find(net.require_interface);
    if (found == interfaces_.end()) {
      found = interfaces_.emplace(net.require_interface, view_.has_interface(net.require_interface)).first;
    }
    if (!found->second) {
      *err = "etrun: error: host " + host_ + " has no interface " + net.require_interface +
             " (--network-interface): name one every host has, or leave the flag out to let "
             "etrun find each host's";
      return false;
    }
  }
  if (!net.resolve) return true;
  auto key = std::make_pair(net.launcher_address, use_ssh_connection);
  auto known = routes_.find(key);
  if (known == routes_.end()) {
    Answer a;
    // The launcher address this connection came from, if IPv4, else the one the launcher gave.
    a.address = use_ssh_connection && !ssh_client_.empty() ? ssh_client_ : net.launcher_address;
    std::string source;
    if (a.address.starts_with("127.")) {
      a.ok = true;
      a.nic = "lo";
    } else {
      a.ok = view_.route(a.address, &a.nic, &source);
    }
    if (!a.ok) {
      a.err = "etrun: error: host " + host_ + " has no route to the launcher at " + a.address +
              ": name the launcher's interface the hosts reach with --network-interface";
    }
    known = routes_.emplace(key, std::move(a)).first;
  }
  const Answer& a = known->second;
  if (!a.ok) {
    *err = a.err;
    return false;
  }
  for (const std::string& v : net.address_vars) vars->push_back(v + "=" + a.address);
  for (const std::string& v : net.interface_vars) vars->push_back(v + "=" + a.nic);
  return true;
}

}  // namespace etrun::launcher::agent
