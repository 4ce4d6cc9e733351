"""The agent where training runs in containers that have nothing of etrun's (issue 35): "pods"
that are folders holding only Debian's static busybox and its applet links, reached with
`--remote-shell 'chroot <pods>/{host}'`, as a Kubernetes pod is with `kubectl exec`. No loader,
no library, no /dev, no /proc: the agent must be brought, checked and run there. Also: files
planted where the bootstrap looks never run, and no variable's value stands on any command
line while a job starts, on pods and over SSH on the cluster bed.

Needs root (chroot), busybox-static, and a static etrun-agent beside etrun (a sanitizer build's
agent needs its runtime's libraries: these tests skip there, saying so)."""
import hashlib
import os
import re
import shutil
import subprocess
import threading
import time
import uuid

import pytest

from conftest import ETRUN, rank_lines, run_etrun, wait_until
from testbed import bed_fixture

BUSYBOX = "/bin/busybox"
AGENT = os.path.join(os.path.dirname(os.path.realpath(ETRUN)), "etrun-agent")


def static_agent():
    """Whether the agent beside etrun needs no loader (ELF without PT_INTERP)."""
    try:
        with open(AGENT, "rb") as f:
            data = f.read()
    except OSError:
        return False
    return b"/lib64/ld-linux" not in data[:4096] and data[:4] == b"\x7fELF"


def skip_reason():
    if os.geteuid() != 0:
        return "pods are chroot folders: root only"
    if not os.access(BUSYBOX, os.X_OK):
        return "no " + BUSYBOX + " (Debian's busybox-static; scripts/test.sh installs it)"
    if not static_agent():
        return "the etrun-agent beside " + ETRUN + " is not static (a sanitizer build's)"
    return ""


pytestmark = pytest.mark.skipif(skip_reason() != "", reason=skip_reason())


def make_pod(root):
    """A folder with only busybox and its applets: a container image of another world."""
    os.makedirs(os.path.join(root, "bin"))
    shutil.copy(BUSYBOX, os.path.join(root, "bin", "busybox"))
    applets = subprocess.run([BUSYBOX, "--list"], capture_output=True, text=True, check=True).stdout.split()
    for applet in applets:
        if applet != "busybox":
            os.symlink("busybox", os.path.join(root, "bin", applet))


@pytest.fixture
def pods(tmp_path):
    root = tmp_path / "pods"
    for name in ("pod1", "pod2"):
        make_pod(str(root / name))
    return root


def shell(pods):
    return ["--remote-shell", f"chroot {pods}/{{host}}"]


def agent_sha256():
    with open(AGENT, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def test_ranks_run_in_pods_that_have_only_busybox(pods):
    r = run_etrun(["-np", "4", "-H", "pod1:2,pod2:2", *shell(pods), "sh", "-c",
                   'echo "up $HOROVOD_RANK of $HOROVOD_SIZE"'], timeout=60)
    assert r.returncode == 0, r.stderr
    assert rank_lines(r.stdout.decode()) == {rank: [f"up {rank} of 4"] for rank in range(4)}
    # Each pod received the agent once, into a private cache named by its hash.
    for pod in ("pod1", "pod2"):
        cache = pods / pod / "root" / ".cache" / "etrun" / "agent"
        assert sorted(os.listdir(cache)) == [agent_sha256()]
        assert oct(os.stat(cache).st_mode & 0o777) == "0o700"
    # The next job finds it there: nothing is sent (the bootstrap asks for nothing).
    r = run_etrun(["-np", "2", "-H", "pod1:1,pod2:1", "--log-level", "DEBUG", *shell(pods), "true"],
                  timeout=60)
    assert r.returncode == 0, r.stderr
    assert b"sending this one" not in r.stderr, r.stderr


def test_a_rank_s_own_exit_code_comes_back_from_a_pod(pods):
    r = run_etrun(["-np", "2", "-H", "pod1:1,pod2:1", *shell(pods), "sh", "-c",
                   '[ "$HOROVOD_RANK" = 1 ] && { echo failing >&2; exit 7; }; sleep 30'], timeout=60)
    assert r.returncode == 7, r.stderr
    assert "[1]<stderr>:failing" in r.stderr.decode()


def test_an_elastic_job_grows_onto_a_pod_and_shrinks_off_it(pods, tmp_path, marker_env):
    # Restart mode (torchrun's semantics: the pod has no Python for Horovod's protocol): each
    # change starts the world afresh; a worker waits for a file named `done` in its directory,
    # which is the test's folder here and / in a pod (the test's folder is not there).
    hosts = tmp_path / "hosts"
    hosts.write_text("localhost:1\n")
    discover = tmp_path / "discover.sh"
    discover.write_text(f"#!/bin/sh\ncat {hosts}\n")
    discover.chmod(0o755)
    out, err = tmp_path / "out", tmp_path / "err"
    proc = subprocess.Popen(
        [ETRUN, "-np", "1", "--min-np", "1", "--max-np", "2", "--elastic-mode", "restart",
         "--host-discovery-script", str(discover), "--discovery-interval", "0.2", *shell(pods),
         "sh", "-c", 'echo "world $WORLD_SIZE on $(hostname)"; while [ ! -e done ]; do sleep 0.1; done'],
        cwd=tmp_path, env=dict(os.environ, **marker_env), stdout=open(out, "wb"), stderr=open(err, "wb"),
        stdin=subprocess.DEVNULL)
    try:
        assert wait_until(lambda: b"world 1" in out.read_bytes(), timeout=30), err.read_text()
        hosts.write_text("localhost:1\npod1:1\n")
        assert wait_until(lambda: out.read_bytes().count(b"world 2") == 2, timeout=30), err.read_text()
        hosts.write_text("localhost:1\n")
        assert wait_until(lambda: out.read_bytes().count(b"world 1") == 2, timeout=30), err.read_text()
        (tmp_path / "done").write_text("")
        (pods / "pod1" / "done").write_text("")
        assert proc.wait(timeout=30) == 0, err.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert out.read_text().count("world 2") == 2


def test_files_planted_where_the_bootstrap_looks_never_run(pods):
    # A program that leaves a marker, at the path of the launcher's own agent inside pod1 and at
    # the cache path of pod2: neither runs, and the job runs with a copy it checked.
    markers = []
    for pod, path in (("pod1", os.path.dirname(os.path.realpath(AGENT))[1:] + "/etrun-agent"),
                      ("pod2", "root/.cache/etrun/agent/" + agent_sha256())):
        planted = pods / pod / path
        planted.parent.mkdir(parents=True, exist_ok=True)
        marker = f"/planted-{pod}-ran"
        planted.write_text(f"#!/bin/sh\ntouch {marker}\n")
        planted.chmod(0o700)
        markers.append(pods / pod / marker[1:])
    os.chmod(pods / "pod2" / "root" / ".cache" / "etrun" / "agent", 0o700)
    r = run_etrun(["-np", "2", "-H", "pod1:1,pod2:1", *shell(pods), "sh", "-c", "echo ran"], timeout=60)
    assert r.returncode == 0, r.stderr
    assert rank_lines(r.stdout.decode()) == {0: ["ran"], 1: ["ran"]}
    for marker in markers:
        assert not marker.exists(), marker
    # pod2's planted copy was replaced by the verified one; pod1's file is left where it was.
    assert hashlib.sha256((pods / "pod2" / "root/.cache/etrun/agent" / agent_sha256()).read_bytes()).hexdigest() \
        == agent_sha256()


@pytest.mark.parametrize("who", ["world-writable", "another user's"])
def test_a_cache_folder_others_may_write_or_another_user_owns_is_never_used(pods, who):
    cache = pods / "pod1" / "root" / ".cache" / "etrun" / "agent"
    cache.mkdir(parents=True)
    shutil.copy(AGENT, cache / agent_sha256())  # the right bytes: still not used from there
    if who == "world-writable":
        os.chmod(cache, 0o777)
    else:
        os.chmod(cache, 0o700)
        os.chown(cache, 65534, 65534)
    r = run_etrun(["-np", "1", "-H", "pod1:1", *shell(pods), "true"], timeout=60)
    assert r.returncode == 255
    assert ("etrun: error: cannot keep etrun's agent in /root/.cache/etrun/agent: it is not a private "
            "folder of this user") in r.stderr.decode(), r.stderr


class CmdlinePoller:
    """Reads every process's /proc/*/cmdline every few milliseconds, keeping what holds `needle`."""

    def __init__(self, needle):
        self.needle = needle.encode()
        self.found = []
        self.reads = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while not self.stop.is_set():
            for pid in os.listdir("/proc"):
                if not pid.isdigit():
                    continue
                try:
                    with open(f"/proc/{pid}/cmdline", "rb") as f:
                        cmdline = f.read()
                except OSError:
                    continue
                self.reads += 1
                if self.needle in cmdline:
                    self.found.append(cmdline.replace(b"\0", b" ").decode(errors="replace"))
            time.sleep(0.002)

    def close(self):
        self.stop.set()
        self.thread.join()


RANK_CHECK = '[ "$MYSECRET" = "$EXPECTED" ] && echo "sees it" || echo "MISSING"'


def check_no_value_on_any_command_line(run):
    """Runs run(env) — 16 ranks that each check they have MYSECRET — while every process's
    command line is read every few milliseconds: the value is never on one, every rank has it."""
    secret = uuid.uuid4().hex
    poller = CmdlinePoller(secret)
    try:
        r = run({"MYSECRET": secret, "EXPECTED": secret})
    finally:
        poller.close()
    assert r.returncode == 0, r.stderr
    assert rank_lines(r.stdout.decode()) == {rank: ["sees it"] for rank in range(16)}
    assert poller.reads > 1000
    assert poller.found == []


def test_no_variable_value_on_any_command_line_in_pods(pods):
    check_no_value_on_any_command_line(lambda env: run_etrun(
        ["-np", "16", "-H", "pod1:8,pod2:8", *shell(pods), "sh", "-c", RANK_CHECK], env=env, timeout=60))


bed = bed_fixture(hosts=2, prefix="s")


def test_no_variable_value_on_any_command_line_over_ssh(bed):
    check_no_value_on_any_command_line(lambda env: subprocess.run(
        bed.exec_argv([ETRUN, "-np", "16", "-H", "s1:8,s2:8", "sh", "-c", RANK_CHECK]),
        env=bed.env(dict(os.environ, **env)), capture_output=True, timeout=120))


def test_a_hung_rank_in_a_pod_shows_its_state_through_the_agent(pods):
    """The hang watchdog's facts of a remote rank come from its host's agent: pod1 has /proc (as
    a Kubernetes pod does), pod2 none, so its rank can say nothing."""
    proc = pods / "pod1" / "proc"
    proc.mkdir()
    subprocess.run(["mount", "-t", "proc", "proc", str(proc)], check=True)
    try:
        r = run_etrun(["-np", "2", "-H", "pod1:1,pod2:1", *shell(pods), "--hang-timeout", "1",
                       "--hang-action", "abort", "sh", "-c", "sleep 1000"], timeout=60)
    finally:
        subprocess.run(["umount", "-l", str(proc)], check=True)
    assert r.returncode == 124, r.stderr
    verdict = [line for line in r.stderr.decode().splitlines() if line.startswith("etrun: hang: ")]
    assert len(verdict) == 1, r.stderr
    assert re.fullmatch(r"etrun: hang: no output for \d+ s: rank 0 on pod1 has no Python stack: "
                        r"state S \(sleeping\), waits in \w+: (sh -c sleep 1000; its child: state S "
                        r"\(sleeping\), waits in \w+: )?sleep 1000; rank 1 on pod2 gave neither a "
                        r"Python stack nor its state", verdict[0]), verdict
