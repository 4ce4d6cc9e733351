"""A pool's endpoint and a job's trust in it (issue 36, items 3 and 5): the token never crosses the
wire, so whatever answers at a pool's address (a port taken while the pool was down) gets nothing
from a job that holds the token, not even its description; a pool's token is new at every start;
and a grant's start_through (a command the job runs) is taken from a pool of this user's registry,
and from a pool reached by address only when ETRUN_POOL_TRUST_START=1 says so. The listeners and
the fake pool are tests/integration/control_auth.py's (the exchange written again in Python)."""
import json
import os
import signal
import socket
import subprocess
import uuid

import pytest

import control_auth
from conftest import ETRUN, run_etrun, wait_until


@pytest.fixture
def runtime(tmp_path):
    d = tmp_path / "run"
    d.mkdir(mode=0o700)
    return {"XDG_RUNTIME_DIR": str(d)}


def closes_at_once(conn, record):
    pass


def not_http(conn, record):
    record(conn.recv(65536))
    conn.sendall(b"SSH-2.0-OpenSSH_9.2p1 Debian-2\r\n")
    while True:
        data = conn.recv(65536)
        if not data:
            return
        record(data)


@pytest.mark.parametrize("serve, reason", [
    (control_auth.plain_http, "it answered 200 without one"),
    (closes_at_once, "it closed the connection"),
    (not_http, "it answered something that is not HTTP"),
])
def test_whatever_listens_at_a_pools_address_never_hears_the_token(serve, reason, marker_env):
    # Given ETRUN_POOL_TOKEN and --pool 127.0.0.1:PORT where something else listens, etrun sends
    # it a random hello and nothing else (not the token, not the job), and fails in one line that
    # names a pool.
    listener = control_auth.Listener(serve)
    token = os.urandom(32).hex()
    where = f"127.0.0.1:{listener.port}"
    try:
        r = run_etrun(["--pool", where, "--job-name", "secretjob", "-np", "1", "true"],
                      env={**marker_env, "ETRUN_POOL_TOKEN": token}, timeout=30)
        received = listener.bytes()
        assert token.encode() not in received
        for secret in (b"secretjob", b"/jobs", b"priority", token[:16].encode()):
            assert secret not in received, received
        if serve is not closes_at_once:
            assert b"Etrun-Auth: v1 hello " in received
        assert r.returncode == 1
        assert r.stderr.decode() == (
            f"etrun: error: pool '{where}' did not prove it knows the pool's token ({reason}): "
            f"refusing to send it anything (is something else listening there?)\n")
    finally:
        listener.close()


def test_a_pool_that_is_down_is_named_a_pool(marker_env):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    r = run_etrun(["--pool", f"127.0.0.1:{port}", "-np", "1", "true"],
                  env={**marker_env, "ETRUN_POOL_TOKEN": "a" * 64}, timeout=30)
    assert r.returncode == 1
    assert r.stderr.decode() == (f"etrun: error: cannot reach pool '127.0.0.1:{port}' (127.0.0.1:{port}): "
                                 f"Connection refused\n")


def test_a_pools_token_is_new_at_every_start(runtime, marker_env):
    name = "p" + uuid.uuid4().hex[:8]
    env = {**runtime, **marker_env}
    tokens = []
    for _ in range(2):
        pool = subprocess.Popen([ETRUN, "pool", "start", name, "-H", "localhost:1", "--gpus", "none"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                stdin=subprocess.DEVNULL, env={**os.environ, **env})
        try:
            assert wait_until(lambda: run_etrun(["pool", "status", name], env=env).returncode == 0, timeout=15)
            tokens.append(run_etrun(["pool", "token", name], env=env).stdout.decode().strip())
            entry = json.load(open(os.path.join(runtime["XDG_RUNTIME_DIR"], "etrun", "pools", name + ".json")))
            assert entry["pid"] == pool.pid and entry["pid_start"] == control_auth.start_time(pool.pid)
        finally:
            pool.send_signal(signal.SIGTERM)
            pool.wait(timeout=10)
    assert len(tokens[0]) == 64 and len(tokens[1]) == 64 and tokens[0] != tokens[1]


class FakePool:
    """A pool endpoint that knows its token and grants one host, reached through `template`."""

    def __init__(self, template):
        self.token = os.urandom(32).hex()
        self.paths = []
        grant = {"hosts": [{"host": "far-away-host", "slots": [0], "devices": [""],
                            "start_through": template}],
                 "target": 1, "queued": False, "version": 1}

        def record(path, status, value):
            def route(body):
                self.paths.append(path)
                return status, value
            return route

        self.listener = control_auth.Listener(control_auth.fake_pool(self.token, {
            ("POST", "/jobs"): record("join", 200, {"id": "far", "version": 0}),
            ("POST", "/jobs/far/sync"): record("sync", 200, grant),
            ("DELETE", "/jobs/far"): record("leave", 200, {"ok": True}),
        }))

    def register(self, runtime, name):
        """Publishes the fake in the registry as a pool of this user on this machine (this test
        process is its pid)."""
        d = os.path.join(runtime["XDG_RUNTIME_DIR"], "etrun", "pools")
        os.makedirs(d, mode=0o700, exist_ok=True)
        os.chmod(os.path.dirname(d), 0o700)
        path = os.path.join(d, name + ".json")
        with open(path, "w") as f:
            json.dump({"job": name, "pid": os.getpid(), "pid_start": control_auth.start_time(os.getpid()),
                       "port": self.listener.port, "token": self.token, "started": "",
                       "address": "127.0.0.1"}, f)
        os.chmod(path, 0o600)


def job_argv(pool):
    return [ETRUN, "--pool", pool, "--job-name", "far", "-np", "1", "--min-np", "1", "--max-np", "1",
            "--elastic-mode", "restart", "true"]


def test_a_start_through_from_a_pool_reached_by_address_is_refused(tmp_path, runtime, marker_env):
    # Given a pool at HOST:PORT (with the right token) whose grant says to start ranks through a
    # command, the job refuses the grant in one line and runs nothing of it.
    ran = tmp_path / "ran"
    fake = FakePool(f"touch {ran} && : {{host}}")
    where = f"127.0.0.1:{fake.listener.port}"
    try:
        r = run_etrun(job_argv(where)[1:], env={**runtime, **marker_env, "ETRUN_POOL_TOKEN": fake.token},
                      timeout=60)
        assert r.returncode == 1
        lines = r.stderr.decode().splitlines()
        assert lines[-1] == (
            f"etrun: error: pool '{where}' (reached by address, not one of this user's pools on this "
            f"machine) asks this job to start its ranks on far-away-host through the command "
            f"\"touch {ran} && : {{host}}\": refused: set ETRUN_POOL_TRUST_START=1 if you trust "
            f"whoever runs that pool to run commands as you"), lines
        assert not ran.exists()
        assert fake.paths[:2] == ["join", "sync"]
        assert fake.token.encode() not in fake.listener.bytes()
    finally:
        fake.listener.close()


@pytest.mark.parametrize("how", ["trusted by address", "in the registry"])
def test_a_start_through_from_a_trusted_or_own_pool_is_taken(how, tmp_path, runtime, marker_env):
    # Given the same grant from a pool the user trusts (ETRUN_POOL_TRUST_START=1) or from a pool
    # of this user's registry (--pool NAME), the job starts the host's ranks through the command.
    ran = tmp_path / "ran"
    fake = FakePool(f"touch {ran} && : {{host}}")
    env = {**os.environ, **runtime, **marker_env}
    if how == "in the registry":
        fake.register(runtime, "own")
        argv = job_argv("own")
    else:
        env.update(ETRUN_POOL_TOKEN=fake.token, ETRUN_POOL_TRUST_START="1")
        argv = job_argv(f"127.0.0.1:{fake.listener.port}")
    job = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                           env=env)
    try:
        assert wait_until(ran.exists, timeout=30), job.stderr.read1().decode() if job.poll() is not None else ""
    finally:
        if job.poll() is None:
            job.send_signal(signal.SIGTERM)
        job.communicate(timeout=30)
        fake.listener.close()
