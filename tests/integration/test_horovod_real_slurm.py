"""Real Horovod 0.28.1 workers (horovod_worker.py) under etrun inside a real Slurm allocation on
the test bed (tests/integration/slurmbed.py): what test_slurm.py asserts of the stand-ins when a
node is set DOWN, plus the time it costs. Skipped as test_horovod_real.py is (ETRUN_HOROVOD_PATH,
set by scripts/test.sh) and where the machine cannot run the cluster."""
import re
import subprocess
import time

from conftest import ETRUN, PYTHON, processes_with_marker, wait_until
from slurmbed import cluster_fixture
from test_elastic_protocol import sizes_in_order
from test_horovod_real import HOROVOD_WORKER, Lines, RealJob, horovod_env, pytestmark  # noqa: F401
from test_multihost import marked_on
from test_slurm import scontrol

cluster = cluster_fixture(hosts=3)


class SlurmRealJob(RealJob):
    """An elastic job of real workers under `salloc -N<n> --no-kill` (a node failure does not end
    the allocation), etrun taking the allocation's nodes with no host flags."""

    def __init__(self, cluster, tmp_path, marker_env, nodes, steps):
        self.events = tmp_path / "events.jsonl"
        cmd = ["salloc", f"-N{nodes}", "--no-kill", ETRUN, "--min-np", "2", "--events-file",
               str(self.events), "--discovery-interval", "0.2", PYTHON, HOROVOD_WORKER,
               "--steps", str(steps), "--step-seconds", "0.05"]
        env = cluster.env(horovod_env(dict(marker_env, HOROVOD_GLOO_TIMEOUT_SECONDS="120")))
        self.proc = subprocess.Popen(cluster.exec_argv(cmd), env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
        self.out = Lines(self.proc.stdout)
        self.errors = Lines(self.proc.stderr)


def test_real_workers_survive_a_node_set_down_and_finish_on_the_others(cluster, tmp_path, marker_env):
    # h3 is set DOWN mid-training: Slurm kills its step, srun exits 0 without the rank's exit
    # record, so h3 is lost; the survivors' mesh is cut and the world resets to 2 with its state.
    marker = next(iter(marker_env.values()))
    job = SlurmRealJob(cluster, tmp_path, marker_env, 3, steps=400)
    try:
        assert job.step_at(3), job.err()
        assert marked_on(cluster.bed, "h3", marker)
        down = time.monotonic()
        scontrol(cluster, "update", "NodeName=h3", "State=DOWN", "Reason=etrun-test")
        smaller = job.step_at(2, after=down, timeout=60)
        assert smaller, job.err()
        assert job.finish() == 0, job.err()
    finally:
        scontrol(cluster, "update", "NodeName=h3", "State=RESUME")
    job.check_training(400)
    assert sizes_in_order(job.out.texts())[:2] == [3, 2]
    # srun says the node failed with exit 0, or, when slurmd was slow to kill the step, 137
    # ("task 0: Killed"): either way the step ended without the rank's own exit status.
    assert re.search(r"the srun step on h3 ended \(exit (0|137)\) without the rank's exit status",
                     job.err()), job.err()
    print(f"real Horovod: scontrol DOWN -> first step of the smaller world {smaller - down:.2f} s")
    assert smaller - down <= 5, f"DOWN -> first step of the smaller world {smaller - down:.2f} s"
    assert wait_until(lambda: processes_with_marker(marker) == [], timeout=20)
    cluster.wait_idle()
