// etrun-smoke reads its place in the job from etrun's worker variables (spec §3.2).
#include "smoke/world.h"

#include <map>
#include <string>

#include <doctest/doctest.h>

using etrun::smoke::ReadWorld;
using etrun::smoke::World;

namespace {

struct FakeEnv {
  std::map<std::string, std::string> vars = {
      {"HOROVOD_RANK", "2"},         {"HOROVOD_SIZE", "3"},
      {"HOROVOD_LOCAL_RANK", "0"},   {"HOROVOD_HOSTNAME", "node-b"},
      {"HOROVOD_GLOO_RENDEZVOUS_ADDR", "10.0.0.1"}, {"HOROVOD_GLOO_RENDEZVOUS_PORT", "4242"}};
  const char* operator()(const char* name) const {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  }
};

std::string ErrorWith(const std::string& name, const char* value) {
  FakeEnv env;
  if (value == nullptr) {
    env.vars.erase(name);
  } else {
    env.vars[name] = value;
  }
  World world;
  std::string err;
  CHECK_FALSE(ReadWorld(env, &world, &err));
  return err;
}

}  // namespace

TEST_CASE("a rank's place and the store's address come from etrun's variables") {
  World world;
  std::string err;
  REQUIRE(ReadWorld(FakeEnv(), &world, &err));
  CHECK(world.rank == 2);
  CHECK(world.size == 3);
  CHECK(world.local_rank == 0);
  CHECK(world.hostname == "node-b");
  CHECK(world.store_address == "10.0.0.1");
  CHECK(world.store_port == 4242);
}

TEST_CASE("a missing or bad variable is one line that says to run under etrun") {
  CHECK(ErrorWith("HOROVOD_RANK", nullptr) ==
        "HOROVOD_RANK is not set: etrun-smoke runs under etrun, e.g. etrun -np 2 etrun-smoke");
  CHECK(ErrorWith("HOROVOD_GLOO_RENDEZVOUS_ADDR", "") ==
        "HOROVOD_GLOO_RENDEZVOUS_ADDR is not set: etrun-smoke runs under etrun, e.g. etrun -np 2 "
        "etrun-smoke");
  CHECK(ErrorWith("HOROVOD_RANK", "3") ==
        "HOROVOD_RANK: expected a whole number from 0 to 2, got '3'");
  CHECK(ErrorWith("HOROVOD_SIZE", "two") ==
        "HOROVOD_SIZE: expected a whole number from 1 to 1048576, got 'two'");
  CHECK(ErrorWith("HOROVOD_GLOO_RENDEZVOUS_PORT", "70000") ==
        "HOROVOD_GLOO_RENDEZVOUS_PORT: expected a whole number from 1 to 65535, got '70000'");
}

TEST_CASE("HOROVOD_HOSTNAME is optional") {
  FakeEnv env;
  env.vars.erase("HOROVOD_HOSTNAME");
  World world;
  std::string err;
  CHECK(ReadWorld(env, &world, &err));
  CHECK(world.hostname.empty());
}
