"""Remote hosts with addresses of their own: two network namespaces made by the test, bridged to
this one, each running its own sshd on port 22. Ranks there reach etrun's rendezvous server over
the bridge; a host whose link goes down mid-job is declared lost within the SSH timeouts.
Skipped where the machine does not allow network namespaces (needs root and iproute2)."""
import os
import shutil
import signal
import subprocess
import time

import pytest

from conftest import ETRUN, PYTHON, WORKER, processes_with_marker, rank_lines, run_etrun, wait_until

STANDIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "horovod_standin.py")
TAG = str(os.getpid() % 100000)
NETS = ["etrun%sa" % TAG, "etrun%sb" % TAG]
BRIDGE = "etb" + TAG
SUBNET = "10.%d.%d" % (200 + os.getpid() % 50, os.getpid() % 250)
GATEWAY = SUBNET + ".1"
HOSTS = [SUBNET + ".2", SUBNET + ".3"]


def ip(*args, check=True):
    return subprocess.run(["ip", *args], check=check, capture_output=True, text=True)


def in_ns(ns, *args):
    return ["ip", "netns", "exec", ns, *args]


def teardown_network():
    for ns in NETS:
        pids = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout.split()
        for pid in pids:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except ProcessLookupError:
                pass
        ip("netns", "del", ns, check=False)
    ip("link", "del", BRIDGE, check=False)


@pytest.fixture(scope="module")
def hosts(tmp_path_factory):
    if os.geteuid() != 0 or shutil.which("ip") is None:
        pytest.skip("network namespaces need root and iproute2")
    probe = ip("netns", "add", NETS[0], check=False)
    if probe.returncode != 0:
        pytest.skip("cannot create network namespaces here: " + probe.stderr.strip())
    d = tmp_path_factory.mktemp("netns")
    try:
        try:
            ip("link", "add", BRIDGE, "type", "bridge")
            ip("addr", "add", GATEWAY + "/24", "dev", BRIDGE)
            ip("link", "set", BRIDGE, "up")
        except subprocess.CalledProcessError as e:
            pytest.skip("cannot create a bridge here: " + e.stderr.strip())
        for name in ("host_key", "client_key"):
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / name)], check=True)
        shutil.copy(d / "client_key.pub", d / "authorized_keys")
        os.makedirs("/run/sshd", exist_ok=True)
        for i, (ns, addr) in enumerate(zip(NETS, HOSTS)):
            if i > 0:
                ip("netns", "add", ns)
            outer, inner = "etv%s%d" % (TAG, i), "eti%s%d" % (TAG, i)
            ip("link", "add", outer, "type", "veth", "peer", "name", inner)
            ip("link", "set", inner, "netns", ns)
            ip("link", "set", outer, "master", BRIDGE)
            ip("link", "set", outer, "up")
            subprocess.run(in_ns(ns, "ip", "link", "set", "lo", "up"), check=True)
            subprocess.run(in_ns(ns, "ip", "addr", "add", addr + "/24", "dev", inner), check=True)
            subprocess.run(in_ns(ns, "ip", "link", "set", inner, "up"), check=True)
            # ClientAlive: once a lost host's link is back, its sshd learns the client is gone
            # and closes the channels, which stops the remote ranks.
            (d / ("sshd_config_%d" % i)).write_text(
                f"ListenAddress {addr}:22\nHostKey {d}/host_key\nAuthorizedKeysFile {d}/authorized_keys\n"
                "PermitRootLogin prohibit-password\nPasswordAuthentication no\n"
                f"UsePAM no\nStrictModes no\nPidFile {d}/sshd_{i}.pid\nLogLevel ERROR\n"
                "ClientAliveInterval 1\nClientAliveCountMax 3\n")
            subprocess.run(in_ns(ns, "/usr/sbin/sshd", "-f", str(d / ("sshd_config_%d" % i)),
                                 "-E", str(d / ("sshd_%d.log" % i))), check=True)
            assert wait_until(lambda: (d / ("sshd_%d.pid" % i)).exists(), timeout=10)
        home = d / "home"
        (home / ".ssh").mkdir(parents=True)
        yield {"key": str(d / "client_key"), "home": str(home)}
    finally:
        teardown_network()


def test_ranks_on_hosts_with_their_own_addresses_rendezvous_over_the_network(hosts):
    # The rendezvous server must listen where the namespaces can reach it (the route toward the
    # hosts leaves from the bridge's address), and the stand-ins' mesh crosses the bridge.
    r = run_etrun(["-np", "4", "-H", f"{HOSTS[0]}:2,{HOSTS[1]}:2", "-i", hosts["key"],
                   "sh", "-c", f'echo "addr $HOROVOD_GLOO_RENDEZVOUS_ADDR"; exec {PYTHON} {STANDIN}'],
                  env={"HOME": hosts["home"], "STANDIN_MESH": "hostname"}, timeout=120)
    assert r.returncode == 0, r.stderr
    lines = rank_lines(r.stdout.decode())
    assert lines == {rank: [f"addr {GATEWAY}", f"rendezvous ok rank {rank}"] for rank in range(4)}


def test_a_host_that_disappears_mid_job_is_declared_lost_and_the_job_stops(hosts, marker_env):
    marker = next(iter(marker_env.values()))
    env = dict(os.environ, HOME=hosts["home"], **marker_env)
    proc = subprocess.Popen([ETRUN, "-np", "2", "-H", f"{HOSTS[0]}:1,{HOSTS[1]}:1", "-i", hosts["key"],
                             "--ssh-connect-timeout", "2", PYTHON, WORKER, "sleep"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                            stdin=subprocess.DEVNULL)
    ready = 0
    while ready < 2:
        line = proc.stdout.readline()
        assert line, proc.stderr.read()
        ready += line.endswith(b"ready\n")
    inner = "eti%s1" % TAG
    subprocess.run(in_ns(NETS[1], "ip", "link", "set", inner, "down"), check=True)
    start = time.monotonic()
    try:
        _, err = proc.communicate(timeout=60)
        lost_after = time.monotonic() - start
        assert proc.returncode == 255, err
        text = err.decode()
        assert f"etrun: error: ssh {HOSTS[1]}:22: connection lost" in text, text
        assert f"rank 1 on {HOSTS[1]} exited with code 255" in text, text
        assert lost_after < 30  # keepalives every second, TCP_USER_TIMEOUT of 2x the connect timeout
    finally:
        subprocess.run(in_ns(NETS[1], "ip", "link", "set", inner, "up"), check=True)
    # The surviving host's rank was stopped; once the lost host is reachable again, its sshd
    # notices the connection is gone and the remote rank is stopped too: nothing is left.
    assert wait_until(lambda: processes_with_marker(marker) == [], timeout=40), \
        [open(f"/proc/{p}/cmdline").read() for p in processes_with_marker(marker)]
