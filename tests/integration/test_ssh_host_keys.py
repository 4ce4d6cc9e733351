"""SSH host keys on the cluster test bed (tests/integration/testbed.py: h1..h3, each its own
network namespace, name and sshd): a host never met is accepted and recorded in ~/.ssh/known_hosts
as OpenSSH's StrictHostKeyChecking=accept-new does, with one warning line for all the new hosts
of a job; a host whose key then changes is refused in one line that says how to fix it, and
nothing is left running; --ssh-strict-host-keys refuses a host not on record. Each job runs with
a HOME of the test's own, so the bed's known_hosts (which lists every host) plays no part.
Skipped with the bed's one line where namespaces are not allowed."""
import os
import queue
import re
import signal
import socket
import stat
import subprocess
import threading
import time

import pytest

from conftest import ETRUN, processes_with_marker, wait_until
from testbed import bed_fixture

SSHD = "/usr/sbin/sshd"
HOSTS = ["h1", "h2", "h3"]
SUFFIX = " (--ssh-strict-host-keys refuses unknown hosts)"

bed = bed_fixture(hosts=3)


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    """A HOME with no ~/.ssh at all: the first job makes it."""
    return tmp_path_factory.mktemp("home")


def known_hosts(home):
    return os.path.join(home, ".ssh", "known_hosts")


def bed_key(bed):
    return os.path.join(bed.home, ".ssh", "id_ed25519")


def host_key_line(key_pub):
    with open(key_pub) as f:
        return " ".join(f.read().split()[:2])


def job_argv(bed, hosts, command, *flags):
    return bed.exec_argv([ETRUN, "-np", str(len(hosts)), "-H", ",".join(f"{h}:1" for h in hosts),
                          "-i", bed_key(bed), *flags, "sh", "-c", command])


def job_env(bed, home, extra=None):
    env = bed.env(dict(os.environ, **(extra or {})))
    env["HOME"] = str(home)
    return env


def run_job(bed, home, hosts, command="true", *flags, extra_env=None):
    return subprocess.run(job_argv(bed, hosts, command, *flags), env=job_env(bed, home, extra_env),
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)


def warnings(stderr):
    return [line for line in stderr.splitlines() if line.startswith("etrun: warning:")]


def errors_about(host, stderr):
    """The error lines about host's connection, without the prefix of the rank whose stderr
    carried them (the connection's failure reaches etrun there, as its agent's would)."""
    found = []
    for line in stderr.splitlines():
        m = re.match(r"^(?:\[\d+\]<stderr>:)?(etrun: error: ssh %s:22: .*)$" % re.escape(host),
                     line)
        if m:
            found.append(m.group(1))
    return found


def test_a_first_job_records_its_new_hosts_and_says_so_in_one_line_while_it_runs(bed, home,
                                                                                  tmp_path):
    # The ranks wait for a file the test writes only once the warning is out: the line came
    # while the job ran, not at its end.
    go = tmp_path / "go"
    proc = subprocess.Popen(job_argv(bed, HOSTS, f"while [ ! -e {go} ]; do sleep 0.05; done"),
                            env=job_env(bed, home), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, stdin=subprocess.DEVNULL)
    lines = queue.Queue()
    reader = threading.Thread(target=lambda: [lines.put(l) for l in proc.stderr], daemon=True)
    reader.start()
    err = []
    try:
        deadline = time.monotonic() + 60
        while not any("recorded the SSH host key" in l for l in err):
            err.append(lines.get(timeout=max(0.1, deadline - time.monotonic())))
        assert proc.poll() is None, "".join(err)
    finally:
        go.touch()
    assert proc.wait(timeout=60) == 0, "".join(err)
    reader.join(timeout=10)
    while not lines.empty():
        err.append(lines.get())
    path = known_hosts(home)
    assert warnings("".join(err)) == [
        f"etrun: warning: recorded the SSH host keys of 3 new hosts in {path}: h1, h2, h3" + SUFFIX]
    key = host_key_line(os.path.join(bed.dir, "etc", "host_key.pub"))
    with open(path) as f:
        assert sorted(f.read().splitlines()) == [f"{h} {key}" for h in HOSTS]
    assert stat.S_IMODE(os.stat(os.path.dirname(path)).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


def test_a_second_job_finds_them_on_record_and_says_nothing(bed, home):
    before = open(known_hosts(home)).read()
    r = run_job(bed, home, HOSTS)
    assert r.returncode == 0, r.stderr
    assert warnings(r.stderr) == [], r.stderr
    assert open(known_hosts(home)).read() == before


def test_a_job_shorter_than_the_quiet_period_still_says_it_once(bed, tmp_path):
    # One host, a rank that exits at once: the line comes when etrun exits if not before.
    r = run_job(bed, tmp_path, ["h3"])
    assert r.returncode == 0, r.stderr
    assert warnings(r.stderr) == [
        f"etrun: warning: recorded the SSH host key of 1 new host in {known_hosts(tmp_path)}: h3"
        + SUFFIX]


def restart_sshd_with_a_new_key(bed, name, tmp_path):
    """Gives host `name` a host key of its own: its sshd (scripts/testbed.py starts every host's
    from D/etc/NAME.sshd_config, all with the bed's one host key) stopped and started again from
    a copy of that config naming a new key."""
    etc = os.path.join(bed.dir, "etc")
    new_key = tmp_path / f"{name}_host_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(new_key)], check=True)
    with open(os.path.join(etc, f"{name}.sshd_config")) as f:
        config = f.read()
    assert "\nHostKey " in config
    config = re.sub(r"(?m)^HostKey .*$", f"HostKey {new_key}", config)
    config_path = tmp_path / f"{name}.sshd_config"
    config_path.write_text(config)
    with open(os.path.join(etc, f"{name}.sshd.pid")) as f:
        old = int(f.read())
    os.kill(old, signal.SIGTERM)
    assert wait_until(lambda: not os.path.exists(f"/proc/{old}"), timeout=10)
    r = bed.run_host(name, [SSHD, "-f", str(config_path), "-E", str(tmp_path / "sshd.log")])
    assert r.returncode == 0, r.stderr
    address = bed.host(name).address

    def listening():
        try:
            socket.create_connection((address, 22), timeout=0.5).close()
            return True
        except OSError:
            return False

    assert wait_until(listening, timeout=10)
    return host_key_line(f"{new_key}.pub")


def test_a_changed_host_key_is_refused_in_one_line_and_nothing_is_left_running(bed, home, tmp_path,
                                                                                marker_env):
    marker = next(iter(marker_env.values()))
    new_key = restart_sshd_with_a_new_key(bed, "h2", tmp_path)
    path = known_hosts(home)
    before = open(path).read()
    r = run_job(bed, home, HOSTS, "sleep 30", extra_env=marker_env)
    assert r.returncode == 255, r.stderr
    refusal = (f"etrun: error: ssh h2:22: the host key differs from the one in {path}: refusing to "
               f"connect (if h2's key changed on purpose, remove the old one with "
               f"ssh-keygen -f {path} -R h2)")
    assert errors_about("h2", r.stderr) == [refusal], r.stderr
    assert errors_about("h1", r.stderr) == errors_about("h3", r.stderr) == [], r.stderr
    assert warnings(r.stderr) == [], r.stderr
    assert open(path).read() == before  # the new key is not recorded
    assert wait_until(lambda: processes_with_marker(marker) == [], timeout=30), \
        [open(f"/proc/{p}/cmdline").read() for p in processes_with_marker(marker)]

    # The fix the line gives works: h2's old key removed, the next job records its new one.
    subprocess.run(["ssh-keygen", "-f", path, "-R", "h2"], check=True, capture_output=True)
    r = run_job(bed, home, HOSTS)
    assert r.returncode == 0, r.stderr
    assert warnings(r.stderr) == [
        f"etrun: warning: recorded the SSH host key of 1 new host in {path}: h2" + SUFFIX]
    with open(path) as f:
        assert f"h2 {new_key}" in f.read().splitlines()


def test_strict_host_keys_refuses_a_host_not_on_record_and_records_nothing(bed, tmp_path):
    r = run_job(bed, tmp_path, ["h1"], "true", "--ssh-strict-host-keys")
    assert r.returncode == 255, r.stderr
    path = known_hosts(tmp_path)
    assert errors_about("h1", r.stderr) == [
        f"etrun: error: ssh h1:22: the host is not in {path} and --ssh-strict-host-keys is set: "
        "add it (e.g. ssh-keyscan) or drop the flag"], r.stderr
    assert warnings(r.stderr) == [], r.stderr
    assert not os.path.exists(path)
