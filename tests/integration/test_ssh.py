"""Remote ranks over SSH (libssh2) against a real sshd on 127.0.0.2/127.0.0.3, started by the
test with throwaway keys: those names are two remote hosts of this machine."""
import os
import re
import shutil
import signal
import socket
import subprocess
import time

import pytest

from conftest import ETRUN, PYTHON, WORKER, processes_with_marker, rank_lines, run_etrun, wait_until

SSHD = "/usr/sbin/sshd"


def free_port(host):
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    d = tmp_path_factory.mktemp("sshd")
    for name in ("host_key", "client_key", "other_key"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / name)], check=True)
    shutil.copy(d / "client_key.pub", d / "authorized_keys")
    port = free_port("127.0.0.2")
    (d / "sshd_config").write_text(
        f"ListenAddress 127.0.0.2:{port}\nListenAddress 127.0.0.3:{port}\n"
        f"HostKey {d}/host_key\nAuthorizedKeysFile {d}/authorized_keys\n"
        "PermitRootLogin prohibit-password\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
        f"UsePAM no\nStrictModes no\nPidFile {d}/sshd.pid\nLogLevel ERROR\nMaxStartups 100\n"
        # Fewer channels per connection than sshd's default 10, so a test can exceed it.
        "MaxSessions 3\n")
    os.makedirs("/run/sshd", exist_ok=True)
    subprocess.run([SSHD, "-f", str(d / "sshd_config"), "-E", str(d / "log")], check=True)
    assert wait_until(lambda: (d / "sshd.pid").exists(), timeout=10)
    home = d / "home"
    (home / ".ssh").mkdir(parents=True)
    yield {"dir": d, "port": port, "key": str(d / "client_key"), "home": str(home)}
    os.kill(int((d / "sshd.pid").read_text()), signal.SIGTERM)


def ssh_args(sshd, key=None):
    return ["-p", str(sshd["port"]), "-i", key or sshd["key"]]


def env_for(sshd, marker_env=None):
    env = {"HOME": sshd["home"]}
    env.update(marker_env or {})
    return env


def test_remote_ranks_get_their_environment_prefixes_and_cwd(sshd):
    r = run_etrun(["-np", "4", "-H", "127.0.0.2:2,127.0.0.3:2", *ssh_args(sshd), "sh", "-c",
                   'echo "$HOROVOD_HOSTNAME $HOROVOD_RANK $HOROVOD_SIZE $HOROVOD_LOCAL_RANK '
                   '$HOROVOD_CROSS_RANK $HOROVOD_GLOO_RENDEZVOUS_ADDR $PYTHONUNBUFFERED $(pwd)" "a b"'],
                  env=env_for(sshd), timeout=60)
    assert r.returncode == 0, r.stderr
    lines = rank_lines(r.stdout.decode())
    cwd = os.getcwd()
    assert lines == {  # "a b" arrives as one argument: nothing is re-parsed remotely
        0: [f"127.0.0.2 0 4 0 0 127.0.0.1 1 {cwd} a b"],
        1: [f"127.0.0.2 1 4 1 0 127.0.0.1 1 {cwd} a b"],
        2: [f"127.0.0.3 2 4 0 1 127.0.0.1 1 {cwd} a b"],
        3: [f"127.0.0.3 3 4 1 1 127.0.0.1 1 {cwd} a b"],
    }
    # Unknown host keys are accepted, as horovodrun's StrictHostKeyChecking=no, and recorded, as
    # OpenSSH's accept-new: one warning for both hosts (the module's HOME starts with none).
    known_hosts = os.path.join(sshd["home"], ".ssh", "known_hosts")
    port = sshd["port"]
    warnings = [l for l in r.stderr.decode().splitlines() if l.startswith("etrun: warning:")]
    assert warnings == [f"etrun: warning: recorded the SSH host keys of 2 new hosts in "
                        f"{known_hosts}: [127.0.0.2]:{port}, [127.0.0.3]:{port} "
                        "(--ssh-strict-host-keys refuses unknown hosts)"], r.stderr


def test_ranks_on_a_host_share_its_one_connection_whatever_the_servers_session_limit(sshd):
    # 2 ranks on .2 and 7 on .3 (the fixture's MaxSessions is 3): each host's ranks run under its
    # one agent, over one connection and one channel, so the limit never comes into play.
    r = run_etrun(["-np", "9", "-H", "127.0.0.2:2,127.0.0.3:7", *ssh_args(sshd), "sh", "-c",
                   'echo "$SSH_CONNECTION"; sleep 1'], env=env_for(sshd), timeout=60)
    assert r.returncode == 0, r.stderr
    lines = rank_lines(r.stdout.decode())
    assert sorted(lines) == list(range(9))
    # SSH_CONNECTION is "client-ip client-port server-ip server-port": one client port per connection.
    conns = {rank: tuple(lines[rank][0].split()[:2]) for rank in lines}
    assert len({conns[r] for r in (0, 1)}) == 1
    assert len({conns[r] for r in range(2, 9)}) == 1
    assert conns[0] != conns[2]


def test_remote_output_arrives_whole_and_in_order_under_load(sshd):
    n = 2000
    r = run_etrun(["-np", "4", "-H", "127.0.0.2:2,127.0.0.3:2", *ssh_args(sshd), PYTHON, WORKER,
                   "spam", str(n)], env=env_for(sshd), timeout=120)
    assert r.returncode == 0, r.stderr
    out = rank_lines(r.stdout.decode("utf-8", "replace"))
    for rank in range(4):
        body = [l for l in out[rank] if l.startswith("rank")]
        assert body == ["rank%d line %d " % (rank, i) + "x" * (i % 50) for i in range(n)]
    err = rank_lines(r.stderr.decode(), "stderr")
    for rank in range(4):
        assert err[rank] == ["err rank%d line %d" % (rank, i) for i in range(0, n, 7)]


def test_remote_and_local_ranks_mix_and_a_remote_failure_code_comes_back(sshd):
    r = run_etrun(["-np", "2", "-H", "localhost:1,127.0.0.2:1", *ssh_args(sshd), "sh", "-c",
                   'echo "$HOROVOD_RANK"; exit $((HOROVOD_RANK * 5))'], env=env_for(sshd), timeout=60)
    assert r.returncode == 5
    assert b"etrun: error: rank 1 on 127.0.0.2 exited with code 5" in r.stderr


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL])
def test_no_remote_process_survives_etrun(sshd, marker_env, sig):
    marker = next(iter(marker_env.values()))
    env = dict(os.environ, **env_for(sshd, marker_env))
    proc = subprocess.Popen([ETRUN, "-np", "2", "-H", "127.0.0.2:1,127.0.0.3:1", *ssh_args(sshd),
                             PYTHON, WORKER, "sleep", "2"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, stdin=subprocess.DEVNULL)
    ready = 0
    while ready < 2:
        line = proc.stdout.readline()
        assert line, proc.stderr.read()
        ready += line.endswith(b"ready\n")
    assert len(processes_with_marker(marker)) >= 6  # remote ranks and their children
    proc.send_signal(sig)
    proc.wait(timeout=60)
    assert wait_until(lambda: processes_with_marker(marker) == [], timeout=30), \
        [open(f"/proc/{p}/cmdline").read() for p in processes_with_marker(marker)]


def test_ssh_failures_are_one_clear_line_naming_host_and_cause(sshd, tmp_path):
    # The strict case runs with a HOME of its own: the module's has recorded the hosts by now.
    empty_home = tmp_path / "home"
    (empty_home / ".ssh").mkdir(parents=True)
    cases = [
        (["-H", "127.0.0.2:1", *ssh_args(sshd, key=str(sshd["dir"] / "other_key"))],
         r"ssh 127\.0\.0\.2:\d+: key .*other_key was refused for user root", env_for(sshd)),
        (["-H", "127.0.0.2:1", "-p", str(free_port("127.0.0.2")), "-i", sshd["key"]],
         r"ssh 127\.0\.0\.2:\d+: cannot connect: Connection refused", env_for(sshd)),
        (["-H", "127.0.0.2:1", *ssh_args(sshd), "--ssh-strict-host-keys"],
         r"ssh 127\.0\.0\.2:\d+: the host is not in .*known_hosts and --ssh-strict-host-keys is set",
         {"HOME": str(empty_home)}),
    ]
    for args, pattern, env in cases:
        start = time.monotonic()
        r = run_etrun(["-np", "1", *args, "/bin/true"], env=env, timeout=60)
        assert r.returncode == 255, (args, r.stderr)
        assert re.search(pattern, r.stderr.decode()), (pattern, r.stderr)
        assert time.monotonic() - start < 30


def test_an_unresolvable_host_fails_before_anything_starts(sshd):
    r = run_etrun(["-np", "1", "-H", "no-such-host.invalid:1", *ssh_args(sshd), "/bin/true"],
                  env=env_for(sshd), timeout=60)
    assert r.returncode == 2
    assert r.stderr.decode().startswith("etrun: error: cannot resolve host 'no-such-host.invalid'")


def test_a_changed_host_key_is_always_refused(sshd, tmp_path):
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    other = (sshd["dir"] / "other_key.pub").read_text().split()
    (home / ".ssh" / "known_hosts").write_text(f"[127.0.0.2]:{sshd['port']} {other[0]} {other[1]}\n")
    r = run_etrun(["-np", "1", "-H", "127.0.0.2:1", *ssh_args(sshd), "/bin/true"],
                  env={"HOME": str(home)}, timeout=60)
    assert r.returncode == 255
    # One line naming the host, the file and the fix, the [host]:port name quoted for the shell.
    known_hosts = home / ".ssh" / "known_hosts"
    port = sshd["port"]
    assert (f"etrun: error: ssh 127.0.0.2:{port}: the host key differs from the one in "
            f"{known_hosts}: refusing to connect (if [127.0.0.2]:{port}'s key changed on purpose, "
            f"remove the old one with ssh-keygen -f {known_hosts} -R '[127.0.0.2]:{port}')"
            ) in r.stderr.decode(), r.stderr
    assert known_hosts.read_text() == f"[127.0.0.2]:{port} {other[0]} {other[1]}\n"  # nothing added


def test_elastic_treats_an_unreachable_host_as_failed_and_goes_on_without_it(sshd, tmp_path):
    # Nothing listens on 127.0.0.9: its rank fails like a crashed one, the host is blacklisted,
    # and (restart mode: every failure restarts the world) the job finishes on 127.0.0.2 alone.
    script = tmp_path / "discover.sh"
    script.write_text("#!/bin/sh\necho 127.0.0.2:1\necho 127.0.0.9:1\n")
    script.chmod(0o755)
    r = run_etrun(["-np", "2", "--min-np", "1", "--host-discovery-script", str(script),
                   "--elastic-mode", "restart", *ssh_args(sshd), "--ssh-connect-timeout", "5",
                   "sh", "-c", 'sleep 1; echo "size=$WORLD_SIZE restarts=$TORCHELASTIC_RESTART_COUNT"'],
                  env=env_for(sshd), timeout=120)
    assert r.returncode == 0, r.stderr
    err = r.stderr.decode()
    assert re.search(r"ssh 127\.0\.0\.9:\d+: cannot connect: Connection refused", err), err
    assert "127.0.0.9" in err and "blacklist" in err, err
    out = r.stdout.decode()
    # The last world is rank 0 alone on 127.0.0.2, started after one restart.
    assert out.rstrip().endswith("[0]<stdout>:size=1 restarts=1"), out
