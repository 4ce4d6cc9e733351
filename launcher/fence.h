// Fencing a lost host. After a partition or a frozen host no RST arrives, so the survivors'
// collectives would wait in Gloo until HOROVOD_GLOO_TIMEOUT_SECONDS (30 s by default). Destroying
// the survivors' TCP sockets to the lost host's addresses (the kernel's SOCK_DESTROY, through
// iproute2's `ss -K`) fails those collectives at once ("Software caused connection abort"), so
// Horovod resets with its state kept. It needs CAP_NET_ADMIN where it runs (root); elsewhere,
// or without `ss`, it does nothing and the survivors wait for Gloo's timeout.
#ifndef ETRUN_LAUNCHER_FENCE_H_
#define ETRUN_LAUNCHER_FENCE_H_

#include <string>
#include <vector>

namespace etrun::launcher {

// The POSIX sh command that destroys this machine's TCP sockets to `addresses` (dotted quads),
// quietly: its exit status means nothing. "" for no address.
std::string FenceCommand(const std::vector<std::string>& addresses);

// Runs FenceCommand here and waits for it (the blocking-work thread). Returns whether it ran.
bool FenceHere(const std::vector<std::string>& addresses);

}  // namespace etrun::launcher

#endif  // ETRUN_LAUNCHER_FENCE_H_
