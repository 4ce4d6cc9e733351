#include "launcher/preflight/self_check.h"

#include <doctest/doctest.h>
#include <unistd.h>

#include <string>
#include <thread>
#include <vector>

#include "smoke/socket.h"

using etrun::launcher::preflight::CheckSelf;
using etrun::launcher::preflight::ParseSelfCheckText;
using etrun::launcher::preflight::SelfCheck;
using etrun::launcher::preflight::SelfCheckText;
using std::chrono::milliseconds;

namespace {

// A store stand-in on 127.0.0.1 that answers one request with `status_line`.
struct OneAnswer {
  explicit OneAnswer(std::string status_line) {
    std::string err;
    REQUIRE(etrun::smoke::Listen(&listener, &port, &err));
    thread = std::thread([this, status_line] {
      etrun::smoke::Fd c;
      std::string why, got;
      auto deadline = etrun::smoke::Clock::now() + std::chrono::seconds(5);
      if (!etrun::smoke::Accept(listener, deadline, &c, &why)) return;
      while (got.find("\r\n\r\n") == std::string::npos && etrun::smoke::ReadSome(c, &got, deadline, &why)) {
      }
      request = got;
      etrun::smoke::WriteAll(c, status_line + "\r\nContent-Length: 0\r\n\r\n", deadline, &why);
    });
  }
  ~OneAnswer() {
    if (thread.joinable()) thread.join();
  }
  // What it was sent, once it has answered.
  std::string Request() {
    thread.join();
    return request;
  }
  etrun::smoke::Fd listener;
  int port = 0;
  std::thread thread;
  std::string request;
};

std::vector<std::string> StoreEnv(int port) {
  return {"PATH=/usr/bin:/bin", "HOROVOD_GLOO_RENDEZVOUS_ADDR=127.0.0.1",
          "HOROVOD_GLOO_RENDEZVOUS_PORT=" + std::to_string(port)};
}

}  // namespace

TEST_CASE("a host's own check: the program on the rank's PATH, an interpreter's script in its folder") {
  char dir[] = "/tmp/etrun-self-check-XXXXXX";
  REQUIRE(mkdtemp(dir) != nullptr);
  std::string here = dir;
  std::vector<std::string> env = {"PATH=/usr/bin:/bin"};
  CHECK(CheckSelf({"sh", "-c", "true"}, env, here, milliseconds(500)).problems.empty());
  CHECK(CheckSelf({"python3", "-m", "json.tool"}, env, here, milliseconds(500)).problems.empty());
  CHECK(CheckSelf({"no-such-program-x"}, env, here, milliseconds(500)).problems ==
        std::vector<std::string>{"cannot run 'no-such-program-x': command not found in PATH"});
  CHECK(CheckSelf({"python3", "-u", "train.py", "--lr", "1"}, env, here, milliseconds(500)).problems ==
        std::vector<std::string>{"no script 'train.py' for python3 in " + here});
  FILE* f = fopen((here + "/train.py").c_str(), "w");
  REQUIRE(f != nullptr);
  fclose(f);
  CHECK(CheckSelf({"python3", "-u", "train.py"}, env, here, milliseconds(500)).problems.empty());
  CHECK(CheckSelf({"/usr/bin/python3.11", "train.py"}, env, here, milliseconds(500)).problems.empty());
  // Code, not a script: nothing to look for; an option's value is no script either.
  for (std::vector<std::string> argv : std::vector<std::vector<std::string>>{
           {"bash", "-lc", "python missing.py"}, {"sh", "-ec", "exit 0"}, {"python3", "-uc", "pass"},
           {"python3", "-W", "ignore", "train.py"}, {"python3", "-Wignore", "-X", "dev", "train.py"},
           {"python3", "-um", "json.tool"}, {"bash", "-o", "pipefail", "-c", "true"},
           {"python3", "--check-hash-based-pycs", "never", "missing.py"}, {"sh", "-s"}, {"perl", "-e", "1"}}) {
    CAPTURE(argv[1]);
    CHECK(CheckSelf(argv, env, here, milliseconds(500)).problems.empty());
  }
  CHECK(CheckSelf({"bash", "-e", "missing.sh", "x"}, env, here, milliseconds(500)).problems ==
        std::vector<std::string>{"no script 'missing.sh' for bash in " + here});
  unlink((here + "/train.py").c_str());
  rmdir(dir);
}

TEST_CASE("a host's own check: the store answers, refuses this host, or is not there") {
  {
    OneAnswer store("HTTP/1.1 404 Not Found");
    SelfCheck c = CheckSelf({"sh"}, StoreEnv(store.port), "", milliseconds(2000));
    CHECK(c.problems.empty());
    CHECK(c.probe_ip == "127.0.0.1");  // the address it reached the store from
  }
  {
    OneAnswer store("HTTP/1.1 403 Forbidden");
    SelfCheck c = CheckSelf({"sh"}, StoreEnv(store.port), "", milliseconds(2000));
    CHECK(c.problems == std::vector<std::string>{
        "the launcher's rendezvous store 127.0.0.1:" + std::to_string(store.port) +
        " refuses this host (403): admit its network with --rendezvous-allow"});
    CHECK(store.Request().starts_with("GET /etrun-preflight/rank_0 HTTP/1.1\r\n"));
  }
  int gone = 0;
  {
    etrun::smoke::Fd l;
    std::string err;
    REQUIRE(etrun::smoke::Listen(&l, &gone, &err));
  }
  SelfCheck c = CheckSelf({"sh"}, StoreEnv(gone), "", milliseconds(500));
  CHECK(c.problems == std::vector<std::string>{"the launcher's rendezvous store: cannot connect to 127.0.0.1:" +
                                               std::to_string(gone) + ": Connection refused"});
}

TEST_CASE("a host's own check: peers probe it on the interface Gloo is told to use, which must be there") {
  SelfCheck c = CheckSelf({"sh"}, {"PATH=/usr/bin:/bin", "HOROVOD_GLOO_IFACE=lo"}, "", milliseconds(500));
  CHECK(c.problems.empty());
  CHECK(c.probe_ip == "127.0.0.1");
  c = CheckSelf({"sh"}, {"PATH=/usr/bin:/bin", "GLOO_SOCKET_IFNAME=nosuch0"}, "", milliseconds(500));
  CHECK(c.problems == std::vector<std::string>{"GLOO_SOCKET_IFNAME names nosuch0, which has no IPv4 address "
                                               "on this host"});
}

TEST_CASE("a host's own check travels as text and back") {
  SelfCheck c;
  c.problems = {"cannot run 'x': command not found in PATH", "two\nlines"};
  c.probe_ip = "198.18.0.3";
  c.probe_port = 4001;
  SelfCheck back;
  REQUIRE(ParseSelfCheckText(SelfCheckText(c), &back));
  CHECK(back.problems == std::vector<std::string>{"cannot run 'x': command not found in PATH", "two lines"});
  CHECK(back.probe_ip == "198.18.0.3");
  CHECK(back.probe_port == 4001);
  CHECK_FALSE(ParseSelfCheckText("nonsense\n", &back));
}
