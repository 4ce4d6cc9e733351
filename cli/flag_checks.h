// flag_checks: what ParseArgs (flags.h) checks once CLI11 has filled a JobConfig from the flag
// table: argparse's mutually exclusive groups, value ranges and the relations between flags (-np
// against --min-np and --max-np, the cooldown range, the SSH port, --priority), the tunables' >= 0
// rule, the --network-interface and --rendezvous-allow lists, --mpi's rules and the flags that are
// not supported yet; and the host list of -H or --hostfile, which `etrun pool start` reads too.
// Each function returns false and sets *err to one line (without "etrun: error: ") at the first
// problem it finds. Internal to cli/. Pure but for ReadHostList (it reads the hostfile);
// thread-safe.
#ifndef ETRUN_CLI_FLAG_CHECKS_H_
#define ETRUN_CLI_FLAG_CHECKS_H_

#include <string>
#include <vector>

#include "cli/flag_table.h"
#include "discovery/host_slots.h"
#include "launcher/job_config.h"
#include "rendezvous/access_list.h"

namespace etrun::cli {

// At most one flag of each of horovodrun's mutually exclusive groups was given.
bool CheckExclusions(const FlagTable& table, std::string* err);

// -np is given; counts, timeouts and intervals are in range; -np fits --min-np and --max-np;
// --priority goes with --pool; the cooldown range, the SSH port and --remote-shell are valid.
bool CheckLaunchValues(const FlagTable& table, const JobConfig& config, std::string* err);

// Every tunable is >= 0; the Gaussian process noise is within 0..1.
bool CheckTunables(const FlagTable& table, const Tunables& tunables, std::string* err);

// Splits the --network-interface(s) values on commas into *nics, first appearance first.
bool CollectNics(const FlagTable& table, std::vector<std::string>* nics, std::string* err);

// Splits the --rendezvous-allow values on commas and parses each into *networks, in order.
bool CollectAllowed(const FlagTable& table, std::vector<rendezvous::Cidr>* networks,
                    std::string* err);

// Parses -H `hosts` or, when it is empty, reads and parses the file `hostfile` into *list, in
// the order given; with neither, *list is emptied. Returns false and sets *err, naming the flag
// or file and the problem, on bad text or a file that cannot be read; *list is then unchanged.
bool ReadHostList(const std::string& hosts, const std::string& hostfile,
                  std::vector<discovery::HostSlots>* list, std::string* err);

// --mpi's rules: static jobs only (horovodrun runs elastic jobs with Gloo), no GPU slots (mpirun
// decides local ranks), and --mpi-args/--binding-args that split like shell words.
bool CheckMpi(const FlagTable& table, const JobConfig& config, std::string* err);

// --hang-timeout, else $ETRUN_HANG_TIMEOUT (seconds above 0), and --hang-action's rules: it needs
// the timeout; restart needs an elastic job; --mpi's ranks are mpirun's, not etrun's to dump.
bool HangTimeoutFromEnv(const FlagTable& table, const std::vector<std::string>& env,
                        JobConfig* config, std::string* err);

// None of the flags whose feature lands in a later release was given.
bool CheckNotSupportedYet(const FlagTable& table, std::string* err);

}  // namespace etrun::cli

#endif  // ETRUN_CLI_FLAG_CHECKS_H_
