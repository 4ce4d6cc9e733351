// The bootstrap (agent_bootstrap.h) run for real under the host's sh (/bin/sh, and busybox's sh
// with only busybox's applets on PATH, as in a minimal container), as a host's login runs it,
// with a stand-in agent: a script that names itself. It runs a copy only once its content is the
// launcher's agent's and where nobody else may change it; else it receives the agent on stdin
// into a private cache; what it cannot use or write safely is one line.
#include "launcher/agent/agent_bootstrap.h"

#include <openssl/evp.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <doctest/doctest.h>
#include <fmt/format.h>

#include "launcher/agent/wire.h"

namespace etrun::launcher::agent {
namespace {

namespace fs = std::filesystem;

std::string StandIn(const std::string& build) {
  return "#!/bin/sh\n# " + build + "\necho \"agent $0 $* ASAN=$ASAN_OPTIONS\"\n";
}

std::string Sha256(const std::string& bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_Digest(bytes.data(), bytes.size(), digest, &length, EVP_sha256(), nullptr);
  std::string hex;
  for (unsigned int i = 0; i < length; ++i) hex += fmt::format("{:02x}", digest[i]);
  return hex;
}

// A planted program: leaves a marker when it runs.
std::string Planted(const std::string& marker) {
  return "#!/bin/sh\ntouch " + marker + "\necho planted\n";
}

struct Run {
  int code = -1;
  std::string out;
};

// The shells a host may have: /bin/sh, and busybox's sh with only busybox's applets on PATH
// (a minimal container's), when busybox is installed.
struct Host {
  std::string sh = "/bin/sh";
  std::string path = "/usr/bin:/bin";
};

std::vector<Host> Hosts(const std::string& dir) {
  std::vector<Host> hosts = {Host{}};
  if (access("/bin/busybox", X_OK) != 0) return hosts;
  std::string bin = dir + "/busybox-bin";
  fs::create_directories(bin);
  for (const char* applet : {"sh", "ls", "id", "readlink", "dirname", "cut", "sha256sum", "head",
                             "mktemp", "ln", "mv", "rm", "chmod", "mkdir", "touch", "cat"}) {
    fs::create_symlink("/bin/busybox", bin + "/" + applet);
  }
  hosts.push_back({bin + "/sh", bin});
  return hosts;
}

// Runs `command` under `host`'s sh with HOME=`home`, `input` on stdin; stdout and stderr together.
Run Shell(const Host& host, const std::string& command, const std::string& home, const std::string& input) {
  std::string in_path = home + "/stdin", out_path = home + "/stdout";
  std::ofstream(in_path) << input;
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    if (freopen(in_path.c_str(), "r", stdin) == nullptr || freopen(out_path.c_str(), "w", stdout) == nullptr) _exit(126);
    dup2(1, 2);
    std::string h = "HOME=" + home, p = "PATH=" + host.path;
    char* env[] = {const_cast<char*>(h.c_str()), const_cast<char*>(p.c_str()), nullptr};
    execle(host.sh.c_str(), "sh", "-c", command.c_str(), static_cast<char*>(nullptr), env);
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
    chmod(path.c_str(), 0700);
  }
  ~Dir() { fs::remove_all(path); }
  std::string path;
};

void Write(const std::string& path, const std::string& text, mode_t mode = 0755) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path) << text;
  chmod(path.c_str(), mode);
}

AgentRef Ref(const std::string& image, const std::string& beside) {
  return {Sha256(image), image.size(), beside};
}

TEST_CASE("the agent beside the launcher's etrun runs when its content is the launcher's agent's") {
  Dir dir;
  for (const Host& host : Hosts(dir.path)) {
    CAPTURE(host.sh);
    std::string agent = dir.path + "/bin/etrun-agent";
    Write(agent, StandIn("build-7"));
    AgentOptions options;
    options.host = "h1";
    std::vector<std::string> env = AgentEnvironment({"PATH=/x", "ASAN_OPTIONS=log_path=/tmp/a", "HOME=/h"});
    CHECK(env == std::vector<std::string>{"ASAN_OPTIONS=log_path=/tmp/a"});
    Run r = Shell(host, BootstrapCommand(Ref(StandIn("build-7"), agent), options, env), dir.path, "");
    CHECK(r.code == 0);
    CHECK(r.out == "agent " + agent + " --host h1 --launcher-timeout 10 --grace 5 ASAN=log_path=/tmp/a\n");
  }
}

TEST_CASE("every folder above the agent is checked, however deep and whatever its name; a sticky one others may write is no matter") {
  Dir dir;  // under /tmp: sticky, anyone may write it
  for (const Host& host : Hosts(dir.path)) {
    CAPTURE(host.sh);
    std::string top = dir.path + "/a b " + std::to_string(host.sh.size());
    std::string agent = top + "/c  d/e\tf/etrun-agent";
    Write(agent, StandIn("build-9"));
    AgentOptions options;
    std::string ran = "agent " + agent + " --host  --launcher-timeout 10 --grace 5 ASAN=\n";
    Run r = Shell(host, BootstrapCommand(Ref(StandIn("build-9"), agent), options), dir.path, "");
    CHECK(r.out == ran);
    chmod(top.c_str(), 0777);  // two folders up, others may write: someone could swap the path below
    r = Shell(host, BootstrapCommand(Ref(StandIn("build-9"), agent), options), dir.path, "");
    CHECK(r.out.starts_with(std::string(kNeedLine)));
    chmod(top.c_str(), 01777);  // sticky: others may not rename or remove what is the user's there
    r = Shell(host, BootstrapCommand(Ref(StandIn("build-9"), agent), options), dir.path, "");
    CHECK(r.out == ran);
  }
}

TEST_CASE("a file planted at the launcher's path never runs: the host receives the agent, checks it and runs it") {
  Dir dir;
  for (const Host& host : Hosts(dir.path)) {
    CAPTURE(host.sh);
    std::string home = dir.path + "/home-" + std::to_string(host.sh.size());
    fs::create_directories(home);
    std::string marker = home + "/planted-ran";
    std::string beside = home + "/bin/etrun-agent";
    Write(beside, Planted(marker));  // not this build: never run, not even to ask
    std::string image = StandIn("build-8");
    AgentOptions options;
    options.host = "h2";
    std::string command = BootstrapCommand(Ref(image, beside), options);
    // The launcher's bytes, then what the agent would read (frames): the bootstrap takes no more.
    Run r = Shell(host, command, home, image + "FRAMES");
    std::string cached = home + "/.cache/etrun/agent/" + Sha256(image);
    CHECK(r.code == 0);
    CHECK(r.out == std::string(kNeedLine) + "\nagent " + cached + " --host h2 --launcher-timeout 10 "
                   "--grace 5 ASAN=\n");
    CHECK_FALSE(fs::exists(marker));
    std::ifstream f(cached);
    CHECK(std::string(std::istreambuf_iterator<char>(f), {}) == image);
    CHECK((fs::status(home + "/.cache/etrun/agent").permissions() & fs::perms::all) == fs::perms::owner_all);
    // Nothing else is left in the cache (the received file was named by its hash, no copy kept).
    int entries = 0;
    for (const auto& e : fs::directory_iterator(home + "/.cache/etrun/agent")) entries += e.exists();
    CHECK(entries == 1);
    // The next time, the cache has it, checked again: nothing is asked.
    r = Shell(host, command, home, "");
    CHECK(r.out == "agent " + cached + " --host h2 --launcher-timeout 10 --grace 5 ASAN=\n");
    // A copy in the cache that someone changed is not run: a verified one takes its place.
    Write(cached, Planted(marker), 0700);
    r = Shell(host, command, home, image);
    CHECK(r.out == std::string(kNeedLine) + "\nagent " + cached + " --host h2 --launcher-timeout 10 "
                   "--grace 5 ASAN=\n");
    CHECK_FALSE(fs::exists(marker));
  }
}

TEST_CASE("an agent in a folder others may write, or of another user, is never run") {
  Dir dir;
  std::string image = StandIn("build-10");
  AgentOptions options;
  std::string marker = dir.path + "/ran";
  // The right bytes, in a folder anyone may write (someone could swap them before they run).
  std::string shared = dir.path + "/shared";
  Write(shared + "/etrun-agent", StandIn("build-10"));
  chmod(shared.c_str(), 0777);
  Run r = Shell(Host{}, BootstrapCommand(Ref(image, shared + "/etrun-agent"), options), dir.path, "");
  CHECK(r.out.starts_with(std::string(kNeedLine)));
  // A cache folder others may write, with the right agent in it: not used, one line, exit 255.
  std::string cache = dir.path + "/.cache/etrun/agent";
  Write(cache + "/" + Sha256(image), image);
  chmod(cache.c_str(), 0777);
  r = Shell(Host{}, BootstrapCommand(Ref(image, "/nonexistent/etrun-agent"), options), dir.path, image);
  CHECK(r.code == 255);
  CHECK(r.out == "etrun: error: cannot keep etrun's agent in " + cache + ": it is not a private folder "
                 "of this user (another user owns it or a folder above it, or others may write them): "
                 "set XDG_CACHE_HOME to a folder of your own, or remove " + cache + "\n");
  // A cache folder of another user (root may run this test: `nobody` owns it then).
  if (geteuid() == 0) {
    chmod(cache.c_str(), 0700);
    REQUIRE(chown(cache.c_str(), 65534, 65534) == 0);
    r = Shell(Host{}, BootstrapCommand(Ref(image, "/nonexistent/etrun-agent"), options), dir.path, image);
    CHECK(r.code == 255);
    CHECK(r.out.find("it is not a private folder of this user") != std::string::npos);
  }
  CHECK_FALSE(fs::exists(marker));
}

TEST_CASE("a host where the agent cannot be stored or received whole says so in one line and exits 255") {
  Dir home;
  fs::create_directories(home.path + "/.cache");
  std::ofstream(home.path + "/.cache/etrun") << "a file where the folder would go";
  AgentOptions options;
  std::string image = "0123456789";
  AgentRef ref = Ref(image, "/nonexistent/etrun-agent");
  std::string cache = home.path + "/.cache/etrun/agent";
  Run r = Shell(Host{}, BootstrapCommand(ref, options), home.path, image);
  CHECK(r.code == 255);
  CHECK(r.out == "etrun: error: cannot create " + cache + " to keep etrun's agent in: make it creatable, "
                 "or set XDG_CACHE_HOME to a writable folder of your own\n");
  // Fewer bytes than announced (the connection dropped), or other bytes: nothing is kept or run.
  fs::remove(home.path + "/.cache/etrun");
  for (const std::string& sent : {std::string("01234"), std::string("abcdefghij")}) {
    r = Shell(Host{}, BootstrapCommand(ref, options), home.path, sent);
    CHECK(r.code == 255);
    CHECK(r.out == std::string(kNeedLine) + "\netrun: error: could not receive etrun's agent into " +
                   cache + ": check the space left there\n");
    CHECK(fs::is_empty(cache));
  }
}

}  // namespace
}  // namespace etrun::launcher::agent
