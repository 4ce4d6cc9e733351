"""Shared helpers for etrun's whole-binary tests: real processes, real signals, loopback only."""
import os
import re
import signal
import socket
import subprocess
import sys
import time
import uuid

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# The binary under test: ctest sets ETRUN_BIN to its own build's etrun (build/, build-asan/,
# build-tsan/), so each build's integration run exercises that build's binary.
ETRUN = os.environ.get("ETRUN_BIN", os.path.join(ROOT, "build", "etrun"))
PYTHON = "/usr/bin/python3"  # Debian's, with python3-torch
WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "worker.py")


def pytest_report_header(config):
    return "etrun under test: " + ETRUN


def pytest_sessionstart(session):
    if not os.access(ETRUN, os.X_OK):
        pytest.exit(f"etrun: error: no etrun binary at {ETRUN}: build it "
                    "(cmake --build build) or point ETRUN_BIN at one", returncode=2)


def run_etrun(args, timeout=120, env=None, **kwargs):
    """Runs etrun to completion and returns the CompletedProcess (bytes output)."""
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    return subprocess.run([ETRUN] + list(args), capture_output=True, timeout=timeout,
                          env=full_env, stdin=subprocess.DEVNULL, **kwargs)


def rank_lines(text, stream="stdout"):
    """Maps rank -> list of line bodies carrying that rank's prefix."""
    out = {}
    for line in text.splitlines():
        m = re.match(r"^\[(\d+)\]<%s>:(.*)$" % stream, line)
        if m:
            out.setdefault(int(m.group(1)), []).append(m.group(2))
    return out


def processes_with_marker(marker):
    """PIDs of live (non-zombie) processes whose environment contains marker."""
    found = []
    needle = marker.encode()
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if needle not in f.read():
                    continue
            with open(f"/proc/{pid}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
            if state != b"Z":
                found.append(int(pid))
        except OSError:
            continue
    return found


def store_get(port, path, source="127.0.0.1"):
    """GET `path` from the rendezvous store on this machine's `port`, from the address `source`;
    returns the status line's code."""
    with socket.socket() as s:
        s.bind((source, 0))
        s.settimeout(30)
        s.connect(("127.0.0.1", port))
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n".encode())
        reply = b""
        while b"\r\n" not in reply:
            chunk = s.recv(4096)
            if not chunk:
                break
            reply += chunk
    return int(reply.split()[1])


def wait_until(predicate, timeout=20.0, interval=0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()


@pytest.fixture
def marker():
    """A unique environment marker; every process started with it is killed at the end."""
    value = "ETRUN_TEST_MARKER=" + uuid.uuid4().hex
    yield value
    for pid in processes_with_marker(value):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


@pytest.fixture
def marker_env(marker):
    key, value = marker.split("=", 1)
    return {key: value}
