"""Preemption and time limits (docs/slurm.md): the example batch script
scripts/examples/slurm/train.sbatch under a real Slurm 22.05 (tests/integration/slurmbed.py), on
three nodes, training checkpoint_worker.py (one checkpoint per rank). SIGTERM to the batch shell
(what `--signal=B:TERM@N` sends before a time limit) drains etrun, which exits 143, and the
script requeues the job; its next run resumes from the checkpoints. Skipped with one line where
the machine cannot run the cluster."""
import json
import os
import re
import shutil
import subprocess
import time

import pytest

from conftest import ETRUN, PYTHON, ROOT, processes_with_marker, rank_lines, wait_until
from slurmbed import cluster_fixture

cluster = cluster_fixture(hosts=3)

EXAMPLE = os.path.join(ROOT, "scripts", "examples", "slurm", "train.sbatch")
TRAINER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "checkpoint_worker.py")
STEPS = 40


class BatchJob:
    """train.sbatch submitted with sbatch -N3 in tmp_path, etrun training TRAINER."""

    def __init__(self, cluster, tmp_path, marker_env):
        self.cluster = cluster
        self.dir = tmp_path
        self.marker = next(iter(marker_env.values()))
        r = cluster.run_launcher(
            ["sbatch", "--parsable", "-N3", "-D", str(tmp_path), EXAMPLE, PYTHON, TRAINER,
             "--steps", str(STEPS), "--dir", str(tmp_path), "--step-seconds", "0.05"],
            env=dict(os.environ, ETRUN=ETRUN, **marker_env), timeout=60)
        assert r.returncode == 0, r.stderr
        self.id = r.stdout.strip()
        self.out = tmp_path / f"train-{self.id}.out"

    def text(self):
        return self.out.read_text() if self.out.exists() else ""

    def ranks(self):
        """rank -> its stdout lines, both runs."""
        return rank_lines(self.text())

    def info(self):
        """scontrol's fields of the job (JobState, Restarts, ExitCode, ...)."""
        r = self.cluster.run_launcher(["scontrol", "-o", "show", "job", self.id], timeout=30)
        assert r.returncode == 0, r.stderr
        return dict(f.split("=", 1) for f in r.stdout.split() if "=" in f)

    def events(self, run):
        path = self.dir / f"etrun-{self.id}.{run}.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()]

    def wait_training(self, step):
        assert wait_until(lambda: all(f"step {step} rank {r}" in self.ranks().get(r, [])
                                      for r in range(3)), timeout=90), self.text()

    def scancel(self, *args):
        r = self.cluster.run_launcher(["scancel", *args, self.id], timeout=30)
        assert r.returncode == 0, r.stderr

    def wait_state(self, state, passing=("RUNNING", "COMPLETING", "REQUEUED"), timeout=90):
        """Waits while the job's state is one of `passing`; fails unless it then is `state`."""
        wait_until(lambda: self.info().get("JobState") not in passing, timeout=timeout,
                   interval=0.2)
        info = self.info()
        assert info.get("JobState") == state, (info, self.text())
        return info


def steps_in(lines):
    """The step numbers of a rank's `step <k> rank <r>` lines, in order."""
    found = (re.fullmatch(r"step (\d+) rank \d+", line) for line in lines)
    return [int(m.group(1)) for m in found if m]


@pytest.mark.parametrize("how", ["--batch", "--full", "steps"])
def test_a_batch_job_signalled_mid_training_drains_exits_143_is_requeued_and_resumes(
        cluster, tmp_path, marker_env, how):
    # `scancel --batch --signal=TERM` signals the batch shell alone, as `--signal=B:TERM@N` does
    # before the time limit; `--full` the shell's process group too (etrun runs in a session of
    # its own). Either way etrun gets one SIGTERM, from the script's trap. Without either
    # (`steps`), as preemption with GraceTime does, Slurm signals only the job's steps: the ranks
    # on h2 and h3 get SIGTERM from Slurm, their wrappers say so and their stubs pass it on to
    # etrun, which drains the whole job the same way.
    # Mid-training: preemption comes later than the steps' first 0.3 s. A rank that drained
    # could end by a second SIGTERM (code None, seen under ASan): Slurm's own signal and etrun's
    # drain both reach the ranks, and Python restores SIGTERM's default action while it exits;
    # checkpoint_worker.py ignores SIGTERM once it has saved, as docs/slurm.md advises.
    job = BatchJob(cluster, tmp_path, marker_env)
    job.wait_training(10)
    job.scancel(*([how] if how != "steps" else []), "--signal=TERM")
    info = job.wait_state("PENDING")  # requeued; Slurm holds it back (BeginTime) for 2 minutes
    requeued_by = time.time()
    assert info["Restarts"] == "1", info
    # The first run drained: every rank finished its step, saved it and exited 0 on SIGTERM;
    # etrun exited 143 and said why; nothing of the run is left on any node.
    first = job.events(0)
    assert first[-1]["event"] == "job_end", first
    end = first[-1]
    assert (end["exit_code"], end["cause"]) == (143, "received SIGTERM: stopped 3 ranks"), end
    exited = sorted((e["rank"], e["host"], e["reason"], e["code"]) for e in first
                    if e["event"] == "rank_exited")
    # On failure, everything that says who ended a rank how: the events and the job's output.
    assert exited == [(0, "h1", "stopped", 0), (1, "h2", "stopped", 0), (2, "h3", "stopped", 0)], \
        (first, job.text())
    assert f"train.sbatch: job {job.id} run 0: etrun exited 143" in job.text()
    assert "again" not in job.text()  # no second SIGTERM cut the grace period short
    assert wait_until(lambda: processes_with_marker(job.marker) == [], timeout=20), \
        [open(f"/proc/{p}/cmdline").read() for p in processes_with_marker(job.marker)]
    drained = {r: int(re.fullmatch(r"drained (\d+) rank \d+", lines[-1]).group(1))
               for r, lines in job.ranks().items()}
    assert sorted(drained) == [0, 1, 2] and min(drained.values()) >= 11, job.text()
    # The second run resumes each rank from its checkpoint and finishes: every step once.
    # Let it start now (slurm.conf's AuthInfo cred_expire sets the wait; slurmd refuses a launch
    # in the second in which the job's last run was killed).
    assert wait_until(lambda: time.time() >= int(requeued_by) + 1, timeout=5)
    r = cluster.run_launcher(["scontrol", "update", f"JobId={job.id}", "StartTime=now"], timeout=30)
    assert r.returncode == 0, r.stderr
    info = job.wait_state("COMPLETED", passing=("PENDING", "CONFIGURING", "RUNNING", "COMPLETING"))
    assert info["ExitCode"] == "0:0", (info, job.text())
    second = job.events(1)
    assert (second[-1]["exit_code"], second[-1]["cause"]) == (0, ""), second
    for rank, lines in job.ranks().items():
        assert f"resume {drained[rank]} rank {rank}" in lines, lines
        assert steps_in(lines) == list(range(STEPS)), lines
        assert lines[-1] == f"done {STEPS} rank {rank}", lines
    assert f"train.sbatch: job {job.id} run 1: etrun exited 0" in job.text()
    assert wait_until(lambda: processes_with_marker(job.marker) == [], timeout=20)
    cluster.wait_idle()


def test_a_cancelled_batch_job_ends_and_is_not_requeued(cluster, tmp_path, marker_env):
    # Plain scancel signals every process of the job (etrun more than once: directly, through
    # the trap and from the steps; one stop all the same); etrun exits 143 but the job is
    # COMPLETING, not RUNNING, so the script leaves it cancelled.
    job = BatchJob(cluster, tmp_path, marker_env)
    job.wait_training(3)
    job.scancel()
    info = job.wait_state("CANCELLED")
    assert info["Restarts"] == "0", info
    assert job.events(0)[-1]["exit_code"] == 143
    assert wait_until(lambda: processes_with_marker(job.marker) == [], timeout=20)
    assert job.info()["JobState"] == "CANCELLED"
    cluster.wait_idle()


def test_the_example_is_executable_bash_that_shellcheck_accepts():
    # Installed alone (share/etrun/examples/slurm/) and copied by sbatch into Slurm's spool: it
    # may name no neighbour of its own.
    assert os.access(EXAMPLE, os.X_OK)
    assert shutil.which("shellcheck"), "shellcheck is missing: scripts/deps.sh lists it"
    r = subprocess.run(["shellcheck", EXAMPLE], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout
    assert "$0" not in open(EXAMPLE).read()
