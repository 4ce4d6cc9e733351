// The stack-dump hook etrun gives its Python ranks, so that the hang watchdog (hang_watch.h) and
// `etrun dump` can show where every rank's threads are without any change to the training script.
// A rank whose environment has ETRUN_STACK_SIGNAL (etrun sets it under --hang-timeout) starts with
// a folder of etrun's first on its PYTHONPATH, holding a sitecustomize.py that Python imports at
// start. It registers faulthandler (C-level: it dumps even while the main thread is blocked in a
// collective) for that signal, writing every thread's stack to the process's stderr, then runs
// the sitecustomize it hides (the next one on sys.path: the user's own, a venv's, Debian's).
// Only the first Python process of a rank registers (its children and forks do not), so one
// dump per rank arrives whole in its prefixed stderr. The signal is SIGURG, which every other
// program ignores by default: etrun sends it to the rank's whole process group harmlessly.
// The file lives in ${XDG_CACHE_HOME:-$HOME/.cache}/etrun/python/<hash of its text>/, made 0700 by
// this user; the launcher makes it for local ranks, each host's agent for its own.
#ifndef ETRUN_LAUNCHER_HANG_PYTHON_HOOK_H_
#define ETRUN_LAUNCHER_HANG_PYTHON_HOOK_H_

#include <signal.h>

#include <string>
#include <string_view>
#include <vector>

namespace etrun::launcher::hang {

inline constexpr char kStackSignalVar[] = "ETRUN_STACK_SIGNAL";
inline constexpr int kStackSignal = SIGURG;

// The module's text.
std::string_view PythonHookText();

// The hook's folder with the module in it, made (or checked) once per process; "" and *err when
// it cannot be made safely (no home, a folder another user could change).
std::string PythonHookDir(std::string* err);

// When `env` asks for the hook (ETRUN_STACK_SIGNAL set), puts its folder first on env's
// PYTHONPATH. False and *err when the folder could not be made: the rank then starts without it.
bool ApplyPythonHook(std::vector<std::string>* env, std::string* err);

}  // namespace etrun::launcher::hang

#endif  // ETRUN_LAUNCHER_HANG_PYTHON_HOOK_H_
