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
  for (const char* bad : {"", "c", "x3", "c-1", "c256", "s9x", "3"}) {
    CHECK_MESSAGE(!ParseExitText(bad, &status), bad);
  }
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
