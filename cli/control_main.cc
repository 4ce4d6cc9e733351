#include "cli/control_main.h"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <optional>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "discovery/host_slots.h"
#include "cli/verb_common.h"
#include "control/control.h"
#include "control/control_wire.h"

namespace etrun::cli {

namespace {

using control::JobEntry;
using control::JobStatus;
using control::RankStatus;
using nlohmann::json;

// A table cell: the number, or `none` for null.
std::string OrNone(const std::optional<int>& n, const char* none) {
  return n ? std::to_string(*n) : none;
}

// The table's cells of a rank: "-" for no rank (mpirun's row, an elastic worker between rounds)
// and for no pid on this machine (a rank on another host: its agent's process there).
std::vector<std::string> RankRow(const RankStatus& r) {
  const int* label = std::get_if<int>(&r.label);
  return {r.rank && *r.rank >= 0 ? std::to_string(*r.rank) : "-",
          label != nullptr ? std::to_string(*label) : std::get<std::string>(r.label),
          r.host,
          OrNone(r.local_rank, "-"),
          r.pid > 0 ? std::to_string(r.pid) : "-",
          r.state,
          std::to_string(r.restarts),
          Duration(r.uptime_s)};
}

// GET /status of a job: the document as the job sent it (what --json prints). Returns false and
// sets *err.
bool FetchStatus(const JobEntry& job, json* document, std::string* err) {
  std::string reply;
  int code = control::ControlRequest(job, "GET", "/status", "", &reply, err);
  if (code == 0) return false;
  if (code != 200) {
    *err = fmt::format("job '{}' answered {}: {}", job.job, code, reply);
    return false;
  }
  *document = json::parse(reply, nullptr, false);
  if (document->is_discarded()) {
    *err = "job '" + job.job + "' sent a malformed status";
    return false;
  }
  return true;
}

// A status document read; a field the job did not send shows as the table always showed it
// (the job's registry name, state "?", zero). Returns false and sets *err.
bool ReadStatus(const JobEntry& job, const json& document, JobStatus* status, std::string* err) {
  *status = JobStatus{};
  status->job = job.job;
  status->state = "?";
  std::string why;
  if (!control::JobStatusFromJson(document, status, &why)) {
    *err = "job '" + job.job + "' sent a malformed status: " + why;
    return false;
  }
  return true;
}

bool FetchStatus(const JobEntry& job, JobStatus* status, std::string* err) {
  json document;
  return FetchStatus(job, &document, err) && ReadStatus(job, document, status, err);
}

}  // namespace

int StatusMain(int argc, char** argv) {
  CLI::App app("Shows a running job of this user: its state, size and ranks.", kStatusVerb);
  std::string name;
  bool as_json = false;
  app.add_option("job", name, "The job's name (see etrun list); optional when only one runs.");
  app.add_flag("--json", as_json, "Prints the status as one JSON object.");
  if (int code = Parse(app, argc, argv); code >= 0) return code;
  JobEntry job;
  std::string err;
  json document;
  JobStatus status;
  if (!control::FindJob(name, &job, &err) || !FetchStatus(job, &document, &err)) return Error(err, 1);
  if (as_json) {
    std::cout << document.dump(2) << "\n";
    return 0;
  }
  if (!ReadStatus(job, document, &status, &err)) return Error(err, 1);
  std::string size = std::to_string(status.world_size);
  if (status.elastic) {
    size += fmt::format(" (np {}, min {}, max {})", status.np, OrNone(status.min_np, "-"),
                        OrNone(status.max_np, "none"));
  }
  std::cout << Table({{"Name:", status.job},
                      {"State:", status.state},
                      {"Duration:", Duration(status.duration_s)},
                      {"World size:", size},
                      {"Resets:", std::to_string(status.resets)},
                      {"Pid:", std::to_string(status.pid)}})
            << "\n";
  std::vector<std::vector<std::string>> rows = {
      {"RANK", "LABEL", "HOST", "LOCAL", "PID", "STATE", "RESTARTS", "UPTIME"}};
  for (const RankStatus& r : status.ranks) rows.push_back(RankRow(r));
  std::cout << Table(rows);
  return 0;
}

int DumpMain(int argc, char** argv) {
  CLI::App app("Shows where every rank of a running job is: each Python rank's stack (all "
               "threads; under --hang-timeout), each other rank's kernel state, and in one line "
               "which ranks are where. The stacks also go to the job's own output.", kDumpVerb);
  std::string name;
  bool as_json = false;
  app.add_option("job", name, "The job's name (see etrun list); optional when only one runs.");
  app.add_flag("--json", as_json, "Prints the dump as one JSON object.");
  if (int code = Parse(app, argc, argv); code >= 0) return code;
  JobEntry job;
  std::string err, reply;
  if (!control::FindJob(name, &job, &err)) return Error(err, 1);
  int code = control::ControlRequest(job, "GET", "/dump", "", &reply, &err, std::chrono::seconds(30));
  if (code == 0) return Error(err, 1);
  json document = json::parse(reply, nullptr, false);
  if (code != 200 || document.is_discarded() || !document.is_object()) {
    return Error(fmt::format("job '{}' answered {}: {}", job.job, code, reply), 1);
  }
  if (as_json) {
    std::cout << document.dump(2) << "\n";
    return 0;
  }
  for (const json& r : document.value("ranks", json::array())) {
    std::string prefix = fmt::format("[{}]<stack>:", r.value("rank", -1));
    std::string stack = r.value("stack", "");
    if (stack.empty()) {
      std::string state = r.contains("state") && r["state"].is_string() ? r["state"].get<std::string>()
                                                                          : "no state known";
      std::cout << prefix << "no Python stack; " << state << "\n";
      continue;
    }
    size_t start = 0;
    while (start < stack.size()) {
      size_t end = stack.find('\n', start);
      if (end == std::string::npos) end = stack.size();
      std::cout << prefix << std::string_view(stack).substr(start, end - start) << "\n";
      start = end + 1;
    }
  }
  std::cout << "etrun: dump of '" << job.job << "': " << document.value("summary", "") << "\n";
  return 0;
}

int ListMain(int argc, char** argv) {
  CLI::App app("Lists this user's running etrun jobs.", kListVerb);
  bool as_json = false;
  app.add_flag("--json", as_json, "Prints the jobs as a JSON array.");
  if (int code = Parse(app, argc, argv); code >= 0) return code;
  std::string err;
  std::vector<JobEntry> jobs = control::ListJobs(&err);
  if (!err.empty()) return Error(err, 1);
  json out = json::array();
  std::vector<std::vector<std::string>> rows = {{"NAME", "STATE", "SIZE", "DURATION", "PID"}};
  for (const JobEntry& job : jobs) {
    json document;
    JobStatus status;
    std::string why;
    if (!FetchStatus(job, &document, &why)) {
      out.push_back(control::UnreachableToJson(job.job, job.pid));
      rows.push_back({job.job, control::kUnreachable, "-", "-", std::to_string(job.pid)});
      continue;
    }
    out.push_back(document);
    if (!ReadStatus(job, document, &status, &why)) {
      rows.push_back({job.job, "?", "-", "-", std::to_string(job.pid)});
      continue;
    }
    rows.push_back({job.job, status.state, std::to_string(status.world_size),
                    Duration(status.duration_s), std::to_string(job.pid)});
  }
  if (as_json) {
    std::cout << out.dump(2) << "\n";
  } else if (jobs.empty()) {
    std::cout << "no running etrun jobs\n";
  } else {
    std::cout << Table(rows);
  }
  return 0;
}

namespace {

// What `etrun scale` was asked for.
struct ScaleRequest {
  std::string job;
  std::string add_host;  // --add HOST:SLOTS
  int add_slots = 0;
  std::string remove;    // --remove HOST
  std::optional<int> to;
  bool clear = false;
  std::string timeout_text = "10m";
  double timeout_s = 0;
};

// Parses scale's flags. Returns -1 to go on, or the exit code (help, or 2 with one error line).
int ParseScale(int argc, char** argv, ScaleRequest* r) {
  CLI::App app(
      "Grows or shrinks a running elastic job. The change overrides the discovery script for the "
      "named hosts until changed again; if the job has not reached the new size within --timeout, "
      "it is rolled back and scale exits 1.",
      kScaleVerb);
  std::string add;
  app.add_option("job", r->job, "The job's name (see etrun list); optional when only one runs.");
  auto* add_opt = app.add_option("--add", add, "Adds HOST:SLOTS (or resizes a host) to the job.");
  auto* remove_opt = app.add_option("--remove", r->remove, "Removes HOST: its ranks are drained.");
  auto* to_opt = app.add_option("--to", r->to, "Aims for a world of N ranks (caps it like --max-np).");
  auto* clear_opt = app.add_flag("--clear", r->clear, "Drops every override: back to what discovery says.");
  app.add_option("--timeout", r->timeout_text, "How long to wait for the new size (default 10m; 90s, 1h).");
  add_opt->excludes(remove_opt)->excludes(to_opt)->excludes(clear_opt);
  remove_opt->excludes(to_opt)->excludes(clear_opt);
  to_opt->excludes(clear_opt);
  if (int code = Parse(app, argc, argv); code >= 0) return code;
  if (add.empty() && r->remove.empty() && !r->to && !r->clear) {
    return Error("say what to change: --add HOST:SLOTS, --remove HOST, --to N or --clear", 2);
  }
  if (!ParseDuration(r->timeout_text, &r->timeout_s)) {
    return Error("--timeout: expected a duration such as 90s, 10m or 1h, got '" + r->timeout_text + "'", 2);
  }
  if (!add.empty()) {
    size_t colon = add.rfind(':');
    std::string host = add.substr(0, colon);
    int slots = 1;
    if (colon != std::string::npos) {
      std::string_view text = std::string_view(add).substr(colon + 1);
      auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), slots);
      if (ec != std::errc() || end != text.data() + text.size()) slots = 0;
    }
    if (discovery::StartsLikeOption(host)) {
      return Error("--add: " + discovery::OptionLikeHostError(host) + ": give the host's name or "
                   "address, got '" + add + "'", 2);
    }
    if (!discovery::IsValidHostName(host) || slots < 1) {
      return Error("--add: expected HOST:SLOTS with at least 1 slot, got '" + add + "'", 2);
    }
    r->add_host = host;
    r->add_slots = slots;
  }
  if (r->to && *r->to < 1) return Error("--to: expected at least 1, got " + std::to_string(*r->to), 2);
  return -1;
}

// The job's overrides after the request: `before` changed as asked.
control::Overrides NextOverrides(const control::Overrides& before, const ScaleRequest& r) {
  control::Overrides after = r.clear ? control::Overrides{} : before;
  if (!r.add_host.empty()) {
    after.add[r.add_host] = r.add_slots;
    std::erase(after.remove, r.add_host);
  }
  if (!r.remove.empty()) {
    after.add.erase(r.remove);
    if (std::find(after.remove.begin(), after.remove.end(), r.remove) == after.remove.end()) {
      after.remove.push_back(r.remove);
    }
  }
  if (r.to) after.to = *r.to;
  return after;
}

// Sends the whole set of overrides. Returns false and sets *why (the job's own error if it
// answered one).
bool PostOverrides(const JobEntry& job, const control::Overrides& overrides, std::string* why) {
  std::string reply;
  int code = control::ControlRequest(job, "POST", "/overrides",
                                     control::OverridesToJson(overrides).dump(), &reply, why);
  if (code == 200) return true;
  if (code != 0) *why = control::ErrorText(reply);
  return false;
}

// Whether the running ranks in `status` match the request; *where says how far it got.
bool Reached(const ScaleRequest& r, const JobStatus& status, std::string* where) {
  int on_host = 0, running = 0;
  for (const RankStatus& rank : status.ranks) {
    if (rank.state != "running" || !rank.rank || *rank.rank < 0) continue;
    ++running;
    if (rank.host == (r.add_host.empty() ? r.remove : r.add_host)) ++on_host;
  }
  // Running, and the round's world has formed: every new worker met the others (jobs of etruns
  // without "world_ready" count as formed).
  bool steady = status.state == "running" && status.world_ready;
  if (!r.add_host.empty()) {
    *where = fmt::format("{} of {} ranks on {}{}", on_host, r.add_slots, r.add_host,
                         steady || on_host < r.add_slots ? "" : ", the new world not formed yet");
    return steady && on_host == r.add_slots;
  }
  if (!r.remove.empty()) {
    *where = fmt::format("{} ranks still on {}", on_host, r.remove);
    return steady && on_host == 0;
  }
  if (r.to) {
    *where = fmt::format("world size {} of {}", running, *r.to);
    return steady && running == *r.to;
  }
  *where = "";
  return true;  // --clear: nothing to wait for
}

}  // namespace

int ScaleMain(int argc, char** argv) {
  ScaleRequest request;
  if (int code = ParseScale(argc, argv, &request); code >= 0) return code;
  JobEntry job;
  std::string err;
  JobStatus status;
  if (!control::FindJob(request.job, &job, &err) || !FetchStatus(job, &status, &err)) return Error(err, 1);
  if (!status.elastic || !status.overrides) {
    return Error("job '" + job.job + "' is static: sizes are fixed (start it with --min-np or "
                 "--host-discovery-script to scale it)", 1);
  }
  control::Overrides before = *status.overrides;
  if (!PostOverrides(job, NextOverrides(before, request), &err)) {
    return Error("job '" + job.job + "' refused the change: " + err, 1);
  }
  auto deadline = std::chrono::steady_clock::now() +
                  std::chrono::milliseconds(static_cast<long long>(request.timeout_s * 1000));
  std::string where = "no answer";
  while (true) {
    JobStatus now_status;
    std::string why;
    if (FetchStatus(job, &now_status, &why) && Reached(request, now_status, &where)) {
      std::cout << "job '" << job.job << "' scaled: " << (where.empty() ? "overrides cleared" : where);
      if (!where.empty()) {
        std::cout << "; the new world of " << now_status.world_size << " ranks is training (round "
                  << now_status.round << ")";
      }
      std::cout << "\n";
      return 0;
    }
    if (!why.empty() && control::ListJobs(&why).empty()) {
      return Error("job '" + job.job + "' ended while scaling", 1);
    }
    if (std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  std::string why;
  bool rolled_back = PostOverrides(job, before, &why);
  return Error(fmt::format("job '{}' did not reach the new size within {} ({}); {}", job.job,
                           request.timeout_text, where,
                           rolled_back ? "the change was rolled back" : "could not roll back: " + why),
               1);
}

}  // namespace etrun::cli
