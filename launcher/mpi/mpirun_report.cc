#include "launcher/mpi/mpirun_report.h"

#include <spdlog/spdlog.h>

#include "events/exit_status.h"

namespace etrun::launcher {
namespace {

// The exit code for a host mpirun cannot reach or start its daemon on: a remote shell's, as an
// unreachable host's ranks get in the other modes.
constexpr int kExitHostUnreachable = 255;

std::string_view Trim(std::string_view s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

// "N total processes failed to start", mpirun's last word on a failed launch.
bool IsLaunchSummary(std::string_view line) {
  line = Trim(line);
  size_t digits = line.find_first_not_of("0123456789");
  return digits > 0 && digits != std::string_view::npos &&
         line.substr(digits) == " total processes failed to start";
}

// show_help's rule: a line of dashes only (Open MPI draws 74).
bool IsRule(std::string_view line) {
  line = Trim(line);
  return line.size() >= 20 && line.find_first_not_of('-') == std::string_view::npos;
}

// The box's text between its rules as one line of single spaces: show_help wraps its sentences
// at different places in different versions.
std::string Flatten(const std::vector<std::string>& box) {
  std::string text;
  for (size_t i = 1; i + 1 < box.size(); ++i) {
    for (char c : box[i]) {
      bool space = c == ' ' || c == '\t' || c == '\r' || c == '\n';
      if (!space) {
        text += c;
      } else if (!text.empty() && text.back() != ' ') {
        text += ' ';
      }
    }
    if (!text.empty() && text.back() != ' ') text += ' ';
  }
  return text;
}

// The value of a "Key: value" line of the box ("Node:       vm"); "" if none.
std::string Field(const std::vector<std::string>& box, std::string_view key) {
  for (const std::string& line : box) {
    std::string_view l = Trim(line);
    if (l.size() > key.size() && l.starts_with(key) && l[key.size()] == ':') {
      return std::string(Trim(l.substr(key.size() + 1)));
    }
  }
  return "";
}

}  // namespace

void MpirunReport::Line(bool is_stderr, std::string_view line, std::string* out) {
  Stream& s = streams_[is_stderr ? 1 : 0];
  if (s.box.empty()) {
    if (IsRule(line)) {
      s.box.emplace_back(line);
      return;
    }
    if (IsLaunchSummary(line)) {
      held_.append(line);
      return;
    }
    out->append(line);
    if (std::string_view t = Trim(line); !t.empty()) s.last_line = t;
    return;
  }
  s.box.emplace_back(line);
  if (!IsRule(line)) return;
  std::optional<LaunchFailure> failure = Recognize(s);
  if (!failure) {
    for (const std::string& l : s.box) out->append(l);
  } else {
    for (const std::string& l : s.box) spdlog::debug("mpirun: {}", Trim(l));
    if (!failure_) failure_ = std::move(failure);
  }
  s.box.clear();
}

void MpirunReport::Finish(bool is_stderr, std::string* out) {
  Stream& s = streams_[is_stderr ? 1 : 0];
  for (const std::string& l : s.box) out->append(l);
  s.box.clear();
}

std::optional<LaunchFailure> MpirunReport::Recognize(const Stream& s) const {
  std::string text = Flatten(s.box);
  std::string node = Field(s.box, "Node");
  std::string on = node.empty() ? "" : " on " + node;
  std::string executable = Field(s.box, "Executable");
  if (text.find("mpirun was unable to find the specified executable file") != std::string::npos) {
    return LaunchFailure{kExitCommandNotFound,
                         "cannot run '" + executable + "'" + on +
                             ": command not found in PATH (mpirun): check the command and PATH there"};
  }
  if (text.find("could not access or execute an executable") != std::string::npos) {
    return LaunchFailure{kExitCommandNotFound,
                         "cannot run '" + executable + "'" + on +
                             ": not an executable file (mpirun): check the command there"};
  }
  if (text.find("could not change to the specified working directory") != std::string::npos) {
    return LaunchFailure{kExitCommandNotFound,
                         "cannot run the command" + on + ": no working directory '" +
                             Field(s.box, "Working directory") +
                             "' there (mpirun): check -wdir in --mpi-args"};
  }
  if (text.find("ORTE was unable to reliably start one or more daemons") != std::string::npos ||
      text.find("An ORTE daemon has unexpectedly failed after launch") != std::string::npos ||
      text.find("ORTE has lost communication with a remote daemon") != std::string::npos) {
    // What the remote shell said just before, if anything: ssh's own error names the host.
    std::string said = streams_[1].last_line.empty() ? "" : " (" + streams_[1].last_line + ")";
    return LaunchFailure{kExitHostUnreachable,
                         "mpirun could not start or reach its daemon on every host" + said +
                             ": check that each host answers ssh without a password and has "
                             "Open MPI installed"};
  }
  if (text.find("There are not enough slots available in the system") != std::string::npos) {
    return LaunchFailure{kExitUsage,
                         "-np is more than the slots of the hosts (mpirun): add hosts or slots, "
                         "or lower -np"};
  }
  return std::nullopt;
}

}  // namespace etrun::launcher
