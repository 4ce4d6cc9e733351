#!/usr/bin/env bash
# SSH launch: 8 trivial ranks on 2 and on 8 loopback "hosts" (127.0.0.2...) through a private sshd
# started here with throwaway keys. Compares `etrun` with `mpirun` (its ssh launcher) and with a
# bash loop starting the same 8 `ssh host /bin/true` in parallel (the floor), using hyperfine.
# Targets: faster than mpirun and within 1.5x of the floor. Needs root (sshd), openssh-server.
# The clients run as a throwaway user (created here, removed at exit) whose shell reads no rc
# files worth measuring: every SSH session runs the user's shell, and a heavy ~/.bashrc (this
# machine's root runs `pyenv init`, ~0.36 s) would be timed once per rank for etrun and the
# floor but once per host for mpirun. BENCH_USER=root measures as root instead.
set -euo pipefail
cd "$(dirname "$0")/../.."
ETRUN=$(realpath "${ETRUN:-build/etrun}")
RUNS=${RUNS:-20}
work=$(mktemp -d)
cleanup() { [ -f "$work/sshd.pid" ] && kill "$(cat "$work/sshd.pid")" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.2", 0)); print(s.getsockname()[1])')
ssh-keygen -q -t ed25519 -N '' -f "$work/host_key"
ssh-keygen -q -t ed25519 -N '' -f "$work/key"
cp "$work/key.pub" "$work/authorized_keys"
{
  for i in 2 3 4 5 6 7 8 9; do echo "ListenAddress 127.0.0.$i:$port"; done
  echo "HostKey $work/host_key"; echo "AuthorizedKeysFile $work/authorized_keys"
  echo "PermitRootLogin prohibit-password"; echo "PasswordAuthentication no"; echo "UsePAM no"
  echo "StrictModes no"; echo "PidFile $work/sshd.pid"; echo "LogLevel ERROR"; echo "MaxStartups 200"
} > "$work/sshd_config"
mkdir -p /run/sshd
/usr/sbin/sshd -f "$work/sshd_config" -E "$work/sshd.log"
sleep 0.5
# Known hosts for every name, so no tool prints warnings.
mkdir -p "$work/home/.ssh"
for i in 2 3 4 5 6 7 8 9; do echo "[127.0.0.$i]:$port $(cut -d' ' -f1,2 "$work/host_key.pub")"; done > "$work/home/.ssh/known_hosts"
cp "$work/key" "$work/home/.ssh/id_ed25519"
user=${BENCH_USER:-etrunbench$$}
as_user=()
if [ "$user" != root ]; then
  # "*": no password, but not a locked account (sshd without PAM refuses locked ones).
  useradd -M -d "$work/home" -s /bin/bash -p "*" "$user"
  trap 'cleanup; userdel "$user" 2>/dev/null || true' EXIT
  : > "$work/home/.bashrc"
  chown -R "$user" "$work/home"
  chmod 755 "$work"
  as_user=(runuser -u "$user" --)
fi
export HOME=$work/home OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# ssh reads known_hosts from the passwd home, not $HOME: name the file.
ssh_opts="-p $port -i $work/home/.ssh/id_ed25519 -o BatchMode=yes -o LogLevel=ERROR -o UserKnownHostsFile=$work/home/.ssh/known_hosts"

for layout in "2 127.0.0.2:4,127.0.0.3:4" "8 127.0.0.2:1,127.0.0.3:1,127.0.0.4:1,127.0.0.5:1,127.0.0.6:1,127.0.0.7:1,127.0.0.8:1,127.0.0.9:1"; do
  read -r nhosts hosts <<< "$layout"
  targets=""
  for h in ${hosts//,/ }; do
    for _ in $(seq 1 "${h#*:}"); do targets+="${h%:*} "; done
  done
  echo "== 8 ranks on $nhosts hosts"
  "${as_user[@]}" env HOME="$HOME" hyperfine -N --warmup 2 --runs "$RUNS" --export-json "$HOME/r.json" ${HYPERFINE_ARGS:-} \
    -n floor "bash -c 'p=; for h in $targets; do ssh $ssh_opts \$h /bin/true & p=\"\$p \$!\"; done; for x in \$p; do wait \$x || exit 1; done'" \
    -n etrun "$ETRUN -np 8 -H $hosts -p $port -i $work/home/.ssh/id_ed25519 /bin/true" \
    -n mpirun "mpirun --oversubscribe --mca routed direct -np 8 -H $hosts --mca plm_rsh_args '$ssh_opts' /bin/true" \
    | grep -E "Benchmark|Time"
  python3 - "$HOME/r.json" "$nhosts" <<'PY'
import json, sys
r = {x["command"]: x["mean"] for x in json.load(open(sys.argv[1]))["results"]}
f, e, m = r["floor"], r["etrun"], r["mpirun"]
ok = e <= 1.5 * f and e < m
print(f"{sys.argv[2]} hosts: floor {f*1e3:.0f} ms, etrun {e*1e3:.0f} ms ({e/f:.2f}x floor, target <= 1.5), "
      f"mpirun {m*1e3:.0f} ms ({m/e:.1f}x etrun): {'PASS' if ok else 'FAIL'}")
open(sys.argv[1] + ".ok", "a").write("" if ok else "fail\n")
PY
done
[ ! -s "$HOME/r.json.ok" ]
