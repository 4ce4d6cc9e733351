#include "smoke/world.h"

#include <charconv>

namespace etrun::smoke {
namespace {

// Reads one decimal variable in [min, max].
bool ReadInt(const std::function<const char*(const char*)>& getenv, const char* name, int min,
             int max, int* value, std::string* err) {
  const char* text = getenv(name);
  if (text == nullptr || *text == '\0') {
    *err = std::string(name) +
           " is not set: etrun-smoke runs under etrun, e.g. etrun -np 2 etrun-smoke";
    return false;
  }
  std::string_view view(text);
  auto [ptr, ec] = std::from_chars(view.data(), view.data() + view.size(), *value);
  if (ec != std::errc() || ptr != view.data() + view.size() || *value < min || *value > max) {
    *err = std::string(name) + ": expected a whole number from " + std::to_string(min) + " to " +
           std::to_string(max) + ", got '" + text + "'";
    return false;
  }
  return true;
}

}  // namespace

bool ReadWorld(const std::function<const char*(const char*)>& getenv, World* world,
               std::string* err) {
  World w;
  if (!ReadInt(getenv, "HOROVOD_SIZE", 1, 1 << 20, &w.size, err) ||
      !ReadInt(getenv, "HOROVOD_RANK", 0, w.size - 1, &w.rank, err) ||
      !ReadInt(getenv, "HOROVOD_LOCAL_RANK", 0, w.size - 1, &w.local_rank, err) ||
      !ReadInt(getenv, "HOROVOD_GLOO_RENDEZVOUS_PORT", 1, 65535, &w.store_port, err)) {
    return false;
  }
  const char* address = getenv("HOROVOD_GLOO_RENDEZVOUS_ADDR");
  if (address == nullptr || *address == '\0') {
    *err = "HOROVOD_GLOO_RENDEZVOUS_ADDR is not set: etrun-smoke runs under etrun, e.g. "
           "etrun -np 2 etrun-smoke";
    return false;
  }
  w.store_address = address;
  if (const char* host = getenv("HOROVOD_HOSTNAME")) w.hostname = host;
  *world = w;
  return true;
}

}  // namespace etrun::smoke
