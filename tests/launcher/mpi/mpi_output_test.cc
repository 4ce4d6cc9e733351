// Whole lines out of mpirun's --tag-output fragments (launcher/mpi/mpi_output.h). The inputs are
// byte streams as Open MPI 4.1 prints them for ranks writing piece by piece.
#include "launcher/mpi/mpi_output.h"

#include <string>
#include <vector>

#include <doctest/doctest.h>

using etrun::launcher::MpiLineAssembler;

namespace {

// Feeds `chunks` one by one, then finishes; returns everything emitted.
std::string Assemble(const std::vector<std::string>& chunks, bool timestamps = false,
                     size_t max_line = 1 << 20) {
  MpiLineAssembler assembler(timestamps, max_line);
  std::string out;
  auto emit = [&out](std::string_view text) { out.append(text); };
  for (const std::string& c : chunks) assembler.Feed(c, emit);
  assembler.Finish(emit);
  return out;
}

// Every split of `stream` into two chunks gives `want`: where reads end cannot matter.
void CheckEverySplit(const std::string& stream, const std::string& want, bool timestamps = false) {
  for (size_t cut = 0; cut <= stream.size(); ++cut) {
    CAPTURE(cut);
    CHECK(Assemble({stream.substr(0, cut), stream.substr(cut)}, timestamps) == want);
  }
}

TEST_CASE("fragments of two ranks' piecewise prints come out as one whole line each") {
  // Given `print("MPI", rank, size, total)` on a pty in ranks 0 and 1, as mpirun printed it.
  std::string stream =
      "[1,1]<stdout>:MPI[1,0]<stdout>:MPI[1,0]<stdout>: [1,1]<stdout>: [1,0]<stdout>:0"
      "[1,1]<stdout>:1[1,0]<stdout>: 3[1,1]<stdout>: 3[1,0]<stdout>:\n[1,1]<stdout>:\n";
  CheckEverySplit(stream, "[1,0]<stdout>:MPI 0 3\n[1,1]<stdout>:MPI 1 3\n");
}

TEST_CASE("a line glued to another rank's fragment is split at the tag") {
  CheckEverySplit("[1,0]<stdout>:MPI 0 3 [1,1]<stdout>:MPI 1 3 6\n[1,0]<stdout>:6\n",
                  "[1,1]<stdout>:MPI 1 3 6\n[1,0]<stdout>:MPI 0 3 6\n");
}

TEST_CASE("carriage-return progress pieces stay pieces, each behind its rank's tag") {
  CheckEverySplit("[1,0]<stdout>:prog 1\r[1,1]<stdout>:prog 1\r[1,0]<stdout>:prog 2\rdone\n",
                  "[1,0]<stdout>:prog 1\r[1,1]<stdout>:prog 1\r[1,0]<stdout>:prog 2\r"
                  "[1,0]<stdout>:done\n");
}

TEST_CASE("stderr tags, mpirun's own untagged lines and a missing last newline") {
  // mpirun's own report has no tag and passes through as it is; a rank's unterminated last
  // line gets a newline at the end of the stream, as in Gloo mode.
  std::string stream =
      "[1,0]<stderr>:err [1,1]<stderr>:oops\n-----\nmpirun noticed that process rank 1\n"
      "[1,0]<stderr>:0\n[1,1]<stdout>:tail";
  CheckEverySplit(stream,
                  "[1,1]<stderr>:oops\n-----\nmpirun noticed that process rank 1\n"
                  "[1,0]<stderr>:err 0\n[1,1]<stdout>:tail\n");
}

TEST_CASE("timestamps: a line keeps the timestamp of its first fragment") {
  std::string stream =
      "Mon Nov 23 23:01:52 2026[1,0]<stdout>:a\n"
      "Mon Nov 23 23:01:52 2026[1,0]<stdout>:c"
      "Mon Nov  3 23:01:53 2026[1,1]<stdout>:x\n"
      "Mon Nov 23 23:01:54 2026[1,0]<stdout>:d\n";
  CheckEverySplit(stream,
                  "Mon Nov 23 23:01:52 2026[1,0]<stdout>:a\n"
                  "Mon Nov  3 23:01:53 2026[1,1]<stdout>:x\n"
                  "Mon Nov 23 23:01:52 2026[1,0]<stdout>:cd\n",
                  true);
}

TEST_CASE("text that only looks like a tag is text") {
  for (const char* text : {"[INFO] ready\n", "[1,2] <stdout>:x\n", "[1,]<stdout>:x\n", "[\n",
                           "a[1,0]<stdout\n"}) {
    CAPTURE(text);
    CHECK(Assemble({std::string("[1,0]<stdout>:") + text}) == std::string("[1,0]<stdout>:") + text);
  }
  CHECK(Assemble({"[1,0]<std"}) == "[1,0]<std");  // a tag cut off by the end of the stream
}

TEST_CASE("a runaway line is emitted in bounded pieces behind its tag") {
  std::string out = Assemble({"[1,0]<stdout>:" + std::string(25, 'x')}, false, 10);
  CHECK(out == "[1,0]<stdout>:xxxxxxxxxx\n[1,0]<stdout>:xxxxxxxxxx\n[1,0]<stdout>:xxxxx\n");
}

TEST_CASE("many ranks' interleaved fragments byte by byte keep every line whole") {
  // Given 12 ranks each writing "line <r> <i>" in three fragments, interleaved round-robin,
  // fed one byte at a time: every line arrives once and whole.
  std::string stream;
  for (int i = 0; i < 5; ++i) {
    for (const char* part : {"line ", "#", "\n"}) {
      for (int r = 0; r < 12; ++r) {
        std::string text = part[0] == '#' ? std::to_string(r) + " " + std::to_string(i) : part;
        stream += "[1," + std::to_string(r) + "]<stdout>:" + text;
      }
    }
  }
  std::vector<std::string> bytes;
  for (char c : stream) bytes.emplace_back(1, c);
  std::string out = Assemble(bytes);
  for (int i = 0; i < 5; ++i) {
    for (int r = 0; r < 12; ++r) {
      std::string line = "[1," + std::to_string(r) + "]<stdout>:line " + std::to_string(r) + " " +
                         std::to_string(i) + "\n";
      CAPTURE(line);
      CHECK(out.find(line) != std::string::npos);
    }
  }
  CHECK(std::count(out.begin(), out.end(), '\n') == 60);
}

}  // namespace

TEST_CASE("an observer sees each whole tagged line with its tag, not mpirun's own text") {
  MpiLineAssembler assembler(true, 8);
  std::vector<std::pair<std::string, std::string>> seen;
  assembler.set_on_line([&seen](const std::string& tag, std::string_view line) {
    seen.emplace_back(tag, std::string(line));
  });
  std::string out;
  auto emit = [&out](std::string_view text) { out.append(text); };
  assembler.Feed("Mon Nov 23 23:01:52 2026[1,1]<stderr>:a\nmpirun says\n"
                 "Mon Nov 23 23:01:52 2026[1,0]<stdout>:0123456789", emit);
  assembler.Finish(emit);
  CHECK(seen == std::vector<std::pair<std::string, std::string>>{
                    {"[1,1]<stderr>:", "Mon Nov 23 23:01:52 2026[1,1]<stderr>:a\n"},
                    {"[1,0]<stdout>:", "Mon Nov 23 23:01:52 2026[1,0]<stdout>:01234567\n"},
                    {"[1,0]<stdout>:", "Mon Nov 23 23:01:52 2026[1,0]<stdout>:89\n"}});
  CHECK(out.find("mpirun says\n") != std::string::npos);
}
