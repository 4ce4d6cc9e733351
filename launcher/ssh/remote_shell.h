// Remote ranks' hosts reached through a command instead of SSH (--remote-shell), as Open MPI's
// plm_rsh_agent: `--remote-shell 'kubectl exec -i {host} -n ns --'` reaches a host by running that
// command, {host} replaced by the host's name, followed by `sh -s`: the shell there reads its
// script from the command's stdin, where etrun writes it first. `sh -s` reads the same whether
// the command passes its arguments on as they are (kubectl exec, docker exec, srun) or joins them
// into one line for a login shell to parse again (ssh), so any such command works; a script in
// the arguments would be split by the second parse. etrun runs one such command per host: the one
// that starts the host's agent (launcher/agent/agent.h), with pipes as its stdin, stdout and
// stderr; a cluster's step is one too (etrun's own template inside an allocation: srun,
// discovery/cluster_kind.h). Pure.
#ifndef ETRUN_LAUNCHER_SSH_REMOTE_SHELL_H_
#define ETRUN_LAUNCHER_SSH_REMOTE_SHELL_H_

#include <string>

namespace etrun::launcher {

// Whether `remote_shell` names the host with {host}. Returns false and sets *err otherwise.
bool CheckRemoteShell(const std::string& remote_shell, std::string* err);

// The shell command line that runs, on `host` through `remote_shell`, a POSIX sh reading its
// script from stdin. {host} becomes the name single-quoted, one word. A name beginning with '-'
// would be read as an option however it is quoted, so for one the line runs nothing of
// `remote_shell`: it prints why on stderr and exits 2 (callers' hosts have been refused such
// names where they entered; this is the last line). Over SSH (ssh_connect) no such line exists:
// libssh2 and getaddrinfo take the name as a string, never parsed as an option.
std::string RemoteShellCommand(const std::string& remote_shell, const std::string& host);

}  // namespace etrun::launcher

#endif  // ETRUN_LAUNCHER_SSH_REMOTE_SHELL_H_
