"""Horovod's static Gloo rendezvous against etrun's HTTP store, through the real binary."""
import os
import signal
import subprocess

import pytest

from conftest import ETRUN, PYTHON, rank_lines, run_etrun, store_get

STANDIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "horovod_standin.py")


def test_four_ranks_on_two_local_host_names_complete_all_six_scope_rendezvous():
    r = run_etrun(["-np", "4", "-H", "localhost:2,127.0.0.1:2", PYTHON, STANDIN], timeout=120)
    assert r.returncode == 0, r.stderr.decode()
    lines = rank_lines(r.stdout.decode())
    assert {rank: lines.get(rank) for rank in range(4)} == {
        rank: [f"rendezvous ok rank {rank}"] for rank in range(4)}


def test_a_single_rank_rendezvous_needs_no_peers():
    r = run_etrun(["-np", "1", PYTHON, STANDIN], timeout=60)
    assert r.returncode == 0, r.stderr.decode()
    assert r.stdout == b"[0]<stdout>:rendezvous ok rank 0\n"


def test_three_hosts_with_uneven_slots():
    r = run_etrun(["-np", "5", "-H", "localhost:3,127.0.0.1:1," + os.uname().nodename + ":1",
                   PYTHON, STANDIN], timeout=120)
    assert r.returncode == 0, r.stderr.decode()
    assert len(rank_lines(r.stdout.decode())) == 5


@pytest.mark.parametrize("allow", [[], ["--rendezvous-allow", "127.0.0.0/29"]])
def test_the_rendezvous_server_refuses_peers_that_are_not_job_hosts(allow):
    # 127.0.0.7 is a loopback address but not this job's host (etrun treats 127.0.0.2+ as other
    # hosts): refused with 403, logged once; admitted with --rendezvous-allow.
    proc = subprocess.Popen([ETRUN, "-np", "1", *allow, "sh", "-c",
                             'echo "port $HOROVOD_GLOO_RENDEZVOUS_PORT"; exec sleep 30'],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    try:
        line = proc.stdout.readline().decode()
        port = int(line.split("port ")[1])
        assert store_get(port, "/probe/key", "127.0.0.1") == 404  # the job's own host: a missing key
        codes = [store_get(port, "/probe/key", "127.0.0.7") for _ in range(3)]
        assert codes == ([404] * 3 if allow else [403] * 3)
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    refusals = err.decode().count("refused a rendezvous connection from 127.0.0.7")
    assert refusals == (0 if allow else 1), err
