"""`etrun report EVENTS.jsonl`: the real binary on events files written here from the schema of
--events-file. Checks the summary against numbers computed here independently, the SVG with
xml.etree, the error paths' exit codes and messages, and that `report` is a verb only as etrun's
first argument."""
import json
import os
import stat
import xml.etree.ElementTree as ET

import pytest

from conftest import ETRUN, PYTHON, rank_lines, run_etrun

SVG = "{http://www.w3.org/2000/svg}"


def ts(t):
    """The "ts" of an event t seconds after 2026-11-22T07:00:00Z (the reader only shows it)."""
    ms = round(t * 1000)
    return "2026-11-22T%02d:%02d:%02d.%03dZ" % (7 + ms // 3600000, ms // 60000 % 60,
                                               ms // 1000 % 60, ms % 1000)


def ev(t, event, **fields):
    return dict({"ts": ts(t), "t": t, "event": event}, **fields)


def hosts(*names):
    return [{"host": n, "slots": 2} for n in names]


def started(t, rank, host, local_rank, rnd):
    return ev(t, "rank_started", rank=rank, host=host, local_rank=local_rank,
              pid=1000 + rank, round=rnd)


def exited(t, rank, host, local_rank, reason, code=None, signal=None):
    return ev(t, "rank_exited", rank=rank, host=host, local_rank=local_rank, pid=1000 + rank,
              code=code, signal=signal, reason=reason)


def elastic_job():
    """A 9-minute elastic job: 4 ranks on two hosts, 8 when two more hosts come, a rank killed on
    node-3 (blacklisted for 60 s, one reset), node-4 removed by discovery (its ranks drained),
    node-3 back after its cooldown, everyone finishes. This is also docs/timeline-example.png."""
    e = [ev(0.0, "job_start", job="resnet50", command=["python3", "train.py", "--epochs", "90"],
            np=4, min_np=2, max_np=8, elastic=True, hosts=[], discovery_script="./discover.sh",
            pid=4242),
         ev(0.3, "discovery", hosts=hosts("node-1", "node-2")),
         ev(0.4, "round", round=1, world_size=4, assignment=[]),
         started(0.45, 0, "node-1", 0, 1), started(0.46, 1, "node-1", 1, 1),
         started(0.47, 2, "node-2", 0, 1), started(0.48, 3, "node-2", 1, 1),
         ev(120.0, "discovery", hosts=hosts("node-1", "node-2", "node-3", "node-4")),
         ev(121.5, "round", round=2, world_size=8, assignment=[]),
         started(121.6, 4, "node-3", 0, 2), started(121.6, 5, "node-3", 1, 2),
         started(121.7, 6, "node-4", 0, 2), started(121.7, 7, "node-4", 1, 2),
         exited(260.0, 5, "node-3", 1, "failed", signal=9),
         ev(260.01, "host_blacklisted", host="node-3", reason="worker node-3[1] was killed by "
            "signal 9 (SIGKILL)", cooldown_s=60),
         ev(260.02, "reset", resets=1, reason="worker node-3[1] was killed by signal 9"),
         exited(260.5, 4, "node-3", 0, "stopped", signal=15),
         ev(263.5, "round", round=3, world_size=6, assignment=[]),
         ev(320.01, "host_resurrected", host="node-3"),
         ev(330.0, "discovery", hosts=hosts("node-1", "node-2", "node-3")),
         exited(331.0, 6, "node-4", 0, "drained", signal=15),
         exited(331.1, 7, "node-4", 1, "drained", signal=15),
         ev(332.2, "round", round=4, world_size=6, assignment=[]),
         started(332.3, 8, "node-3", 0, 4), started(332.3, 9, "node-3", 1, 4)]
    for i, (rank, host, lr) in enumerate([(0, "node-1", 0), (1, "node-1", 1), (2, "node-2", 0),
                                          (3, "node-2", 1), (8, "node-3", 0), (9, "node-3", 1)]):
        e.append(exited(540.0 + i * 0.02, rank, host, lr, "finished", code=0))
    e.append(ev(540.3, "job_end", exit_code=0, cause=""))
    return e


def write_events(path, events, tail=""):
    with open(path, "w") as f:
        for e in events:
            f.write(json.dumps(e) + "\n")
        f.write(tail)
    return str(path)


def time_at_size(events):
    """World size -> seconds, computed straight from the schema's rules (0 while resetting)."""
    end = next((e["t"] for e in events if e["event"] == "job_end"), events[-1]["t"])
    out, size, since = {}, 0, 0.0
    for e in sorted(events, key=lambda e: e["t"]):
        if e["event"] == "round":
            new = e["world_size"]
        elif e["event"] == "reset":
            new = 0
        else:
            continue
        out[size] = out.get(size, 0.0) + e["t"] - since
        size, since = new, e["t"]
    out[size] = out.get(size, 0.0) + end - since
    return {k: v for k, v in out.items() if v > 0}, end


def report(args, **kwargs):
    r = run_etrun(["report"] + list(args), timeout=30, **kwargs)
    return r.returncode, r.stdout.decode(), r.stderr.decode()


def svg_classes(root, tag, cls):
    return [el for el in root.iter(SVG + tag) if el.get("class") == cls]


def test_summary_and_picture_of_an_elastic_job(tmp_path):
    events = elastic_job()
    path = write_events(tmp_path / "events.jsonl", events)
    out = tmp_path / "timeline.svg"
    code, stdout, stderr = report([path, "-o", str(out)])
    assert code == 0, stderr
    assert stderr == ""

    sizes, end = time_at_size(events)
    assert sorted(sizes) == [0, 4, 6, 8]
    lines = stdout.splitlines()
    assert lines[0] == "job: resnet50 (elastic, np 4, min 2, max 8)"
    assert "command: python3 train.py --epochs 90" in lines
    assert "duration: 540.3 s (9:00)" in lines
    assert "exit: 0 (success)" in lines
    for size, seconds in sizes.items():
        shown = ("%.2f s" if seconds < 10 else "%.1f s") % seconds
        pct = "%.0f%%" % (100 * seconds / end)
        if seconds >= 60:
            pct = "%d:%02d, %s" % (int(seconds) // 60, int(seconds) % 60, pct)
        want = "  size %d: %s (%s)" % (size, shown, pct)
        assert any(line.startswith(want) for line in lines), (want, stdout)
    assert "resets: 1, time lost to resets: 3.48 s" in lines
    assert "failures: 1" in lines
    assert "  at 260.0 s (4:20): rank 5 on node-3 was killed by signal 9 (SIGKILL)" in lines
    assert "blacklisted hosts: 1" in lines
    assert any(line.startswith("  at 260.0 s (4:20): node-3 for 60 s: ") for line in lines)

    # The picture: well-formed SVG, one lane per host in order, a bar per rank process.
    root = ET.parse(str(out)).getroot()
    assert root.tag == SVG + "svg"
    lanes = svg_classes(root, "g", "lane")
    assert [lane.find(SVG + "text").text for lane in lanes] == [
        "node-1", "node-2", "node-3", "node-4"]
    bars = svg_classes(root, "rect", "bar")
    assert len(bars) == 10
    # One color per way a process ended: 6 finished, 2 drained, 1 failed, 1 stopped.
    by_color = {}
    for bar in bars:
        tip = bar.find(SVG + "title").text
        ends = [r for r in ("finished", "failed", "stopped", "drained") if ", %s" % r in tip]
        assert len(ends) == 1, tip
        by_color.setdefault(bar.get("fill"), []).append(ends[0])
    assert sorted(len(v) for v in by_color.values()) == [1, 1, 2, 6]
    assert all(len(set(v)) == 1 for v in by_color.values())
    assert len(svg_classes(lanes[2], "g", "failure")) == 1
    assert len(svg_classes(lanes[2], "g", "blacklist")) == 1
    assert len(svg_classes(root, "g", "reset")) == 1
    # Solid world-size lines: 4 -> 8 before the reset, 6 -> 6 after it.
    steps = svg_classes(root, "polyline", "size")
    assert len(steps) == 2
    ys = [[float(p.split(",")[1]) for p in s.get("points").split()] for s in steps]
    assert len(set(ys[0])) == 2 and len(set(ys[1])) == 1
    assert min(ys[0]) < ys[1][0] < max(ys[0])  # 8 above 6 above 4
    width = float(root.get("width"))
    for bar in bars:
        assert 0 < float(bar.get("x")) and float(bar.get("x")) + float(bar.get("width")) <= width


def test_json_summary_matches_the_text(tmp_path):
    events = elastic_job()
    path = write_events(tmp_path / "events.jsonl", events)
    code, stdout, stderr = report(["--json", path])
    assert code == 0, stderr
    assert stdout.count("\n") == 1
    j = json.loads(stdout)
    sizes, end = time_at_size(events)
    assert j["job"] == "resnet50" and j["complete"] is True and j["exit_code"] == 0
    assert j["duration_s"] == pytest.approx(end)
    assert {s["size"]: s["seconds"] for s in j["time_at_size"]} == pytest.approx(sizes)
    assert j["resets"] == 1
    assert j["reset_lost_s"] == pytest.approx(263.5 - 260.02)
    assert j["failures"] == [{"t": 260.0, "rank": 5, "host": "node-3", "local_rank": 1,
                              "code": None, "signal": 9}]
    assert [b["host"] for b in j["blacklisted"]] == ["node-3"]
    assert j["blacklisted"][0]["cooldown_s"] == 60
    assert j["hosts"] == ["node-1", "node-2", "node-3", "node-4"]
    assert j["ranks_started"] == 10


def test_a_killed_job_is_drawn_up_to_its_last_event(tmp_path):
    # Given the job cut at 300 s (no job_end) with a half-written last line: a warning, not an
    # error; the summary says the end is unknown and the picture still parses.
    events = [e for e in elastic_job() if e["t"] <= 300]
    path = write_events(tmp_path / "events.jsonl", events, tail='{"ts":"2026-11-22T07:05:01')
    out = tmp_path / "t.svg"
    code, stdout, stderr = report([path, "-o", str(out)])
    assert code == 0, stderr
    assert stderr == ("etrun: warning: %s line %d: skipped an incomplete last line (no newline, "
                      "not valid JSON)\n" % (path, len(events) + 1))
    assert "exit: unknown: no job_end" in stdout
    assert "duration: 263.5 s (4:23)" in stdout
    root = ET.parse(str(out)).getroot()
    titles = [t.text for t in root.iter(SVG + "title")]
    assert any("still running" in (t or "") for t in titles)
    assert "so far" in root.find(SVG + "title").text


def test_a_failed_static_job(tmp_path):
    events = [ev(0.0, "job_start", job="static", command=["python3", "w.py"], np=2, min_np=None,
                 max_np=None, elastic=False, hosts=hosts("localhost"), discovery_script=None,
                 pid=1),
              started(0.01, 0, "localhost", 0, 0), started(0.01, 1, "localhost", 1, 0),
              exited(2.5, 1, "localhost", 1, "failed", code=7),
              exited(2.6, 0, "localhost", 0, "stopped", signal=15),
              ev(2.7, "job_end", exit_code=7,
                 cause="rank 1 on localhost exited with code 7; stopped the other 1 rank")]
    code, stdout, stderr = report([write_events(tmp_path / "e.jsonl", events)])
    assert code == 0, stderr
    assert "exit: 7 (rank 1 on localhost exited with code 7; stopped the other 1 rank)" in stdout
    assert "  size 2: 2.70 s (100%)" in stdout
    assert "  at 2.50 s: rank 1 on localhost exited with code 7" in stdout


def test_unreadable_or_malformed_files_exit_1_naming_file_and_line(tmp_path):
    missing = str(tmp_path / "nope.jsonl")
    code, stdout, stderr = report([missing])
    assert (code, stdout) == (1, "")
    assert stderr == ("etrun: error: cannot read events file %s: No such file or directory\n"
                      % missing)

    code, _, stderr = report([str(tmp_path)])
    assert code == 1 and stderr.endswith(": it is a directory\n")

    lines = [json.dumps(e) for e in elastic_job()[:4]]
    lines[2] = lines[2].replace('"world_size": 4', '"world_size": "four"')
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(lines) + "\n")
    code, stdout, stderr = report([str(bad), "-o", str(tmp_path / "x.svg")])
    assert (code, stdout) == (1, "")
    assert stderr == ('etrun: error: %s line 3: round: "world_size" should be an integer, not a '
                      'string\n' % bad)
    assert not (tmp_path / "x.svg").exists()

    bad.write_text(lines[0] + "\nnot json at all\n")
    code, _, stderr = report([str(bad)])
    assert code == 1
    assert stderr.startswith("etrun: error: %s line 2: not valid JSON: " % bad)
    assert stderr.count("\n") == 1


def test_an_unwritable_output_exits_1(tmp_path):
    path = write_events(tmp_path / "e.jsonl", elastic_job())
    target = str(tmp_path / "missing-dir" / "t.svg")
    code, stdout, stderr = report([path, "-o", target])
    assert (code, stdout) == (1, "")
    assert stderr == ("etrun: error: cannot write %s: No such file or directory (choose another "
                      "-o path)\n" % target)


@pytest.mark.parametrize("args, needle", [
    ([], "EVENTS is required"),
    (["--bogus", "a.jsonl"], "--bogus"),
    (["a.jsonl", "-o"], "-o"),
    (["a.jsonl", "-o", ""], "-o needs a file name"),
])
def test_bad_flags_exit_2_with_one_line(args, needle):
    code, stdout, stderr = report(args)
    assert (code, stdout) == (2, "")
    assert stderr.startswith("etrun: error: report: ")
    assert needle in stderr
    assert stderr.endswith("(usage: etrun report EVENTS.jsonl [MORE.jsonl...] [-o OUT.svg] [--json])\n")
    assert stderr.count("\n") == 1


def test_help():
    code, stdout, _ = report(["--help"])
    assert code == 0
    assert "EVENTS" in stdout and "--json" in stdout and "--output" in stdout


def test_report_is_a_verb_only_as_the_first_argument(tmp_path):
    # Given an executable named "report" on PATH, horovodrun-style command lines still run it.
    script = tmp_path / "report"
    script.write_text("#!/bin/sh\necho ran report \"$@\"\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    env = {"PATH": "%s:%s" % (tmp_path, os.environ.get("PATH", ""))}
    for args in (["-np", "1", "report", "x.jsonl"], ["-np", "1", "--", "report", "x.jsonl"]):
        r = run_etrun(args, timeout=60, env=env)
        assert r.returncode == 0, r.stderr
        assert rank_lines(r.stdout.decode()) == {0: ["ran report x.jsonl"]}


def test_report_reads_a_file_that_etrun_wrote(tmp_path):
    # End to end: a failing static job writes its events file (--events-file), report reads it.
    path = str(tmp_path / "events.jsonl")
    r = run_etrun(["-np", "2", "--events-file", path, PYTHON, "-c",
                   "import os,sys; sys.exit(3 if os.environ['HOROVOD_RANK'] == '1' else 0)"],
                  timeout=60)
    assert r.returncode == 3, r.stderr
    code, stdout, stderr = report(["--json", path, "-o", str(tmp_path / "t.svg")])
    assert code == 0, stderr
    j = json.loads(stdout)
    assert j["complete"] is True and j["exit_code"] == 3
    assert [(f["rank"], f["code"]) for f in j["failures"]] == [(1, 3)]
    ET.parse(str(tmp_path / "t.svg"))
