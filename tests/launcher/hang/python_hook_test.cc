#include "launcher/hang/python_hook.h"

#include <stdlib.h>
#include <sys/stat.h>

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "launcher/process/environment.h"

using etrun::launcher::EnvValue;
using etrun::launcher::hang::ApplyPythonHook;
using etrun::launcher::hang::PythonHookDir;
using etrun::launcher::hang::PythonHookText;

TEST_CASE("a rank that asks for the hook gets its folder first on PYTHONPATH; others are left alone") {
  // The first use in this process decides the folder: a private cache, not the user's own.
  char cache[] = "/tmp/etrun-hook-test-XXXXXX";
  REQUIRE(mkdtemp(cache) != nullptr);
  setenv("XDG_CACHE_HOME", cache, 1);
  std::vector<std::string> plain = {"PATH=/usr/bin", "PYTHONPATH=/mine"};
  std::string err;
  CHECK(ApplyPythonHook(&plain, &err));
  CHECK(EnvValue(plain, "PYTHONPATH") == "/mine");

  std::vector<std::string> asked = {"PATH=/usr/bin", "ETRUN_STACK_SIGNAL=23", "PYTHONPATH=/mine:/theirs"};
  REQUIRE(ApplyPythonHook(&asked, &err));
  std::string dir = PythonHookDir(&err);
  REQUIRE_FALSE(dir.empty());
  CHECK(EnvValue(asked, "PYTHONPATH") == dir + ":/mine:/theirs");
  std::vector<std::string> bare = {"ETRUN_STACK_SIGNAL=23", "ETRUN_STACK_OWNER=77"};
  REQUIRE(ApplyPythonHook(&bare, &err));
  CHECK(EnvValue(bare, "PYTHONPATH") == dir);
  CHECK(EnvValue(bare, "ETRUN_STACK_OWNER").empty());  // decided in the rank, never inherited

  // The module is there, the user's alone to change, and says what it is.
  struct stat st;
  REQUIRE(stat(dir.c_str(), &st) == 0);
  CHECK((st.st_mode & 077) == 0);
  std::ifstream in(dir + "/sitecustomize.py");
  std::stringstream text;
  text << in.rdbuf();
  CHECK(text.str() == PythonHookText());
  CHECK(text.str().find("faulthandler.register") != std::string::npos);
  CHECK(dir.starts_with(std::string(cache) + "/etrun/python/"));
  unsetenv("XDG_CACHE_HOME");
  std::filesystem::remove_all(cache);
}
