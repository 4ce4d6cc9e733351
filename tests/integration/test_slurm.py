"""etrun inside a real Slurm allocation (tests/integration/slurmbed.py: slurmctld here, a slurmd
per test-bed host h1..h3, each with its own network namespace, name and eth0): with no -H and no
flags etrun takes the allocation's nodes and starts ranks there through `srun --overlap`, with no
sshd or key involved. Skipped with one line where the machine cannot run the cluster."""
import os
import re
import signal
import subprocess
import time

import pytest

from conftest import ETRUN, PYTHON, WORKER, processes_with_marker, rank_lines, wait_until
from slurmbed import cluster_fixture
from test_elastic_protocol import STANDIN, sizes_in_order
from test_multihost import BedJob, marked_on

cluster = cluster_fixture(hosts=3)

HOROVOD_STANDIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "horovod_standin.py")
SHOW = f'echo "$(hostname) $HOROVOD_GLOO_IFACE $SLURM_STEP_ID"; exec {PYTHON} {HOROVOD_STANDIN}'


def check_ranks(stdout):
    # One rank per node, in Slurm's node order, each told its own eth0, each run as a Slurm step
    # (SLURM_STEP_ID set: srun started it), and the Horovod-protocol rendezvous across them.
    lines = rank_lines(stdout)
    assert sorted(lines) == [0, 1, 2], stdout
    for rank in range(3):
        host, iface, step = lines[rank][0].split(" ")
        assert (host, iface) == (f"h{rank + 1}", "eth0"), lines
        assert re.fullmatch(r"\d+", step), lines
        assert lines[rank][1:] == [f"rendezvous ok rank {rank}"], lines


def test_inside_salloc_ranks_run_on_the_allocations_nodes_through_srun(cluster, marker_env):
    # salloc's shell runs on the launching machine, which is no node: every rank goes through
    # srun; -np defaults to the allocation's slots (one per node here).
    marker = next(iter(marker_env.values()))
    r = cluster.run_launcher(["salloc", "-N3", ETRUN, "sh", "-c", SHOW],
                             env=dict(os.environ, **marker_env), timeout=120)
    assert r.returncode == 0, r.stderr
    check_ranks(r.stdout)
    assert "etrun: " not in r.stderr, r.stderr  # no warning, no error
    assert wait_until(lambda: processes_with_marker(marker) == [], timeout=20)


def test_an_sbatch_job_runs_etrun_on_its_first_node_and_the_others_through_srun(cluster, tmp_path):
    # The batch script runs on h1: h1's rank is a local process, h2's and h3's srun steps.
    out = tmp_path / "job.out"
    script = tmp_path / "job.sh"
    script.write_text(f"#!/bin/sh\n{ETRUN} sh -c '{SHOW}'\necho \"etrun exit $?\"\n")
    script.chmod(0o755)
    r = cluster.run_launcher(["sbatch", "-N3", "-o", str(out), str(script)], timeout=60)
    assert r.returncode == 0, r.stderr
    assert wait_until(lambda: out.exists() and "etrun exit" in out.read_text(), timeout=90), \
        out.read_text() if out.exists() else "no output file"
    text = out.read_text()
    assert "etrun exit 0" in text, text
    lines = rank_lines(text)
    assert lines[0][0].split(" ")[:2] == ["h1", "eth0"], text
    assert lines[0][0].split(" ")[2] == "", text  # local to the batch step: no srun
    assert [lines[r][0].split(" ")[:2] for r in (1, 2)] == [["h2", "eth0"], ["h3", "eth0"]], text


def test_256_ranks_inside_salloc_are_one_srun_step_per_node(cluster, marker_env):
    # 86 slots on each of the 3 nodes (ETRUN_SLURM_SLOTS), 256 ranks: each node's ranks run
    # under its one agent, so the job makes 3 steps, not 256.
    marker = next(iter(marker_env.values()))
    r = cluster.run_launcher(["salloc", "-N3", ETRUN, "-np", "256", "sh", "-c",
                              'echo "up $HOROVOD_RANK $(hostname) $SLURM_STEP_ID"'],
                             env=dict(os.environ, ETRUN_SLURM_SLOTS="86", **marker_env), timeout=180)
    assert r.returncode == 0, r.stderr
    lines = rank_lines(r.stdout)
    assert sorted(lines) == list(range(256))
    steps = set()
    for rank, said in lines.items():
        up, number, host, step = said[0].split(" ")
        assert (up, number, host) == ("up", str(rank), f"h{rank // 86 + 1}"), said
        steps.add((host, step))
    assert len({step for _, step in steps}) == 3, steps  # one step per node, its ranks share it
    assert wait_until(lambda: processes_with_marker(marker) == [], timeout=20)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_etrun_stopped_or_killed_inside_salloc_leaves_nothing_on_any_node(cluster, marker_env, sig):
    # SIGTERM: etrun stops its ranks (the stubs close srun's stdin, the wrapper stops the rank).
    # SIGKILL: the stubs die with etrun (parent-death signal), srun with them, and Slurm's step
    # cleanup ends what ran on the nodes.
    marker = next(iter(marker_env.values()))
    proc = subprocess.Popen(cluster.exec_argv(["salloc", "-N3", ETRUN, PYTHON, WORKER, "sleep"]),
                            env=cluster.env(dict(os.environ, **marker_env)),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    ready = 0
    while ready < 3:
        line = proc.stdout.readline()
        assert line, proc.stderr.read()
        ready += line.endswith(b"ready\n")
    etrun = [p for p in processes_with_marker(marker)  # etrun itself, not its stubs (__...)
             if open(f"/proc/{p}/cmdline", "rb").read().split(b"\0")[:2] == [ETRUN.encode(), PYTHON.encode()]]
    assert etrun
    started = time.monotonic()
    os.kill(min(etrun), sig)  # etrun, not its guardian (forked later)
    proc.communicate(timeout=60)
    assert wait_until(lambda: processes_with_marker(marker) == [], timeout=30), \
        [open(f"/proc/{p}/cmdline").read() for p in processes_with_marker(marker)]
    assert time.monotonic() - started < 60


class SlurmJob(BedJob):
    """An elastic job under `salloc -N<n> --no-kill` (a node failure does not end the allocation),
    etrun taking the allocation's nodes with no host flags, polling them every 0.2 s; Gloo's
    timeout (the stand-in's) is 120 s, so a survivor that waits for it fails the test."""

    def __init__(self, cluster, tmp_path, marker_env, nodes, steps, extra=()):
        self.bed = cluster.bed
        self.events = tmp_path / "events.jsonl"
        self.out_path = tmp_path / "out.txt"
        self.err_path = tmp_path / "err.txt"
        cmd = ["salloc", f"-N{nodes}", "--no-kill", ETRUN, "--min-np", "2", "--events-file",
               str(self.events), "--discovery-interval", "0.2", *extra, PYTHON, STANDIN,
               "--steps", str(steps), "--step-seconds", "0.05", "--timeout", "120"]
        self.proc = subprocess.Popen(cluster.exec_argv(cmd),
                                     env=cluster.env(dict(os.environ, **marker_env,
                                                          HOROVOD_GLOO_TIMEOUT_SECONDS="120")),
                                     stdout=open(self.out_path, "wb"), stderr=open(self.err_path, "wb"),
                                     stdin=subprocess.DEVNULL)


def scontrol(cluster, *args):
    r = cluster.run_launcher(["scontrol", *args], timeout=30)
    assert r.returncode == 0, r.stderr


def test_an_elastic_job_survives_a_node_set_down_and_finishes_on_the_others(cluster, tmp_path, marker_env):
    # h3 is set DOWN mid-training: Slurm kills its step and srun exits 0 ("Node failure"); the
    # missing exit record makes it a lost host: blacklisted, the world resets to 2 with its state
    # and every step is committed once. Nothing of the job is left on h3.
    marker = next(iter(marker_env.values()))
    job = SlurmJob(cluster, tmp_path, marker_env, 3, steps=200)
    try:
        assert job.wait_for_size(3), job.err()
        assert marked_on(cluster.bed, "h3", marker)
        scontrol(cluster, "update", "NodeName=h3", "State=DOWN", "Reason=etrun-test")
        assert job.wait_for_size(2, timeout=60), job.err()
        assert job.finish() == 0, job.err()
    finally:
        scontrol(cluster, "update", "NodeName=h3", "State=RESUME")
    job.check_training(200)
    assert sizes_in_order(job.lines())[:2] == [3, 2]
    # srun says the node failed with exit 0, or, when slurmd was slow to kill the step, 137
    # ("task 0: Killed"): either way the step ended without the rank's own exit status.
    assert re.search(r"the srun step on h3 ended \(exit (0|137)\) without the rank's exit status",
                     job.err()), job.err()
    blacklisted = [e for e in job.event_list() if e["event"] == "host_blacklisted"]
    assert [(e["host"], e["reason"]) for e in blacklisted] == [("h3", "cannot be reached")]
    assert wait_until(lambda: processes_with_marker(marker) == [], timeout=20)
    cluster.wait_idle()


def job_id(cluster):
    r = cluster.run_launcher(["squeue", "-h", "-o", "%i"], timeout=30)
    assert r.returncode == 0 and len(r.stdout.split()) == 1, (r.stdout, r.stderr)
    return r.stdout.split()[0]


def test_an_elastic_job_follows_its_allocation_shrinking(cluster, tmp_path, marker_env):
    # `scontrol update JobId=... NumNodes=2` releases h3: Slurm ends the step there at once and
    # the next squeue poll no longer lists h3; the job trains on at 2 and finishes, h3 is idle.
    marker = next(iter(marker_env.values()))
    job = SlurmJob(cluster, tmp_path, marker_env, 3, steps=200)
    assert job.wait_for_size(3), job.err()
    scontrol(cluster, "update", f"JobId={job_id(cluster)}", "NumNodes=2")
    assert job.wait_for_size(2, timeout=60), job.err()
    assert wait_until(lambda: marked_on(cluster.bed, "h3", marker) == [], timeout=20)
    assert cluster.node_states()["h3"] == "idle"
    assert job.finish() == 0, job.err()
    job.check_training(200)
    assert sizes_in_order(job.lines())[:2] == [3, 2]
    assert wait_until(lambda: processes_with_marker(marker) == [], timeout=20)


def test_an_elastic_job_grows_onto_another_allocation_and_drains_when_it_ends(cluster, tmp_path, marker_env):
    # The job runs on a 2-node allocation with --add-slurm-jobs spare: a later `sbatch -J spare`
    # holding h3 adds h3 (its rank through srun --jobid=<spare>), and `scancel` of that job takes
    # h3 away again. Twice: the second spare job's h3 is a new lease, not the blacklisted host of
    # the first. The training never stops and keeps every step once.
    marker = next(iter(marker_env.values()))
    job = SlurmJob(cluster, tmp_path, marker_env, 2, steps=500,
                   extra=["--add-slurm-jobs", "spare"])
    spares = []
    try:
        assert job.wait_for_size(2), job.err()
        for _ in range(2):
            r = cluster.run_launcher(["sbatch", "--parsable", "-J", "spare", "-N1", "-w", "h3",
                                      "-o", "/dev/null", "--wrap", "sleep 300"], timeout=30)
            assert r.returncode == 0, r.stderr
            spares.append(r.stdout.strip())
            assert job.wait_for_size(3, timeout=60), job.err()
            assert marked_on(cluster.bed, "h3", marker)
            assert cluster.run_launcher(["scancel", spares[-1]], timeout=30).returncode == 0
            assert job.wait_for_size(2, timeout=60), job.err()
            assert wait_until(lambda: marked_on(cluster.bed, "h3", marker) == [], timeout=20)
            cluster.wait_idle(["h3"])
        assert job.finish() == 0, job.err()
    finally:
        for spare in spares:
            cluster.run_launcher(["scancel", spare], timeout=30)
    job.check_training(500)
    assert sizes_in_order(job.lines())[:5] == [2, 3, 2, 3, 2]
    assert wait_until(lambda: processes_with_marker(marker) == [], timeout=20)
    cluster.wait_idle()


def test_an_elastic_job_survives_a_node_whose_slurmd_is_killed(cluster, tmp_path, marker_env):
    # h3's slurmd dies: its step runs on (and says it is alive) until slurmctld declares the node
    # DOWN (SlurmdTimeout, 5 s on the bed) and srun reports the node failure; then as for a node
    # set DOWN. Once the slurmd is back, nothing of the job is left on h3.
    marker = next(iter(marker_env.values()))
    job = SlurmJob(cluster, tmp_path, marker_env, 3, steps=500)
    try:
        assert job.wait_for_size(3), job.err()
        os.kill(cluster.slurmd_pid("h3"), signal.SIGKILL)
        assert job.wait_for_size(2, timeout=90), job.err()
    finally:
        if cluster.slurmd_pid("h3") is None:
            cluster.start_slurmd("h3")
    assert job.finish() == 0, job.err()
    # ReturnToService=1 brings h3 back once its slurmd registers; RESUME if it is still DOWN.
    cluster.run_launcher(["scontrol", "update", "NodeName=h3", "State=RESUME"], timeout=30)
    job.check_training(500)
    assert sizes_in_order(job.lines())[:2] == [3, 2]
    assert "srun: error: Node failure on h3" in job.err(), job.err()
    assert wait_until(lambda: marked_on(cluster.bed, "h3", marker) == [], timeout=30)
    cluster.wait_idle(timeout=60)


def test_an_elastic_job_survives_a_node_whose_link_is_cut(cluster, tmp_path, marker_env):
    # h3's link is cut: no RST comes, and Slurm would take far longer than Gloo's timeout to call
    # h3 down. Its rank's alive records stop: after --lost-host-timeout (3 s) the stub gives up
    # on srun, h3 is lost, and the survivors' sockets to it are cut through srun (ss -K on h1 and
    # h2), so their collective fails now and the world resets to 2 with its state. After the heal,
    # the stranded rank on h3 is gone.
    marker = next(iter(marker_env.values()))
    job = SlurmJob(cluster, tmp_path, marker_env, 3, steps=400,
                   extra=["--log-level", "INFO"])
    stranded = []
    try:
        assert job.wait_for_size(3), job.err()
        stranded = marked_on(cluster.bed, "h3", marker)
        assert stranded
        cluster.bed.cut("h3")
        try:
            assert job.wait_for_size(2, timeout=60), job.err()
        finally:
            cluster.bed.heal("h3")
        assert job.finish(timeout=120) == 0, job.err()
    finally:
        cluster.run_launcher(["scontrol", "update", "NodeName=h3", "State=RESUME"], timeout=30)
    job.check_training(400)
    assert sizes_in_order(job.lines())[:2] == [3, 2]
    err = job.err()
    assert "etrun: error: no answer from h3 for 3 s (--lost-host-timeout): the host's ranks are lost" in err, err
    assert "host h3 is lost: its peers' connections to it are cut on h1, h2" in err, err
    assert wait_until(lambda: not any(os.path.exists(f"/proc/{p}") for p in stranded), timeout=60), \
        [open(f"/proc/{p}/cmdline").read() for p in stranded if os.path.exists(f"/proc/{p}")]
    assert wait_until(lambda: processes_with_marker(marker) == [], timeout=30)
    cluster.wait_idle(timeout=60)
