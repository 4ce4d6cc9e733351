// The network facts a rank learns on its own host (HostNetwork, launcher/remote_starter.h): the
// launcher address this host reaches, the host's interface toward it, and that an interface the
// user named exists there. Hosts differ from the launcher and from each other in addresses and
// interface names, so the agent finds them on its host, from the kernel's own answers (the
// source address of a route, the interfaces' addresses): no shell, no awk, no name lookup.
#ifndef ETRUN_LAUNCHER_AGENT_HOST_NETWORK_H_
#define ETRUN_LAUNCHER_AGENT_HOST_NETWORK_H_

#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "discovery/interfaces.h"
#include "launcher/remote_starter.h"

namespace etrun::launcher::agent {

// The exit code of a rank whose host cannot serve it (no route to the launcher, the named
// interface missing there): one line on its stderr says which host and what fixes it.
inline constexpr int kHostNetworkFailure = 255;

// What the agent reads of its host. Real: HostNetworkFinder's default (getifaddrs, a UDP
// connect, if_nametoindex); tests hand in their own.
struct HostView {
  std::function<std::vector<discovery::Interface>()> interfaces;
  // The interface and source address of the route toward an IPv4 address; false: no route.
  std::function<bool(const std::string& ipv4, std::string* nic, std::string* source)> route;
  std::function<bool(const std::string& name)> has_interface;
};
HostView RealHostView();

// Finds a host's facts once per question and keeps them: every rank of the host with the same
// HostNetwork gets the same answer without asking the kernel again. Not thread-safe.
class HostNetworkFinder {
 public:
  // `host`: the host's name, for messages; `ssh_connection`: SSH_CONNECTION of the agent's
  // environment ("" when it runs under no SSH connection).
  HostNetworkFinder(std::string host, std::string ssh_connection, HostView view = RealHostView());

  // The variables ("K=V") a rank with `net` gets on this host: the address variables set to the
  // launcher address it reaches (SSH_CONNECTION's client address when `use_ssh_connection` and
  // it is IPv4, else net.launcher_address), the interface variables to the host's interface
  // toward it ("lo" for 127/8). Returns false and sets *err, the rank's one line, when the host
  // lacks net.require_interface or has no route to that address.
  bool Vars(const HostNetwork& net, bool use_ssh_connection, std::vector<std::string>* vars,
            std::string* err);

 private:
  std::string host_;
  std::string ssh_client_;  // SSH_CONNECTION's first word when it is an IPv4 address
  HostView view_;
  struct Answer {
    bool ok = false;
    std::string address, nic, err;
  };
  std::map<std::pair<std::string, bool>, Answer> routes_;  // (launcher address, use SSH)
  std::map<std::string, bool> interfaces_;                 // named interface -> present
};

}  // namespace etrun::launcher::agent

#endif  // ETRUN_LAUNCHER_AGENT_HOST_NETWORK_H_
