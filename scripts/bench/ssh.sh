#!/usr/bin/env bash
# SSH launch: 8 trivial ranks on 2 and on 8 loopback "hosts" (127.0.0.2...) through a private sshd
# started here with throwaway keys. Compares `etrun` with `mpirun` (its ssh launcher) and with a
# bash loop starting the same 8 `ssh host /bin/true` in parallel (the floor), using hyperfine.
# Targets: faster than mpirun and within 1.5x of the floor. Needs root (sshd), openssh-server.
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
export HOME=$work/home OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# ssh reads known_hosts from the passwd home, not $HOME: name the file.
ssh_opts="-p $port -i $work/key -o BatchMode=yes -o LogLevel=ERROR -o UserKnownHostsFile=$work/home/.ssh/known_hosts"

for layout in "2 127.0.0.2:4,127.0.0.3:4" "8 127.0.0.2:1,127.0.0.3:1,127.0.0.4:1,127.0.0.5:1,127.0.0.6:1,127.0.0.7:1,127.0.0.8:1,127.0.0.9:1"; do
  read -r nhosts hosts <<< "$layout"
  targets=""
  for h in ${hosts//,/ }; do
    for _ in $(seq 1 "${h#*:}"); do targets+="${h%:*} "; done
  done
  echo "== 8 ranks on $nhosts hosts"
  hyperfine -N --warmup 2 --runs "$RUNS" --export-json "$work/r.json" ${HYPERFINE_ARGS:-} \
    -n floor "bash -c 'p=; for h in $targets; do ssh $ssh_opts \$h /bin/true & p=\"\$p \$!\"; done; for x in \$p; do wait \$x || exit 1; done'" \
    -n etrun "$ETRUN -np 8 -H $hosts -p $port -i $work/key /bin/true" \
    -n mpirun "mpirun --oversubscribe --mca routed direct -np 8 -H $hosts --mca plm_rsh_args '$ssh_opts' /bin/true" \
    | grep -E "Benchmark|Time"
  python3 - "$work/r.json" "$nhosts" <<'PY'
import json, sys
r = {x["command"]: x["mean"] for x in json.load(open(sys.argv[1]))["results"]}
f, e, m = r["floor"], r["etrun"], r["mpirun"]
ok = e <= 1.5 * f and e < m
print(f"{sys.argv[2]} hosts: floor {f*1e3:.0f} ms, etrun {e*1e3:.0f} ms ({e/f:.2f}x floor, target <= 1.5), "
      f"mpirun {m*1e3:.0f} ms ({m/e:.1f}x etrun): {'PASS' if ok else 'FAIL'}")
open(sys.argv[1] + ".ok", "a").write("" if ok else "fail\n")
PY
done
[ ! -s "$work/r.json.ok" ]
