// pool_main: `etrun pool VERB ...`, the shared slot pool's commands (pool/pool_daemon.h):
//   etrun pool start NAME (-H HOSTS | --hostfile FILE | --host-discovery-script SCRIPT) [...]
//   etrun pool status [NAME] [--json]
//   etrun pool priority JOB N [--pool NAME]
//   etrun pool stop [NAME]
//   etrun pool token [NAME]
// Like `status` and `scale`, a verb only as etrun's first argument.
#ifndef ETRUN_CLI_POOL_MAIN_H_
#define ETRUN_CLI_POOL_MAIN_H_

namespace etrun::cli {

inline constexpr char kPoolVerb[] = "pool";

// argv[0] is "pool". Exit codes: 0 done; 1 the pool cannot be found, reached or started, or it
// refused the request; 2 bad flags. Errors are one "etrun: error:" line.
int PoolMain(int argc, char** argv);

}  // namespace etrun::cli

#endif  // ETRUN_CLI_POOL_MAIN_H_
