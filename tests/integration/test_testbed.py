"""The cluster test bed itself (scripts/testbed.py, tests/integration/testbed.py): hosts with
their own names, addresses and sshds, reachable as on a cluster, and nothing left after `down`.
Skipped with the bed's one line where the machine does not allow network namespaces."""
import os
import re
import socket
import subprocess
import threading

import pytest

from conftest import ETRUN, PYTHON, rank_lines, wait_until
from testbed import SCRIPT, SKIP_EXIT, Unsupported, bed_fixture, up

bed = bed_fixture(hosts=3)

LISTEN = ("import socket, sys\n"
          "s = socket.create_server((sys.argv[1], 0)); print(s.getsockname()[1], flush=True)\n"
          "c, peer = s.accept()\n"
          "c.sendall(('hello from %s to %s' % (socket.gethostname(), peer[0])).encode())\n")
CONNECT = ("import socket, sys\n"
           "c = socket.create_connection((sys.argv[1], int(sys.argv[2])),\n"
           "                             timeout=float(sys.argv[3]))\n"
           "print(c.recv(100).decode())\n")


def test_ssh_with_the_beds_home_lands_on_the_host_it_names(bed):
    r = bed.run_launcher(["ssh", "h1", "hostname"], timeout=30)
    assert (r.returncode, r.stdout, r.stderr) == (0, "h1\n", "")


def test_etrun_on_the_launchers_side_starts_ranks_on_hosts_by_name_with_the_beds_key(bed):
    # libssh2 takes $HOME/.ssh/id_ed25519; the hosts' keys are known, so etrun warns of nothing.
    r = bed.run_launcher([ETRUN, "-np", "3", "-H", "h1:1,h2:1,h3:1", "hostname"], timeout=60)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    assert rank_lines(r.stdout) == {0: ["h1"], 1: ["h2"], 2: ["h3"]}


def test_a_host_has_its_name_its_address_on_eth0_and_no_route_beyond_the_bed(bed):
    h2 = bed.host("h2")
    assert bed.run_host("h2", ["hostname"]).stdout == "h2\n"
    assert bed.run_host("h2", ["getent", "hosts", "h2"]).stdout.split() == [h2.address, "h2"]
    eth0 = bed.run_host("h2", ["ip", "-o", "-4", "addr", "show", "eth0"]).stdout
    assert f"inet {h2.address}/24 " in eth0
    # The bed's subnet only: a host cannot stumble on the launcher's other addresses.
    routes = bed.run_host("h2", ["ip", "-4", "route"]).stdout.splitlines()
    assert len(routes) == 1 and routes[0].startswith(bed.launcher_address[:-1] + "0/24 dev eth0 ")
    # Every host name resolves on every host and on the launcher's side (only there: the
    # machine's /etc/hosts is not touched).
    want = [(h.address, h.name) for h in bed.hosts]
    for r in [bed.run_host(h.name, ["getent", "hosts", "h1", "h2", "h3"]) for h in bed.hosts] + [
            bed.run_launcher(["getent", "hosts", "h1", "h2", "h3"])]:
        assert [tuple(line.split()) for line in r.stdout.splitlines()] == want
    outside = subprocess.run(["getent", "hosts", "h1"], capture_output=True, text=True).stdout
    assert bed.host("h1").address not in outside


def test_hosts_reach_each_other_by_name_and_the_launcher_over_tcp(bed):
    h1, h2 = bed.host("h1"), bed.host("h2")
    listener = subprocess.Popen(bed.host_argv("h2", [PYTHON, "-c", LISTEN, h2.address]),
                                stdout=subprocess.PIPE, text=True)
    try:
        port = listener.stdout.readline().strip()
        r = bed.run_host("h1", [PYTHON, "-c", CONNECT, "h2", port, "5"], timeout=30)
        assert r.stdout == f"hello from h2 to {h1.address}\n", r.stderr
    finally:
        listener.kill()
        listener.wait()
    with socket.create_server((bed.launcher_address, 0)) as server:
        seen = []
        t = threading.Thread(target=lambda: seen.append(server.accept()[1][0]))
        t.start()
        r = bed.run_host("h1", [PYTHON, "-c", "import socket, sys; socket.create_connection("
                                "(sys.argv[1], int(sys.argv[2])), timeout=5).close()",
                                bed.launcher_address, str(server.getsockname()[1])], timeout=30)
        t.join(10)
        assert r.returncode == 0, r.stderr
        assert seen == [h1.address]


def test_the_launchers_interface_toward_the_hosts_is_not_their_eth0(bed):
    # The point of the bed: a worker given the launcher's interface name finds no such interface.
    route = subprocess.run(["ip", "-o", "route", "get", bed.host("h1").address],
                           capture_output=True, text=True, check=True).stdout
    assert f" dev {bed.bridge} " in route and " eth0 " not in route, route
    back = bed.run_host("h1", ["ip", "-o", "route", "get", bed.launcher_address]).stdout
    assert " dev eth0 " in back, back
    assert bed.run_host("h1", ["ip", "link", "show", bed.bridge]).returncode != 0


def test_a_cut_link_drops_traffic_silently_until_healed(bed):
    bed.cut("h3")
    try:
        r = bed.run_host("h1", [PYTHON, "-c", CONNECT, "h3", "22", "1"], timeout=30)
        assert "TimeoutError" in r.stderr or "timed out" in r.stderr, r.stderr
    finally:
        bed.heal("h3")
    assert wait_until(lambda: bed.run_launcher(["ssh", "h3", "hostname"], timeout=30).stdout
                      == "h3\n", timeout=20)


def test_a_host_whose_processes_all_die_boots_again(bed):
    # A reboot: every process of h3 killed at once; its names and address survive, sshd restarts.
    pids = subprocess.run(["ip", "netns", "pids", bed.host("h3").netns], capture_output=True,
                          text=True, check=True).stdout.split()
    assert pids
    subprocess.run(["kill", "-KILL", *pids], check=True)
    r = bed.run_launcher(["ssh", "-o", "ConnectTimeout=5", "h3", "true"], timeout=30)
    assert r.returncode == 255 and "refused" in r.stderr, r.stderr
    bed.start_sshd("h3")
    assert bed.run_launcher(["ssh", "h3", "hostname"], timeout=30).stdout == "h3\n"


def namespace_inodes(b):
    inodes = set()
    for h in b.hosts:
        inodes.add(os.stat(h.netns_path).st_ino)
        for kind in ("mnt", "uts"):
            inodes.add(os.stat(f"/proc/{h.holder()}/ns/{kind}").st_ino)
    return inodes


def processes_of(directory, inodes):
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if directory.encode() in f.read():
                    found.append(pid)
                    continue
            for kind in ("net", "mnt", "uts"):
                link = os.readlink(f"/proc/{pid}/ns/{kind}")
                if int(link[link.index("[") + 1:-1]) in inodes:
                    found.append(pid)
        except (OSError, ValueError):
            continue
    return found


def leftovers(tag, directory):
    """What of bed `tag` (state in `directory`) is left: netns, links, mounts."""
    names = re.compile(r"\betbd%d(v\d+|-\S+)?\b" % tag)
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    with open("/proc/self/mountinfo") as f:
        mounts = [line for line in f if directory in line or names.search(line)]
    return ([line for line in netns.splitlines() if names.search(line)]
            + [line for line in links.splitlines() if names.search(line)] + mounts)


def test_down_leaves_no_namespace_link_process_or_mount(tmp_path):
    directory = str(tmp_path / "bed")
    try:
        b = up(directory, hosts=2)
    except Unsupported as e:
        pytest.skip(str(e))
    inodes = namespace_inodes(b)
    stray = subprocess.Popen(b.host_argv("h2", ["sleep", "600"]))  # a process nobody stops
    session = b.run_launcher(["ssh", "h1", "sleep 600 </dev/null >/dev/null 2>&1 &"], timeout=30)
    assert session.returncode == 0, session.stderr
    assert leftovers(b.tag, directory) and processes_of(directory, inodes)
    b.down()
    b.down()  # idempotent
    assert stray.wait(timeout=10) == -9
    assert leftovers(b.tag, directory) == []
    assert processes_of(directory, inodes) == []
    assert not os.path.exists(directory)


def test_down_all_removes_the_leftovers_of_any_bed(bed, tmp_path):
    # In a world of its own (network, mount and PID namespaces, a /run/netns of its own), so the
    # beds of other tests (`bed` among them) stay: a bed whose state directory is gone is found
    # by its names alone.
    directory = str(tmp_path / "lost")
    script = (f"umount -R /run/netns 2>/dev/null; mount -t tmpfs tmpfs /run/netns || exit 1; "
              f"ip link set lo up; {PYTHON} {SCRIPT} up --dir {directory} --hosts 2 >/dev/null || "
              f"exit $?; rm {directory}/bed.json; {PYTHON} {SCRIPT} down --all || exit 1; "
              f"echo ==; ip netns list; ip -o link show | grep etbd; "
              f"grep etbd /proc/self/mountinfo; true")
    r = subprocess.run(["unshare", "--net", "--mount", "--propagation", "private", "--pid",
                        "--fork", "--mount-proc", "sh", "-c", script],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    removed, _, after = r.stdout.partition("==\n")
    assert after == "", r.stdout + r.stderr
    assert removed.splitlines() == [
        "testbed: removed /run/netns/etbd1-h1", "testbed: removed /run/netns/etbd1-h2",
        "testbed: removed holder of etbd1-h1", "testbed: removed holder of etbd1-h2",
        "testbed: removed etbd1v1", "testbed: removed etbd1v2", "testbed: removed etbd1"], \
        r.stdout + r.stderr
    assert processes_of(directory, set()) == []


def test_where_namespaces_are_not_allowed_up_says_why_in_one_line_and_exits_77(tmp_path):
    cases = [(["unshare", "-r", "--net"], "testbed: cannot create network namespaces here: ")]
    with open("/proc/self/uid_map") as f:
        real_root = os.geteuid() == 0 and f.read().split() == ["0", "0", "4294967295"]
    if real_root:  # runuser needs it
        cases.append((["runuser", "-u", "nobody", "--"], "testbed: needs root "))
    ran = 0
    for prefix, why in cases:
        r = subprocess.run([*prefix, PYTHON, SCRIPT, "up", "--dir", str(tmp_path / "x")],
                           capture_output=True, text=True, timeout=60)
        if r.stderr.startswith(prefix[0] + ":"):
            continue  # this machine cannot make that world either
        ran += 1
        assert r.returncode == SKIP_EXIT, r.stderr
        assert r.stdout == "" and r.stderr.count("\n") == 1 and r.stderr.startswith(why), r.stderr
        assert not (tmp_path / "x").exists()
    if not ran:
        pytest.skip("no world without namespaces can be made here (unshare -r refused)")
