"""A pool's endpoint and a job's trust in it (issue 36, items 3 and 5): the token never crosses the
wire, so whatever answers at a pool's address (a port taken while the pool was down) gets nothing
from a job that holds the token, not even its description; and a pool's token is new at every
start. The listeners are tests/integration/control_auth.py's (the exchange written again in
Python)."""
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
