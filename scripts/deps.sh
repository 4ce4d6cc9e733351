# Debian packages etrun needs. ETRUN_PACKAGES: to build it, run it (SSH and --mpi ranks) and run
# its examples (PyTorch); scripts/setup.sh installs these. ETRUN_TEST_PACKAGES: what only the test
# suite and the benchmarks use (sanitizer runtimes and clang for the fuzzer, pytest, sshd for the
# test bed's hosts, slurm-wlm and munge for the Slurm cluster on the test bed, busybox-static for
# the agent's container tests (test_pods), shellcheck, load
# and timing tools, and what building real Horovod for its tests needs: scripts/horovod.sh);
# scripts/test.sh installs both (python3-venv: the wheel's test, test_wheel). `ensure_packages [PKG...]` installs those of
# the given packages (default: ETRUN_PACKAGES) that are missing. When another apt or dpkg holds
# the package locks (a fresh machine's own updates often do), it says so in one line and waits,
# at most ETRUN_APT_LOCK_TIMEOUT seconds (default 600), then fails with one line.
ETRUN_PACKAGES=(
  build-essential cmake pkg-config
  libcli11-dev libboost-dev libboost-filesystem-dev libboost-system-dev
  libssh2-1-dev libssl-dev libopenmpi-dev openmpi-bin
  libspdlog-dev libfmt-dev doctest-dev nlohmann-json3-dev
  python3 python3-torch procps openssh-client help2man
)
ETRUN_TEST_PACKAGES=(
  clang libclang-rt-14-dev libasan8 libtsan2 libubsan1
  python3-pytest python3-mpi4py strace hyperfine wrk time openssh-server shellcheck
  slurm-wlm munge busybox-static
  libtorch-dev pybind11-dev python3-dev python3-cffi python3-cloudpickle python3-psutil
  python3-yaml python3-packaging python3-setuptools python3-wheel python3-pip python3-venv
  libeigen3-dev
)

ensure_packages() {
  local missing=()
  local pkg
  local wanted=("$@")
  if [ ${#wanted[@]} -eq 0 ]; then wanted=("${ETRUN_PACKAGES[@]}"); fi
  for pkg in "${wanted[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
      missing+=("$pkg")
    fi
  done
  if [ ${#missing[@]} -eq 0 ]; then
    return 0
  fi
  echo "etrun: installing missing packages: ${missing[*]}" >&2
  local sudo=()
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null; then sudo=(sudo); else
      echo "etrun: error: missing packages ${missing[*]}: run as root or install them with apt-get" >&2
      return 1
    fi
  fi
  local timeout="${ETRUN_APT_LOCK_TIMEOUT:-600}"
  # apt waits for the locks itself too (DPkg::Lock::Timeout), should one be taken after the wait.
  local wait=(-o "DPkg::Lock::Timeout=$timeout")
  wait_for_apt_locks "$timeout" || return 1
  "${sudo[@]}" apt-get "${wait[@]}" update -qq
  wait_for_apt_locks "$timeout" || return 1
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get "${wait[@]}" install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# The locks apt and dpkg take; ETRUN_APT_LOCKS (space-separated) replaces them in tests.
apt_lock_files() {
  if [ -n "${ETRUN_APT_LOCKS:-}" ]; then echo "$ETRUN_APT_LOCKS"; return; fi
  echo /var/lib/dpkg/lock-frontend /var/lib/dpkg/lock /var/lib/apt/lists/lock /var/cache/apt/archives/lock
}

# Prints "FILE PID" for the first lock file some process holds (fcntl or flock, as /proc/locks
# lists them); nothing when all are free.
apt_lock_holder() {
  local file inode fields
  for file in $(apt_lock_files); do
    inode=$(stat -c %i "$file" 2>/dev/null) || continue
    while read -r -a fields; do
      # "N: POSIX ADVISORY WRITE PID MAJ:MIN:INODE START END"; waiters ("->") are not holders.
      if [ "${fields[1]:-}" != "->" ] && [ "${fields[5]##*:}" = "$inode" ]; then
        echo "$file ${fields[4]}"
        return 0
      fi
    done < /proc/locks
  done
  return 0
}

# Waits until no apt lock is held, saying so once, for at most $1 seconds; false (with one
# error line) when one is still held then.
wait_for_apt_locks() {
  local timeout="$1" waited=0 held
  held=$(apt_lock_holder)
  [ -z "$held" ] && return 0
  echo "etrun: another apt or dpkg is running (${held% *} is held by pid ${held##* }): waiting for it, at most $timeout s (ETRUN_APT_LOCK_TIMEOUT)" >&2
  while [ -n "$held" ]; do
    if [ "$waited" -ge "$timeout" ]; then
      echo "etrun: error: another apt or dpkg still holds the package lock (${held% *}, pid ${held##* }) after $timeout s: let it finish (or stop it), then run this again" >&2
      return 1
    fi
    sleep 1
    waited=$((waited + 1))
    held=$(apt_lock_holder)
  done
}
