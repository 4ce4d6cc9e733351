// Fencing a failed world. After a partition or a frozen host no RST arrives, so the survivors'
// collectives would wait in Gloo until HOROVOD_GLOO_TIMEOUT_SECONDS (30 s by default); and even
// after a peer's death, only the survivors with an operation on its pair fail: another survivor,
// waiting in a ring step for one that did fail, blocks until that timeout (the failed one keeps
// its Gloo context, and so the connection, until Horovod re-initializes). Destroying the
// survivors' TCP sockets to the lost host's addresses and every connection of the world's Gloo
// mesh (rendezvous/gloo_mesh.h; the kernel's SOCK_DESTROY, through iproute2's `ss -K`) fails
// every survivor's collective at once ("Software caused connection abort"), so Horovod resets
// with its state kept. It needs CAP_NET_ADMIN where it runs (root); elsewhere, or without `ss`,
// it does nothing and the survivors wait for Gloo's timeout.
#ifndef ETRUN_LAUNCHER_FENCE_H_
#define ETRUN_LAUNCHER_FENCE_H_

#include <string>
#include <vector>

namespace etrun::launcher {

// The POSIX sh command that destroys this machine's TCP sockets to `addresses` (dotted quads)
// and those matching `mesh_terms` (ss filter terms, GlooMesh::FilterTerms), the terms
// `per_command` to one ss run (its filter grows with each), quietly: its exit status means
// nothing. "" for nothing to destroy.
std::string FenceCommand(const std::vector<std::string>& addresses,
                         const std::vector<std::string>& mesh_terms = {}, size_t per_command = 64);

// Runs a FenceCommand here with /bin/sh and waits for it (the blocking-work thread). Returns
// whether it ran.
bool FenceHere(const std::string& command);

}  // namespace etrun::launcher

#endif  // ETRUN_LAUNCHER_FENCE_H_
