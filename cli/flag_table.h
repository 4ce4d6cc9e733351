// flag_table: horovodrun's option table on a CLI11 App (see flags.h for what it accepts), shared
// by the parser (flags.cc) and the checks that run after it (flag_checks.h). Internal to cli/.
// One table per parse; not thread-safe.
#ifndef ETRUN_CLI_FLAG_TABLE_H_
#define ETRUN_CLI_FLAG_TABLE_H_

#include <CLI/CLI.hpp>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cli/argv_normalizer.h"
#include "launcher/job_config.h"

namespace etrun::cli {

// horovodrun's option table on a CLI11 App. Values land in the JobConfig given to the
// constructor, which must outlive the table; --hostfile's path stays here (hostfile()). Every
// option has a long name; argparse-only single-dash multi-letter names ("-np") live in
// dash_aliases_, because CLI11 cannot spell them.
class FlagTable {
 public:
  explicit FlagTable(JobConfig* c);
  FlagTable(const FlagTable&) = delete;
  FlagTable& operator=(const FlagTable&) = delete;

  std::vector<OptionSpec> Specs() const;
  // "-np/--num-proc" for "--num-proc", as argparse names options in its messages.
  std::string Display(const std::string& long_name) const;
  bool Given(const std::string& long_name) const { return app_.get_option(long_name)->count() > 0; }
  // Runs CLI11 on normalized tokens. Returns false and sets *err (one line) on a bad value.
  bool Parse(const std::vector<std::string>& tokens, std::string* err);
  // Every --network-interface(s) value, in command-line order.
  std::vector<std::string> NicValues() const;
  // --hostfile's path (the last one given), or "" when not given; read by the caller.
  const std::string& hostfile() const { return hostfile_; }
  // Every value given to a TakeAll option, in command-line order.
  std::vector<std::string> Results(const std::string& name) const {
    return app_.get_option(name)->results();
  }
  std::string Help() const { return app_.help(); }

 private:
  // Adds an option with values; CLI11 converts them to T (after our syntax checks) and `store`
  // receives the last occurrence's value, only if the option was given.
  template <typename T>
  CLI::Option* Value(const std::string& names, std::function<void(const T&)> store,
                     const std::string& help, const char* dash_alias = nullptr);
  template <typename T>
  CLI::Option* Optional(const std::string& names, std::optional<T>* field, const std::string& help,
                        const char* dash_alias = nullptr) {
    return Value<T>(
        names, [field](const T& v) { *field = v; }, help, dash_alias);
  }
  CLI::Option* Text(const std::string& names, std::string* field, const std::string& help) {
    return Value<std::string>(
        names, [field](const std::string& v) { *field = v; }, help);
  }
  CLI::Option* Switch(const std::string& names, const std::string& help, std::function<void()> on,
                      const char* dash_alias = nullptr);
  // `name` sets *field to true, `negation` to false; the negation is hidden from --help if asked.
  void SwitchPair(const std::string& name, const std::string& negation, std::optional<bool>* field,
                  const std::string& help, bool negation_hidden);
  CLI::Option* Finish(CLI::Option* opt, const char* dash_alias);

  // Each adds --help's groups in their order: AddGeneral adds "Options" (AddOptions),
  // "Controller arguments" (AddController) and "SSH arguments" (AddSsh).
  void AddGeneral(JobConfig* c);
  void AddOptions(JobConfig* c);
  void AddController(JobConfig* c);
  void AddSsh(JobConfig* c);
  // Per cluster kind (cli/cluster_kinds.h): --ignore-<kind>, and --add-<kind>-jobs where the
  // kind can grow onto other allocations.
  void AddClusterKinds(JobConfig* c);
  void AddHostsAndElastic(JobConfig* c);
  void AddTunables(Tunables* t);
  void AddLibraryAndLogging(JobConfig* c);

  CLI::App app_;
  std::map<std::string, std::string> dash_aliases_;  // "--num-proc" -> "-np"
  std::string group_;                                // help group of the options being added
  std::string hostfile_;                             // --hostfile's path
};

}  // namespace etrun::cli

#endif  // ETRUN_CLI_FLAG_TABLE_H_
