#include "control/control.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <ctime>
#include <fstream>
#include <sstream>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <fmt/format.h>
#include <openssl/crypto.h>
#include <spdlog/spdlog.h>

#include "control/control_wire.h"

namespace etrun::control {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

namespace {

std::string UtcNow() {
  time_t now = time(nullptr);
  struct tm utc;
  gmtime_r(&now, &utc);
  char out[32];
  strftime(out, sizeof(out), "%Y-%m-%dT%H:%M:%SZ", &utc);
  return out;
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
  } catch (const nlohmann::json::exception&) {
    return false;
  }
  out->path = path;
  return true;
}

}  // namespace

bool ProcessAlive(int pid) { return pid > 0 && (kill(pid, 0) == 0 || errno == EPERM); }

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
    if (!ProcessAlive(entry.pid)) {
      unlink(path.c_str());  // its etrun was killed before it could clean up
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

// Checks the token, then hands the request to the job's handler.
class ControlServer::Auth : public rendezvous::HttpHandler {
 public:
  Auth(Handler handler, std::string token) : handler_(std::move(handler)), token_(std::move(token)) {}
  void set_token(std::string token) { token_ = std::move(token); }

  void Handle(rendezvous::HttpRequest request,
              std::function<void(rendezvous::HttpResponse)> respond) override {
    const std::string want = "Bearer " + token_;
    const std::string& got = request.authorization;
    if (got.size() != want.size() || CRYPTO_memcmp(got.data(), want.data(), want.size()) != 0) {
      return respond({401, ErrorToJson("missing or wrong token").dump()});
    }
    handler_(request, [respond](int status, nlohmann::json body) {
      respond({status, body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)});
    });
  }

 private:
  Handler handler_;
  std::string token_;
};

ControlServer::ControlServer(asio::io_context* io, Handler handler) {
  unsigned char random[32];
  size_t got = 0;
  while (got < sizeof(random)) {
    ssize_t n = getrandom(random + got, sizeof(random) - got, 0);
    if (n > 0) got += static_cast<size_t>(n);
    else if (errno != EINTR) break;
  }
  std::string token;
  for (size_t i = 0; i < got; ++i) token += fmt::format("{:02x}", random[i]);
  entry_.token = token;
  auth_ = std::make_unique<Auth>(std::move(handler), token);
  server_ = std::make_unique<rendezvous::HttpServer>(io, auth_.get());
}

void ControlServer::UseToken(const std::string& token) {
  if (token.size() != 64 || token.find_first_not_of("0123456789abcdef") != std::string::npos) return;
  entry_.token = token;
  auth_->set_token(token);
}

ControlServer::~ControlServer() {
  if (!entry_.path.empty()) unlink(entry_.path.c_str());
}

bool ControlServer::Start(const std::string& job, std::string* err, const std::string& sub,
                          const std::string& address, int port) {
  if (entry_.token.size() != 64) {
    *err = "no random numbers for the control token";
    return false;
  }
  std::string dir = RegistryDir(err, sub);
  if (dir.empty()) return false;
  if (!server_->Listen(address, port, err)) return false;
  // Clients on this machine reach an endpoint open to every interface over loopback.
  entry_.address = address == "0.0.0.0" ? "127.0.0.1" : address;
  entry_.pid = getpid();
  entry_.port = server_->port();
  entry_.started = UtcNow();
  // A live job of the same name keeps it; this one gets its pid appended.
  std::string name = job;
  JobEntry other;
  if (ReadEntry(dir + "/" + name + ".json", &other) && ProcessAlive(other.pid) && other.pid != getpid()) {
    name += "-" + std::to_string(getpid());
  }
  for (char& c : name) {
    if (c == '/' || c == '\0') c = '_';
  }
  entry_.job = name;
  nlohmann::json j = {{"job", name}, {"pid", entry_.pid}, {"port", entry_.port},
                      {"token", entry_.token}, {"started", entry_.started},
                      {"address", entry_.address}};
  std::string path = dir + "/" + name + ".json";
  std::string tmp = path + ".tmp" + std::to_string(getpid());
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  std::string text = j.dump() + "\n";
  if (fd < 0 || write(fd, text.data(), text.size()) != static_cast<ssize_t>(text.size()) ||
      close(fd) != 0 || rename(tmp.c_str(), path.c_str()) != 0) {
    *err = "cannot write " + path + ": " + strerror(errno);
    unlink(tmp.c_str());
    return false;
  }
  entry_.path = path;
  return true;
}

int ControlRequest(const JobEntry& job, const std::string& method, const std::string& target,
                   const std::string& body, std::string* reply, std::string* err,
                   std::chrono::milliseconds timeout) {
  try {
    asio::io_context io;
    beast::tcp_stream stream(io);
    stream.expires_after(timeout);
    stream.connect(asio::ip::tcp::endpoint(asio::ip::make_address_v4(job.address),
                                           static_cast<unsigned short>(job.port)));
    http::request<http::string_body> req(http::string_to_verb(method), target, 11);
    req.set(http::field::host, job.address);
    req.set(http::field::authorization, "Bearer " + job.token);
    req.body() = body;
    req.prepare_payload();
    http::write(stream, req);
    beast::flat_buffer buffer;
    http::response<http::string_body> res;
    http::read(stream, buffer, res);
    *reply = res.body();
    return static_cast<int>(res.result_int());
  } catch (const std::exception& e) {
    *err = fmt::format("cannot reach job '{}' (pid {}, port {}): {}", job.job, job.pid, job.port, e.what());
    return 0;
  }
}

}  // namespace etrun::control
