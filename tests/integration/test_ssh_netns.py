"""Remote hosts with addresses of their own: two hosts of the cluster test bed
(tests/integration/testbed.py: network namespaces bridged to this one, 198.18.0.0/15 addresses,
each with its own sshd on port 22). Ranks there reach etrun's rendezvous server over the bridge;
a host whose link goes down mid-job is declared lost within the SSH timeouts. Skipped, with the
bed's one line, where the machine does not allow network namespaces."""
import os
import subprocess
import time

import pytest

from conftest import ETRUN, PYTHON, WORKER, processes_with_marker, rank_lines, run_etrun, wait_until
from testbed import bed_fixture

STANDIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "horovod_standin.py")

bed = bed_fixture(hosts=2)


@pytest.fixture(scope="module")
def hosts(bed):
    """The two hosts' addresses, the launcher's address on the bed, and the bed's HOME (its
    ~/.ssh/id_ed25519 is authorized on both hosts)."""
    return {"addrs": [h.address for h in bed.hosts], "gateway": bed.launcher_address,
            "key": os.path.join(bed.home, ".ssh", "id_ed25519"), "home": bed.home}


def test_ranks_on_hosts_with_their_own_addresses_rendezvous_over_the_network(hosts):
    # The rendezvous server must listen where the namespaces can reach it, each rank is told the
    # launcher address its host reaches (the bridge's) and its own interface toward it (eth0
    # there, not the launcher's bridge), and the stand-ins' mesh, bound as Gloo binds, crosses
    # the bridge.
    addrs = hosts["addrs"]
    r = run_etrun(["-np", "4", "-H", f"{addrs[0]}:2,{addrs[1]}:2", "-i", hosts["key"],
                   "sh", "-c", f'echo "addr $HOROVOD_GLOO_RENDEZVOUS_ADDR $HOROVOD_GLOO_IFACE"; '
                               f'exec {PYTHON} {STANDIN}'],
                  env={"HOME": hosts["home"]}, timeout=120)
    assert r.returncode == 0, r.stderr
    lines = rank_lines(r.stdout.decode())
    assert lines == {rank: [f"addr {hosts['gateway']} eth0", f"rendezvous ok rank {rank}"]
                     for rank in range(4)}


@pytest.mark.parametrize("mode", ["static", "elastic"])
def test_with_no_network_flags_workers_on_hosts_by_name_rendezvous(bed, mode):
    # horovodrun works here (it probes the hosts); etrun before issue 20 gave remote workers the
    # launcher's interface (static: Gloo found no such interface on the host) or a rendezvous
    # address of 127.0.0.1 (elastic).
    elastic = ["--min-np", "2"] if mode == "elastic" else []
    r = subprocess.run(bed.exec_argv([ETRUN, "-np", "2", "-H", "h1:1,h2:1", *elastic, PYTHON,
                                      STANDIN]), env=bed.env(), capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert rank_lines(r.stdout) == {0: ["rendezvous ok rank 0"], 1: ["rendezvous ok rank 1"]}


def test_a_host_that_disappears_mid_job_is_declared_lost_and_the_job_stops(bed, hosts, marker_env):
    marker = next(iter(marker_env.values()))
    env = dict(os.environ, HOME=hosts["home"], **marker_env)
    addrs = hosts["addrs"]
    proc = subprocess.Popen([ETRUN, "-np", "2", "-H", f"{addrs[0]}:1,{addrs[1]}:1", "-i", hosts["key"],
                             "--ssh-connect-timeout", "2", PYTHON, WORKER, "sleep"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                            stdin=subprocess.DEVNULL)
    ready = 0
    while ready < 2:
        line = proc.stdout.readline()
        assert line, proc.stderr.read()
        ready += line.endswith(b"ready\n")
    lost = bed.hosts[1].name
    assert bed.run_host(lost, ["ip", "link", "set", "eth0", "down"]).returncode == 0
    start = time.monotonic()
    try:
        _, err = proc.communicate(timeout=60)
        lost_after = time.monotonic() - start
        assert proc.returncode == 255, err
        text = err.decode()
        # The heartbeat (from a second on) or TCP_USER_TIMEOUT, whichever tells first.
        assert f"etrun: error: ssh {addrs[1]}:22: connection lost: " in text, text
        assert f"rank 1 on {addrs[1]} exited with code 255" in text, text
        assert lost_after < 30  # a heartbeat every second, lost after 3 s of silence
    finally:
        assert bed.run_host(lost, ["ip", "link", "set", "eth0", "up"]).returncode == 0
    # The surviving host's rank was stopped; once the lost host is reachable again, its sshd
    # notices the connection is gone and the remote rank is stopped too: nothing is left.
    assert wait_until(lambda: processes_with_marker(marker) == [], timeout=40), \
        [open(f"/proc/{p}/cmdline").read() for p in processes_with_marker(marker)]
