// etrun-smoke's flags and size sweep: nccl-tests' names and meanings, exact error lines.
#include "smoke/options.h"

#include <doctest/doctest.h>

using etrun::smoke::ParseOptions;
using etrun::smoke::ParseResult;
using etrun::smoke::ParseSize;
using etrun::smoke::SmokeOptions;
using etrun::smoke::SweepSizes;

namespace {

// Parses args expecting an error and returns its text.
std::string ErrorOf(const std::vector<std::string>& args) {
  SmokeOptions options;
  std::string err;
  CHECK(ParseOptions(args, &options, &err) == ParseResult::kError);
  return err;
}

}  // namespace

TEST_CASE("sizes take binary K, M and G suffixes, with or without B, in any case") {
  struct Case {
    const char* text;
    size_t bytes;
  };
  for (const Case& c : {Case{"8", 8}, Case{"512K", 512 << 10}, Case{"64M", 64 << 20},
                        Case{"64mb", 64 << 20}, Case{"1G", size_t{1} << 30},
                        Case{"1024B", 1024}, Case{"1099511627776", size_t{1} << 40}}) {
    size_t bytes = 0;
    CAPTURE(c.text);
    CHECK(ParseSize(c.text, &bytes));
    CHECK(bytes == c.bytes);
  }
  for (const char* bad : {"", "0", "0M", "M", "-8", "8X", "8 M", "1.5M", "2048G",
                          "99999999999999"}) {
    size_t bytes = 0;
    CAPTURE(bad);
    CHECK_FALSE(ParseSize(bad, &bytes));
  }
}

TEST_CASE("defaults sweep 8 B to 64 MiB by x2 with 20 timed and 5 warm-up iterations") {
  SmokeOptions options;
  std::string err;
  REQUIRE(ParseOptions({}, &options, &err) == ParseResult::kRun);
  CHECK(options.iters == 20);
  CHECK(options.warmup == 5);
  CHECK(options.backend.empty());
  std::vector<size_t> sizes = SweepSizes(options);
  REQUIRE(sizes.size() == 24);
  CHECK(sizes.front() == 8);
  CHECK(sizes[1] == 16);
  CHECK(sizes.back() == 64 << 20);
}

TEST_CASE("short, long and --name=value forms set the same fields") {
  SmokeOptions a, b;
  std::string err;
  REQUIRE(ParseOptions({"-b", "1K", "-e", "1M", "-f", "4", "-n", "3", "-w", "0", "--backend",
                        "tcp", "--timeout", "2.5"},
                       &a, &err) == ParseResult::kRun);
  REQUIRE(ParseOptions({"--minbytes=1K", "--maxbytes", "1M", "--stepfactor=4", "--iters=3",
                        "--warmup_iters", "0", "--backend=tcp", "--timeout=2.5"},
                       &b, &err) == ParseResult::kRun);
  for (const SmokeOptions& o : {a, b}) {
    CHECK(o.min_bytes == 1024);
    CHECK(o.max_bytes == 1 << 20);
    CHECK(o.step_factor == 4);
    CHECK(o.iters == 3);
    CHECK(o.warmup == 0);
    CHECK(o.backend == "tcp");
    CHECK(o.timeout_s == 2.5);
  }
  CHECK(SweepSizes(a) == std::vector<size_t>{1024, 4096, 16384, 65536, 262144, 1048576});
}

TEST_CASE("sizes that are not whole floats round down, and the sweep stops at -e") {
  // Given -b 10 -e 100 -f 3: 10, 30, 90 bytes measure 8, 28 and 88 bytes.
  SmokeOptions options;
  std::string err;
  REQUIRE(ParseOptions({"-b", "10", "-e", "100", "-f", "3"}, &options, &err) ==
          ParseResult::kRun);
  CHECK(SweepSizes(options) == std::vector<size_t>{8, 28, 88});
  REQUIRE(ParseOptions({"-b", "64", "-e", "64", "-f", "1"}, &options, &err) == ParseResult::kRun);
  CHECK(SweepSizes(options) == std::vector<size_t>{64});
  REQUIRE(ParseOptions({"-b", "1G", "-e", "1T"}, &options, &err) == ParseResult::kError);
}

TEST_CASE("-h and --help ask for the usage text, which lists the backends built") {
  SmokeOptions options;
  std::string err;
  CHECK(ParseOptions({"-n", "3", "--help"}, &options, &err) == ParseResult::kHelp);
  CHECK(ParseOptions({"-h"}, &options, &err) == ParseResult::kHelp);
  CHECK(etrun::smoke::Usage(true).find("backends in this build: tcp nccl\n") != std::string::npos);
  CHECK(etrun::smoke::Usage(false).find("backends in this build: tcp (built without CUDA/NCCL)") !=
        std::string::npos);
}

TEST_CASE("bad flags are one line naming the flag, the value and the fix") {
  CHECK(ErrorOf({"--bogus"}) == "unknown flag '--bogus': see etrun-smoke --help");
  CHECK(ErrorOf({"extra"}) == "unexpected argument 'extra': see etrun-smoke --help");
  CHECK(ErrorOf({"-b"}) == "-b: expected a value");
  CHECK(ErrorOf({"-b", "x"}) == "-b: expected a size such as 8, 512K or 64M, got 'x'");
  CHECK(ErrorOf({"-b", "2"}) == "-b/--minbytes: expected at least 4 bytes (one float), got 2");
  CHECK(ErrorOf({"-b", "1M", "-e", "1K"}) ==
        "-b/--minbytes 1048576 is larger than -e/--maxbytes 1024: swap them");
  CHECK(ErrorOf({"-f", "1"}) == "-f/--stepfactor: expected 2 or more, got 1");
  CHECK(ErrorOf({"-f", "0"}) == "-f: expected a whole number from 2 to 1024, got '0'");
  CHECK(ErrorOf({"-n", "0"}) == "-n: expected a whole number from 1 to 1000000, got '0'");
  CHECK(ErrorOf({"--iters=x"}) == "--iters: expected a whole number from 1 to 1000000, got 'x'");
  CHECK(ErrorOf({"-w", "-1"}) == "-w: expected a whole number from 0 to 1000000, got '-1'");
  CHECK(ErrorOf({"--backend", "mpi"}) == "--backend: expected tcp or nccl, got 'mpi'");
  CHECK(ErrorOf({"--timeout", "0"}) ==
        "--timeout: expected a positive number of seconds, got '0'");
  CHECK(ErrorOf({"--timeout", "inf"}) ==
        "--timeout: expected a positive number of seconds, got 'inf'");
}
