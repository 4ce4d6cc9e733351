# Debian packages etrun needs. ETRUN_PACKAGES: to build it, run it (SSH and --mpi ranks) and run
# its examples (PyTorch); scripts/setup.sh installs these. ETRUN_TEST_PACKAGES: what only the test
# suite and the benchmarks use (sanitizer runtimes and clang for the fuzzer, pytest, sshd for the
# test bed's hosts, slurm-wlm and munge for the Slurm cluster on the test bed, shellcheck, load
# and timing tools, and what building real Horovod for its tests needs: scripts/horovod.sh);
# scripts/test.sh installs both. `ensure_packages [PKG...]` installs those of
# the given packages (default: ETRUN_PACKAGES) that are missing.
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
  slurm-wlm munge
  libtorch-dev pybind11-dev python3-dev python3-cffi python3-cloudpickle python3-psutil
  python3-yaml python3-packaging python3-setuptools python3-wheel python3-pip libeigen3-dev
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
  "${sudo[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}
