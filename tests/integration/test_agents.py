"""One agent per remote host (launcher/agent/): a job of 256 ranks over SSH and through a remote
shell holds one connection and at most one process per host on the launcher's side, and a host
whose file system has no etrun gets the launcher's own build over that connection, cached per
user, or says in one line why it cannot."""
import hashlib
import os
import subprocess
import tempfile
import time

import pytest

from conftest import ETRUN, processes_with_marker, rank_lines, wait_until
from testbed import bed_fixture

HOSTS = 4
PER_HOST = 64  # 4 x 64 = 256 ranks

bed = bed_fixture(hosts=HOSTS, prefix="a")

BED_SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                          "scripts", "testbed.py")


def host_list(per_host=PER_HOST):
    return ",".join(f"a{i}:{per_host}" for i in range(1, HOSTS + 1))


def descendants(pid):
    """The processes below `pid` on this machine (by their parents in /proc)."""
    children = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def run_counting(bed, argv, marker_env):
    """Runs etrun on the launcher's side; returns (result, the most processes below it seen)."""
    proc = subprocess.Popen(bed.exec_argv(argv), env=bed.env(dict(os.environ, **marker_env)),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    most = 0
    while proc.poll() is None:
        most = max(most, len(descendants(proc.pid)))
        time.sleep(0.05)
    out, err = proc.communicate(timeout=120)
    return subprocess.CompletedProcess(argv, proc.returncode, out, err), most


def check_all_up(r):
    assert r.returncode == 0, r.stderr.decode()[-3000:]
    lines = rank_lines(r.stdout.decode())
    assert sorted(lines) == list(range(HOSTS * PER_HOST))
    assert all(lines[rank] == [f"up {rank}"] for rank in lines)


def test_256_ranks_over_ssh_are_four_agents_and_no_process_per_rank(bed, marker_env):
    # The bed's sshds keep their default MaxSessions (10): one channel per host is all etrun opens.
    r, most = run_counting(bed, [ETRUN, "-np", str(HOSTS * PER_HOST), "-H", host_list(), "sh", "-c",
                                 'echo "up $HOROVOD_RANK"; sleep 1'], marker_env)
    check_all_up(r)
    # Below etrun (unshare's sh execs it): its guardian only, no process per rank or host
    # (the SSH connections are threads).
    assert most <= 2, most
    marker = next(iter(marker_env.values()))
    assert wait_until(lambda: not processes_with_marker(marker), timeout=20), processes_with_marker(marker)


def test_256_ranks_through_a_remote_shell_are_one_command_per_host(bed, marker_env, tmp_path):
    log = tmp_path / "shells.log"
    shell = f"sh -c 'echo \"$1\" >> {log}; shift; exec \"$@\"' shell {{host}} /usr/bin/python3 {BED_SCRIPT} host --dir {bed.dir} {{host}} --"
    r = subprocess.run(bed.exec_argv([ETRUN, "-np", str(HOSTS * PER_HOST), "-H", host_list(),
                                      "--remote-shell", shell, "sh", "-c", 'echo "up $HOROVOD_RANK"']),
                       env=bed.env(dict(os.environ, **marker_env)), capture_output=True, timeout=120)
    check_all_up(r)
    assert sorted(log.read_text().split()) == [f"a{i}" for i in range(1, HOSTS + 1)]
    marker = next(iter(marker_env.values()))
    assert wait_until(lambda: not processes_with_marker(marker), timeout=20), processes_with_marker(marker)


@pytest.fixture
def hidden(bed):
    """Hides, on a2 only, the directory of the launcher's etrun and root's etrun cache: a host
    with nothing of etrun on it. Yields a2's (empty) cache directory, as this machine sees it, and
    where a2 sees it."""
    empty = tempfile.mkdtemp(prefix="etrun-no-binary-")
    cache = tempfile.mkdtemp(prefix="etrun-cache-")
    build = os.path.dirname(os.path.realpath(ETRUN))
    home_cache = os.path.expanduser("~/.cache")
    os.makedirs(home_cache, exist_ok=True)
    for source, target in ((empty, build), (cache, home_cache)):
        r = bed.run_host("a2", ["mount", "--bind", source, target])
        assert r.returncode == 0, r.stderr
    try:
        yield cache, home_cache
    finally:
        for target in (home_cache, build):
            bed.run_host("a2", ["umount", target])


def test_a_host_without_etrun_gets_this_build_once_and_keeps_it(bed, hidden):
    argv = [ETRUN, "--log-level", "DEBUG", "-np", "4", "-H", "a1:2,a2:2", "sh", "-c",
            'echo "up $HOROVOD_RANK $(hostname)"']
    r = bed.run_launcher(argv, timeout=60)
    assert r.returncode == 0, r.stderr
    lines = rank_lines(r.stdout)
    assert {rank: lines[rank] for rank in lines} == {0: ["up 0 a1"], 1: ["up 1 a1"], 2: ["up 2 a2"],
                                                     3: ["up 3 a2"]}
    assert "a2: no usable etrun there; sending this one" in r.stderr
    assert "a1: no usable etrun there" not in r.stderr
    # The agent etrun carries, kept once in a2's cache under its SHA-256 (no temporary left).
    agents = [os.path.join(root, name) for root, _, names in os.walk(hidden[0]) for name in names]
    with open(os.path.join(os.path.dirname(os.path.realpath(ETRUN)), "etrun-agent"), "rb") as f:
        mine = f.read()
    assert agents == [os.path.join(hidden[0], "etrun", "agent", hashlib.sha256(mine).hexdigest())], agents
    with open(agents[0], "rb") as theirs:
        assert theirs.read() == mine
    # The next job finds it in the cache: nothing is sent again.
    r = bed.run_launcher(argv, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "no usable etrun there" not in r.stderr


def test_a_host_that_cannot_store_the_agent_fails_its_ranks_in_one_line(bed, hidden):
    r = bed.run_host("a2", ["mount", "-o", "remount,bind,ro", hidden[1]])
    assert r.returncode == 0, r.stderr
    r = bed.run_launcher([ETRUN, "-np", "2", "-H", "a1:1,a2:1", "true"], timeout=60)
    assert r.returncode != 0
    assert f"etrun: error: cannot create {hidden[1]}/etrun/agent to keep etrun's agent in" in r.stderr, r.stderr
    assert "rank 1 on a2" in r.stderr, r.stderr


def gpu_shell(bed, tmp_path, gpus_by_host, prefix=""):
    """A remote shell into the bed whose hosts each have their own nvidia-smi on PATH, listing
    gpus_by_host[host] GPUs (failing when that is None: the tool must not be asked), with
    `prefix` ("VAR=value ...") in the agent's environment, as a Slurm step's would be."""
    for host, count in gpus_by_host.items():
        bin_dir = tmp_path / host
        bin_dir.mkdir()
        smi = bin_dir / "nvidia-smi"
        smi.write_text("#!/bin/sh\n[ \"$1\" = -L ] || exit 64\n" +
                       ("echo asked >&2; exit 9\n" if count is None else
                        "".join(f"echo 'GPU {i}: NVIDIA Fake (UUID: GPU-{host}-{i})'\n" for i in range(count))))
        smi.chmod(0o755)
    return (f"/usr/bin/python3 {BED_SCRIPT} host --dir {bed.dir} {{host}} -- "
            f"env {prefix} PATH={tmp_path}/{{host}}:/usr/bin:/bin")


def devices(stdout):
    return {rank: lines[0] for rank, lines in rank_lines(stdout).items()}


SHOW_DEVICES = ["sh", "-c", 'echo "${CUDA_VISIBLE_DEVICES-unset}"']


def test_remote_hosts_count_their_own_gpus_and_hand_them_out(bed, tmp_path, marker_env):
    # a1 has 4 GPUs, a2 has 2; the launcher's own CUDA_VISIBLE_DEVICES (one GPU) is this machine's
    # and counts for no remote host.
    shell = gpu_shell(bed, tmp_path, {"a1": 4, "a2": 2})
    env = bed.env(dict(os.environ, CUDA_VISIBLE_DEVICES="9", **marker_env))
    r = subprocess.run(bed.exec_argv([ETRUN, "-np", "5", "-H", "a1:3,a2:2", "--gpus-per-rank", "1",
                                      "--remote-shell", shell] + SHOW_DEVICES),
                       env=env, capture_output=True, timeout=120, text=True)
    assert r.returncode == 0, r.stderr
    assert devices(r.stdout) == {0: "0", 1: "1", 2: "2", 3: "0", 4: "1"}
    assert r.stderr == ""
    r = subprocess.run(bed.exec_argv([ETRUN, "-np", "4", "-H", "a1:2,a2:2", "--ranks-per-gpu", "2",
                                      "--remote-shell", shell] + SHOW_DEVICES),
                       env=env, capture_output=True, timeout=120, text=True)
    assert r.returncode == 0, r.stderr
    assert devices(r.stdout) == {0: "0", 1: "0", 2: "0", 3: "0"}


def test_a_hosts_own_cuda_visible_devices_wins_over_nvidia_smi(bed, tmp_path):
    # As in a Slurm step given GPUs: the agent's CUDA_VISIBLE_DEVICES lists the host's GPUs for the
    # job, and nvidia-smi is not asked.
    shell = gpu_shell(bed, tmp_path, {"a3": None}, prefix="CUDA_VISIBLE_DEVICES=GPU-x,GPU-y")
    r = bed.run_launcher([ETRUN, "-np", "2", "-H", "a3:2", "--gpus-per-rank", "1", "--remote-shell", shell]
                         + SHOW_DEVICES, timeout=120)
    assert r.returncode == 0, r.stderr
    assert devices(r.stdout) == {0: "GPU-x", 1: "GPU-y"}
    assert "asked" not in r.stderr


def test_a_remote_host_with_too_few_gpus_fails_its_ranks_in_one_line_each(bed, tmp_path, marker_env):
    shell = gpu_shell(bed, tmp_path, {"a1": 4, "a2": 2})
    r = subprocess.run(bed.exec_argv([ETRUN, "-np", "4", "-H", "a1:2,a2:2", "--gpus-per-rank", "2",
                                      "--remote-shell", shell, "sleep", "30"]),
                       env=bed.env(dict(os.environ, **marker_env)), capture_output=True, timeout=120,
                       text=True)
    assert r.returncode == 2, r.stderr
    said = rank_lines(r.stderr, "stderr")
    assert said[3] == ["etrun: error: agent on a2: --gpus-per-rank 2: local rank 1 needs GPUs 2-3 but "
                       "this host has 2 (nvidia-smi -L): lower --gpus-per-rank or a2's slots"], r.stderr
    assert set(said) == {3}, r.stderr
    marker = next(iter(marker_env.values()))
    assert wait_until(lambda: not processes_with_marker(marker), timeout=20), processes_with_marker(marker)


def test_ssh_as_the_remote_shell_finds_the_launchers_etrun_and_sends_nothing(bed):
    # ssh joins its arguments into one line that the login shell parses again; kubectl passes them
    # on as they are. The agent's bootstrap reaches the host whole either way: here it finds the
    # launcher's own etrun (a shared file system) instead of receiving a copy.
    r = bed.run_launcher([ETRUN, "--log-level", "DEBUG", "-np", "4", "-H", "a1:2,a2:2",
                          "--remote-shell", "ssh {host}", "sh", "-c", 'echo "up $HOROVOD_RANK $(hostname)"'],
                         timeout=60)
    assert r.returncode == 0, r.stderr
    lines = rank_lines(r.stdout)
    assert {rank: lines[rank] for rank in lines} == {0: ["up 0 a1"], 1: ["up 1 a1"], 2: ["up 2 a2"],
                                                     3: ["up 3 a2"]}
    assert "agent up after" in r.stderr
    assert "no usable etrun there" not in r.stderr, r.stderr


def test_preflight_names_a_remote_host_with_too_few_gpus_before_any_rank_starts(bed, tmp_path, marker_env):
    shell = gpu_shell(bed, tmp_path, {"a1": 4, "a2": 2})
    r = subprocess.run(bed.exec_argv([ETRUN, "-np", "4", "-H", "a1:2,a2:2", "--gpus-per-rank", "2",
                                      "--preflight", "--remote-shell", shell, "sleep", "30"]),
                       env=bed.env(dict(os.environ, **marker_env)), capture_output=True, timeout=120,
                       text=True)
    assert r.returncode == 3, r.stderr
    assert r.stderr.splitlines() == [
        "etrun: error: pre-flight: a2: --gpus-per-rank 2: 2 ranks on this host need 4 GPUs but it has "
        "2 (nvidia-smi -L): lower -np, lower --gpus-per-rank or add hosts",
        "etrun: error: pre-flight found 1 of 2 hosts sick (a2): nothing was started; fix it or leave "
        "it out, or run anyway with --preflight=warn"], r.stderr
    assert r.stdout == ""
