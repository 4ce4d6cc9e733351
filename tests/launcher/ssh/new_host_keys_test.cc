// The one warning for new host keys (new_host_keys.h): its words, and when a batch of hosts met
// by many connections is due, on a clock the test moves.
#include "launcher/ssh/new_host_keys.h"

#include <doctest/doctest.h>

namespace etrun::launcher {
namespace {

using std::chrono::milliseconds;
using TimePoint = NewHostKeyBatch::TimePoint;

const std::string kFile = "/root/.ssh/known_hosts";

TEST_CASE("one line names every new host, in natural order") {
  CHECK(NewHostKeysLine(kFile, {"h10", "h2", "h1"}, "") ==
        "recorded the SSH host keys of 3 new hosts in /root/.ssh/known_hosts: h1, h2, h10 "
        "(--ssh-strict-host-keys refuses unknown hosts)");
  CHECK(NewHostKeysLine(kFile, {"[h1]:2222"}, "") ==
        "recorded the SSH host key of 1 new host in /root/.ssh/known_hosts: [h1]:2222 "
        "(--ssh-strict-host-keys refuses unknown hosts)");
  CHECK(NewHostKeysLine(kFile, {"node-b", "node-a", "node-a"}, "") ==
        "recorded the SSH host keys of 2 new hosts in /root/.ssh/known_hosts: node-a, node-b "
        "(--ssh-strict-host-keys refuses unknown hosts)");
}

TEST_CASE("past ten hosts the line names the first ten and counts the rest") {
  std::vector<std::string> names;
  for (int i = 64; i >= 1; --i) names.push_back("h" + std::to_string(i));
  CHECK(NewHostKeysLine(kFile, names, "") ==
        "recorded the SSH host keys of 64 new hosts in /root/.ssh/known_hosts: h1, h2, h3, h4, "
        "h5, h6, h7, h8, h9, h10 and 54 more (--ssh-strict-host-keys refuses unknown hosts)");
}

TEST_CASE("keys that could not be recorded are said to be accepted, with the reason") {
  CHECK(NewHostKeysLine(kFile, {"h1", "h2"}, "cannot open it: Read-only file system") ==
        "accepted the SSH host keys of 2 new hosts without recording them in "
        "/root/.ssh/known_hosts (cannot open it: Read-only file system): h1, h2 "
        "(--ssh-strict-host-keys refuses unknown hosts)");
  CHECK(NewHostKeysLine(kFile, {"h1"}, "cannot open it: Permission denied") ==
        "accepted the SSH host key of 1 new host without recording it in "
        "/root/.ssh/known_hosts (cannot open it: Permission denied): h1 "
        "(--ssh-strict-host-keys refuses unknown hosts)");
}

TEST_CASE("a batch is due once keys stop coming for a moment, and never later than its cap") {
  NewHostKeyBatch batch;
  TimePoint t0{};
  CHECK(!batch.Due());
  CHECK(batch.Take().empty());

  SUBCASE("hosts met close together make one line, due a quiet period after the last") {
    batch.Add(kFile, "h1", "", t0);
    CHECK(batch.Due() == t0 + NewHostKeyBatch::kQuiet);
    batch.Add(kFile, "h3", "", t0 + milliseconds(300));
    batch.Add(kFile, "h2", "", t0 + milliseconds(600));
    CHECK(batch.Due() == t0 + milliseconds(600) + NewHostKeyBatch::kQuiet);
    CHECK(batch.Take() == std::vector<std::string>{NewHostKeysLine(kFile, {"h1", "h2", "h3"}, "")});
    CHECK(!batch.Due());
    // A host met later (an elastic job growing) starts a batch of its own.
    batch.Add(kFile, "h4", "", t0 + milliseconds(5000));
    CHECK(batch.Due() == t0 + milliseconds(5000) + NewHostKeyBatch::kQuiet);
    CHECK(batch.Take() == std::vector<std::string>{NewHostKeysLine(kFile, {"h4"}, "")});
  }
  SUBCASE("hosts that keep coming do not hold the line back past the cap") {
    for (int i = 0; i < 100; ++i) {
      batch.Add(kFile, "h" + std::to_string(i), "", t0 + milliseconds(500 * i));
    }
    CHECK(batch.Due() == t0 + NewHostKeyBatch::kAtMost);
  }
  SUBCASE("hosts recorded and hosts that could not be make a line each") {
    batch.Add(kFile, "h1", "", t0);
    batch.Add(kFile, "h2", "cannot open it: Permission denied", t0);
    batch.Add(kFile, "h3", "", t0);
    CHECK(batch.Take() == std::vector<std::string>{
                              NewHostKeysLine(kFile, {"h1", "h3"}, ""),
                              NewHostKeysLine(kFile, {"h2"}, "cannot open it: Permission denied")});
  }
}

}  // namespace
}  // namespace etrun::launcher
