// The bootstrap (agent_bootstrap.h) run for real under /bin/sh, as a host's login runs it, with
// a stand-in etrun: a script that answers `__agent-id` with its id and `__agent ...` by naming
// itself. It runs the launcher's build where it is, else receives it on stdin into the cache,
// and refuses in one line when it can store it nowhere.
#include "launcher/agent/agent_bootstrap.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <doctest/doctest.h>

#include "launcher/agent/wire.h"

namespace etrun::launcher::agent {
namespace {

namespace fs = std::filesystem;

std::string StandIn(const std::string& id) {
  return "#!/bin/sh\n"
         "[ \"$1\" = __agent-id ] && { echo " + id + "; exit 0; }\n"
         "echo \"agent $0 $* ASAN=$ASAN_OPTIONS\"\n";
}

struct Run {
  int code = -1;
  std::string out;
};

// Runs `command` under sh with HOME=`home`, `input` on stdin; stdout and stderr together.
Run Shell(const std::string& command, const std::string& home, const std::string& input) {
  std::string in_path = home + "/stdin", out_path = home + "/stdout";
  std::ofstream(in_path) << input;
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    freopen(in_path.c_str(), "r", stdin);
    freopen(out_path.c_str(), "w", stdout);
    dup2(1, 2);
    std::string h = "HOME=" + home;
    char* env[] = {const_cast<char*>(h.c_str()), const_cast<char*>("PATH=/usr/bin:/bin"), nullptr};
    execle("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr), env);
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  Run r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream f(out_path);
  r.out.assign(std::istreambuf_iterator<char>(f), {});
  return r;
}

struct Dir {
  Dir() {
    char templ[] = "/tmp/etrun-bootstrap-XXXXXX";
    path = mkdtemp(templ);
  }
  ~Dir() { fs::remove_all(path); }
  std::string path;
};

TEST_CASE("the launcher's own build where it is on the host runs as the agent, with the sanitizers' options") {
  Dir home;
  std::string etrun = home.path + "/etrun";
  std::ofstream(etrun) << StandIn("build-7");
  chmod(etrun.c_str(), 0755);
  AgentOptions options;
  options.host = "h1";
  std::vector<std::string> env = AgentEnvironment({"PATH=/x", "ASAN_OPTIONS=log_path=/tmp/a", "HOME=/h"});
  CHECK(env == std::vector<std::string>{"ASAN_OPTIONS=log_path=/tmp/a"});
  Run r = Shell(BootstrapCommand(etrun, "build-7", 100, options, env), home.path, "");
  CHECK(r.code == 0);
  CHECK(r.out == "agent " + etrun + " __agent --host h1 --launcher-timeout 10 --grace 5 ASAN=log_path=/tmp/a\n");
}

TEST_CASE("a host without this build asks for it, stores exactly its bytes in the cache and runs it") {
  Dir home;
  std::string other = home.path + "/etrun";
  std::ofstream(other) << StandIn("an-older-build");  // at the launcher's path, but not this build
  chmod(other.c_str(), 0755);
  std::string image = StandIn("build-8");
  AgentOptions options;
  options.host = "h2";
  std::string command = BootstrapCommand(other, "build-8", image.size(), options);
  // The launcher's bytes, then what the agent would read (frames): the bootstrap takes no more.
  Run r = Shell(command, home.path, image + "FRAMES");
  std::string cached = home.path + "/.cache/etrun/agent/build-8/etrun";
  CHECK(r.code == 0);
  CHECK(r.out == std::string(kNeedLine) + "\nagent " + cached + " __agent --host h2 --launcher-timeout 10 "
                 "--grace 5 ASAN=\n");
  std::ifstream f(cached);
  CHECK(std::string(std::istreambuf_iterator<char>(f), {}) == image);
  // The next time, the cache has it: nothing is asked.
  r = Shell(command, home.path, "");
  CHECK(r.out == "agent " + cached + " __agent --host h2 --launcher-timeout 10 --grace 5 ASAN=\n");
}

TEST_CASE("a host where the agent cannot be stored says so in one line and exits 255") {
  Dir home;
  fs::create_directories(home.path + "/.cache");
  std::ofstream(home.path + "/.cache/etrun") << "a file where the directory would go";
  AgentOptions options;
  Run r = Shell(BootstrapCommand("/nonexistent/etrun", "build-9", 10, options), home.path, "0123456789");
  CHECK(r.code == 255);
  CHECK(r.out == "etrun: error: no etrun of this build on the host and cannot write " + home.path +
                 "/.cache/etrun/agent/build-9: put it at /nonexistent/etrun there, or make the cache "
                 "writable\n");
  // Fewer bytes than announced (the connection dropped): nothing half-written is kept or run.
  fs::remove(home.path + "/.cache/etrun");
  r = Shell(BootstrapCommand("/nonexistent/etrun", "build-9", 10, options), home.path, "01234");
  CHECK(r.code == 255);
  CHECK(r.out == std::string(kNeedLine) + "\netrun: error: could not receive etrun's agent into " +
                 home.path + "/.cache/etrun/agent/build-9\n");
  CHECK_FALSE(fs::exists(home.path + "/.cache/etrun/agent/build-9/etrun"));
}

}  // namespace
}  // namespace etrun::launcher::agent
