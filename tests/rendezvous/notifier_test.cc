// The Notifier against a Python stand-in for a Horovod worker's notification service
// (tests/integration/notification_standin.py), which unpickles what we send with the real
// `pickle` module and answers as a Horovod worker would.
#include "rendezvous/notifier.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sstream>

#include <doctest/doctest.h>

namespace asio = boost::asio;
using etrun::rendezvous::HostUpdateResult;
using etrun::rendezvous::Notifier;
using etrun::rendezvous::NotifierOptions;
using etrun::rendezvous::WorkerRegistration;

namespace {

// Runs the stand-in; its stdin is closed (ending it) at destruction.
class Standin {
 public:
  explicit Standin(std::vector<std::string> args) {
    int in[2], out[2];
    REQUIRE(pipe(in) == 0);
    REQUIRE(pipe(out) == 0);
    pid_ = fork();
    if (pid_ == 0) {
      dup2(in[0], 0);
      dup2(out[1], 1);
      close(in[1]);
      close(out[0]);
      std::vector<std::string> argv = {"/usr/bin/python3", ETRUN_SOURCE_DIR "/tests/integration/notification_standin.py"};
      argv.insert(argv.end(), args.begin(), args.end());
      std::vector<char*> c;
      for (auto& a : argv) c.push_back(a.data());
      c.push_back(nullptr);
      execv(c[0], c.data());
      _exit(127);
    }
    close(in[0]);
    close(out[1]);
    stdin_ = in[1];
    stdout_ = fdopen(out[0], "r");
    std::istringstream first(ReadLine());
    std::string word, key_hex;
    first >> word >> port_ >> key_hex;
    REQUIRE(word == "listening");
    for (size_t i = 0; i + 1 < key_hex.size(); i += 2) key_.push_back(static_cast<char>(std::stoi(key_hex.substr(i, 2), nullptr, 16)));
  }
  ~Standin() {
    close(stdin_);
    fclose(stdout_);
    int status;
    waitpid(pid_, &status, 0);
  }
  std::string ReadLine() {
    char buf[512];
    if (fgets(buf, sizeof(buf), stdout_) == nullptr) return "";
    std::string line(buf);
    if (!line.empty() && line.back() == '\n') line.pop_back();
    return line;
  }
  WorkerRegistration Registration(const std::string& host = "hostA", int lr = 0) const {
    WorkerRegistration reg;
    reg.host = host;
    reg.local_rank = lr;
    // A closed port first: only the live address answers the ping.
    reg.addresses = {{"lo", {{"127.0.0.1", 1}, {"127.0.0.1", port_}}}};
    reg.key = key_;
    return reg;
  }
  int port() const { return port_; }
  const std::string& key() const { return key_; }

 private:
  pid_t pid_ = -1;
  int stdin_ = -1;
  FILE* stdout_ = nullptr;
  int port_ = 0;
  std::string key_;
};

struct Result {
  bool called = false;
  bool ok = false;
  std::string err;
};

Notifier::Done Capture(Result* r) {
  return [r](bool ok, std::string err) {
    r->called = true;
    r->ok = ok;
    r->err = std::move(err);
  };
}

NotifierOptions FastOptions() {
  NotifierOptions o;
  o.timeout = std::chrono::milliseconds(5000);
  o.retry_delay = std::chrono::milliseconds(20);
  return o;
}

}  // namespace

TEST_CASE("a registered worker is pinged, then notified, and a real unpickler reads it") {
  Standin worker({});
  asio::io_context io;
  Notifier notifier(&io, FastOptions());
  Result reg, note, late;
  notifier.Register(worker.Registration(), Capture(&reg));
  io.run();
  REQUIRE(reg.called);
  CHECK(reg.ok);
  CHECK(notifier.IsRegistered("hostA", 0));
  io.restart();
  notifier.Notify("hostA", 0, 1700000000, HostUpdateResult::kAdded, Capture(&note));
  io.run();
  CHECK(note.ok);
  CHECK(worker.ReadLine() == "notified 1700000000 2 HostUpdateResult");
  // After 2038: LONG1 timestamps, and both flags.
  io.restart();
  notifier.Notify("hostA", 0, 4102444800, HostUpdateResult::kMixed, Capture(&late));
  io.run();
  CHECK(late.ok);
  CHECK(worker.ReadLine() == "notified 4102444800 3 HostUpdateResult");
}

TEST_CASE("a worker that never acknowledges is retried, and reported if it never does") {
  Standin worker({"--drop", "2"});
  asio::io_context io;
  Notifier notifier(&io, FastOptions());
  Result reg, note;
  notifier.Register(worker.Registration(), Capture(&reg));
  io.run();
  REQUIRE(reg.ok);
  io.restart();
  notifier.Notify("hostA", 0, 1700000001, HostUpdateResult::kRemoved, Capture(&note));
  io.run();
  CHECK(note.ok);  // the third attempt got through
  CHECK(worker.ReadLine() == "notified 1700000001 1 HostUpdateResult");

  Standin silent({"--drop", "99"});
  NotifierOptions two = FastOptions();
  two.attempts = 2;
  Notifier impatient(&io, two);
  Result reg2, lost;
  io.restart();
  impatient.Register(silent.Registration(), Capture(&reg2));
  io.run();
  REQUIRE(reg2.ok);
  io.restart();
  impatient.Notify("hostA", 0, 1700000002, HostUpdateResult::kAdded, Capture(&lost));
  io.run();
  CHECK_FALSE(lost.ok);
  CHECK(lost.err.find("connection closed before the reply") != std::string::npos);
}

TEST_CASE("registration fails for a wrong key, a wrong service or no reachable address") {
  asio::io_context io;
  NotifierOptions o = FastOptions();
  o.attempts = 1;
  Notifier notifier(&io, o);

  Standin worker({});
  WorkerRegistration wrong_key = worker.Registration();
  wrong_key.key[0] ^= 1;  // the worker drops frames whose MAC does not match
  Result a;
  notifier.Register(wrong_key, Capture(&a));
  io.run();
  CHECK_FALSE(a.ok);
  CHECK(a.err.find("no address answered the ping") != std::string::npos);

  Standin other({"--bad-service"});
  Result b;
  io.restart();
  notifier.Register(other.Registration(), Capture(&b));
  io.run();
  CHECK_FALSE(b.ok);
  CHECK(b.err.find("answered as 'some other service'") != std::string::npos);

  WorkerRegistration nowhere;
  nowhere.host = "h";
  nowhere.key = std::string(32, 'k');
  nowhere.addresses = {{"lo", {{"127.0.0.1", 1}}}};
  Result c;
  io.restart();
  notifier.Register(nowhere, Capture(&c));
  io.run();
  CHECK_FALSE(c.ok);
  CHECK_FALSE(notifier.IsRegistered("hostA", 0));
  CHECK_FALSE(notifier.IsRegistered("h", 0));

  Result d;
  notifier.Notify("nobody", 0, 1, HostUpdateResult::kAdded, Capture(&d));
  CHECK(d.called);
  CHECK_FALSE(d.ok);
}

TEST_CASE("notification timestamps strictly increase, even within one second") {
  asio::io_context io;
  Notifier notifier(&io);
  int64_t a = notifier.NextTimestamp(), b = notifier.NextTimestamp(), c = notifier.NextTimestamp();
  CHECK(a >= static_cast<int64_t>(time(nullptr)) - 1);
  CHECK(b == a + 1);
  CHECK(c == b + 1);
}
