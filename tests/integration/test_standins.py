"""The Horovod stand-ins bind as Gloo does (tests/integration/gloo_device.py): the main context
on the address of the interface HOROVOD_GLOO_IFACE names on the worker's own host (none there:
the worker terminates with Gloo's "Unable to find address for"), on the host name's address when
it is unset; the process-set contexts always on the host name's address. The cases that need
hosts with addresses of their own run on the cluster test bed (skipped where it cannot be made).
"""
import os
import re
import socket
import subprocess

from conftest import ETRUN, PYTHON, rank_lines, run_etrun
from testbed import bed_fixture

HERE = os.path.dirname(os.path.abspath(__file__))
STANDIN = os.path.join(HERE, "horovod_standin.py")
ELASTIC = os.path.join(HERE, "elastic_standin.py")

bed = bed_fixture(hosts=2)

RANK_ENV = {"HOROVOD_HOSTNAME": "localhost", "HOROVOD_RANK": "0", "HOROVOD_SIZE": "1",
            "HOROVOD_LOCAL_RANK": "0", "HOROVOD_LOCAL_SIZE": "1", "HOROVOD_CROSS_RANK": "0",
            "HOROVOD_CROSS_SIZE": "1", "HOROVOD_ELASTIC": "1",
            # Nothing listens there: the worker must stop before its first request.
            "HOROVOD_GLOO_RENDEZVOUS_ADDR": "127.0.0.1", "HOROVOD_GLOO_RENDEZVOUS_PORT": "9"}


def bound(lines):
    """{scope: ip} from the stand-in's --print-addresses lines, scopes with the hash cut off."""
    out = {}
    for line in lines:
        m = re.match(r"bound (\S+?)(_process_set_hash_\w+)? (\S+)$", line)
        if m:
            out[m.group(1) + ("_process_set" if m.group(2) else "")] = m.group(3)
    return out


def test_a_standin_whose_interface_is_missing_on_its_host_terminates_as_gloo_does():
    for argv in ([PYTHON, STANDIN], [PYTHON, ELASTIC, "--steps", "1"]):
        r = subprocess.run(argv, env=dict(os.environ, **RANK_ENV, HOROVOD_GLOO_IFACE="nosuch0"),
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 134, r.stderr
        assert "terminate called after throwing an instance of 'gloo::EnforceNotMet'" in r.stderr
        assert r.stderr.rstrip().endswith("Unable to find address for: nosuch0"), r.stderr


def test_without_an_interface_every_context_binds_the_host_names_address():
    # This machine's host name resolves to loopback here: local jobs still run without one.
    r = run_etrun(["-np", "2", "sh", "-c",
                   f"unset HOROVOD_GLOO_IFACE; exec {PYTHON} {STANDIN} --print-addresses"])
    assert r.returncode == 0, r.stderr
    own = socket.gethostbyname(socket.gethostname())
    for rank, lines in rank_lines(r.stdout.decode()).items():
        assert lines[-1] == f"rendezvous ok rank {rank}"
        assert set(bound(lines).values()) == {own}, lines


def test_on_a_host_of_its_own_the_main_context_follows_the_interface_and_process_sets_the_name(bed):
    # Two ranks on h1 with HOROVOD_GLOO_IFACE=lo: the main context meets on 127.0.0.1, the
    # process sets on h1's address.
    h1 = bed.host("h1")
    r = bed.run_launcher([ETRUN, "-np", "2", "-H", "h1:2", "sh", "-c",
                          f"HOROVOD_GLOO_IFACE=lo exec {PYTHON} {STANDIN} --print-addresses"],
                         timeout=120)
    assert r.returncode == 0, r.stderr
    for rank, lines in rank_lines(r.stdout).items():
        assert lines[-1] == f"rendezvous ok rank {rank}"
        lo, own = "127.0.0.1", h1.address
        assert bound(lines) == {"global": lo, "local_h1": lo, f"cross_{rank}": lo,
                                "final_check": lo, "global_process_set": own,
                                "local_h1_process_set": own, f"cross_{rank}_process_set": own}, lines


def test_across_hosts_each_worker_binds_its_own_hosts_address(bed):
    for iface in ("", "eth0"):  # unset: the host name's address; eth0: that interface's
        r = bed.run_launcher([ETRUN, "-np", "2", "-H", "h1:1,h2:1", "sh", "-c",
                              f"export HOROVOD_GLOO_IFACE={iface}; "
                              f"exec {PYTHON} {STANDIN} --print-addresses"], timeout=120)
        assert r.returncode == 0, r.stderr
        for rank, lines in rank_lines(r.stdout).items():
            assert lines[-1] == f"rendezvous ok rank {rank}"
            assert set(bound(lines).values()) == {bed.hosts[rank].address}, (iface, lines)


def test_given_the_launchers_interface_a_worker_on_another_host_terminates(bed):
    # What etrun with no network flags gives remote workers today (issue 20): the launcher's
    # interface toward them, which the hosts do not have.
    r = bed.run_launcher([ETRUN, "-np", "1", "-H", "h2:1", "sh", "-c",
                          f"HOROVOD_GLOO_IFACE={bed.bridge} exec {PYTHON} {STANDIN}"], timeout=120)
    assert r.returncode == 134, r.stderr
    assert ("[0]<stderr>:  what():  [enforce fail at gloo/transport/tcp/device.cc] ifa != "
            f"nullptr. Unable to find address for: {bed.bridge}") in r.stdout + r.stderr, \
        r.stdout + r.stderr


def test_the_elastic_standin_trains_across_hosts_on_their_own_interfaces(bed, tmp_path):
    # No network flags: each worker is told the launcher address its host reaches and its own
    # interface toward it (issue 20).
    log = tmp_path / "log"
    r = bed.run_launcher([ETRUN, "-np", "2", "--min-np", "2", "-H", "h1:1,h2:1", PYTHON, ELASTIC,
                          "--steps", "5", "--log", str(log)], timeout=120)
    assert r.returncode == 0, r.stderr
    lines = rank_lines(r.stdout)
    assert {rank: lines[rank][-1] for rank in lines} == {
        0: "done 5 steps rank 0 size 2", 1: "done 5 steps rank 1 size 2"}
    binds = set(re.findall(r"^\S+ (h\d):0 pid \d+ bind \S+ (\S+)$", log.read_text(), re.M))
    assert binds == {(h.name, h.address) for h in bed.hosts}
