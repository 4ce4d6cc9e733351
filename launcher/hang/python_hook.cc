#include "launcher/hang/python_hook.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <mutex>

#include "launcher/process/environment.h"

namespace etrun::launcher::hang {

namespace {

constexpr std::string_view kHook = R"PY(# etrun's stack-dump hook (launcher/hang/python_hook.h): under `etrun --hang-timeout`, this
# rank's first Python process dumps every thread's stack to stderr on ETRUN_STACK_SIGNAL, then the
# sitecustomize this one hides runs as it would have.
import os as _os
import sys as _sys


def _etrun_register():
    try:
        signum = int(_os.environ.get("ETRUN_STACK_SIGNAL", "0"))
        owner = _os.environ.get("ETRUN_STACK_OWNER")
        if signum <= 0 or (owner and owner != str(_os.getpid())):
            return
        import faulthandler
        faulthandler.register(signum, file=2, all_threads=True, chain=False)
        _os.environ["ETRUN_STACK_OWNER"] = str(_os.getpid())
        _os.register_at_fork(after_in_child=lambda: faulthandler.unregister(signum))
    except Exception:
        pass


def _etrun_chain():
    # The next sitecustomize.py on sys.path, run as Python would have run it. Found and executed
    # here rather than through importlib.util, whose import alone would cost a few milliseconds.
    here = _os.path.dirname(_os.path.abspath(__file__))
    for entry in _sys.path:
        folder = _os.path.abspath(entry or ".")
        if folder == here:
            continue
        path = _os.path.join(folder, "sitecustomize.py")
        if _os.path.isfile(path):
            module = type(_sys)("sitecustomize")
            module.__file__ = path
            _sys.modules["sitecustomize"] = module
            with open(path, "rb") as f:
                code = compile(f.read(), path, "exec")
            exec(code, module.__dict__)
            return
        if _os.path.isdir(_os.path.join(folder, "sitecustomize")):
            import importlib.machinery
            import importlib.util
            spec = importlib.machinery.PathFinder.find_spec("sitecustomize", [folder])
            if spec is not None and spec.loader is not None:
                module = importlib.util.module_from_spec(spec)
                _sys.modules["sitecustomize"] = module
                spec.loader.exec_module(module)
            return


_etrun_register()
_etrun_chain()
)PY";

uint64_t Fnv1a(std::string_view text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

// mkdir -m 0700 of `from` and each folder below it on the way to `path`, where missing; `path`
// must then be this user's and writable by nobody else (it may have been there).
bool MakePrivateDirs(const std::string& from, const std::string& path, std::string* err) {
  for (size_t end = from.size(); end != std::string::npos; end = path.find('/', end + 1)) {
    std::string part = path.substr(0, end);
    if (mkdir(part.c_str(), 0700) != 0 && errno != EEXIST) {
      *err = "cannot create " + part + ": " + strerror(errno);
      return false;
    }
  }
  if (mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) {
    *err = "cannot create " + path + ": " + strerror(errno);
    return false;
  }
  struct stat st;
  if (lstat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid() ||
      (st.st_mode & 022) != 0) {
    *err = path + " is not a folder of this user's that only it may change";
    return false;
  }
  // Every folder above it too, as the agent's bootstrap checks its cache: this user's or root's,
  // and writable by no one else unless sticky (/tmp), so nobody can swap the path's folders.
  for (std::string up = path.substr(0, path.rfind('/')); !up.empty(); up = up.substr(0, up.rfind('/'))) {
    if (stat(up.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) ||
        (st.st_uid != geteuid() && st.st_uid != 0) ||
        ((st.st_mode & 022) != 0 && (st.st_mode & S_ISVTX) == 0)) {
      *err = up + " (above " + path + ") is a folder others may change";
      return false;
    }
  }
  return true;
}

bool SameContent(const std::string& file, std::string_view text) {
  int fd = open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return false;
  struct stat st;
  bool same = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
              (st.st_mode & 022) == 0 && static_cast<size_t>(st.st_size) == text.size();
  std::string got;
  if (same) {
    got.resize(text.size());
    same = read(fd, got.data(), got.size()) == static_cast<ssize_t>(got.size()) && got == text;
  }
  close(fd);
  return same;
}

std::string MakeHookDir(std::string* err) {
  std::string base;
  if (const char* cache = getenv("XDG_CACHE_HOME"); cache != nullptr && cache[0] == '/') {
    base = cache;
  } else if (const char* home = getenv("HOME"); home != nullptr && home[0] == '/') {
    base = std::string(home) + "/.cache";
  } else {
    *err = "neither XDG_CACHE_HOME nor HOME names a folder";
    return "";
  }
  char hash[17];
  snprintf(hash, sizeof(hash), "%016llx", static_cast<unsigned long long>(Fnv1a(kHook)));
  std::string dir = base + "/etrun/python/" + hash;
  if (!MakePrivateDirs(base, dir, err)) return "";
  std::string file = dir + "/sitecustomize.py";
  if (SameContent(file, kHook)) return dir;
  char host[64] = {};
  gethostname(host, sizeof(host) - 1);
  // Named by host and pid: agents on hosts that share a home must not write the same file.
  std::string partial = file + "." + host + "." + std::to_string(getpid());
  int fd = open(partial.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    *err = "cannot write " + partial + ": " + strerror(errno);
    return "";
  }
  bool ok = write(fd, kHook.data(), kHook.size()) == static_cast<ssize_t>(kHook.size());
  ok = close(fd) == 0 && ok;
  if (!ok || rename(partial.c_str(), file.c_str()) != 0) {
    *err = "cannot write " + file + ": " + strerror(errno);
    unlink(partial.c_str());
    return "";
  }
  return dir;
}

}  // namespace

std::string_view PythonHookText() { return kHook; }

std::string PythonHookDir(std::string* err) {
  static std::mutex mutex;
  static std::string dir, why;
  static bool tried = false;
  std::lock_guard<std::mutex> lock(mutex);
  if (!tried) {
    dir = MakeHookDir(&why);
    tried = true;
  }
  if (dir.empty()) *err = why;
  return dir;
}

bool ApplyPythonHook(std::vector<std::string>* env, std::string* err) {
  // Whose stacks a process dumps is decided in the rank, never inherited from the launcher's own
  // environment (etrun started from a hooked process).
  std::erase_if(*env, [](const std::string& kv) { return kv.starts_with("ETRUN_STACK_OWNER="); });
  if (EnvValue(*env, kStackSignalVar).empty()) return true;
  std::string dir = PythonHookDir(err);
  if (dir.empty()) return false;
  std::string path = EnvValue(*env, "PYTHONPATH");
  *env = OverlayEnvironment(std::move(*env), {"PYTHONPATH=" + dir + (path.empty() ? "" : ":" + path)});
  return true;
}

}  // namespace etrun::launcher::hang
