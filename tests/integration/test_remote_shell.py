"""--remote-shell: remote ranks started through a command instead of SSH (Kubernetes' `kubectl
exec`), with a fake kubectl that runs the command on this machine as if in the named pod. Exit
codes, signals and no orphans as over SSH; a pod whose kubectl dies is lost and blacklisted."""
import json
import os
import signal
import subprocess
import time

import pytest

from conftest import ETRUN, processes_with_marker, run_etrun, wait_until

KUBECTL = r'''#!/bin/sh
# kubectl exec -i POD -n NS -- CMD...: runs CMD here, as if in POD; logs POD to $KUBECTL_LOG.
[ "$1" = exec ] && [ "$2" = -i ] || { echo "fake kubectl: unexpected $*" >&2; exit 2; }
pod=$3; shift 3
while [ "$#" -gt 0 ] && [ "$1" != "--" ]; do shift; done
shift
echo "$pod" >> "$KUBECTL_LOG"
if [ "$pod" = "${KUBECTL_DIE:-}" ]; then
  # The connection drops: the command loses its stdin (the remote side sees the channel close)
  # and kubectl dies.
  "$@" < /dev/null &
  sleep 0.5
  kill -9 $$
fi
exec "$@"
'''


@pytest.fixture
def kubectl(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    path = bin_dir / "kubectl"
    path.write_text(KUBECTL)
    path.chmod(0o755)
    return path


def env_for(kubectl, marker_env=None, **extra):
    env = dict(os.environ, KUBECTL_LOG=str(kubectl.parent / "pods.log"), **extra)
    env.update(marker_env or {})
    return env


def shell_args(kubectl):
    return ["--remote-shell", f"{kubectl} exec -i {{host}} -n training --", "--network-interface", "lo"]


def test_remote_ranks_run_through_the_command_with_env_prefixes_cwd_and_exit_code(kubectl, tmp_path):
    r = run_etrun([*shell_args(kubectl), "-np", "3", "-H", "pod-a:2,pod-b:1", "sh", "-c",
                   'echo "$HOROVOD_HOSTNAME $HOROVOD_RANK $HOROVOD_LOCAL_RANK $(pwd)"; '
                   '[ "$HOROVOD_RANK" = 2 ] && { sleep 1; exit 5; }; exit 0'],
                  env=env_for(kubectl), cwd=tmp_path)
    assert r.returncode == 5, r.stderr
    lines = sorted(r.stdout.decode().splitlines())
    assert lines == [f"[0]<stdout>:pod-a 0 0 {tmp_path}", f"[1]<stdout>:pod-a 1 1 {tmp_path}",
                     f"[2]<stdout>:pod-b 2 0 {tmp_path}"]
    assert "etrun: error: rank 2 on pod-b exited with code 5" in r.stderr.decode()
    # One kubectl exec per pod, whatever its number of ranks: the pod's agent runs them.
    assert sorted((kubectl.parent / "pods.log").read_text().split()) == ["pod-a", "pod-b"]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_stopping_or_killing_etrun_leaves_no_remote_rank_running(kubectl, tmp_path, marker, marker_env, sig):
    p = subprocess.Popen([ETRUN, *shell_args(kubectl), "-np", "2", "-H", "pod-a:1,pod-b:1",
                          "sh", "-c", "echo ready; exec sleep 600"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path,
                         env=env_for(kubectl, marker_env))
    try:
        for _ in range(2):
            assert p.stdout.readline().endswith(b"ready\n")
        p.send_signal(sig)
        p.wait(timeout=60)
        if sig == signal.SIGTERM:
            assert p.returncode == 128 + signal.SIGTERM
        assert wait_until(lambda: not processes_with_marker(marker), timeout=30), \
            processes_with_marker(marker)
    finally:
        p.kill()
        p.wait()


def test_a_pod_whose_remote_shell_dies_is_lost_and_blacklisted(kubectl, tmp_path, marker, marker_env):
    # Restart mode blacklists no host for a crash, but a lost connection is not a crash: as over
    # SSH, the pod is blacklisted and the job goes on without it.
    hosts = tmp_path / "hosts"
    hosts.write_text("pod-a:1\npod-b:1\n")
    script = tmp_path / "discover.sh"
    script.write_text(f"#!/bin/sh\ncat {hosts}\n")
    script.chmod(0o755)
    events = tmp_path / "events.jsonl"
    r = run_etrun([*shell_args(kubectl), "-np", "2", "--min-np", "1", "--host-discovery-script",
                   str(script), "--elastic-mode", "restart", "--events-file", str(events),
                   "sh", "-c", 'echo "$HOROVOD_HOSTNAME size $HOROVOD_SIZE"; sleep 2'],
                  env=env_for(kubectl, marker_env, KUBECTL_DIE="pod-b"), cwd=tmp_path, timeout=120)
    assert r.returncode == 0, r.stderr
    evs = [json.loads(line) for line in events.read_text().splitlines()]
    lost = [e for e in evs if e["event"] == "rank_exited" and e["host"] == "pod-b"]
    assert lost and lost[0]["code"] == 255, lost
    assert [e["host"] for e in evs if e["event"] == "host_blacklisted"] == ["pod-b"]
    assert [e["world_size"] for e in evs if e["event"] == "round"][-1] == 1
    assert "remote shell for pod-b was killed by signal 9" in r.stderr.decode()
    assert wait_until(lambda: not processes_with_marker(marker), timeout=30), \
        processes_with_marker(marker)


def test_a_remote_shell_without_host_is_a_usage_error():
    r = run_etrun(["--remote-shell", "kubectl exec -i -- ", "-np", "1", "true"])
    assert r.returncode == 2
    assert r.stderr.decode() == (
        "etrun: error: --remote-shell 'kubectl exec -i -- ' does not name the host: write {host} "
        "where it goes, e.g. --remote-shell 'kubectl exec -i {host} --'\n")
