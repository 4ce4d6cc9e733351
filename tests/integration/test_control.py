"""etrun status / list / scale against real running jobs, through their token-protected control
endpoints (a private registry under XDG_RUNTIME_DIR, made per test)."""
import json
import os
import socket
import subprocess
import time

import pytest

import control_auth
from conftest import ETRUN, wait_until


@pytest.fixture
def runtime(tmp_path):
    d = tmp_path / "run"
    d.mkdir(mode=0o700)
    return {"XDG_RUNTIME_DIR": str(d)}


def start(args, env, **kwargs):
    return subprocess.Popen([ETRUN, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, env=dict(os.environ, **env), **kwargs)


def etrun(args, env, timeout=60):
    return subprocess.run([ETRUN, *args], capture_output=True, text=True, timeout=timeout,
                          env=dict(os.environ, **env), stdin=subprocess.DEVNULL)


def status(env, job=None):
    r = etrun(["status", *([job] if job else []), "--json"], env)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def registry(env):
    d = os.path.join(env["XDG_RUNTIME_DIR"], "etrun")
    return [os.path.join(d, f) for f in os.listdir(d)] if os.path.isdir(d) else []


def stop(proc):
    proc.terminate()
    proc.communicate(timeout=30)


def test_status_and_list_show_a_static_job_and_its_ranks(runtime):
    job = start(["-np", "2", "--job-name", "static-one", "sleep", "30"], runtime)
    try:
        assert wait_until(lambda: etrun(["list"], runtime).stdout.startswith("NAME"), timeout=20)
        listed = etrun(["list"], runtime).stdout.splitlines()
        assert listed[1].split()[:3] == ["static-one", "running", "2"]
        s = status(runtime)  # the only job: no name needed
        assert (s["job"], s["state"], s["elastic"], s["world_size"], s["pid"]) == \
            ("static-one", "running", False, 2, job.pid)
        assert sorted((r["rank"], r["host"], r["local_rank"]) for r in s["ranks"]) == \
            [(0, "localhost", 0), (1, "localhost", 1)]
        assert all(os.path.exists(f"/proc/{r['pid']}") for r in s["ranks"])
        table = etrun(["status", "static-one"], runtime).stdout
        assert "Name:        static-one" in table and "RANK  LABEL  HOST" in table
        scale = etrun(["scale", "--to", "3"], runtime)
        assert scale.returncode == 1 and "is static: sizes are fixed" in scale.stderr
    finally:
        stop(job)
    # The registry entry goes with the job.
    assert registry(runtime) == []
    r = etrun(["status"], runtime)
    assert r.returncode == 1
    assert r.stderr == "etrun: error: no running etrun job of this user: start one, or check XDG_RUNTIME_DIR\n"
    assert etrun(["list"], runtime).stdout == "no running etrun jobs\n"


def test_the_control_endpoint_refuses_requests_without_the_token(runtime):
    """The token never crosses the wire (control/control_auth.h): a request without the exchange,
    or with the token itself as a Bearer header, gets 401 before its body is read; one signed under
    a session of the token gets through; a captured one is not taken again, on its connection or
    on another; a body changed on the way is refused."""
    job = start(["-np", "1", "--job-name", "guarded", "sleep", "30"], runtime)
    try:
        assert wait_until(lambda: len(registry(runtime)) == 1, timeout=20)
        path = registry(runtime)[0]
        assert os.stat(path).st_mode & 0o777 == 0o600
        assert os.stat(os.path.dirname(path)).st_mode & 0o777 == 0o700
        entry = json.load(open(path))
        assert entry["pid"] == job.pid and entry["pid_start"] == control_auth.start_time(job.pid)
        token, port = entry["token"], entry["port"]
        # A million-byte body announced and never sent: the 401 comes at once all the same.
        for header in ["", f"Authorization: Bearer {token}\r\n", f"Etrun-Auth: {token}\r\n"]:
            with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
                s.sendall(f"POST /overrides HTTP/1.1\r\nHost: x\r\n{header}Content-Length: 1000000\r\n\r\n".encode())
                answer = s.recv(4096)
            assert answer.startswith(b"HTTP/1.1 401 "), (header, answer)
        client = control_auth.Client(token, port)
        client.hello()
        captured = client.signed("GET", "/status")
        status, body, signed = client.send(captured)
        assert (status, signed, json.loads(body)["job"]) == (200, True, "guarded")
        assert client.send(captured)[0] == 401  # the same request again on its connection
        client.close()
        other = control_auth.Client(token, port)
        other.hello()
        assert other.send(captured)[0] == 401  # ... and on another
        other.close()
        tampered = control_auth.Client(token, port)
        tampered.hello()
        request = tampered.signed("POST", "/overrides", b'{"add":{},"remove":[],"to":1}')
        assert tampered.send(request.replace(b'"to":1', b'"to":9'))[0] == 401
        tampered.close()
    finally:
        stop(job)


def test_a_registry_entry_whose_pid_was_reused_is_no_job(runtime, tmp_path):
    """An entry is a job only while its pid runs the process that wrote it (pid and start time):
    one whose pid another process has now, or an older etrun's without a start time, is never
    asked anything, so a listener on its port (another user's) gets no byte. A live entry whose
    port something else took gets the hello only, and one line naming the job."""
    listener = control_auth.Listener(control_auth.plain_http)
    other = subprocess.Popen(["sleep", "60"])  # the process the pid belongs to now
    try:
        d = os.path.join(runtime["XDG_RUNTIME_DIR"], "etrun")
        os.makedirs(d, mode=0o700, exist_ok=True)
        token = os.urandom(32).hex()
        entry = {"job": "ghost", "pid": other.pid, "pid_start": control_auth.start_time(other.pid) + 5,
                 "port": listener.port, "token": token, "started": "", "address": "127.0.0.1"}
        for name, fields in [("ghost", entry), ("older", {k: v for k, v in entry.items() if k != "pid_start"})]:
            with open(os.path.join(d, name + ".json"), "w") as f:
                json.dump({**fields, "job": name}, f)
            os.chmod(os.path.join(d, name + ".json"), 0o600)
        for args in (["status"], ["status", "ghost"], ["status", "older"], ["list"], ["scale", "ghost", "--to", "1"]):
            r = etrun(args, runtime)
            if args == ["list"]:
                assert r.stdout == "no running etrun jobs\n", r
            else:
                assert r.returncode == 1, r
                assert r.stderr.startswith("etrun: error: no running etrun job of this user"), r.stderr
        assert not os.path.exists(os.path.join(d, "ghost.json"))  # stale: removed
        assert os.path.exists(os.path.join(d, "older.json"))  # maybe an older etrun's: left
        time.sleep(0.2)
        assert listener.bytes() == b""
        # The pid and start time right: asked, but the listener does not prove it knows the token.
        with open(os.path.join(d, "ghost.json"), "w") as f:
            json.dump({**entry, "pid_start": control_auth.start_time(other.pid)}, f)
        r = etrun(["status", "ghost"], runtime)
        assert r.returncode == 1
        assert r.stderr == (f"etrun: error: job 'ghost' did not prove it knows the job's token (it answered "
                            f"200 without one): refusing to send it anything (is something else listening "
                            f"at 127.0.0.1:{listener.port}?)\n")
        assert wait_until(lambda: b"Etrun-Auth: v1 hello " in listener.bytes(), timeout=5)
        assert token.encode() not in listener.bytes() and b"/status" not in listener.bytes()
    finally:
        other.kill()
        other.wait()
        listener.close()


def test_scale_adds_and_removes_hosts_of_an_elastic_job_and_rolls_back_on_timeout(runtime, tmp_path):
    script = tmp_path / "discover.sh"
    script.write_text("#!/bin/sh\necho localhost:1\n")
    script.chmod(0o755)
    events = tmp_path / "events.jsonl"
    job = start(["-np", "1", "--min-np", "1", "--max-np", "4", "--host-discovery-script", str(script),
                 "--elastic-mode", "restart", "--job-name", "grow", "--events-file", str(events),
                 "sleep", "60"], runtime)
    try:
        assert wait_until(lambda: registry(runtime) and status(runtime)["world_size"] == 1, timeout=20)
        r = etrun(["scale", "grow", "--add", "127.0.0.1:2", "--timeout", "30s"], runtime)
        assert r.returncode == 0, r.stderr
        assert r.stdout == ("job 'grow' scaled: 2 of 2 ranks on 127.0.0.1; the new world of 3 ranks "
                            "is training (round 2)\n")
        s = status(runtime, "grow")
        assert s["world_size"] == 3 and s["overrides"]["add"] == {"127.0.0.1": 2}
        assert sorted(r["host"] for r in s["ranks"]) == ["127.0.0.1", "127.0.0.1", "localhost"]
        # Rollback: with the world capped at 3, a 4th slot can never start.
        r = etrun(["scale", "grow", "--to", "3"], runtime)
        assert r.returncode == 0, r.stderr
        r = etrun(["scale", "grow", "--add", "127.0.0.1:3", "--timeout", "1.5s"], runtime)
        assert r.returncode == 1
        assert r.stderr == ("etrun: error: job 'grow' did not reach the new size within 1.5s "
                            "(2 of 3 ranks on 127.0.0.1); the change was rolled back\n")
        assert status(runtime, "grow")["overrides"] == {"add": {"127.0.0.1": 2}, "remove": [], "to": 3}
        r = etrun(["scale", "grow", "--remove", "127.0.0.1", "--timeout", "30s"], runtime)
        assert r.returncode == 0, r.stderr
        s = status(runtime, "grow")
        assert [r["host"] for r in s["ranks"]] == ["localhost"] and s["world_size"] == 1
    finally:
        stop(job)
    sizes = [e["world_size"] for e in map(json.loads, events.read_text().splitlines()) if e["event"] == "round"]
    assert sizes[0] == 1 and 3 in sizes and sizes[-1] == 1


def test_bad_scale_requests_are_usage_errors(runtime):
    for args, message in [
        (["scale"], "say what to change: --add HOST:SLOTS, --remove HOST, --to N or --clear"),
        (["scale", "--add", "h:0"], "--add: expected HOST:SLOTS with at least 1 slot, got 'h:0'"),
        (["scale", "--add=-G:1"], "--add: host names cannot begin with '-' (ssh or a remote shell would "
                                  "read '-G' as an option): give the host's name or address, got '-G:1'"),
        (["scale", "--to", "3", "--timeout", "soon"], "--timeout: expected a duration such as 90s, 10m or 1h, got 'soon'"),
    ]:
        r = etrun(args, runtime)
        assert r.returncode == 2, args
        assert r.stderr == f"etrun: error: {message}\n"
    r = etrun(["scale", "--add", "h:1", "--remove", "h"], runtime)
    assert r.returncode == 2 and r.stderr.startswith("etrun: error: ")


def test_the_verbs_are_verbs_only_as_the_first_argument(runtime, tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "status").write_text("#!/bin/sh\necho a program named status\n")
    (bin_dir / "status").chmod(0o755)
    env = dict(runtime, PATH=f"{bin_dir}:{os.environ['PATH']}")
    for args in (["-np", "1", "status"], ["--", "status"]):
        if args[0] == "--":
            args = ["-np", "1", "--", "status"]
        r = etrun(args, env)
        assert r.returncode == 0, r.stderr
        assert r.stdout == "[0]<stdout>:a program named status\n"


def test_scale_grows_and_drains_a_horovod_protocol_job_without_losing_a_step(runtime, tmp_path, marker_env):
    from test_elastic_protocol import HOSTNAME, ElasticJob, committed_steps, sizes_in_order
    events = tmp_path / "events.jsonl"
    job = ElasticJob(tmp_path, dict(marker_env, **runtime), ["localhost", "127.0.0.1"], steps=150,
                     extra=["--job-name", "hvd", "--events-file", str(events), "--grace-period", "30"])
    assert job.wait_for_size(2)
    r = etrun(["scale", "hvd", "--add", f"{HOSTNAME}:1", "--timeout", "60s"], runtime)
    returned = time.monotonic()
    assert r.returncode == 0, r.stderr
    # It returned once the new world trained, not when the new process started (issue 13): the
    # round's world_ready is in the events already, and it says so.
    assert r.stdout.endswith("; the new world of 3 ranks is training (round 2)\n"), r.stdout
    ready = [json.loads(l) for l in events.read_text().splitlines() if '"world_ready"' in l]
    assert [e["world_size"] for e in ready] == [2, 3]
    assert status(runtime, "hvd")["world_ready"] is True
    assert job.wait_for_size(3)
    assert time.monotonic() - returned < 30
    r = etrun(["scale", "hvd", "--remove", "127.0.0.1", "--timeout", "60s"], runtime)
    assert r.returncode == 0, r.stderr
    assert job.wait_for_size(2)
    rc, err = job.finish()
    assert rc == 0, err
    lines = job.lines()
    assert sizes_in_order(lines) == [2, 3, 2]
    assert committed_steps(lines) == set(range(150))
    exits = [json.loads(l) for l in events.read_text().splitlines()]
    removed = [e for e in exits if e["event"] == "rank_exited" and e["host"] == "127.0.0.1"]
    # Drained at its next commit: it left on its own, long before the 30 s grace period's SIGKILL.
    assert len(removed) == 1 and removed[0]["reason"] == "drained", removed
    assert removed[0]["signal"] != 9
