#include "launcher/preflight/self_check.h"

#include <arpa/inet.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>

#include "discovery/interfaces.h"
#include "launcher/process/environment.h"
#include "launcher/process/program_path.h"
#include "smoke/socket.h"

namespace etrun::launcher::preflight {
namespace {

// The interpreters whose first operand is a script to run, which must be there too.
enum class Interpreter { kNone, kPython, kShell, kPerl, kRuby };

Interpreter InterpreterOf(const std::string& program) {
  std::string name = program.substr(program.rfind('/') + 1);
  auto versioned = [&name](std::string_view base) {  // python3, python3.11, perl5.36
    return name.starts_with(base) && name.find_first_not_of("0123456789.", base.size()) == std::string::npos;
  };
  if (versioned("python")) return Interpreter::kPython;
  for (const char* shell : {"sh", "bash", "dash", "zsh", "ksh"}) {
    if (name == shell) return Interpreter::kShell;
  }
  if (versioned("perl")) return Interpreter::kPerl;
  if (versioned("ruby")) return Interpreter::kRuby;
  return Interpreter::kNone;
}

// The script `argv` runs under `kind`; "" when it runs none (code given with -c, -m or -e, a
// script read from stdin) or when its options cannot be told apart from it (a long option):
// then nothing is checked rather than a healthy host called sick.
std::string ScriptOf(Interpreter kind, const std::vector<std::string>& argv) {
  // Options after which no script comes, and options whose value follows them.
  std::string_view no_script, valued;
  switch (kind) {
    case Interpreter::kPython: no_script = "cm"; valued = "WX"; break;
    case Interpreter::kShell: no_script = "cs"; valued = "oO"; break;
    case Interpreter::kPerl: no_script = "eE"; valued = "IMm"; break;
    case Interpreter::kRuby: no_script = "e"; valued = "Ir"; break;
    case Interpreter::kNone: return "";
  }
  for (size_t i = 1; i < argv.size(); ++i) {
    const std::string& word = argv[i];
    if (word == "--") return i + 1 < argv.size() ? argv[i + 1] : "";
    if (word == "-" || word.starts_with("--")) return "";
    bool option = word.size() > 1 && (word[0] == '-' || (kind == Interpreter::kShell && word[0] == '+'));
    if (!option) return word;
    for (size_t k = 1; k < word.size(); ++k) {
      if (no_script.find(word[k]) != std::string_view::npos) return "";
      if (valued.find(word[k]) != std::string_view::npos) {
        if (k + 1 == word.size()) ++i;  // "-W ignore": the next word is its value
        break;                          // "-Wignore": the rest of this one
      }
    }
  }
  return "";
}

bool IsIpv4(const std::string& text) {
  in_addr a{};
  return inet_pton(AF_INET, text.c_str(), &a) == 1;
}

std::string InterfaceAddress(const std::string& name) {
  for (const discovery::Interface& nic : discovery::LocalInterfaces()) {
    if (nic.name == name && !nic.ipv4.empty()) return nic.ipv4.front();
  }
  return "";
}

}  // namespace

SelfCheck CheckSelf(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                    const std::string& cwd, std::chrono::milliseconds timeout) {
  SelfCheck check;
  std::string err;
  char here[4096];
  std::string dir = !cwd.empty() ? cwd : getcwd(here, sizeof(here)) != nullptr ? here : ".";
  if (argv.empty()) {
    check.problems.push_back("the command is empty");
  } else if (FindProgram(argv[0], EnvValue(env, "PATH"), &err, cwd).empty()) {
    check.problems.push_back("cannot run '" + argv[0] + "': " + err);
  } else if (Interpreter kind = InterpreterOf(argv[0]); kind != Interpreter::kNone) {
    std::string script = ScriptOf(kind, argv);
    std::string file = script.empty() || script.front() == '/' ? script : dir + "/" + script;
    struct stat st;
    if (!script.empty() && (stat(file.c_str(), &st) != 0 || !S_ISREG(st.st_mode))) {
      check.problems.push_back("no script '" + script + "' for " + argv[0] + " in " + dir);
    }
  }

  // etrun's store (MASTER_ADDR is rank 0's own, in restart mode: nobody listens there yet).
  std::string store = EnvValue(env, "HOROVOD_GLOO_RENDEZVOUS_ADDR");
  std::string port = EnvValue(env, "HOROVOD_GLOO_RENDEZVOUS_PORT");
  std::string seen_from;
  if (!store.empty() && IsIpv4(store) && !port.empty()) {
    smoke::Fd fd;
    auto deadline = std::chrono::steady_clock::now() + timeout;
    // A request the store answers at once (a rank's key is never held), as a rank's would be.
    const std::string request = "GET /etrun-preflight/rank_0 HTTP/1.1\r\nHost: " + store +
                                "\r\nConnection: close\r\n\r\n";
    std::string answer;
    bool ok = smoke::ConnectIpv4(store, atoi(port.c_str()), deadline, &fd, &err) &&
              smoke::WriteAll(fd, request, deadline, &err);
    while (ok && answer.find("\r\n") == std::string::npos) ok = smoke::ReadSome(fd, &answer, deadline, &err);
    if (!ok) {
      if (err.empty()) err = "closed before it answered";
      if (err.ends_with("timed out")) {
        err = err.substr(0, err.size() - 9) + "no answer in " + std::to_string(timeout.count()) + " ms";
      }
      if (!err.starts_with("cannot connect to ")) err = store + ":" + port + ": " + err;
      check.problems.push_back("the launcher's rendezvous store: " + err);
    } else if (answer.starts_with("HTTP/1.1 403") || answer.starts_with("HTTP/1.0 403")) {
      check.problems.push_back("the launcher's rendezvous store " + store + ":" + port +
                               " refuses this host (403): admit its network with --rendezvous-allow");
    } else {
      seen_from = smoke::LocalAddress(fd);
    }
  }

  for (const char* var : {"HOROVOD_GLOO_IFACE", "GLOO_SOCKET_IFNAME"}) {
    std::string nic = EnvValue(env, var);
    if (nic.empty() || !check.probe_ip.empty()) continue;
    nic = nic.substr(0, nic.find(','));
    check.probe_ip = InterfaceAddress(nic);
    if (check.probe_ip.empty()) {  // Gloo would fail on it just so
      check.problems.push_back(std::string(var) + " names " + nic + ", which has no IPv4 address on this host");
      return check;
    }
  }
  if (check.probe_ip.empty()) check.probe_ip = seen_from;
  if (check.probe_ip.empty()) {
    std::string nic;
    discovery::FirstNonLoopback(discovery::LocalInterfaces(), &nic, &check.probe_ip);
  }
  if (check.probe_ip.empty()) check.problems.push_back("no IPv4 address its peers could reach it on");
  return check;
}

std::string SelfCheckText(const SelfCheck& check) {
  std::string text;
  for (std::string p : check.problems) {
    for (char& c : p) {
      if (c == '\n') c = ' ';
    }
    text += "problem " + p + "\n";
  }
  text += "probe " + check.probe_ip + ":" + std::to_string(check.probe_port) + "\n";
  return text;
}

bool ParseSelfCheckText(std::string_view text, SelfCheck* check) {
  *check = SelfCheck{};
  while (!text.empty()) {
    size_t end = text.find('\n');
    std::string_view line = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    if (line.starts_with("problem ")) {
      check->problems.emplace_back(line.substr(8));
    } else if (line.starts_with("probe ")) {
      std::string where(line.substr(6));
      size_t colon = where.rfind(':');
      if (colon == std::string::npos) return false;
      check->probe_ip = where.substr(0, colon);
      check->probe_port = atoi(where.c_str() + colon + 1);
    } else if (!line.empty()) {
      return false;
    }
  }
  return true;
}

}  // namespace etrun::launcher::preflight
