#include "launcher/rendezvous_service.h"

#include <unistd.h>

#include <cstdlib>

#include <spdlog/spdlog.h>

#include "launcher/process/environment.h"

namespace etrun::launcher {

int RendezvousThreads(const JobConfig& config, const std::vector<std::string>& environment) {
  int requested = 0;
  if (std::string value = EnvValue(environment, "ETRUN_RENDEZVOUS_THREADS"); !value.empty()) {
    char* end = nullptr;
    long parsed = strtol(value.c_str(), &end, 10);
    if (*end == '\0' && parsed >= 1 && parsed <= 4096) {
      requested = static_cast<int>(parsed);
    } else {
      spdlog::warn("ignoring ETRUN_RENDEZVOUS_THREADS={}: not a whole number from 1 to 4096", value);
    }
  }
  if (config.rendezvous_threads) requested = *config.rendezvous_threads;
  return rendezvous::ServiceThreadCount(requested);
}

bool RendezvousService::Start(rendezvous::HttpHandler* handler, const std::string& address,
                              const rendezvous::AccessList* access, std::string* err) {
  server_ = std::make_unique<rendezvous::HttpServer>(service_.loops(), handler);
  server_->set_access(access);
  server_->set_local_user(geteuid());  // on this machine, only the job's user (etrun's own)
  if (!server_->Listen(address, 0, err)) return false;
  service_.Start();
  spdlog::debug("rendezvous server listening on {}:{} ({} threads)", address, server_->port(), threads_);
  return true;
}

void RendezvousService::Stop() {
  service_.Stop();
  if (server_) server_->Stop();
}

}  // namespace etrun::launcher
