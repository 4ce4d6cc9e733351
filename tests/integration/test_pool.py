"""The shared slot pool end to end (issue 12): a real `etrun pool start` daemon, real etrun jobs
joined with --pool, Horovod-protocol stand-ins training on loopback.

The walkthrough test is docs/pool.md's scenario on 8 CPU slots: training 1 alone gets 8; training 2
arrives: 4/4; training 2's priority 10000: 5/3; training 1 ends: training 2 grows to 8. It checks
the pool's allocations and the workers' world sizes at every stage, that every training step was
committed exactly once (the stand-ins' state history), and, sampling /proc all along, that no pool
slot ever had processes of two jobs at once.
"""
import importlib.util
import json
import os
import signal
import subprocess
import threading
import time
import uuid

import pytest

from conftest import ETRUN, PYTHON, ROOT, processes_with_marker, run_etrun, wait_until

_spec = importlib.util.spec_from_file_location("chaos", os.path.join(ROOT, "scripts", "soak", "chaos.py"))
chaos = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(chaos)

STANDIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "elastic_standin.py")


def pool_status(name):
    r = run_etrun(["pool", "status", name, "--json"], timeout=20)
    if r.returncode != 0:
        return None
    return json.loads(r.stdout)


def held(name):
    """{job: slots held} of the pool, or None when it cannot be asked."""
    status = pool_status(name)
    if status is None:
        return None
    return {j["job"]: j["held"] + j["releasing"] for j in status["jobs"]}


class Pool:
    def __init__(self, tmp_path, env, slots=8, extra=(), name=None):
        self.name = name or "p" + uuid.uuid4().hex[:8]
        self.events = str(tmp_path / f"{self.name}.jsonl")
        self.log = open(tmp_path / f"{self.name}.log", "ab")
        self.env = env
        self.proc = subprocess.Popen(
            [ETRUN, "pool", "start", self.name, "-H", f"localhost:{slots}", *(extra or ["--gpus", "none"]),
             "--min-hold", "1s", "--events-file", self.events],
            stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env={**os.environ, **env})
        assert wait_until(lambda: pool_status(self.name) is not None, timeout=10), self.text()

    def text(self):
        self.log.flush()
        with open(self.log.name, errors="replace") as f:
            return f.read()

    def allocations(self):
        out = []
        with open(self.events) as f:
            for line in f:
                e = json.loads(line)
                if e["event"] == "pool_allocation":
                    out.append(e)
        return out

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=10)
        self.log.close()


class Job:
    """An etrun job on the pool, training a stand-in until its steps file says stop."""

    def __init__(self, tmp_path, pool, name, env, priority=None, min_np=1, max_np=8,
                 startup=0.3, step_seconds=0.05):
        self.name = name
        self.dir = tmp_path / name
        self.dir.mkdir()
        self.records = self.dir / "records"
        self.records.mkdir()
        self.steps_file = self.dir / "steps"
        self.out = open(self.dir / "out", "wb")
        self.events = self.dir / "events.jsonl"
        args = [ETRUN, "--pool", pool.name, "--job-name", name, "-np", str(min_np),
                "--min-np", str(min_np), "--max-np", str(max_np), "--events-file", str(self.events)]
        if priority is not None:
            args += ["--priority", str(priority)]
        args += [PYTHON, STANDIN, "--steps", "1000000", "--step-seconds", str(step_seconds),
                 "--record-dir", str(self.records), "--steps-file", str(self.steps_file),
                 "--startup-seconds", str(startup), "--timeout", "120"]
        self.proc = subprocess.Popen(args, stdout=self.out, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL,
                                     env={**os.environ, **env, "ETRUN_TEST_JOB": name})

    def text(self):
        self.out.flush()
        with open(self.out.name, errors="replace") as f:
            return f.read()

    def trains_at(self, size, after=0):
        """True once a step was committed in a world of `size` after byte offset `after`."""
        return f"size {size}" in self.text()[after:] and "step" in self.text()[after:]

    def finish(self, extra_steps=20, timeout=60):
        """Ends training a few steps from now (rank 0 reads the steps file at every commit)."""
        total = chaos.max_committed(str(self.records)) + 1 + extra_steps
        tmp = self.steps_file.with_suffix(".tmp")
        tmp.write_text(str(total))
        os.replace(tmp, self.steps_file)
        self.proc.wait(timeout=timeout)
        self.out.close()
        return total


class SlotWatch:
    """Samples /proc: which job's processes sit on which pool slot (ETRUN_POOL_SLOT)."""

    def __init__(self, marker):
        self.marker = marker
        self.clashes = []
        self.samples = 0
        self.stop_flag = False
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def sample(self):
        for slot, jobs in chaos.pool_slot_owners(self.marker, "ETRUN_TEST_JOB").items():
            if len(jobs) > 1:
                self.clashes.append((slot, sorted(jobs)))
        self.samples += 1

    def run(self):
        while not self.stop_flag:
            self.sample()
            time.sleep(0.02)

    def stop(self):
        self.stop_flag = True
        self.thread.join(timeout=10)


def check_history(job, total):
    records, _ = chaos.read_records(str(job.records))
    failures, chain = chaos.check_steps(records, total)
    assert not failures, f"{job.name}: {failures[:5]}\n{job.text()[-3000:]}"
    assert chain == total


def test_walkthrough_8_then_4_4_then_5_3_then_8(tmp_path, marker, marker_env):
    pool = Pool(tmp_path, marker_env)
    watch = SlotWatch(marker)
    jobs = []
    try:
        one = Job(tmp_path, pool, "train1", marker_env)
        jobs.append(one)
        assert wait_until(lambda: held(pool.name) == {"train1": 8} and one.trains_at(8), timeout=60), \
            pool.text() + one.text()

        mark = len(one.text())
        two = Job(tmp_path, pool, "train2", marker_env)
        jobs.append(two)
        assert wait_until(lambda: held(pool.name) == {"train1": 4, "train2": 4} and
                          one.trains_at(4, mark) and two.trains_at(4), timeout=60), \
            pool.text() + one.text()[-2000:] + two.text()[-2000:]

        mark1, mark2 = len(one.text()), len(two.text())
        r = run_etrun(["pool", "priority", "train2", "10000", "--pool", pool.name])
        assert r.returncode == 0, r.stderr
        assert wait_until(lambda: held(pool.name) == {"train1": 3, "train2": 5} and
                          one.trains_at(3, mark1) and two.trains_at(5, mark2), timeout=60), \
            pool.text() + one.text()[-2000:] + two.text()[-2000:]

        mark2 = len(two.text())
        total1 = one.finish()
        assert one.proc.returncode == 0, one.text()[-3000:]
        assert wait_until(lambda: held(pool.name) == {"train2": 8} and two.trains_at(8, mark2),
                          timeout=60), pool.text() + two.text()[-2000:]
        total2 = two.finish()
        assert two.proc.returncode == 0, two.text()[-3000:]
    finally:
        watch.stop()
        for j in jobs:
            if j.proc.poll() is None:
                j.proc.kill()
        pool.stop()

    check_history(one, total1)
    check_history(two, total2)
    assert watch.samples > 50
    assert not watch.clashes, f"slots used by two jobs at once: {watch.clashes[:5]}"
    # The pool's own record: the four stages in order, and never more held than exist.
    stages = [a["held"] for a in pool.allocations()]
    for a in pool.allocations():
        assert sum(a["held"].values()) <= a["total"] == 8
    want = [{"train1": 8}, {"train1": 4, "train2": 4}, {"train1": 3, "train2": 5}, {"train2": 8}]
    it = iter(stages)
    for stage in want:
        assert any(s == stage for s in it), f"{stage} missing (in order) from {stages}"
    with open(pool.events) as f:
        events = [json.loads(line)["event"] for line in f]
    assert events[0] == "pool_start" and events[-1] == "pool_stop"
    assert events.count("pool_job_left") == 2
    # Each job's own events name its pool job, so `etrun report` can put them under the pool's chart.
    for job in (one, two):
        with open(job.events) as f:
            start = json.loads(f.readline())
        assert start["event"] == "job_start" and start["hosts"] == []
        assert (start["pool"], start["pool_job"]) == (pool.name, job.name)
    svg = tmp_path / "pool.svg"
    r = run_etrun(["report", pool.events, str(one.events), str(two.events), "-o", str(svg)])
    assert r.returncode == 0, r.stderr
    text = svg.read_text()
    assert "train1" in text and "train2" in text and "<svg" in text


def test_a_killed_job_returns_its_slots_at_once(tmp_path, marker, marker_env):
    pool = Pool(tmp_path, marker_env)
    watch = SlotWatch(marker)
    try:
        one = Job(tmp_path, pool, "victim", marker_env)
        assert wait_until(lambda: held(pool.name) == {"victim": 8} and one.trains_at(8), timeout=60)
        two = Job(tmp_path, pool, "other", marker_env)
        assert wait_until(lambda: held(pool.name) == {"victim": 4, "other": 4} and two.trains_at(4),
                          timeout=60), pool.text()
        mark = len(two.text())
        os.kill(one.proc.pid, signal.SIGKILL)  # etrun itself: its guardian kills the ranks
        one.proc.wait(timeout=10)
        assert wait_until(lambda: "victim" not in held(pool.name), timeout=2), pool.text()
        assert wait_until(lambda: held(pool.name) == {"other": 8} and two.trains_at(8, mark),
                          timeout=60), pool.text() + two.text()[-2000:]
        assert "job 'victim' left (crashed)" in pool.text()
        two.finish()
        assert two.proc.returncode == 0
        watch.stop()
        assert not watch.clashes, f"slots used by two jobs at once: {watch.clashes[:5]}"
    finally:
        watch.stop()
        for j in (one, two):
            if j.proc.poll() is None:
                j.proc.kill()
        pool.stop()


def test_jobs_train_on_without_the_pool_and_join_again(tmp_path, marker, marker_env):
    pool = Pool(tmp_path, marker_env, slots=4)
    job = Job(tmp_path, pool, "steady", marker_env, max_np=4)
    try:
        assert wait_until(lambda: held(pool.name) == {"steady": 4} and job.trains_at(4), timeout=60)
        old_token = run_etrun(["pool", "token", pool.name]).stdout
        # Its hosts are the pool's: `etrun scale` may cap it, not add hosts.
        r = run_etrun(["scale", "steady", "--add", "localhost:8", "--timeout", "5s"], env=marker_env)
        assert r.returncode != 0 and b"pool" in r.stderr and b"etrun pool priority" in r.stderr, r.stderr
        pool.stop()
        before = chaos.max_committed(str(job.records))
        assert wait_until(lambda: chaos.max_committed(str(job.records)) > before + 20, timeout=30), \
            job.text()[-2000:]
        assert job.proc.poll() is None
        # A pool of the same name is back: the job joins it again holding the same 4 slots.
        again = subprocess.Popen(
            [ETRUN, "pool", "start", pool.name, "-H", "localhost:4", "--gpus", "none"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
            env={**os.environ, **marker_env})
        try:
            assert wait_until(lambda: held(pool.name) == {"steady": 4}, timeout=15)
            # With the new pool's token, which it read in the registry: tokens are new at every start.
            assert run_etrun(["pool", "token", pool.name]).stdout not in (old_token, b"")
            status = pool_status(pool.name)
            assert status["jobs"][0]["slots"]["localhost"] == [{"slot": s} for s in range(4)]
            total = job.finish()
            assert job.proc.returncode == 0
            check_history(job, total)
            assert wait_until(lambda: held(pool.name) == {}, timeout=5)
        finally:
            again.send_signal(signal.SIGTERM)
            again.wait(timeout=10)
    finally:
        if job.proc.poll() is None:
            job.proc.kill()


def test_gpu_pool_gives_each_job_its_own_devices(tmp_path, marker, marker_env):
    pool = Pool(tmp_path, marker_env, slots=4, extra=["--gpus", "4"])
    names = ("a", "b")
    out_paths = {name: tmp_path / f"job-{name}.out" for name in names}

    def gpu_lines(name):
        return [l for l in out_paths[name].read_text(errors="replace").splitlines() if "gpu=" in l]

    procs = []
    try:
        for name in names:
            with open(out_paths[name], "wb") as out:
                procs.append(subprocess.Popen(
                    [ETRUN, "--pool", pool.name, "--job-name", name, "--elastic-mode", "restart",
                     "-np", "2", "--min-np", "2", "--max-np", "2",
                     "sh", "-c", 'echo "gpu=$ETRUN_POOL_GPU visible=$CUDA_VISIBLE_DEVICES slot=$ETRUN_POOL_SLOT"; sleep 60'],
                    stdout=out, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                    env={**os.environ, **marker_env}))
        assert wait_until(lambda: held(pool.name) == {"a": 2, "b": 2}, timeout=20), pool.text()
        status = pool_status(pool.name)
        gpus = {}
        for j in status["jobs"]:
            gpus[j["job"]] = sorted(s["gpu"] for s in j["slots"]["localhost"])
        assert sorted(gpus["a"] + gpus["b"]) == ["0", "1", "2", "3"]
        # Every rank has printed its line (then sleeps until it is stopped).
        assert wait_until(lambda: all(len(gpu_lines(name)) >= 2 for name in names), timeout=20), \
            {name: out_paths[name].read_text(errors="replace") for name in names}
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            p.communicate(timeout=20)
        pool.stop()
    for name in names:
        lines = gpu_lines(name)
        assert len(lines) == 2, out_paths[name].read_text(errors="replace")
        for line in lines:
            fields = dict(kv.split("=", 1) for kv in line.split(":", 1)[1].split())
            assert fields["gpu"] in gpus[name]
            # Only this job's GPUs are visible, its own among them.
            visible = fields["visible"].split(",")
            assert fields["gpu"] in visible and set(visible) <= set(gpus[name]), line


def test_bad_requests_get_one_line_errors(tmp_path, marker, marker_env):
    r = run_etrun(["--pool", "no-such-pool-" + uuid.uuid4().hex[:6], "-np", "1", "true"])
    assert r.returncode == 1
    err = r.stderr.decode().strip().splitlines()
    assert len(err) == 1 and "no pool named" in err[0] and "etrun pool start" in err[0], err
    r = run_etrun(["--priority", "7", "-np", "1", "true"])
    assert r.returncode == 2 and b"give --pool NAME" in r.stderr
    r = run_etrun(["--pool", "x", "-H", "localhost:2", "-np", "1", "true"])
    assert r.returncode == 2 and b"cannot be used together" in r.stderr
    r = run_etrun(["pool", "start", "nohosts"])
    assert r.returncode == 2 and b"say where the slots are" in r.stderr
    r = run_etrun(["pool", "frobnicate"])
    assert r.returncode == 2 and b"unknown command" in r.stderr
    pool = Pool(tmp_path, marker_env, slots=2)
    try:
        r = run_etrun(["pool", "start", pool.name, "-H", "localhost:2"])
        assert r.returncode == 1 and b"already running" in r.stderr, r.stderr
        r = run_etrun(["pool", "priority", "ghost", "10", "--pool", pool.name])
        assert r.returncode == 1 and b"no job 'ghost'" in r.stderr, r.stderr
        r = run_etrun(["pool", "priority", "ghost", "0", "--pool", pool.name])
        assert r.returncode == 2 and b"1..1000000" in r.stderr
        r = run_etrun(["--pool", pool.name, "--priority", "0", "-np", "1", "true"])
        assert r.returncode == 2 and b"--priority" in r.stderr
        # A job whose minimum cannot fit waits, queued, rather than starting short.
        big = subprocess.Popen([ETRUN, "--pool", pool.name, "--job-name", "big", "-np", "3",
                                "--min-np", "3", "--max-np", "3", "--elastic-mode", "restart",
                                "true"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               stdin=subprocess.DEVNULL, env={**os.environ, **marker_env})
        assert wait_until(lambda: [j["state"] for j in pool_status(pool.name)["jobs"]] == ["queued"],
                          timeout=10)
        time.sleep(1.5)
        assert big.poll() is None
        assert [j["state"] for j in pool_status(pool.name)["jobs"]] == ["queued"]
        big.send_signal(signal.SIGTERM)
        assert big.wait(timeout=10) != 0
        assert wait_until(lambda: held(pool.name) == {}, timeout=5)
    finally:
        pool.stop()


def test_restart_mode_jobs_move_slots_by_restarting(tmp_path, marker, marker_env):
    """--elastic-mode restart (torch.distributed-style workers): a move is the job's own path,
    every rank stopped and the new world started with the new WORLD_SIZE."""
    pool = Pool(tmp_path, marker_env, slots=4)
    worker = 'echo "world=$WORLD_SIZE rank=$RANK slot=$ETRUN_POOL_SLOT"; exec sleep 60'
    procs, outs = [], []
    try:
        for name in ("first", "second"):
            out = open(tmp_path / f"{name}.out", "wb")
            outs.append(out)
            procs.append(subprocess.Popen(
                [ETRUN, "--pool", pool.name, "--job-name", name, "--elastic-mode", "restart",
                 "-np", "1", "--min-np", "1", "--max-np", "4", "--grace-period", "1",
                 "sh", "-c", worker],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env={**os.environ, **marker_env}))
            if name == "first":
                assert wait_until(lambda: (tmp_path / "first.out").read_text().count("world=4") == 4,
                                  timeout=20), pool.text()
        assert wait_until(lambda: held(pool.name) == {"first": 2, "second": 2}, timeout=30), pool.text()
        assert wait_until(lambda: (tmp_path / "first.out").read_text().count("world=2") == 2 and
                          (tmp_path / "second.out").read_text().count("world=2") == 2, timeout=20)
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            p.wait(timeout=20)
        for out in outs:
            out.close()
        pool.stop()
    first = (tmp_path / "first.out").read_text()
    # The 4-rank world was stopped before the 2-rank one started: a restart, not a resize.
    assert first.index("world=2") > first.rindex("world=4")
    slots = lambda text, world: {l.split("slot=")[1] for l in text.splitlines() if f"world={world} " in l}
    assert not slots(first, 2) & slots((tmp_path / "second.out").read_text(), 2)


def test_a_pool_opened_with_listen_takes_jobs_that_hold_its_token(tmp_path, marker, marker_env):
    """--listen opens the pool beyond the registry: a job names it HOST:PORT and needs the token
    (`etrun pool token`) in ETRUN_POOL_TOKEN; without it, with a wrong one, or with the token of
    the pool before it was restarted (a token is new at every start), one error line that says
    how to get the current one."""
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.2", 0))
        port = s.getsockname()[1]
    pool = Pool(tmp_path, marker_env, slots=2, extra=["--gpus", "none", "--listen", f"127.0.0.2:{port}"])
    try:
        assert "anyone with its token" in pool.text()
        token = run_etrun(["pool", "token", pool.name]).stdout.decode().strip()
        assert len(token) == 64
        where = f"127.0.0.2:{port}"
        r = run_etrun(["--pool", where, "-np", "1", "true"], env=marker_env)
        assert r.returncode == 1 and b"ETRUN_POOL_TOKEN" in r.stderr, r.stderr
        wrong = (f"etrun: error: pool '{where}' did not prove it knows the pool's token (its proof is "
                 f"of another token): refusing to send it anything (a pool's token is new at every "
                 f"start: get the current one with `etrun pool token NAME` on the pool's machine; or "
                 f"is something else listening at {where}?)\n").encode()
        r = run_etrun(["--pool", where, "-np", "1", "true"], env={**marker_env, "ETRUN_POOL_TOKEN": "0" * 64})
        assert r.returncode == 1 and r.stderr == wrong, r.stderr
        r = run_etrun(["--pool", where, "--job-name", "remote", "--elastic-mode", "restart", "-np", "2",
                       "--min-np", "2", "sh", "-c", "echo world=$WORLD_SIZE"],
                      env={**marker_env, "ETRUN_POOL_TOKEN": token}, timeout=30)
        assert r.returncode == 0, r.stderr
        assert r.stdout.decode().count("world=2") == 2
        assert "job 'remote' left (ended)" in pool.text()
        # The pool restarted at the same address has a new token: the old one is refused alike.
        pool.stop()
        pool = Pool(tmp_path, marker_env, slots=2, extra=["--gpus", "none", "--listen", where], name=pool.name)
        assert run_etrun(["pool", "token", pool.name]).stdout.decode().strip() != token
        r = run_etrun(["--pool", where, "-np", "1", "true"], env={**marker_env, "ETRUN_POOL_TOKEN": token})
        assert r.returncode == 1 and r.stderr == wrong, r.stderr
    finally:
        pool.stop()


def test_the_readme_walkthrough_script_runs(tmp_path, marker_env):
    """scripts/examples/pool_demo.sh, as docs/pool.md runs it: four stages, then the chart."""
    script = os.path.join(ROOT, "scripts", "examples", "pool_demo.sh")
    r = subprocess.run([script, ETRUN], capture_output=True, timeout=240, stdin=subprocess.DEVNULL,
                       env={**os.environ, **marker_env, "OUT": str(tmp_path / "demo")})
    out = r.stdout.decode()
    assert r.returncode == 0, out[-3000:] + r.stderr.decode()[-2000:]
    stages = [line for line in out.splitlines() if line.startswith("== ")]
    assert [s[:5] for s in stages] == ["== 1.", "== 2.", "== 3.", "== 4."], stages
    rows = lambda stage: [l.split()[:5] for l in out.split(stage, 1)[1].split("== ", 1)[0].splitlines()
                          if l.startswith("train")]
    assert [r[3] for r in rows("== 1.")] == ["8"]
    assert [r[3] for r in rows("== 2.")] == ["4", "4"]
    assert [(r[0], r[1], r[3]) for r in rows("== 3.")] == [("train1", "5000", "3"), ("train2", "10000", "5")]
    assert [(r[0], r[3]) for r in rows("== 4.")] == [("train2", "8")]
    assert (tmp_path / "demo" / "pool.svg").stat().st_size > 1000
