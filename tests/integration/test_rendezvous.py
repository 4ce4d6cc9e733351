"""Horovod's static Gloo rendezvous against etrun's HTTP store, through the real binary."""
import os

from conftest import PYTHON, rank_lines, run_etrun

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
