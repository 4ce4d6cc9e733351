# Debian packages etrun needs to build, test, benchmark and run its examples (slurm-wlm and
# munge: the Slurm cluster on the test bed, scripts/slurmbed.py). Sourced by
# scripts/setup.sh and scripts/test.sh; `ensure_packages` installs only what is missing.
ETRUN_PACKAGES=(
  build-essential cmake pkg-config clang libclang-rt-14-dev
  libasan8 libtsan2 libubsan1
  libcli11-dev libboost-dev libboost-filesystem-dev libboost-system-dev
  libssh2-1-dev libssl-dev libopenmpi-dev openmpi-bin
  libspdlog-dev libfmt-dev doctest-dev nlohmann-json3-dev
  python3 python3-pytest python3-torch python3-mpi4py strace
  hyperfine wrk time procps openssh-server openssh-client shellcheck help2man
  slurm-wlm munge
)

ensure_packages() {
  local missing=()
  local pkg
  for pkg in "${ETRUN_PACKAGES[@]}"; do
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
