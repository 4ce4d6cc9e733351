#include "launcher/process/environment.h"

#include <doctest/doctest.h>

namespace etrun::launcher {

TEST_CASE("a rank's variables go over the login's as env(1) sets them") {
  // Given a login environment with PATH twice and HOME, the rank's PATH replaces the first in
  // place (the second goes), its own new names are appended in order, and nothing else moves.
  std::vector<std::string> login = {"PATH=/bin", "HOME=/root", "PATH=/old", "PATHX=kept"};
  CHECK(OverlayEnvironment(login, {"PATH=/usr/bin", "NEW=1", "EMPTY="}) ==
        std::vector<std::string>{"PATH=/usr/bin", "HOME=/root", "PATHX=kept", "NEW=1", "EMPTY="});
  CHECK(OverlayEnvironment({}, {"A=1", "A=2"}) == std::vector<std::string>{"A=2"});
  CHECK(EnvValue(OverlayEnvironment(login, {"HOME=/home/u"}), "HOME") == "/home/u");
}

}  // namespace etrun::launcher
