// Remote ranks' hosts reached through a command instead of SSH (--remote-shell), as Open MPI's
// plm_rsh_agent: `--remote-shell 'kubectl exec -i {host} -n ns --'` reaches a host by running that
// command, {host} replaced by the host's name, followed by `sh -c '<command>'`. etrun runs one
// such command per host: the one that starts the host's agent (launcher/agent/agent.h), with pipes
// as its stdin, stdout and stderr; a cluster's step is one too (etrun's own template inside an
// allocation: srun, discovery/cluster_kind.h). Pure.
#ifndef ETRUN_LAUNCHER_SSH_REMOTE_SHELL_H_
#define ETRUN_LAUNCHER_SSH_REMOTE_SHELL_H_

#include <string>

namespace etrun::launcher {

// Whether `remote_shell` names the host with {host}. Returns false and sets *err otherwise.
bool CheckRemoteShell(const std::string& remote_shell, std::string* err);

// The shell command line that runs `remote_command` on `host` through `remote_shell`.
std::string RemoteShellCommand(const std::string& remote_shell, const std::string& host,
                               const std::string& remote_command);

}  // namespace etrun::launcher

#endif  // ETRUN_LAUNCHER_SSH_REMOTE_SHELL_H_
