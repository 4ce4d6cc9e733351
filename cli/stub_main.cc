#include "cli/stub_main.h"

#include <cstdio>
#include <string>

#include "launcher/ssh/remote_shell.h"
#include "launcher/ssh/ssh_rank.h"

namespace etrun::cli {

int StubMain(int argc, char** argv) {
  std::string mode = argv[1];
  if (mode == launcher::kSshRankMode) {
    if (argc != 5) {  // mode, socket, label, remote command (SshRankArgs)
      fprintf(stderr, "etrun: error: %s is etrun's internal SSH helper mode\n", launcher::kSshRankMode);
      return 2;
    }
    return launcher::RunSshRank(argv[2], argv[3], argv[4]);
  }
  if (mode == launcher::kRemoteShellRankMode) {
    if (argc != 5) {  // mode, host, command line, exit status (RemoteShellRankArgs)
      fprintf(stderr, "etrun: error: %s is etrun's internal remote-shell helper mode\n",
              launcher::kRemoteShellRankMode);
      return 2;
    }
    launcher::RecordMode record;
    if (!launcher::ParseStatusMode(argv[4], &record)) {
      fprintf(stderr, "etrun: error: %s is etrun's internal remote-shell helper mode\n",
              launcher::kRemoteShellRankMode);
      return 2;
    }
    return launcher::RunRemoteShellRank(argv[2], argv[3], record);
  }
  return -1;
}

}  // namespace etrun::cli
