#include "cli/report_main.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <iostream>
#include <string>
#include <vector>

#include "events/exit_status.h"
#include "report/pool_report.h"
#include "report/report.h"

namespace etrun::cli {
namespace {

constexpr char kUsage[] = "usage: etrun report EVENTS.jsonl [MORE.jsonl...] [-o OUT.svg] [--json]";

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

// One events file and what it holds: a job's timeline or a pool's.
struct ReportFile {
  std::string path;
  bool is_pool = false;
  report::JobTimeline job;
  report::PoolTimeline pool;
};

// Reads and parses one events file. Returns false after printing the one "etrun: error:" line;
// prints the file's warnings.
bool LoadFile(const std::string& path, ReportFile* file) {
  std::string text;
  std::string err;
  file->path = path;
  if (!ReadFile(path, &text, &err)) {
    std::cerr << "etrun: error: cannot read events file " << path << ": " << err << "\n";
    return false;
  }
  file->is_pool = report::IsPoolEvents(text);
  const bool parsed = file->is_pool ? report::ParsePoolEvents(text, path, &file->pool, &err)
                                    : report::ParseEvents(text, path, &file->job, &err);
  if (!parsed) {
    std::cerr << "etrun: error: " << err << "\n";
    return false;
  }
  for (const std::string& warning : file->is_pool ? file->pool.warnings : file->job.warnings) {
    std::cerr << "etrun: warning: " << warning << "\n";
  }
  return true;
}

// The picture of the files: a pool's chart with its jobs' timelines below, or one job's timeline.
// Returns false with a usage problem in *err when the files do not make one picture.
bool Picture(const std::vector<ReportFile>& files, std::string* svg, std::string* err) {
  const ReportFile* pool = nullptr;
  std::vector<report::JobTimeline> jobs;
  for (const ReportFile& file : files) {
    if (!file.is_pool) {
      jobs.push_back(file.job);
    } else if (pool != nullptr) {
      *err = "-o draws one pool: " + pool->path + " and " + file.path + " are both pools' files";
      return false;
    } else {
      pool = &file;
    }
  }
  if (pool != nullptr) {
    *svg = report::RenderPoolSvg(pool->pool, jobs);
  } else if (jobs.size() == 1) {
    *svg = report::RenderSvg(jobs[0]);
  } else {
    *err = "-o draws one job, or a pool's events file with its jobs' files; " +
           std::to_string(jobs.size()) + " jobs' files and no pool's were given";
    return false;
  }
  return true;
}

}  // namespace

int ReportMain(int argc, char** argv) {
  std::vector<std::string> events_paths;
  std::string output_path;
  bool as_json = false;
  CLI::App app(
      "Summarizes a job or a shared GPU pool from its events file (--events-file); with -o, draws "
      "its timeline. A pool's file with its jobs' files draws the pool's slots above each job.",
      "etrun report");
  app.add_option("EVENTS", events_paths,
                 "events files (JSON Lines) written by --events-file or `etrun pool start`")
      ->required();
  app.add_option("-o,--output", output_path, "write the timeline picture (SVG) to this file");
  app.add_flag("--json", as_json, "print each summary as one JSON object (a line) instead of text");
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

  std::vector<ReportFile> files(events_paths.size());
  for (size_t i = 0; i < files.size(); ++i) {
    if (!LoadFile(events_paths[i], &files[i])) return kExitFailure;
  }
  std::string err;
  if (!output_path.empty()) {
    std::string svg;
    if (!Picture(files, &svg, &err)) {
      std::cerr << "etrun: error: report: " << err << " (" << kUsage << ")\n";
      return kExitUsage;
    }
    if (!WriteFile(output_path, svg, &err)) {
      std::cerr << "etrun: error: cannot write " << output_path << ": " << err
                << " (choose another -o path)\n";
      return kExitFailure;
    }
  }
  for (size_t i = 0; i < files.size(); ++i) {
    const ReportFile& f = files[i];
    if (i > 0 && !as_json) std::cout << "\n";  // text summaries are separated by a blank line
    if (f.is_pool) {
      std::cout << (as_json ? report::PoolSummaryJson(f.pool) : report::PoolSummaryText(f.pool));
    } else {
      std::cout << (as_json ? report::SummaryJson(f.job) : report::SummaryText(f.job));
    }
  }
  std::cout << std::flush;
  return kExitOk;
}

}  // namespace etrun::cli
