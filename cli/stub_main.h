// `etrun __ssh_rank ...` and `etrun __remote_shell_rank ...`: the local stub of a remote rank
// (launcher/ssh/ssh_rank.h, remote_shell.h), started by etrun itself. Its argv is parsed here.
#ifndef ETRUN_CLI_STUB_MAIN_H_
#define ETRUN_CLI_STUB_MAIN_H_

namespace etrun::cli {

// Runs the stub mode that argv[1] names and returns its exit code; -1 when argv[1] names none.
// REQUIRES: argc > 1.
int StubMain(int argc, char** argv);

}  // namespace etrun::cli

#endif  // ETRUN_CLI_STUB_MAIN_H_
