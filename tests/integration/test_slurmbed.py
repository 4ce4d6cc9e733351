"""The Slurm cluster on the test bed itself (scripts/slurmbed.py, tests/integration/slurmbed.py):
Debian's slurmctld here and a slurmd on each of h1..h3 run jobs from either side, steps run in
their host's network namespace, nodes go DOWN and come back, and nothing is left after `down`.
Skipped with one line where the machine allows no network namespaces or lacks slurm-wlm/munge."""
import os
import re
import signal
import socket
import subprocess

import pytest

from conftest import PYTHON, processes_with_marker, wait_until
from slurmbed import SCRIPT, SKIP_EXIT, Unsupported, cluster_fixture, up
from testbed import up as bed_up

cluster = cluster_fixture(hosts=3)


def ok(r):
    assert r.returncode == 0, (r.stdout, r.stderr)
    return r.stdout


def job_state(cluster, job):
    """squeue's state of `job` ("PENDING", "RUNNING", "COMPLETED", ...), "" once slurmctld has
    forgotten it."""
    return cluster.run_launcher(["squeue", "-h", "-j", job, "-o", "%T"]).stdout.strip()


def test_srun_on_the_launchers_side_runs_a_task_on_each_node(cluster):
    out = ok(cluster.run_launcher(["srun", "-N3", "hostname"], timeout=30))
    assert sorted(out.split()) == ["h1", "h2", "h3"]


def test_a_step_runs_in_its_hosts_network_namespace_from_either_side(cluster):
    show = ["sh", "-c", 'echo "$(hostname) $(ip -o -4 addr show eth0 | awk \'{print $4}\')"']
    out = ok(cluster.run_launcher(["srun", "-N3", *show], timeout=30))
    assert sorted(out.splitlines()) == [f"{h.name} {h.address}/24" for h in cluster.bed.hosts]
    # A client on a host (srun on h1) reaches slurmctld at the launcher's address and h3's
    # slurmd; the step's output comes back to h1.
    out = ok(cluster.run_host("h1", ["srun", "-w", "h3", *show], timeout=30))
    assert out == f"h3 {cluster.bed.host('h3').address}/24\n"


def test_an_sbatch_job_runs_on_a_node_and_writes_its_output_file(cluster, tmp_path):
    # Submitted on the launcher's side and on a host (h3), in the submitter's directory.
    sbatch = ["sbatch", "--parsable", "-o", "out.%j", "--wrap", "hostname; echo done"]
    jobs = {ok(cluster.run_launcher([*sbatch, "-w", "h2"], cwd=str(tmp_path), timeout=30)).strip():
            "h2",
            ok(subprocess.run(cluster.host_argv("h3", [*sbatch, "-w", "h1"], cwd=str(tmp_path)),
                              env=cluster.host_env(), capture_output=True, text=True,
                              timeout=30)).strip(): "h1"}
    for job, node in jobs.items():
        assert re.fullmatch(r"\d+", job)
        out = tmp_path / f"out.{job}"
        assert wait_until(lambda: job_state(cluster, job) in ("", "COMPLETED") and out.exists(),
                          timeout=30)
        assert out.read_text() == f"{node}\ndone\n"


def test_salloc_grants_two_nodes_and_srun_inside_runs_on_them(cluster):
    script = ('echo "$SLURM_JOB_NODELIST"; scontrol show hostnames "$SLURM_JOB_NODELIST"; '
              'echo ==; srun hostname')
    r = cluster.run_launcher(["salloc", "-N2", "sh", "-c", script], timeout=30)
    head, _, ran = ok(r).partition("==\n")
    nodelist, *nodes = head.split()
    assert len(nodes) == 2 and set(nodes) <= {"h1", "h2", "h3"}, r.stdout
    assert nodelist in ("h[1-2]", "h[1,3]", "h[2-3]")
    assert sorted(ran.split()) == nodes
    assert "Granted job allocation" in r.stderr


def test_a_node_set_down_gets_no_job_until_resumed(cluster):
    ok(cluster.run_launcher(["scontrol", "update", "NodeName=h2", "State=DOWN", "Reason=test"]))
    try:
        assert cluster.node_states()["h2"] == "down"
        # It stays down while its slurmd answers pings and registration requests (one or two a
        # second with SlurmdTimeout=5; ReturnToService=2 would return it within about 4 s).
        assert not wait_until(lambda: cluster.node_states()["h2"] != "down", timeout=6,
                              interval=0.5)
        reason = ok(cluster.run_launcher(["sinfo", "-h", "-n", "h2", "-o", "%E"])).strip()
        assert reason == "test"
        assert sorted(ok(cluster.run_launcher(["srun", "-N2", "hostname"], timeout=30)).split()) \
            == ["h1", "h3"]
        r = cluster.run_launcher(["srun", "-w", "h2", "--immediate=1", "true"], timeout=30)
        assert r.returncode != 0
    finally:
        ok(cluster.run_launcher(["scontrol", "update", "NodeName=h2", "State=RESUME"]))
    cluster.wait_idle(["h2"], timeout=20)
    assert ok(cluster.run_launcher(["srun", "-w", "h2", "hostname"], timeout=30)) == "h2\n"


def test_scancel_ends_a_running_job_and_its_processes(cluster, marker, marker_env):
    env = dict(os.environ, **marker_env)
    job = ok(cluster.run_launcher(["sbatch", "--parsable", "-w", "h3", "-o", "/dev/null",
                                   "--wrap", "srun sleep 300"], env=env, timeout=30)).strip()
    assert wait_until(lambda: job_state(cluster, job) == "RUNNING", timeout=30)
    assert wait_until(lambda: len(processes_with_marker(marker)) >= 2, timeout=30)  # script, sleep
    ok(cluster.run_launcher(["scancel", job]))
    assert wait_until(lambda: job_state(cluster, job) in ("", "CANCELLED"), timeout=30)
    assert wait_until(lambda: processes_with_marker(marker) == [], timeout=30)


def test_a_node_whose_slurmd_dies_goes_down_and_returns_once_it_is_back(cluster):
    # SlurmdTimeout=5: slurmctld notices within seconds; ReturnToService=1: the node returns to
    # service as soon as its slurmd registers again.
    pid = cluster.slurmd_pid("h3")
    assert pid
    os.kill(pid, signal.SIGKILL)
    assert wait_until(lambda: cluster.node_states()["h3"].startswith("down"), timeout=30,
                      interval=0.2)
    assert cluster.slurmd_pid("h3") is None
    cluster.start_slurmd("h3")
    cluster.wait_idle(["h3"], timeout=20)
    assert ok(cluster.run_launcher(["srun", "-w", "h3", "hostname"], timeout=30)) == "h3\n"


def slurm_processes(c):
    """PIDs of processes carrying cluster c's SLURM_CONF or marks (zombies aside)."""
    marks = {f"SLURM_CONF={c.conf}", f"ETRUN_SLURMBED={c.name}", f"SLURM_CLUSTER_NAME={c.name}"}
    return [p for m in marks for p in processes_with_marker(m)]


def port_is_free(port):
    """Whether nothing listens on `port` (its connections' TIME_WAIT aside)."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("0.0.0.0", port))
            return True
        except OSError:
            return False


def test_down_leaves_no_process_file_or_mount_and_only_its_own_bed_goes(tmp_path, marker,
                                                                         marker_env):
    # Slurm on a bed made beforehand: down stops Slurm, its jobs and clients, and keeps the bed.
    directory = str(tmp_path / "bed")
    try:
        bed = bed_up(directory, hosts=2)
    except Unsupported as e:
        pytest.skip(str(e))
    try:
        try:
            c = up(directory, cpus=2)
        except Unsupported as e:
            pytest.skip(str(e))
        assert not c.owns_bed and c.nodes == ["h1", "h2"]
        env = dict(os.environ, **marker_env)
        ok(c.run_launcher(["sbatch", "-N2", "-o", "/dev/null", "--wrap", "srun sleep 300"],
                          env=env))
        # A step whose task leaves its session, and a client waiting for its step.
        client = subprocess.Popen(c.exec_argv(["srun", "-w", "h1", "sh", "-c",
                                               "setsid sleep 300 </dev/null >/dev/null 2>&1 & "
                                               "sleep 300"]), env=c.env(env),
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        # The batch script, its srun and two sleeps; the client, its shell and two sleeps.
        assert wait_until(lambda: len(processes_with_marker(marker)) >= 8, timeout=30)
        assert slurm_processes(c) and os.path.exists(c.dir) and not port_is_free(c.port)
        c.down()
        c.down()  # idempotent
        assert client.wait(timeout=10) == -9
        assert slurm_processes(c) == []
        assert processes_with_marker(marker) == []
        assert not os.path.exists(c.dir) and port_is_free(c.port)
        with open("/proc/self/mountinfo") as f:
            assert [line for line in f if c.dir in line] == []
        # The bed is still there and whole.
        assert bed.run_host("h2", ["hostname"]).stdout == "h2\n"
        assert sorted(os.listdir(directory)) == ["bed.json", "bin", "etc", "home", "hosts",
                                                 "launcher.hosts", "log", "run"]
    finally:
        bed.down()
    assert not os.path.exists(directory)


def test_down_of_a_cluster_that_made_its_bed_removes_the_bed_too(tmp_path):
    directory = str(tmp_path / "bed")
    r = subprocess.run([PYTHON, SCRIPT, "up", "--dir", directory, "--hosts", "1"],
                       capture_output=True, text=True, timeout=60)
    if r.returncode == SKIP_EXIT:
        pytest.skip(r.stderr.strip())
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[-1] == f"export SLURM_CONF={directory}/slurm/slurm.conf"
    tag = int(re.search(r"cluster etbd(\d+) ", r.stdout).group(1))
    r = subprocess.run([PYTHON, SCRIPT, "exec", "--dir", directory, "--", "srun", "hostname"],
                       capture_output=True, text=True, timeout=60)
    assert (r.returncode, r.stdout) == (0, "h1\n"), r.stderr
    r = subprocess.run([PYTHON, SCRIPT, "down", "--dir", directory], capture_output=True,
                       text=True, timeout=60)
    assert (r.returncode, r.stdout, r.stderr) == (0, "", "")
    assert not os.path.exists(directory)
    assert f"etbd{tag}-" not in subprocess.run(["ip", "netns", "list"], capture_output=True,
                                               text=True).stdout


def test_where_slurm_is_missing_up_says_why_in_one_line_and_exits_77(tmp_path):
    # slurmctld unusable (not executable) in a mount namespace of its own; and not root.
    cases = [(["unshare", "--mount", "--propagation", "private", "sh", "-c",
               'mount --bind /dev/null /usr/sbin/slurmctld && exec "$@"', "-"],
              "slurmbed: missing slurmctld (Debian packages slurm-wlm and munge: ")]
    with open("/proc/self/uid_map") as f:
        if os.geteuid() == 0 and f.read().split() == ["0", "0", "4294967295"]:
            cases.append((["runuser", "-u", "nobody", "--"], "testbed: needs root "))
    ran = 0
    for prefix, why in cases:
        r = subprocess.run([*prefix, PYTHON, SCRIPT, "up", "--dir", str(tmp_path / "x")],
                           capture_output=True, text=True, timeout=60)
        if r.returncode != SKIP_EXIT and r.stderr.startswith(prefix[0] + ":"):
            continue  # this machine cannot make that world either
        ran += 1
        assert r.returncode == SKIP_EXIT, r.stderr
        assert r.stdout == "" and r.stderr.count("\n") == 1 and r.stderr.startswith(why), r.stderr
        assert not (tmp_path / "x").exists()
    if not ran:
        pytest.skip("no world without Slurm or root can be made here (unshare --mount refused)")
