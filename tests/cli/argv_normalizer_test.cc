// argparse's syntax as horovodrun users rely on it (spec §1.1), on a small option table shaped
// like horovodrun's: one-letter, single-dash multi-letter and long names; 0, 1 and 2 values.
#include "cli/argv_normalizer.h"

#include <doctest/doctest.h>

#include <string>
#include <vector>

namespace etrun::cli {
namespace {

std::vector<OptionSpec> TestSpecs() {
  return {
      {{"-np", "--num-proc"}, 1},
      {{"--min-np", "--min-num-proc"}, 1},
      {{"--max-np", "--max-num-proc"}, 1},
      {{"--slots-per-host"}, 1},
      {{"-H", "--hosts"}, 1},
      {{"-hostfile", "--hostfile"}, 1},
      {{"--host-discovery-script"}, 1},
      {{"-p", "--ssh-port"}, 1},
      {{"-i", "--ssh-identity-file"}, 1},
      {{"-h", "--help"}, 0},
      {{"-v", "--version"}, 0},
      {{"-cb", "--check-build"}, 0},
      {{"-prefix-timestamp", "--prefix-output-with-timestamp"}, 0},
      {{"--verbose"}, 0},
      {{"--network-interfaces"}, 1},
      {{"--network-interface"}, 1},
      {{"--blacklist-cooldown-range"}, 2},
      {{"--gloo"}, 0},
      {{"--gloo-timeout-seconds"}, 1},
      {{"--mpi-args"}, 1},
  };
}

// Returns the error, or "" with *out filled.
std::string Normalize(const std::vector<std::string>& args, NormalizedArgs* out) {
  std::string err;
  return NormalizeArgv(TestSpecs(), args, out, &err) ? "" : err;
}

using Tokens = std::vector<std::string>;

struct Case {
  Tokens args;
  Tokens options;  // canonical
  Tokens command;
};

void CheckCases(const std::vector<Case>& cases) {
  for (const Case& c : cases) {
    CAPTURE(c.args);
    NormalizedArgs out;
    REQUIRE(Normalize(c.args, &out) == "");
    CHECK(out.options == c.options);
    CHECK(out.command == c.command);
  }
}

TEST_CASE("the command starts at the first word that is neither an option nor a value") {
  // Given argparse.REMAINDER, everything after the first plain word belongs to the command,
  // including words that look like launcher options.
  CheckCases({
      {{"-np", "2", "python", "t.py", "-np", "3"},
       {"--num-proc=2"},
       {"python", "t.py", "-np", "3"}},
      {{"--verbose", "python", "--verbose"}, {"--verbose"}, {"python", "--verbose"}},
      {{"python"}, {}, {"python"}},
      {{"-v"}, {"--version"}, {}},
      {{}, {}, {}},
      // argparse takes negative numbers, a lone '-' and words with a space for positionals.
      {{"-np", "2", "-5", "x"}, {"--num-proc=2"}, {"-5", "x"}},
      {{"-np", "2", "-", "x"}, {"--num-proc=2"}, {"-", "x"}},
      {{"-np", "2", "-x y"}, {"--num-proc=2"}, {"-x y"}},
  });
}

TEST_CASE("a double dash ends the options and is dropped, but only where an option could be") {
  // Given `--` before the command, it is removed (horovodrun would run `-- python x`); inside
  // the command it is the command's business.
  CheckCases({
      {{"-np", "2", "--", "python", "x"}, {"--num-proc=2"}, {"python", "x"}},
      {{"--", "-np", "2"}, {}, {"-np", "2"}},
      {{"-np", "2", "python", "--", "x"}, {"--num-proc=2"}, {"python", "--", "x"}},
      {{"-np", "2", "--"}, {"--num-proc=2"}, {}},
  });
}

TEST_CASE("values may be attached with an equals sign to any option that takes one") {
  CheckCases({
      {{"--num-proc=4", "x"}, {"--num-proc=4"}, {"x"}},
      {{"-np=4", "x"}, {"--num-proc=4"}, {"x"}},
      {{"-H=a:1", "x"}, {"--hosts=a:1"}, {"x"}},
      {{"--hosts=a:1,b:2", "x"}, {"--hosts=a:1,b:2"}, {"x"}},
      {{"-hostfile=hosts.txt", "x"}, {"--hostfile=hosts.txt"}, {"x"}},
      {{"--slots=4", "x"}, {"--slots-per-host=4"}, {"x"}},
      // After '=' anything goes, even a leading dash or another '='.
      {{"--mpi-args=-x FOO=1", "x"}, {"--mpi-args=-x FOO=1"}, {"x"}},
  });
}

TEST_CASE("one-letter options take a value glued to the letter") {
  CheckCases({
      {{"-Ha:1,b:2", "x"}, {"--hosts=a:1,b:2"}, {"x"}},
      {{"-p2222", "x"}, {"--ssh-port=2222"}, {"x"}},
      {{"-i/home/u/.ssh/key", "x"}, {"--ssh-identity-file=/home/u/.ssh/key"}, {"x"}},
      {{"-Ha=b", "x"}, {"--hosts=a=b"}, {"x"}},
  });
}

TEST_CASE("multi-letter single-dash options never take a glued value") {
  // Given argparse, `-np4` is not `-np 4`; we say so instead of argparse's "-np is required".
  NormalizedArgs out;
  CHECK(Normalize({"-np4", "x"}, &out) == "unrecognized option '-np4' (did you mean -np 4?)");
  CHECK(Normalize({"-hostfilehosts.txt", "x"}, &out) ==
        "unrecognized option '-hostfilehosts.txt' (did you mean -hostfile hosts.txt?)");
}

TEST_CASE("long options may be abbreviated to a unique prefix") {
  CheckCases({
      {{"--slots", "4", "x"}, {"--slots-per-host=4"}, {"x"}},
      {{"--verb", "x"}, {"--verbose"}, {"x"}},
      {{"--host-disc", "./d.sh", "x"}, {"--host-discovery-script=./d.sh"}, {"x"}},
      {{"--blacklist", "1", "2", "x"}, {"--blacklist-cooldown-range", "1", "2"}, {"x"}},
      {{"--network-interfaces", "a", "x"}, {"--network-interfaces=a"}, {"x"}},
  });
}

TEST_CASE("single-dash multi-letter options may be abbreviated too") {
  // Given argparse, `-host` is `-hostfile` and `-n` is `-np`. A prefix of a multi-letter name
  // wins over a glued value of a one-letter option: `-pre` is -prefix-timestamp, not `-p re`.
  CheckCases({
      {{"-host", "f", "x"}, {"--hostfile=f"}, {"x"}},
      {{"-n", "4", "x"}, {"--num-proc=4"}, {"x"}},
      {{"-c", "x"}, {"--check-build"}, {"x"}},
      {{"-pre", "x"}, {"--prefix-output-with-timestamp"}, {"x"}},
      {{"-prefix-timestamp", "x"}, {"--prefix-output-with-timestamp"}, {"x"}},
  });
}

TEST_CASE("a prefix matching only aliases of one option is accepted") {
  // Given --min-np and --min-num-proc name one option, `--min` is not ambiguous (argparse says
  // it is; a deliberate improvement).
  CheckCases({
      {{"--min", "2", "x"}, {"--min-np=2"}, {"x"}},
      {{"--min-num", "2", "x"}, {"--min-np=2"}, {"x"}},
      {{"--max", "2", "x"}, {"--max-np=2"}, {"x"}},
  });
}

TEST_CASE("an exact name wins over longer names it is a prefix of") {
  CheckCases({
      {{"--gloo", "x"}, {"--gloo"}, {"x"}},
      {{"--network-interface", "eth0", "x"}, {"--network-interface=eth0"}, {"x"}},
      {{"-p", "22", "x"}, {"--ssh-port=22"}, {"x"}},
      {{"-h"}, {"--help"}, {}},
  });
}

TEST_CASE("a prefix matching two different options is an error listing them") {
  NormalizedArgs out;
  CHECK(Normalize({"--network-interf", "eth0", "x"}, &out) ==
        "ambiguous option '--network-interf' could match --network-interface, "
        "--network-interfaces: type more of the name");
  CHECK(
      Normalize({"--gl", "x"}, &out) ==
      "ambiguous option '--gl' could match --gloo, --gloo-timeout-seconds: type more of the name");
  CHECK(Normalize({"--m=3", "x"}, &out) ==
        "ambiguous option '--m' could match --max-np, --max-num-proc, --min-np, --min-num-proc, "
        "--mpi-args: type more of the name");
}

TEST_CASE("a value may start with a dash only if it is a negative number or has a space") {
  CheckCases({
      {{"-np", "-1", "x"}, {"--num-proc=-1"}, {"x"}},
      {{"--gloo-timeout-seconds", "-.5", "x"}, {"--gloo-timeout-seconds=-.5"}, {"x"}},
      {{"--mpi-args", "-x FOO", "x"}, {"--mpi-args=-x FOO"}, {"x"}},
      {{"-H", "-", "x"}, {"--hosts=-"}, {"x"}},
  });
  NormalizedArgs out;
  CHECK(Normalize({"-np", "--verbose", "x"}, &out) ==
        "option -np expects a value: put it after the option, or write -np=VALUE if it starts "
        "with '-'");
  CHECK(Normalize({"--mpi-args", "-x", "x"}, &out) ==
        "option --mpi-args expects a value: put it after the option, or write --mpi-args=VALUE "
        "if it starts with '-'");
  CHECK(Normalize({"-np", "--", "x"}, &out).rfind("option -np expects a value", 0) == 0);
}

TEST_CASE("a missing value names the option as it was typed") {
  NormalizedArgs out;
  CHECK(Normalize({"-np"}, &out).rfind("option -np expects a value", 0) == 0);
  CHECK(Normalize({"--slots"}, &out).rfind("option --slots expects a value", 0) == 0);
  CHECK(Normalize({"-H"}, &out).rfind("option -H expects a value", 0) == 0);
}

TEST_CASE("the blacklist cooldown range takes two values") {
  CheckCases({
      {{"--blacklist-cooldown-range", "10", "60", "x"},
       {"--blacklist-cooldown-range", "10", "60"},
       {"x"}},
      {{"--blacklist-cooldown-range", "-1", "60", "x"},
       {"--blacklist-cooldown-range", "-1", "60"},
       {"x"}},
  });
  const std::string two =
      "option --blacklist-cooldown-range expects 2 values: put them after the "
      "option, separated by spaces";
  NormalizedArgs out;
  CHECK(Normalize({"--blacklist-cooldown-range", "10"}, &out) == two);
  CHECK(Normalize({"--blacklist-cooldown-range", "10", "--verbose"}, &out) == two);
  CHECK(Normalize({"--blacklist-cooldown-range=10", "60"}, &out) == two);
}

TEST_CASE("a flag given a value with an equals sign is an error") {
  NormalizedArgs out;
  CHECK(Normalize({"--verbose=yes", "x"}, &out) ==
        "option --verbose takes no value: remove '=yes'");
  CHECK(Normalize({"-cb=1"}, &out) == "option -cb takes no value: remove '=1'");
  CHECK(Normalize({"--verb=1"}, &out) == "option --verb takes no value: remove '=1'");
}

TEST_CASE("an empty value is an error") {
  // Given `-H "$HOSTS"` with HOSTS unset, say so rather than launch on a default host.
  NormalizedArgs out;
  const std::string empty = "option -H has an empty value: give a value or leave the option out";
  CHECK(Normalize({"-H", "", "x"}, &out) == empty);
  CHECK(Normalize({"-H=", "x"}, &out) == empty);
  CHECK(Normalize({"--hosts=", "x"}, &out) ==
        "option --hosts has an empty value: give a value or leave the option out");
}

TEST_CASE("an unknown option is an error, with a suggestion when one is close") {
  NormalizedArgs out;
  CHECK(Normalize({"--min_np", "2"}, &out) ==
        "unrecognized option '--min_np' (did you mean --min-np?)");
  CHECK(Normalize({"--np", "2"}, &out) == "unrecognized option '--np' (did you mean -np?)");
  CHECK(Normalize({"--verbsoe"}, &out) ==
        "unrecognized option '--verbsoe' (did you mean --verbose?)");
  CHECK(Normalize({"-verbose"}, &out) ==
        "unrecognized option '-verbose' (did you mean --verbose?)");
  CHECK(Normalize({"--bogus=1"}, &out) ==
        "unrecognized option '--bogus': run 'etrun --help' to list the options");
  // -v is a flag, so `-vx` is not `-v` with a value.
  CHECK(Normalize({"-vx"}, &out) == "unrecognized option '-vx' (did you mean -v?)");
}

TEST_CASE("repeated options are all kept, in order") {
  // Given argparse, the last one wins; flags.cc tells CLI11 so. Here nothing is dropped.
  CheckCases({
      {{"-np", "1", "--verbose", "-np=2", "x"},
       {"--num-proc=1", "--verbose", "--num-proc=2"},
       {"x"}},
  });
}

TEST_CASE("a failed normalization leaves the output alone") {
  NormalizedArgs out;
  out.options = {"--keep"};
  out.command = {"keep"};
  CHECK(Normalize({"-np", "2", "--bogus", "x"}, &out) != "");
  CHECK(out.options == Tokens{"--keep"});
  CHECK(out.command == Tokens{"keep"});
}

TEST_CASE("spellcheck suggests the closest name within a few edits") {
  const std::vector<std::string> names = {"--min-np", "--max-np", "-np", "--verbose", "--tcp"};
  CHECK(SpellcheckName("--min_np", names) == "--min-np");
  CHECK(SpellcheckName("--tpc", names) == "--tcp");
  CHECK(SpellcheckName("--np", names) == "-np");
  CHECK(SpellcheckName("--bogus", names) == "");
  CHECK(SpellcheckName("--tcx", {"--tca", "--tcb"}) == "--tca");  // a tie: the earliest wins
}

}  // namespace
}  // namespace etrun::cli
