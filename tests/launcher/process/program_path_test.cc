#include "launcher/process/program_path.h"

#include <doctest/doctest.h>

namespace etrun::launcher {

TEST_CASE("FindProgram looks a name up on PATH as execvp does and says why it cannot") {
  std::string err;
  CHECK(FindProgram("sh", "/nonexistent:/bin", &err) == "/bin/sh");
  CHECK(FindProgram("/bin/sh", "", &err) == "/bin/sh");
  CHECK(FindProgram("no-such-program-etrun", "/bin:/usr/bin", &err).empty());
  CHECK(err == "command not found in PATH");
  CHECK(FindProgram("/no/such/file", "", &err).empty());
  CHECK(err == "no such file");
  CHECK(FindProgram("/etc/passwd", "", &err).empty());
  CHECK(err == "not an executable file");
  CHECK(FindProgram("", "", &err).empty());
  CHECK(err == "the command is empty");
}

TEST_CASE("CommandCannotRun is empty for a runnable command and one line for the others") {
  CHECK(CommandCannotRun({"sh", "-c", "true"}, {"PATH=/bin"}).empty());
  CHECK(CommandCannotRun({"no-such-program-etrun"}, {"PATH=/bin"}) ==
        "cannot run 'no-such-program-etrun': command not found in PATH: check the command and PATH");
}

}  // namespace etrun::launcher

namespace etrun::launcher {

TEST_CASE("a relative program is the child's: found from the directory it runs in") {
  // ./x and a relative PATH entry are looked up from `cwd` (the rank's), not etrun's; a cwd that
  // is not a directory leaves etrun's own, as a failed `cd` would.
  std::string err;
  CHECK(FindProgram("./sh", "", &err, "/bin") == "/bin/./sh");
  CHECK(FindProgram("sh", "bin", &err, "/") == "/bin/sh");
  CHECK(FindProgram("./sh", "", &err, "/no/such/dir").empty());
  CHECK(err == "no such file");
}

}  // namespace etrun::launcher
