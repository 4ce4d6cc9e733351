"""A real Slurm cluster on the cluster test bed (scripts/slurmbed.py) for pytest: slurmctld on
this machine, one slurmd on each of the bed's hosts h1..hK, each node with `cpus` CPUs.

    from slurmbed import cluster_fixture
    cluster = cluster_fixture(hosts=3)  # a module-scoped fixture named `cluster`

    def test_x(cluster):
        cluster.run_launcher(["srun", "-N3", "hostname"])      # SLURM_CONF set for them
        cluster.run_host("h2", ["sbatch", "--wrap", "hostname"])
        subprocess.run(cluster.exec_argv([...]), env=cluster.env())   # or host_argv/host_env
        cluster.bed                     # its testbed.Bed: .host("h1"), .cut("h2"), ...
        cluster.wait_idle(["h2"])       # after RESUME or start_slurmd("h2")

Where the machine cannot run it (not root, no network namespaces, slurm-wlm or munge missing)
the fixture skips with that one line. Nothing of the cluster or its bed is left after the
module, whatever the tests did.
"""
import importlib.util
import os
import sys

import pytest

import testbed  # noqa: F401 - registers scripts/testbed.py as etrun_testbed first

SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                      "scripts", "slurmbed.py")
_spec = importlib.util.spec_from_file_location("etrun_slurmbed", SCRIPT)
sb = importlib.util.module_from_spec(_spec)
sys.modules["etrun_slurmbed"] = sb
_spec.loader.exec_module(sb)

Cluster, SlurmBedError, Unsupported = sb.Cluster, sb.SlurmBedError, sb.Unsupported
up, load, down_all, SKIP_EXIT = sb.up, sb.load, sb.down_all, sb.SKIP_EXIT


def cluster_fixture(hosts=3, cpus=4):
    """A module-scoped fixture (assign it to `cluster` in the test module) giving a Cluster on a
    bed of its own with `hosts` hosts h1..hK, every node idle."""

    @pytest.fixture(scope="module")
    def cluster(tmp_path_factory):
        directory = tmp_path_factory.mktemp("slurmbed") / "bed"
        try:
            made = up(str(directory), hosts=hosts, cpus=cpus)
        except Unsupported as e:
            pytest.skip(str(e))
        try:
            yield made
        finally:
            made.down()

    return cluster
