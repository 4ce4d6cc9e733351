"""Limits: many ranks, many rendezvous connections, a slow client, a runaway discovery script."""
import json
import os
import re
import resource
import signal
import socket
import subprocess
import time

import pytest

from conftest import ETRUN, PYTHON, WORKER, processes_with_marker, rank_lines, run_etrun


def test_256_local_ranks_start_and_stop_cleanly(marker_env):
    r = run_etrun(["-np", "256", "sh", "-c", 'echo "$HOROVOD_RANK of $HOROVOD_SIZE"'],
                  env=marker_env, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    lines = rank_lines(r.stdout.decode())
    assert lines == {rank: [f"{rank} of 256"] for rank in range(256)}
    assert processes_with_marker(next(iter(marker_env.values()))) == []


def test_a_low_open_file_limit_is_raised_or_named():
    # Soft 256 is too few for 256 ranks, but the hard limit allows more: etrun raises it, and
    # the ranks get the original soft limit back.
    r = subprocess.run(["prlimit", "--nofile=256:4096", ETRUN, "-np", "256", "sh", "-c", "ulimit -n"],
                       capture_output=True, timeout=120, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr[-2000:]
    assert set(l for lines in rank_lines(r.stdout.decode()).values() for l in lines) == {"256"}
    r = subprocess.run(["prlimit", "--nofile=100:100", ETRUN, "-np", "256", "true"],
                       capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
    assert r.returncode == 2
    assert r.stderr.decode() == ("etrun: error: 256 ranks need about 832 open files but the hard "
                                 "limit is 100 (ulimit -Hn): raise it, or start fewer ranks per etrun\n")


def get(port, path="/probe/key"):
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n".encode())
        return int(s.recv(4096).split()[1])


def test_the_rendezvous_server_serves_beside_10000_idle_connections_and_a_slow_client():
    # 10,000 idle connections from one address (127.0.0.2, admitted): 4,096 are held, the most one
    # address may have, and the rest are answered 503 at once; the job's own address is served
    # beside them, and a slow client is cut off at the read timeout (docs/security.md).
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 10100:
        pytest.skip(f"the hard open-file limit ({hard}) is below 10,100")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 10100), hard))
    proc = subprocess.Popen([ETRUN, "-np", "1", "--rendezvous-allow", "127.0.0.2/32", "sh", "-c",
                             'echo "port $HOROVOD_GLOO_RENDEZVOUS_PORT"; exec sleep 60'],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    idle = []
    try:
        port = int(proc.stdout.readline().decode().split("port ")[1])
        slow = socket.create_connection(("127.0.0.1", port), timeout=30)
        slow_since = time.monotonic()
        slow.sendall(b"GET /slow")  # a slow-loris: never finishes its request line
        for _ in range(10000):
            idle.append(socket.create_connection(("127.0.0.1", port), timeout=30,
                                                 source_address=("127.0.0.2", 0)))
        assert get(port) == 404  # still served: a missing key
        assert get(port, "/a/b/c") == 400
        held = refused = 0
        for s in idle:
            s.setblocking(False)
            try:
                reply = s.recv(4096)
            except BlockingIOError:
                held += 1
                continue
            refused += reply.startswith(b"HTTP/1.1 503")
        assert held <= 4096 and refused > 0, (held, refused)
        # The slow client is cut off after the server's read timeout (10 s), not kept forever.
        slow.settimeout(30)
        reply = slow.recv(4096)
        if reply:  # answered with an error status, then closed
            assert reply.startswith(b"HTTP/1.1 4"), reply
            assert slow.recv(4096) == b""
        assert 8 < time.monotonic() - slow_since < 25
        assert proc.poll() is None
    finally:
        for s in idle:
            s.close()
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def write_script(tmp_path, body):
    path = tmp_path / "discover.sh"
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return str(path)


def test_a_discovery_script_listing_100000_hosts_is_capped_with_a_warning(tmp_path):
    script = write_script(tmp_path, "echo localhost:1\ni=0; while [ $i -lt 100000 ]; do echo h$i:1; i=$((i+1)); done\n")
    r = run_etrun(["-np", "1", "--max-np", "1", "--host-discovery-script", script, "true"], timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "more than 10000 hosts listed: using the first 10000" in r.stderr.decode()


def test_a_discovery_script_printing_more_than_1_mib_fails_clearly(tmp_path):
    script = write_script(tmp_path, f"exec {PYTHON} -c \"print('localhost:1\\n' * 200000)\"\n")
    r = run_etrun(["-np", "1", "--host-discovery-script", script, "true"], timeout=120)
    assert r.returncode == 1
    assert r.stderr.decode().startswith(
        "etrun: error: the host discovery script failed (printed more than 1 MiB on stdout (etrun "
        "reads at most that: one host:slots line per host))")



def test_a_slot_count_no_machine_has_is_a_bad_discovery_line(tmp_path):
    # Issue 22's run: a typo in a slot count (localhost:100000000) is refused like any bad line:
    # one error line, exit 1, no rank started (was: 65,536 ranks tried, 100,000 error lines).
    script = write_script(tmp_path, "echo localhost:100000000\n")
    r = run_etrun(["-np", "2", "--min-np", "1", "--host-discovery-script", script, "true"], timeout=60)
    assert r.returncode == 1
    assert r.stdout == b""
    assert r.stderr.decode() == (
        'etrun: error: the host discovery script printed a bad line 1: at most 4096 slots per host, '
        'got "localhost:100000000": fix the script; it must print host:slots lines\n')


def test_a_slot_count_typo_later_keeps_the_hosts_and_the_job(tmp_path):
    # A running job whose script starts printing an absurd count keeps its hosts, says so in a
    # warning per run, and finishes as if nothing happened.
    hosts = tmp_path / "hosts"
    hosts.write_text("localhost:2\n")
    gate = tmp_path / "gate"
    gate.write_text("")
    script = write_script(tmp_path, f"cat {hosts}\n")
    worker = f'echo up; while [ -e {gate} ]; do sleep 0.05; done; echo done'
    events = tmp_path / "events.jsonl"
    p = subprocess.Popen([ETRUN, "-np", "2", "--min-np", "1", "--discovery-interval", "0.2",
                          "--events-file", str(events), "--host-discovery-script", script,
                          "sh", "-c", worker],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    try:
        seen = b""
        while seen.count(b"up\n") < 2:
            line = p.stdout.readline()
            assert line, "etrun ended before both ranks were up"
            seen += line
        hosts.write_text("localhost:100000000\n")
        deadline = time.monotonic() + 30
        while events.read_text().count('"discovery_failed"') < 2:  # two runs saw the bad line
            assert time.monotonic() < deadline, "no discovery_failed event"
            time.sleep(0.05)
        gate.unlink()
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 0, err.decode()[-2000:]
    assert rank_lines((seen + out).decode()) == {0: ["up", "done"], 1: ["up", "done"]}
    lines = err.decode().splitlines()
    assert lines, "expected a warning about the bad line"
    assert all(l == 'etrun: warning: the host discovery script printed a bad line 1: at most 4096 '
                    'slots per host, got "localhost:100000000"; keeping the last host list'
               for l in lines), lines


def test_an_elastic_job_uses_only_the_ranks_the_open_file_limit_lets_etrun_supervise(tmp_path):
    # 4,000 discovered slots but a hard limit of 200 open files (3 per rank, 64 for etrun): one
    # warning naming the limit and the fix, and a world of 45 ranks that all start and finish
    # (was: a start attempt per slot and an error line for each one past the limit).
    # -np 50 above what can run is lowered to it, not waited for.
    script = write_script(tmp_path, "echo localhost:4000\n")
    r = subprocess.run(["prlimit", "--nofile=200:200", ETRUN, "-np", "50", "--min-np", "1",
                        "--host-discovery-script", script, "sh", "-c", "echo $HOROVOD_SIZE"],
                       capture_output=True, timeout=120, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stderr.decode() == (
        "etrun: warning: the open-file limit (200, ulimit -n) lets etrun supervise at most 45 "
        "ranks: the other 3955 slots are not used; say so with --max-np 45 or raise the limit "
        "(ulimit -Hn)\n")
    assert rank_lines(r.stdout.decode()) == {rank: ["45"] for rank in range(45)}
    # A job whose hosts fit says nothing about the limit.
    small = write_script(tmp_path, "echo localhost:2\n")
    r = subprocess.run(["prlimit", "--nofile=200:200", ETRUN, "-np", "2", "--min-np", "1",
                        "--host-discovery-script", small, "true"],
                       capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
    assert r.returncode == 0 and r.stderr == b"", r.stderr
    # Fewer than --min-np: nothing starts, one line, exit 2.
    r = subprocess.run(["prlimit", "--nofile=100:100", ETRUN, "-np", "20", "--min-np", "20",
                        "--host-discovery-script", script, "true"],
                       capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
    assert r.returncode == 2
    assert r.stderr.decode() == ("etrun: error: the open-file limit (100, ulimit -Hn) lets etrun "
                                 "supervise at most 12 ranks, fewer than the 20 the job needs: "
                                 "raise it, or start fewer ranks per etrun\n")


def etrun_lines(stderr):
    return [l for l in stderr.decode().splitlines() if l.startswith("etrun: ")]


def run_with_descriptors_taken(args, taken, env=None):
    """etrun under a hard open-file limit of 200, started with `taken` of them already open (as
    under a parent that leaks descriptors), so fewer ranks fit than etrun's cap allows."""
    fds = [os.open("/dev/null", os.O_RDONLY) for _ in range(taken)]
    try:
        return subprocess.run(["prlimit", "--nofile=200:200", ETRUN] + args, pass_fds=fds,
                              capture_output=True, timeout=120, stdin=subprocess.DEVNULL,
                              env=dict(os.environ, **(env or {})))
    finally:
        for fd in fds:
            os.close(fd)


def test_an_elastic_job_short_of_descriptors_says_so_once_and_goes_on_with_the_ranks_that_start(
        tmp_path, marker, marker_env):
    # Issue 22: 45 slots (what the limit of 200 lets etrun supervise), but 120 descriptors are
    # taken: a rank cannot be started (EMFILE). One warning naming the limit and the fix, no
    # start tried past it, the host is not blacklisted, and the job runs as its world the ranks
    # it can afford, fewer than could start (was: an error line per rank, the host blacklisted,
    # the job failed).
    script = write_script(tmp_path, "echo localhost:45\n")
    events = tmp_path / "events.jsonl"
    r = run_with_descriptors_taken(["-np", "45", "--min-np", "1", "--events-file", str(events),
                                    "--host-discovery-script", script,
                                    "sh", "-c", "echo $HOROVOD_SIZE"], 120, marker_env)
    assert r.returncode == 0, r.stderr[-2000:]
    lines = etrun_lines(r.stderr)
    assert len(lines) == 1, lines
    m = re.fullmatch(r"etrun: warning: cannot start worker localhost\[(\d+)\]: too many open "
                     r"files: etrun's open-file limit is 200 \(ulimit -Hn\); going on with (\d+) "
                     r"ranks from now on \(keeping room for etrun's own work\): raise the limit, "
                     r"or cap the job with --max-np (\d+)", lines[0])
    assert m and m.group(2) == m.group(3), lines[0]
    world = int(m.group(2))
    assert 1 <= world < int(m.group(1)) < 45
    # Workers started for the world of 45 were stopped (some may have printed first); the world
    # that ran is the smaller one.
    by_rank = rank_lines(r.stdout.decode())
    assert set(range(world)) <= set(by_rank) <= set(range(int(m.group(1)))), by_rank
    for rank, seen in by_rank.items():
        assert seen[-1] == (str(world) if rank < world else "45"), (rank, seen)
    recorded = [json.loads(l) for l in events.read_text().splitlines()]
    assert not [e for e in recorded if e["event"] == "host_blacklisted"]
    assert recorded[-1] == {**recorded[-1], "event": "job_end", "exit_code": 0, "cause": ""}
    assert processes_with_marker(marker) == []


def test_an_elastic_job_short_of_descriptors_below_min_np_ends_with_one_line(tmp_path, marker,
                                                                             marker_env):
    # The same shortage with --min-np 45: the ranks started are stopped at once (they would
    # sleep a minute), and the job ends with one line, exit 1 and the cause in job_end.
    script = write_script(tmp_path, "echo localhost:45\n")
    events = tmp_path / "events.jsonl"
    r = run_with_descriptors_taken(["-np", "45", "--min-np", "45", "--events-file", str(events),
                                    "--host-discovery-script", script, "sleep", "60"], 120,
                                   marker_env)
    assert r.returncode == 1, r.stderr[-2000:]
    lines = etrun_lines(r.stderr)
    assert len(lines) == 1, lines
    assert re.fullmatch(r"etrun: error: cannot start worker localhost\[\d+\]: too many open "
                        r"files: etrun's open-file limit is 200 \(ulimit -Hn\); etrun can run only "
                        r"\d+ ranks and keep room for its own work, fewer than --min-np 45: raise "
                        r"the limit, or lower --min-np", lines[0]), lines[0]
    end = json.loads(events.read_text().splitlines()[-1])
    assert end["event"] == "job_end" and end["exit_code"] == 1
    assert end["cause"] == lines[0][len("etrun: error: "):]
    assert processes_with_marker(marker) == []
