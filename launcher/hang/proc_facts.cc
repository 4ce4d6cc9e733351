#include "launcher/hang/proc_facts.h"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <string>

namespace etrun::launcher::hang {

namespace {

constexpr size_t kMaxCommand = 200;

std::string ReadSmallFile(const std::string& path) {
  std::string out;
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return out;
  char buf[4096];
  ssize_t n;
  while (out.size() < sizeof(buf) && (n = read(fd, buf, sizeof(buf))) > 0) out.append(buf, static_cast<size_t>(n));
  close(fd);
  return out;
}

const char* StateName(char state) {
  switch (state) {
    case 'R': return "running";
    case 'S': return "sleeping";
    case 'D': return "in uninterruptible I/O";
    case 'T': return "stopped";
    case 't': return "stopped by a tracer";
    case 'Z': return "a zombie";
    case 'I': return "idle";
    default: return "in an unknown state";
  }
}

// No newline or other control byte in a value: the text is one line per key.
std::string Clean(std::string_view value) {
  std::string out;
  for (char c : value) out.push_back(static_cast<unsigned char>(c) < 0x20 ? ' ' : c);
  return out;
}

// The one child of `pid` (its main thread's), or -1 when it has none or several.
pid_t OnlyChild(pid_t pid) {
  std::string children = ReadSmallFile("/proc/" + std::to_string(pid) + "/task/" +
                                       std::to_string(pid) + "/children");
  while (!children.empty() && children.back() == ' ') children.pop_back();
  if (children.empty() || children.find(' ') != std::string::npos) return -1;
  return static_cast<pid_t>(atoi(children.c_str()));
}

bool ReadFacts(pid_t pid, ProcFacts* facts, int depth);

}  // namespace

bool ReadProcFacts(pid_t pid, ProcFacts* facts) { return ReadFacts(pid, facts, 0); }

namespace {

bool ReadFacts(pid_t pid, ProcFacts* facts, int depth) {
  std::string base = "/proc/" + std::to_string(pid) + "/";
  std::string stat = ReadSmallFile(base + "stat");
  // "pid (comm) S ...": comm may hold spaces and parentheses, so the state follows the last ')'.
  size_t close = stat.rfind(')');
  if (close == std::string::npos || close + 2 >= stat.size()) return false;
  facts->state = stat[close + 2];
  std::string wchan = ReadSmallFile(base + "wchan");
  facts->wchan = (wchan == "0" || facts->state == 'R') ? "" : Clean(wchan);
  if (facts->state == 'D') {
    // Reading the command line of a process in uninterruptible sleep can block for as long as it
    // sleeps (it takes the process's memory lock, which it may hold): its name from stat only.
    size_t open = stat.find('(');
    facts->command = open == std::string::npos ? "" : Clean(stat.substr(open + 1, close - open - 1));
    facts->child.clear();
    return true;
  }
  std::string cmdline = ReadSmallFile(base + "cmdline");
  while (!cmdline.empty() && cmdline.back() == '\0') cmdline.pop_back();
  for (char& c : cmdline) {
    if (c == '\0') c = ' ';
  }
  if (cmdline.size() > kMaxCommand) cmdline = cmdline.substr(0, kMaxCommand - 3) + "...";
  facts->command = Clean(cmdline);
  facts->child.clear();
  if (depth < 3 && facts->wchan == "do_wait") {
    ProcFacts child;
    if (pid_t c = OnlyChild(pid); c > 0 && ReadFacts(c, &child, depth + 1)) {
      facts->child = DescribeProcFacts(child);
    }
  }
  return true;
}

}  // namespace

std::string ProcFactsText(const ProcFacts& facts) {
  return "state=" + std::string(1, facts.state) + "\nwchan=" + Clean(facts.wchan) +
         "\ncommand=" + Clean(facts.command) + "\nchild=" + Clean(facts.child) + "\n";
}

bool ParseProcFacts(std::string_view text, ProcFacts* facts) {
  bool state = false;
  while (!text.empty()) {
    size_t end = text.find('\n');
    std::string_view line = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    size_t eq = line.find('=');
    if (eq == std::string_view::npos) return false;
    std::string_view key = line.substr(0, eq), value = line.substr(eq + 1);
    if (key == "state" && value.size() == 1) {
      facts->state = value[0];
      state = true;
    } else if (key == "wchan") {
      facts->wchan = std::string(value);
    } else if (key == "command") {
      facts->command = std::string(value);
    } else if (key == "child") {
      facts->child = std::string(value);
    }  // other keys: a newer agent's; ignored
  }
  return state;
}

std::string DescribeProcFacts(const ProcFacts& facts) {
  std::string out = "state " + std::string(1, facts.state) + " (" + StateName(facts.state) + ")";
  if (!facts.wchan.empty()) out += ", waits in " + facts.wchan;
  if (!facts.command.empty()) out += ": " + facts.command;
  if (!facts.child.empty()) out += "; its child: " + facts.child;
  return out;
}

}  // namespace etrun::launcher::hang
