// argv_normalizer: Python argparse's command-line syntax, as horovodrun users rely on it (spec
// §1.1), rewritten into a canonical token list that CLI11 parses without surprises. It knows
// nothing of what the options mean; flags.cc describes them (read off its CLI11 App) and converts
// the values. Pure functions without state: safe to call from any thread.
//
// What it accepts, given the option descriptions:
//   * `--long VALUE`, `--long=VALUE`, `-x VALUE`, `-x=VALUE`, `-xVALUE` (one-letter options only),
//     `-multi VALUE`, `-multi=VALUE` (single-dash multi-letter names such as `-np`, `-hostfile`).
//   * Any unique prefix of a `--long` name (`--slots` = `--slots-per-host`), and of a `-multi`
//     name (`-host` = `-hostfile`). A prefix that matches only names of ONE option is unique
//     (`--min` = `--min-np`, whose alias is `--min-num-proc`); argparse calls that ambiguous, we
//     do not. An exact name always wins over a prefix (`--gloo` is not `--gloo-timeout-seconds`).
//   * The worker command starts at the first token that is neither an option nor an option's
//     value, and takes every token after it verbatim (argparse.REMAINDER). A `--` where an option
//     could stand ends the options and is dropped (horovodrun keeps it as the command's first
//     word, which then fails to run).
//   * A value may start with '-' only if it looks like a negative number (`-1`, `-.5`) or contains
//     a space (argparse's rules), or if attached with '=' (`--mpi-args=-x FOO`).
//   * An empty value (`-H ""`, `--hosts=`) is an error; argparse takes it and horovodrun then
//     silently falls back to a default.
//   * Options may repeat; what repetition means (last wins, or collect) is the caller's business.
#ifndef ETRUN_CLI_ARGV_NORMALIZER_H_
#define ETRUN_CLI_ARGV_NORMALIZER_H_

#include <string>
#include <vector>

namespace etrun::cli {

// One option as the normalizer needs to know it.
struct OptionSpec {
  // Every spelling, dashes included. Three kinds: "--long" (abbreviable), "-x" (one character
  // after the dash; may take an attached value "-xVALUE"), "-multi" (one dash, two or more
  // characters; abbreviable, never takes an attached value). REQUIRES: at least one "--long"
  // name; the first one names the option in the canonical output.
  std::vector<std::string> names;
  int num_values = 0;  // values per occurrence: 0 (a flag), 1 or 2
  // With num_values 1: the value may be left out ("--preflight"), and is then given only attached
  // ("--preflight=warn"); a word after it is never taken for its value.
  bool value_optional = false;
};

struct NormalizedArgs {
  // One entry per occurrence, in command-line order, spelled with the option's first "--long"
  // name: "--verbose" for a flag; "--num-proc=4" for one value (always attached with '=', so that
  // a value such as "-x FOO" is never taken for an option downstream);
  // "--blacklist-cooldown-range", "10", "60" for two values.
  std::vector<std::string> options;
  // The worker command, verbatim; empty if the arguments hold only options.
  std::vector<std::string> command;
};

// Normalizes `args` (the arguments after the program name) against `specs`. On success returns
// true and overwrites *out. On a syntax error returns false, leaves *out unchanged and sets *err to
// one line without prefix or newline, in the form "<what>: <how to fix>" or
// "<what> (did you mean <option>?)", e.g. "option -np expects a value: ...".
// REQUIRES: no name appears in two specs.
bool NormalizeArgv(const std::vector<OptionSpec>& specs, const std::vector<std::string>& args,
                   NormalizedArgs* out, std::string* err);

// The closest of `candidates` to `word` by edit distance, or "" when none is close enough to be a
// plausible typo. Ties go to the earliest candidate.
std::string SpellcheckName(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace etrun::cli

#endif  // ETRUN_CLI_ARGV_NORMALIZER_H_
