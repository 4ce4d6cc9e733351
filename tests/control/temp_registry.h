// A registry of the test's own (control/registry.h): XDG_RUNTIME_DIR points at a fresh 0700
// directory while it lives, and is restored after.
#ifndef ETRUN_TESTS_CONTROL_TEMP_REGISTRY_H_
#define ETRUN_TESTS_CONTROL_TEMP_REGISTRY_H_

#include <stdlib.h>

#include <filesystem>
#include <optional>
#include <string>

#include <doctest/doctest.h>

namespace etrun::control {

class TempRegistry {
 public:
  TempRegistry() {
    if (const char* old = getenv("XDG_RUNTIME_DIR")) old_ = old;
    char dir[] = "/tmp/etrun-registry-test-XXXXXX";
    REQUIRE(mkdtemp(dir) != nullptr);
    root_ = dir;
    setenv("XDG_RUNTIME_DIR", dir, 1);
  }
  ~TempRegistry() {
    if (old_) {
      setenv("XDG_RUNTIME_DIR", old_->c_str(), 1);
    } else {
      unsetenv("XDG_RUNTIME_DIR");
    }
    std::filesystem::remove_all(root_);
  }
  TempRegistry(const TempRegistry&) = delete;
  TempRegistry& operator=(const TempRegistry&) = delete;

  // The registry directory itself (made by RegistryDir on first use).
  std::string dir() const { return root_ + "/etrun"; }

 private:
  std::string root_;
  std::optional<std::string> old_;
};

}  // namespace etrun::control

#endif  // ETRUN_TESTS_CONTROL_TEMP_REGISTRY_H_
