#include "rendezvous/elastic_handler.h"

#include <charconv>

#include <spdlog/spdlog.h>

namespace etrun::rendezvous {

std::string FormatRankAndSize(const std::optional<SlotInfo>& slot) {
  if (!slot) return "-1,-1,-1,-1,-1,-1";
  return std::to_string(slot->rank) + "," + std::to_string(slot->size) + "," +
         std::to_string(slot->local_rank) + "," + std::to_string(slot->local_size) + "," +
         std::to_string(slot->cross_rank) + "," + std::to_string(slot->cross_size);
}

bool ParseSlotKey(std::string_view key, std::string* host, int* local_rank) {
  size_t colon = key.rfind(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == key.size()) return false;
  std::string_view digits = key.substr(colon + 1);
  for (char c : digits) {
    if (c < '0' || c > '9') return false;
  }
  auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), *local_rank);
  if (ec != std::errc() || ptr != digits.data() + digits.size()) return false;
  *host = std::string(key.substr(0, colon));
  return true;
}

void PostedHooks::RecordReady(const std::string& host, int local_rank,
                              std::function<void(std::optional<SlotInfo>)> reply) {
  post_([driver = driver_, host, local_rank, reply = std::move(reply)]() mutable {
    driver->RecordReady(host, local_rank, std::move(reply));
  });
}

void PostedHooks::RegisterWorker(WorkerRegistration registration, std::function<void(bool)> done) {
  post_([driver = driver_, registration = std::move(registration), done = std::move(done)]() mutable {
    driver->RegisterWorker(std::move(registration), std::move(done));
  });
}

void RendezvousHandler::Handle(HttpRequest&& request, Responder respond) {
  std::string_view scope, key;
  if (hooks_ == nullptr || !SplitScopeKey(request.target, &scope, &key) ||
      (scope != "rank_and_size" && scope != "worker_addresses")) {
    return kv_.Handle(std::move(request), std::move(respond));
  }
  std::string host;
  int local_rank = 0;
  if (!ParseSlotKey(key, &host, &local_rank)) {
    spdlog::warn("rendezvous: bad slot '{}' in {} {}", key, request.method, request.target);
    return respond({400, ""});
  }
  if (scope == "rank_and_size") {
    if (request.method != "GET") return respond({405, ""});
    hooks_->RecordReady(host, local_rank, [respond](std::optional<SlotInfo> slot) {
      respond({200, FormatRankAndSize(slot)});
    });
    return;
  }
  if (request.method != "PUT") return kv_.Handle(std::move(request), std::move(respond));
  WorkerRegistration registration;
  registration.host = host;
  registration.local_rank = local_rank;
  std::string err;
  if (!DecodeWorkerAddressesBody(request.body, &registration.addresses, &registration.key, &err)) {
    spdlog::warn("rendezvous: worker {}[{}] sent unreadable addresses: {}", host, local_rank, err);
    return respond({400, ""});
  }
  // horovodrun keeps the raw registration in the store too (wiped at the next Init).
  if (!store_->Put(scope, key, std::move(request.body))) return respond(StoreFullResponse(*store_));
  hooks_->RegisterWorker(std::move(registration), [respond](bool ok) {
    respond({ok ? 200 : 500, ""});
  });
}

}  // namespace etrun::rendezvous
