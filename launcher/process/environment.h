// The environment as etrun handles it: a vector of "K=V" strings, the base of every child's.
// Pure but for CurrentEnvironment, which reads `environ`. Thread-compatible.
#ifndef ETRUN_LAUNCHER_PROCESS_ENVIRONMENT_H_
#define ETRUN_LAUNCHER_PROCESS_ENVIRONMENT_H_

#include <string>
#include <string_view>
#include <vector>

namespace etrun::launcher {

// This process's environment, "K=V" each.
std::vector<std::string> CurrentEnvironment();

// The value of `name` in a "K=V" environment: the first entry, as getenv finds it; "" if none.
std::string EnvValue(const std::vector<std::string>& env, std::string_view name);

// `base` with each "K=V" of `over` set on it, in order, as env(1) sets them: a name `base` has
// keeps its place with the new value (every entry of that name goes), a new one is appended.
std::vector<std::string> OverlayEnvironment(std::vector<std::string> base,
                                            const std::vector<std::string>& over);

}  // namespace etrun::launcher

#endif  // ETRUN_LAUNCHER_PROCESS_ENVIRONMENT_H_
