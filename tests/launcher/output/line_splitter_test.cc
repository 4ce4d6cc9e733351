#include "launcher/output/line_splitter.h"

#include <regex>

#include <doctest/doctest.h>

using etrun::launcher::TimestampFormat;
using etrun::launcher::LineSplitter;
using etrun::launcher::PrefixFormatter;

namespace {

// Feeds chunks through a splitter and formatter, then ends the stream.
std::string Run(const std::vector<std::string>& chunks, int rank = 3, bool is_stderr = false,
                size_t max_line = 16 << 20) {
  LineSplitter splitter(max_line);
  PrefixFormatter formatter(rank, is_stderr, false, TimestampFormat::kAsctime);
  std::string out;
  auto emit = [&](std::string_view piece, bool terminated) { formatter.Append(piece, terminated, &out); };
  for (const std::string& c : chunks) splitter.Feed(c, emit);
  splitter.Finish(emit);
  return out;
}

}  // namespace

TEST_CASE("pieces end at \\n or \\r and each gets the rank prefix (spec 7.1)") {
  struct Case {
    std::vector<std::string> chunks;
    const char* want;
  } cases[] = {
      {{"a\nb\n"}, "[3]<stdout>:a\n[3]<stdout>:b\n"},
      {{"a\r\n"}, "[3]<stdout>:a\r[3]<stdout>:\n"},                       // CRLF: two pieces
      {{"10%\r20%\rdone\n"}, "[3]<stdout>:10%\r[3]<stdout>:20%\r[3]<stdout>:done\n"},
      {{"par", "tial", " line\n"}, "[3]<stdout>:partial line\n"},          // glued across reads
      {{"x\n", "", "y\n"}, "[3]<stdout>:x\n[3]<stdout>:y\n"},
      {{"\n\n"}, "[3]<stdout>:\n[3]<stdout>:\n"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.want);
    CHECK(Run(c.chunks) == c.want);
  }
}

TEST_CASE("a final line without newline is ended by etrun") {
  CHECK(Run({"done\nno newline"}) == "[3]<stdout>:done\n[3]<stdout>:no newline\n");
  CHECK(Run({}).empty());
}

TEST_CASE("bytes pass through untouched: NUL, invalid UTF-8, long lines") {
  std::string weird("a\0b\xff\xfe\xc3(\n", 8);
  CHECK(Run({weird}) == "[3]<stdout>:" + weird);
  std::string big(1 << 20, 'x');
  CHECK(Run({big.substr(0, 1000), big.substr(1000), "\n"}) == "[3]<stdout>:" + big + "\n");
}

TEST_CASE("a runaway line beyond the cap is cut into ended pieces") {
  CHECK(Run({"abcdefgh", "\n"}, 0, false, 4) == "[0]<stdout>:abcd\n[0]<stdout>:efgh\n[0]<stdout>:\n");
}

TEST_CASE("stderr pieces say stderr") {
  CHECK(Run({"oops\n"}, 12, true) == "[12]<stderr>:oops\n");
}

TEST_CASE("timestamps come first, horovodrun's asctime form has no separator") {
  PrefixFormatter asctime(0, false, true, TimestampFormat::kAsctime);
  std::string out;
  asctime.Append("hi\n", true, &out);
  CHECK(std::regex_match(out, std::regex(R"([A-Z][a-z]{2} [A-Z][a-z]{2} [ 0-9]\d \d\d:\d\d:\d\d \d{4}\[0\]<stdout>:hi\n)")));
  PrefixFormatter iso(1, true, true, TimestampFormat::kIso);
  out.clear();
  iso.Append("hi\n", true, &out);
  CHECK(std::regex_match(out, std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}[+-]\d{4} \[1\]<stderr>:hi\n)")));
}
