"""The pre-flight (--preflight, --preflight=warn; issue 38): on four bed hosts over SSH, one host's
link throttled with `tc qdisc ... tbf` (its sends) and one host without the training script (an
empty folder bound over the job's folder there). A static job refuses to start, naming both with
what was measured; with =warn it runs on all; with healthy hosts it runs. On this machine alone: a
missing script, and the flags' errors."""
import json
import os
import re
import subprocess

import pytest

from conftest import ETRUN, PYTHON, processes_with_marker, rank_lines, run_etrun, wait_until
from test_elastic_protocol import sizes_in_order
from test_multihost import BedJob
from testbed import bed_fixture

bed = bed_fixture(hosts=4)
HOSTS = "h1:1,h2:1,h3:1,h4:1"
TRAIN = 'import os, socket; print("up", os.environ["HOROVOD_RANK"], socket.gethostname())\n'


def events(path, name):
    with open(path) as f:
        return [e for e in map(json.loads, f) if e["event"] == name]


def etrun_on_bed(bed, tmp_path, marker_env, *flags, hosts=("-H", HOSTS), np=4):
    key = os.path.join(bed.home, ".ssh", "id_ed25519")
    (tmp_path / "train.py").write_text(TRAIN)
    return subprocess.run(bed.exec_argv([ETRUN, "-np", str(np), *hosts, "-i", key, *flags,
                                         "--events-file", str(tmp_path / "events.jsonl"), PYTHON,
                                         "train.py"]),
                          env=bed.env(dict(os.environ, **marker_env)), capture_output=True, text=True,
                          timeout=180, stdin=subprocess.DEVNULL, cwd=tmp_path)


@pytest.fixture
def throttled(bed):
    """h3 sends at 8 Mbit/s (a token bucket on its eth0), a thousandth of the bridge's rate here."""
    r = bed.run_host("h3", ["tc", "qdisc", "add", "dev", "eth0", "root", "tbf", "rate", "8mbit",
                            "burst", "16kb", "latency", "400ms"])
    if r.returncode != 0:
        pytest.skip("tc tbf is not available here: " + r.stderr.strip())
    try:
        yield "h3"
    finally:
        bed.run_host("h3", ["tc", "qdisc", "del", "dev", "eth0", "root"])


@pytest.fixture
def no_script_on_h4(bed, tmp_path):
    """h4 sees an empty folder where the job's folder (tmp_path, its working directory) is."""
    empty = tmp_path.parent / (tmp_path.name + "-empty")
    empty.mkdir()
    r = bed.run_host("h4", ["mount", "--bind", str(empty), str(tmp_path)])
    assert r.returncode == 0, r.stderr
    try:
        yield "h4"
    finally:
        bed.run_host("h4", ["umount", str(tmp_path)])


def test_a_static_job_refuses_to_start_naming_the_throttled_host_and_the_one_without_the_script(
        bed, tmp_path, marker_env, throttled, no_script_on_h4):
    r = etrun_on_bed(bed, tmp_path, marker_env, "--preflight")
    assert r.returncode == 3, r.stderr
    lines = r.stderr.splitlines()
    slow = [line for line in lines if line.startswith("etrun: error: pre-flight: h3: ")]
    assert len(slow) == 1, r.stderr
    rate = r"[\d.]+ Mbit/s"
    assert re.fullmatch(rf"etrun: error: pre-flight: h3: slow link: sends at {rate} to h4, {rate} to h1, "
                        rf"below a quarter of the other links' median {rate}", slow[0]), slow[0]
    assert f"etrun: error: pre-flight: h4: no script 'train.py' for {PYTHON} in {tmp_path}" in lines, r.stderr
    assert lines[-1] == ("etrun: error: pre-flight found 2 of 4 hosts sick (h3, h4): nothing was "
                         "started; fix them or leave them out, or run anyway with --preflight=warn")
    assert "up" not in r.stdout and rank_lines(r.stdout) == {}, r.stdout
    [pre] = events(tmp_path / "events.jsonl", "preflight")
    assert pre["hosts"] == ["h1", "h2", "h3", "h4"]
    assert [s["host"] for s in pre["sick"]] == ["h3", "h4"]
    assert pre["action"] == "refuse" and pre["median_mbit_s"] > 100 and pre["seconds"] > 0
    assert events(tmp_path / "events.jsonl", "rank_started") == []
    [end] = events(tmp_path / "events.jsonl", "job_end")
    assert end["exit_code"] == 3
    marker = next(iter(marker_env.values()))
    assert wait_until(lambda: processes_with_marker(marker) == [], timeout=20)


def test_warn_names_the_sick_hosts_and_runs_on_all(bed, tmp_path, marker_env, throttled):
    r = etrun_on_bed(bed, tmp_path, marker_env, "--preflight=warn")
    assert r.returncode == 0, r.stderr
    warned = [line for line in r.stderr.splitlines() if line.startswith("etrun: warning: pre-flight: ")]
    assert len(warned) == 1, r.stderr
    assert warned[0].startswith("etrun: warning: pre-flight: h3: slow link: sends at "), warned
    assert warned[0].endswith("; its ranks run anyway (--preflight=warn)"), warned
    assert sorted(r.stdout.splitlines()) == [f"[{i}]<stdout>:up {i} h{i + 1}" for i in range(4)], r.stdout
    [pre] = events(tmp_path / "events.jsonl", "preflight")
    assert pre["action"] == "warn" and [s["host"] for s in pre["sick"]] == ["h3"]


def test_healthy_hosts_pass_and_the_job_runs(bed, tmp_path, marker_env):
    r = etrun_on_bed(bed, tmp_path, marker_env, "--preflight", "--log-level", "INFO")
    assert r.returncode == 0, r.stderr
    assert sorted(r.stdout.splitlines()) == [f"[{i}]<stdout>:up {i} h{i + 1}" for i in range(4)], r.stdout
    summary = [line for line in r.stderr.splitlines() if line.startswith("etrun: info: pre-flight: ")]
    assert len(summary) == 1, r.stderr
    assert re.fullmatch(r"etrun: info: pre-flight: 4 hosts checked in [\d.]+ s, 0 sick, median stream "
                        r"\d+ Mbit/s, round trips up to [\d.]+ ms", summary[0]), summary[0]
    [pre] = events(tmp_path / "events.jsonl", "preflight")
    assert pre["action"] == "start" and pre["sick"] == [] and pre["max_rtt_ms"] > 0


def test_an_elastic_job_leaves_the_sick_hosts_out_and_says_why(bed, tmp_path, marker_env, throttled,
                                                               no_script_on_h4):
    discover = tmp_path / "discover.sh"
    discover.write_text("#!/bin/sh\nprintf 'h1:1\\nh2:1\\nh3:1\\nh4:1\\n'\n")
    discover.chmod(0o755)
    # -np 2: the job starts once two hosts are well; --max-np 4 would take all four.
    r = etrun_on_bed(bed, tmp_path, marker_env, "--preflight", "--min-np", "2", "--max-np", "4",
                     hosts=("--host-discovery-script", str(discover)), np=2)
    assert r.returncode == 0, r.stderr
    lines = r.stderr.splitlines()
    left = [line for line in lines if line.startswith("etrun: warning: pre-flight: ")]
    assert len(left) == 2, r.stderr
    assert re.fullmatch(r"etrun: warning: pre-flight: h3: slow link: sends at [\d.]+ Mbit/s to h4, [\d.]+ "
                        r"Mbit/s to h1, below a quarter of the other links' median [\d.]+ Mbit/s; left out of the job",
                        left[0]), left
    assert left[1] == (f"etrun: warning: pre-flight: h4: no script 'train.py' for {PYTHON} in {tmp_path}; "
                       "left out of the job"), left
    # It ran on the two others only.
    assert sorted(r.stdout.splitlines()) == ["[0]<stdout>:up 0 h1", "[1]<stdout>:up 1 h2"], r.stdout
    log = tmp_path / "events.jsonl"
    [pre] = events(log, "preflight")
    assert pre["action"] == "leave_out" and [s["host"] for s in pre["sick"]] == ["h3", "h4"]
    blacklisted = {e["host"]: e["reason"] for e in events(log, "host_blacklisted")}
    assert sorted(blacklisted) == ["h3", "h4"], blacklisted
    assert blacklisted["h4"] == f"pre-flight: no script 'train.py' for {PYTHON} in {tmp_path}"
    assert {e["host"] for e in events(log, "rank_started")} == {"h1", "h2"}


def test_a_host_added_to_a_running_elastic_job_is_checked_first_and_joins_once_well(bed, tmp_path,
                                                                                  marker_env, throttled):
    # h3 comes while h1 and h2 train: its slow link keeps it out (blacklisted, the world stays 2);
    # once its link is well again it is checked again after its cooldown, and joins.
    job = BedJob(bed, tmp_path, marker_env, ["h1", "h2"], steps=160,
                 extra=["--preflight", "--blacklist-cooldown-range", "2", "3"])
    assert job.wait_for_size(2), job.err()
    job.set_hosts(["h1", "h2", "h3"])
    assert wait_until(lambda: "host_blacklisted" in (e["event"] for e in job.event_list()), timeout=30), \
        [e for e in job.event_list() if not e["event"].startswith("rank_")]
    assert not job.wait_for_size(3, timeout=2), job.err()  # it stays out
    bed.run_host("h3", ["tc", "qdisc", "del", "dev", "eth0", "root"])
    assert job.wait_for_size(3, timeout=60), job.err()
    assert job.finish() == 0, job.err()
    job.check_training(160)
    assert sizes_in_order(job.lines())[:2] == [2, 3]
    checks = [e for e in job.event_list() if e["event"] == "preflight"]
    assert [(c["hosts"][:1], c["action"]) for c in checks] == [(["h1"], "start"), (["h3"], "leave_out"),
                                                                 (["h3"], "start")], checks
    assert sorted(checks[1]["hosts"]) == ["h1", "h2", "h3"]  # the job's hosts were its peers
    [blacklisted] = [e for e in job.event_list() if e["event"] == "host_blacklisted"]
    assert blacklisted["host"] == "h3" and blacklisted["reason"].startswith("pre-flight: slow link: sends at ")
    assert "etrun: warning: pre-flight: h3: slow link: sends at " in job.err()


def test_a_host_without_the_script_on_this_machine(tmp_path, marker_env):
    (tmp_path / "sub").mkdir()
    r = run_etrun(["-np", "2", "--preflight", PYTHON, "missing.py"], env=marker_env, cwd=tmp_path)
    err = r.stderr.decode()
    assert r.returncode == 3, err
    assert err.splitlines() == [
        f"etrun: error: pre-flight: localhost: no script 'missing.py' for {PYTHON} in {tmp_path}",
        "etrun: error: pre-flight found 1 of 1 host sick (localhost): nothing was started; fix it or "
        "leave it out, or run anyway with --preflight=warn"], err
    assert r.stdout == b""


def test_a_program_missing_on_this_machine_is_refused_before_the_preflight_as_without_one(tmp_path,
                                                                                       marker_env):
    r = run_etrun(["-np", "1", "--preflight", "no-such-program-here"], env=marker_env, cwd=tmp_path)
    assert r.returncode == 127, r.stderr
    assert r.stderr.decode().splitlines() == [
        "etrun: error: cannot run 'no-such-program-here': command not found in PATH: check the "
        "command and PATH"], r.stderr


@pytest.mark.parametrize("flags, message", [
    (["--preflight=later"], "etrun: error: --preflight: expected one of warn, got 'later'"),
    (["--preflight="], "etrun: error: option --preflight has an empty value: give a value or leave the option out"),
    (["--mpi", "--preflight"], "etrun: error: --mpi and --preflight cannot be used together: mpirun "
                               "starts the ranks, and etrun's agents, which check the hosts, do not run: "
                               "drop one"),
])
def test_bad_preflight_flags_are_one_line(flags, message, marker_env):
    r = run_etrun(["-np", "1", *flags, "true"], env=marker_env)
    assert r.returncode == 2, r.stderr
    assert r.stderr.decode().splitlines() == [message], r.stderr


def test_a_word_after_preflight_is_the_command_not_its_value(marker_env):
    r = run_etrun(["-np", "1", "--preflight", "echo", "warn"], env=marker_env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode() == "[0]<stdout>:warn\n"
