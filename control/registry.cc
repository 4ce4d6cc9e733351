#include "control/registry.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

namespace etrun::control {

int64_t ProcessStartTime(int pid) {
  if (pid <= 0) return -1;
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!in || !std::getline(in, line)) return -1;
  // "pid (comm) state ...": comm may hold spaces and parentheses, so fields count from the last
  // ')'. After it come field 3 (state) onwards: starttime, field 22, is the 20th.
  size_t paren = line.rfind(')');
  if (paren == std::string::npos) return -1;
  std::istringstream fields(line.substr(paren + 1));
  std::string field;
  for (int i = 3; i <= 22; ++i) {
    if (!(fields >> field)) return -1;
  }
  if (field.empty() || field.size() > 18 || field.find_first_not_of("0123456789") != std::string::npos) {
    return -1;
  }
  return std::stoll(field);
}

bool ProcessAlive(int pid, int64_t start) {
  return pid > 0 && start >= 0 && ProcessStartTime(pid) == start;
}

std::string MachineName() {
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  return name;
}

std::string RegistryDir(std::string* err, const std::string& sub) {
  const char* runtime = getenv("XDG_RUNTIME_DIR");
  std::string dir = runtime != nullptr && *runtime == '/' && access(runtime, W_OK) == 0
                        ? std::string(runtime) + "/etrun"
                        : "/tmp/etrun-" + std::to_string(getuid());
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    *err = "cannot create " + dir + ": " + strerror(errno);
    return "";
  }
  struct stat st;
  if (lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != getuid() ||
      (st.st_mode & 077) != 0) {
    *err = dir + " is not a directory private to this user: remove it and try again";
    return "";
  }
  if (!sub.empty()) {
    dir += "/" + sub;
    if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
      *err = "cannot create " + dir + ": " + strerror(errno);
      return "";
    }
  }
  return dir;
}

bool ReadEntry(const std::string& path, JobEntry* out) {
  std::ifstream in(path);
  if (!in) return false;
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) return false;
  try {
    out->job = j.at("job").get<std::string>();
    out->pid = j.at("pid").get<int>();
    out->port = j.at("port").get<int>();
    out->token = j.at("token").get<std::string>();
    out->started = j.value("started", "");
    out->address = j.value("address", "127.0.0.1");
    auto start = j.find("pid_start");
    out->pid_start = start != j.end() && start->is_number_integer() ? start->get<int64_t>() : -1;
  } catch (const nlohmann::json::exception&) {
    return false;
  }
  out->path = path;
  return true;
}

std::string WriteEntry(const std::string& dir, const JobEntry& entry, std::string* err) {
  nlohmann::json j = {{"job", entry.job}, {"pid", entry.pid}, {"pid_start", entry.pid_start},
                      {"port", entry.port}, {"token", entry.token}, {"started", entry.started},
                      {"address", entry.address}};
  std::string path = dir + "/" + entry.job + ".json";
  std::string tmp = path + ".tmp" + std::to_string(getpid());
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  std::string text = j.dump() + "\n";
  if (fd < 0 || write(fd, text.data(), text.size()) != static_cast<ssize_t>(text.size()) ||
      close(fd) != 0 || rename(tmp.c_str(), path.c_str()) != 0) {
    *err = "cannot write " + path + ": " + strerror(errno);
    unlink(tmp.c_str());
    return "";
  }
  return path;
}

std::vector<JobEntry> ListJobs(std::string* err, const std::string& sub) {
  std::vector<JobEntry> jobs;
  std::string dir = RegistryDir(err, sub);
  if (dir.empty()) return jobs;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return jobs;
  while (struct dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name.size() < 6 || name.substr(name.size() - 5) != ".json") continue;
    JobEntry entry;
    std::string path = dir + "/" + name;
    if (!ReadEntry(path, &entry)) continue;
    entry.kind = sub == kPoolRegistry ? "pool" : "job";
    if (!ProcessAlive(entry.pid, entry.pid_start)) {
      // Its etrun was killed before it could clean up, or the pid is another process's now.
      // An older etrun's entry (no start time) is left alone while its pid exists.
      if (entry.pid_start >= 0 || ProcessStartTime(entry.pid) < 0) unlink(path.c_str());
      continue;
    }
    jobs.push_back(entry);
  }
  closedir(d);
  std::sort(jobs.begin(), jobs.end(), [](const JobEntry& a, const JobEntry& b) { return a.job < b.job; });
  return jobs;
}

bool FindJob(const std::string& name, JobEntry* out, std::string* err) {
  std::vector<JobEntry> jobs = ListJobs(err);
  if (!err->empty()) return false;
  if (jobs.empty()) {
    *err = "no running etrun job of this user: start one, or check XDG_RUNTIME_DIR";
    return false;
  }
  if (name.empty()) {
    if (jobs.size() == 1) {
      *out = jobs[0];
      return true;
    }
    std::string names;
    for (const JobEntry& j : jobs) names += (names.empty() ? "" : ", ") + j.job;
    *err = "several jobs are running (" + names + "): name one";
    return false;
  }
  for (const JobEntry& j : jobs) {
    if (j.job == name) {
      *out = j;
      return true;
    }
  }
  std::string names;
  for (const JobEntry& j : jobs) names += (names.empty() ? "" : ", ") + j.job;
  *err = "no running job named '" + name + "' (running: " + names + ")";
  return false;
}

}  // namespace etrun::control
