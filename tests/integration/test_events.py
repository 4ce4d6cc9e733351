"""--events-file through the real binary: the JSON Lines a static and an elastic job write."""
import json
import os
import subprocess
import time

from conftest import ETRUN, PYTHON, WORKER, run_etrun, wait_until


def read_events(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


def test_a_static_job_with_a_failure_reports_starts_exits_and_the_end(tmp_path):
    path = tmp_path / "events.jsonl"
    r = run_etrun(["-np", "3", "--events-file", str(path), PYTHON, WORKER, "exit", "1", "7"], timeout=60)
    assert r.returncode == 7
    events = read_events(path)
    names = [e["event"] for e in events]
    assert names[0] == "job_start" and names[-1] == "job_end"
    assert names.count("rank_started") == 3 and names.count("rank_exited") == 3
    start = events[0]
    assert start["job"] == "worker" and start["np"] == 3 and start["elastic"] is False
    assert start["hosts"] == [{"host": "localhost", "slots": 3}]
    assert start["command"][-3:] == ["exit", "1", "7"] and start["pid"] > 0
    assert all(e["ts"].endswith("Z") and e["t"] >= 0 for e in events)
    assert [e["t"] for e in events] == sorted(e["t"] for e in events)
    started = {e["rank"]: e for e in events if e["event"] == "rank_started"}
    exited = {e["rank"]: e for e in events if e["event"] == "rank_exited"}
    assert sorted(started) == [0, 1, 2] and all(started[r]["pid"] == exited[r]["pid"] for r in started)
    assert (exited[1]["code"], exited[1]["signal"], exited[1]["reason"]) == (7, None, "failed")
    assert {exited[0]["reason"], exited[2]["reason"]} == {"stopped"}  # etrun stopped them
    assert events[-1]["exit_code"] == 7
    assert events[-1]["cause"] == "rank 1 on localhost exited with code 7; stopped the other 2 ranks"


def test_an_elastic_job_reports_discovery_rounds_resets_and_exit_reasons(tmp_path):
    hosts = tmp_path / "hosts"
    hosts.write_text("localhost:1\n")
    script = tmp_path / "discover.sh"
    script.write_text(f"#!/bin/sh\ncat {hosts}\n")
    script.chmod(0o755)
    path = tmp_path / "events.jsonl"
    # Restart mode: the first world waits to be stopped; the second exits at once.
    proc = subprocess.Popen(
        [ETRUN, "-np", "1", "--min-np", "1", "--max-np", "2", "--host-discovery-script", str(script),
         "--discovery-interval", "0.2", "--elastic-mode", "restart", "--events-file", str(path),
         "--job-name", "resize-me", "sh", "-c",
         'if [ "$TORCHELASTIC_RESTART_COUNT" = 0 ]; then exec sleep 60; fi'],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    assert wait_until(lambda: path.exists() and "rank_started" in path.read_text(), timeout=30)
    hosts.write_text("localhost:2\n")
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    events = read_events(path)
    assert events[0]["job"] == "resize-me" and events[0]["elastic"] is True
    summary = []
    for e in events[1:]:
        if e["event"] == "discovery":
            summary.append("discovery " + ",".join(f"{h['host']}:{h['slots']}" for h in e["hosts"]))
        elif e["event"] == "round":
            summary.append(f"round {e['round']} size {e['world_size']}")
        elif e["event"] == "rank_started":
            summary.append(f"start {e['rank']} round {e['round']}")
        elif e["event"] == "rank_exited":
            summary.append(f"exit {e['rank']} {e['reason']}")
        elif e["event"] == "reset":
            summary.append(f"reset {e['resets']}: {e['reason']}")
        else:
            summary.append(e["event"])
    # Training stops at reset_begin and goes on at world_ready (restart mode: once the ranks run).
    assert summary[:8] == ["discovery localhost:1", "round 1 size 1", "start 0 round 1", "world_ready",
                           "discovery localhost:2", "reset_begin", "exit 0 stopped",
                           "reset 1: the hosts changed"]
    assert summary[8:12] == ["round 2 size 2", "start 0 round 2", "start 1 round 2", "world_ready"]
    assert sorted(summary[12:14]) == ["exit 0 finished", "exit 1 finished"]
    assert summary[14:] == ["job_end"] and events[-1]["exit_code"] == 0


def test_an_unwritable_events_file_is_a_usage_error_before_anything_starts(tmp_path):
    r = run_etrun(["-np", "1", "--events-file", str(tmp_path / "no" / "such" / "dir.jsonl"), "true"])
    assert r.returncode == 2
    assert r.stderr.decode().startswith("etrun: error: cannot write the events file ")
    assert "choose a writable --events-file path" in r.stderr.decode()


def test_a_symlink_at_the_events_file_or_a_rank_s_file_is_never_written_through(tmp_path):
    # Another user may plant `ev.jsonl -> victim`: etrun would truncate the victim. It refuses in
    # one line and writes nothing; so for a rank's own files under --output-filename.
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    events = tmp_path / "ev.jsonl"
    events.symlink_to(victim)
    r = run_etrun(["-np", "1", "--events-file", str(events), "true"])
    assert r.returncode == 2
    assert r.stderr.decode() == (f"etrun: error: the events file {events} is a symbolic link, which etrun "
                                 "does not write through: remove it, or choose another --events-file path\n")
    assert victim.read_text() == "precious\n"
    logs = tmp_path / "logs"
    (logs / "rank.0").mkdir(parents=True)
    (logs / "rank.0" / "stdout").symlink_to(victim)
    r = run_etrun(["-np", "1", "--output-filename", str(logs), "echo", "hi"])
    assert r.returncode != 0
    err = r.stderr.decode()
    assert f"{logs}/rank.0/stdout is a symbolic link, which etrun does not write through" in err, err
    assert len([line for line in err.splitlines() if line.startswith("etrun: error:")]) == 1, err
    assert victim.read_text() == "precious\n"
