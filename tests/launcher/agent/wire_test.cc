// The agent's frames (wire.h): what one side appends the other reads back, whatever pieces the
// stream comes in.
#include "launcher/agent/wire.h"

#include <vector>

#include <doctest/doctest.h>

namespace etrun::launcher::agent {
namespace {

TEST_CASE("frames read back whole and in order, however the stream is cut") {
  std::string stream;
  AppendFrame(&stream, kStart, 7, "echo 'hi'");
  AppendFrame(&stream, kPing, 0, "");
  AppendFrame(&stream, kStdout, 4294967295u, std::string("a\0b\n", 4));
  for (size_t piece : {1, 2, 5, 9, 64}) {
    FrameReader reader;
    std::vector<Frame> frames;
    for (size_t at = 0; at < stream.size(); at += piece) {
      REQUIRE(reader.Feed(std::string_view(stream).substr(at, piece), [&](Frame& f) { frames.push_back(f); }));
    }
    REQUIRE(frames.size() == 3);
    CHECK(frames[0].op == kStart);
    CHECK(frames[0].id == 7);
    CHECK(frames[0].data == "echo 'hi'");
    CHECK(frames[1].op == kPing);
    CHECK(frames[1].data.empty());
    CHECK(frames[2].id == 4294967295u);
    CHECK(frames[2].data == std::string("a\0b\n", 4));
    CHECK(reader.pending() == 0);
  }
}

TEST_CASE("a length beyond the limit is not an agent's stream") {
  std::string stream = "O";
  stream += std::string("\1\0\0\0", 4);
  stream += std::string("\xff\xff\xff\x7f", 4);
  FrameReader reader;
  int frames = 0;
  CHECK_FALSE(reader.Feed(stream, [&](Frame&) { ++frames; }));
  CHECK(frames == 0);
}

TEST_CASE("exit statuses travel as text both ways; anything else is refused") {
  ExitStatus status;
  REQUIRE(ParseExitText(ExitText(ExitStatus::Exited(3)), &status));
  CHECK((status.kind == ExitStatus::Kind::kExited && status.code == 3));
  REQUIRE(ParseExitText(ExitText(ExitStatus::Signaled(9)), &status));
  CHECK((status.kind == ExitStatus::Kind::kSignaled && status.signal == 9));
  for (const char* bad : {"", "c", "x3", "c-1", "c256", "s9x", "3", "c3@", "c3@x", "c3@-5", "@5"}) {
    CHECK_MESSAGE(!ParseExitText(bad, &status), bad);
  }
  // With the time its process ended, in the agent's milliseconds.
  int64_t at = 0;
  CHECK(ExitText(ExitStatus::Exited(7), 1234) == "c7@1234");
  REQUIRE(ParseExitText("c7@1234", &status, &at));
  CHECK((status.code == 7 && at == 1234));
  REQUIRE(ParseExitText("s15", &status, &at));
  CHECK(at == -1);
}

TEST_CASE("a rank's GPU share travels as three numbers, exactly one flag given") {
  GpuShare share;
  REQUIRE(ParseGpuShare(GpuShareText({2, 0, 3}), &share));
  CHECK((share.gpus_per_rank == 2 && share.ranks_per_gpu == 0 && share.local_rank == 3));
  REQUIRE(ParseGpuShare(GpuShareText({0, 4, 0}), &share));
  CHECK((share.gpus_per_rank == 0 && share.ranks_per_gpu == 4 && share.local_rank == 0));
  for (const char* bad : {"", "2 0", "2 0 3 4", "0 0 1", "2 2 1", "2 0 -1", "2  0 1", "2 0 x", "2 0 1 "}) {
    CHECK_MESSAGE(!ParseGpuShare(bad, &share), bad);
  }
}

}  // namespace
}  // namespace etrun::launcher::agent

namespace etrun::launcher::agent {

// A string literal with its NULs, without the terminating one.
template <size_t N>
std::string Raw(const char (&text)[N]) {
  return std::string(text, N - 1);
}

TEST_CASE("a rank to start travels as tagged items and reads back the same; anything else is refused") {
  // Values may hold anything but a NUL: quotes, spaces, newlines, '=' pass as they are.
  RankStart start;
  start.cwd = "/work/it's here";
  start.env = {"SECRET=a b\nc", "EMPTY=", "EQ=x=y"};
  start.argv = {"python3", "-c", "print('hi')", ""};
  start.network.resolve = true;
  start.network.launcher_address = "198.18.0.1";
  start.network.address_vars = {"MASTER_ADDR"};
  start.network.interface_vars = {"GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME"};
  start.network.require_interface = "eth0";
  start.ssh_connection = true;
  RankStart back;
  std::string err;
  REQUIRE(ParseRankStart(RankStartText(start), &back, &err));
  CHECK(back.cwd == start.cwd);
  CHECK(back.env == start.env);
  CHECK(back.argv == start.argv);
  CHECK(back.network.resolve);
  CHECK(back.network.launcher_address == "198.18.0.1");
  CHECK(back.network.address_vars == start.network.address_vars);
  CHECK(back.network.interface_vars == start.network.interface_vars);
  CHECK(back.network.require_interface == "eth0");
  CHECK(back.ssh_connection);
  const struct {
    std::string text;
    const char* err;
  } bad[] = {
      {Raw("C/\0Apython3"), "an item without its end"},
      {Raw("C/\0Xwhat\0Atrue\0"), "an unknown item 'X'"},
      {Raw("C/\0E=nameless\0Atrue\0"), "a variable without a name"},
      {Raw("C/\0ENOEQUALS\0Atrue\0"), "a variable without a name"},
      {Raw("Atrue\0"), "no directory or no command"},
      {Raw("C/\0"), "no directory or no command"},
  };
  for (const auto& row : bad) {
    CAPTURE(row.text);
    CHECK_FALSE(ParseRankStart(row.text, &back, &err));
    CHECK(err == row.err);
  }
}

}  // namespace etrun::launcher::agent
