#include "cli/report_main.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <iostream>
#include <string>

#include "launcher/exit_status.h"
#include "report/report.h"

namespace etrun::cli {
namespace {

constexpr char kUsage[] = "usage: etrun report EVENTS.jsonl [-o OUT.svg] [--json]";

// Reads the whole file. Returns false with *err ("<what>: <strerror>") on failure.
bool ReadFile(const std::string& path, std::string* text, std::string* err) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *err = strerror(errno);
    return false;
  }
  struct stat st;
  if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
    close(fd);
    *err = "it is a directory";
    return false;
  }
  char buffer[1 << 16];
  for (;;) {
    const ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      *err = strerror(errno);
      close(fd);
      return false;
    }
    text->append(buffer, static_cast<size_t>(n));
  }
  close(fd);
  return true;
}

// Writes text to path (created or truncated, 0666 & ~umask). Returns false with *err.
bool WriteFile(const std::string& path, const std::string& text, std::string* err) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0) {
    *err = strerror(errno);
    return false;
  }
  for (size_t done = 0; done < text.size();) {
    const ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      *err = strerror(errno);
      close(fd);
      return false;
    }
    done += static_cast<size_t>(n);
  }
  if (close(fd) != 0) {  // NFS and full disks report here
    *err = strerror(errno);
    return false;
  }
  return true;
}

}  // namespace

int ReportMain(int argc, char** argv) {
  std::string events_path;
  std::string output_path;
  bool as_json = false;
  CLI::App app(
      "Summarizes a job from its events file (--events-file); with -o, draws its timeline.",
      "etrun report");
  app.add_option("EVENTS", events_path, "the events file (JSON Lines) written by --events-file")
      ->required();
  app.add_option("-o,--output", output_path, "write the timeline picture (SVG) to this file");
  app.add_flag("--json", as_json, "print the summary as one JSON object instead of text");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help() << std::flush;
    return kExitOk;
  } catch (const CLI::ParseError& e) {
    std::cerr << "etrun: error: report: " << e.what() << " (" << kUsage << ")\n";
    return kExitUsage;
  }
  if (app.count("--output") > 0 && output_path.empty()) {
    std::cerr << "etrun: error: report: -o needs a file name for the SVG picture (" << kUsage
              << ")\n";
    return kExitUsage;
  }

  std::string text;
  std::string err;
  if (!ReadFile(events_path, &text, &err)) {
    std::cerr << "etrun: error: cannot read events file " << events_path << ": " << err << "\n";
    return kExitFailure;
  }
  report::JobTimeline timeline;
  if (!report::ParseEvents(text, events_path, &timeline, &err)) {
    std::cerr << "etrun: error: " << err << "\n";
    return kExitFailure;
  }
  for (const std::string& warning : timeline.warnings) {
    std::cerr << "etrun: warning: " << warning << "\n";
  }
  if (!output_path.empty() && !WriteFile(output_path, report::RenderSvg(timeline), &err)) {
    std::cerr << "etrun: error: cannot write " << output_path << ": " << err
              << " (choose another -o path)\n";
    return kExitFailure;
  }
  std::cout << (as_json ? report::SummaryJson(timeline) : report::SummaryText(timeline))
            << std::flush;
  return kExitOk;
}

}  // namespace etrun::cli
