"""Real Horovod 0.28.1 (PyTorch, Gloo) under etrun on the cluster test bed (h1..h3, each its own
network namespace, host name, eth0 and sshd; no network flags anywhere): what the stand-in tests
of test_multihost.py and test_elastic_protocol.py assert, with real workers
(horovod_worker.py), plus the time each change costs.

Real Horovod is built from the vendored source by scripts/horovod.sh, which scripts/test.sh runs
first and whose directory it exports as ETRUN_HOROVOD_PATH; without it these tests are skipped
with the one line the script printed. They run in the release stage only (not under the
sanitizers: the workers are the same, etrun's paths are the stand-in tests')."""
import os
import re
import signal
import subprocess
import threading
import time

import pytest

from conftest import ETRUN, PYTHON, processes_with_marker, rank_lines, wait_until
from test_elastic_protocol import committed_steps, sizes_in_order
from test_multihost import marked_on
from test_store_security import USER_WARNING, gated_job, meet_under_flood, meet_while_nobody_tries, needs_root
from testbed import bed_fixture

HOROVOD_PATH = os.environ.get("ETRUN_HOROVOD_PATH", "")
HOROVOD_WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "horovod_worker.py")
pytestmark = pytest.mark.skipif(
    not HOROVOD_PATH,
    reason=os.environ.get("ETRUN_HOROVOD_UNAVAILABLE") or
    "real Horovod not built: run scripts/horovod.sh and set ETRUN_HOROVOD_PATH to the directory "
    "it prints (scripts/test.sh does both)")

bed = bed_fixture(hosts=3)

# Every stdout line the real worker writes, after etrun's prefix (horovod_worker.py's docstring).
# Horovod's own log lines may come too (warnings; "[<date>: W <file>:<line>] [<rank>]: <text>").
# No test passes --log-level INFO (which etrun, as horovodrun, hands on as HOROVOD_LOG_LEVEL): a
# worker's C++ logger then writes its lines to stdout in pieces, and the worker's own prints can
# land between them, inside that one process's stream.
LINE = re.compile(r"^\[\d+\]<stdout>:(step \d+ rank \d+ size \d+|reset: rank -?\d+ -> \d+ size \d+|"
                  r"done \d+ steps rank \d+ size \d+|\[\d{4}-\d\d-\d\d [\d:. ]+: [A-Z] [^\]]+\] \[\d+\]: .*)$")


def horovod_env(extra=None):
    """The environment of a job of real workers: horovod on PYTHONPATH (etrun forwards it to the
    bed's hosts, as horovodrun forwards the launcher's environment)."""
    path = HOROVOD_PATH + (":" + os.environ["PYTHONPATH"] if os.environ.get("PYTHONPATH") else "")
    return dict(os.environ, PYTHONPATH=path, **(extra or {}))


class Lines:
    """A stream read on a thread: each line with the monotonic time it arrived."""

    def __init__(self, stream):
        self.lines = []
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self.thread.start()

    def _read(self, stream):
        for raw in stream:
            with self.lock:
                self.lines.append((time.monotonic(), raw.decode(errors="replace").rstrip("\n")))

    def texts(self):
        with self.lock:
            return [text for _, text in self.lines]

    def first(self, pattern, after=0.0, timeout=90.0):
        """The arrival time of the first line matching `pattern` at or after `after`, or None."""
        regex = re.compile(pattern)
        found = []

        def seen():
            with self.lock:
                found[:] = [t for t, text in self.lines if t >= after and regex.search(text)]
            return bool(found)

        return found[0] if wait_until(seen, timeout=timeout, interval=0.01) else None

    def last_before(self, pattern, before):
        regex = re.compile(pattern)
        with self.lock:
            found = [t for t, text in self.lines if t < before and regex.search(text)]
        return found[-1] if found else None


class RealJob:
    """An elastic job of real Horovod workers on the bed's hosts, listed by a discovery script
    from a file; stdout and stderr timed line by line."""

    def __init__(self, bed, tmp_path, marker_env, hosts, steps, extra=(), gloo_timeout=120):
        self.hosts_file = tmp_path / "hosts"
        self.set_hosts(hosts)
        script = tmp_path / "discover.sh"
        script.write_text(f"#!/bin/sh\ncat {self.hosts_file}\n")
        script.chmod(0o755)
        self.events = tmp_path / "events.jsonl"
        cmd = [ETRUN, "-np", str(len(hosts)), "--min-np", "1", "--discovery-interval", "0.1",
               "--host-discovery-script", str(script), "--events-file", str(self.events), *extra,
               PYTHON, HOROVOD_WORKER, "--steps", str(steps), "--step-seconds", "0.05"]
        env = bed.env(horovod_env(dict(marker_env, HOROVOD_GLOO_TIMEOUT_SECONDS=str(gloo_timeout))))
        self.proc = subprocess.Popen(bed.exec_argv(cmd), env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
        self.out = Lines(self.proc.stdout)
        self.errors = Lines(self.proc.stderr)

    def set_hosts(self, hosts):
        tmp = self.hosts_file.with_suffix(".tmp")
        tmp.write_text("".join(f"{h}:1\n" for h in hosts))
        tmp.rename(self.hosts_file)
        return time.monotonic()

    def err(self):
        return "\n".join(self.errors.texts()[-60:])

    def step_at(self, size, after=0.0, timeout=90.0):
        """When the first step committed in a world of `size` arrived after `after` (or None)."""
        return self.out.first(rf"<stdout>:step \d+ rank \d+ size {size}$", after, timeout)

    def finish(self, timeout=180):
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise
        self.out.thread.join(timeout=10)
        self.errors.thread.join(timeout=10)
        return code

    def check_training(self, steps):
        """Every step committed once, in order, by whole lines only."""
        lines = self.out.texts()
        bad = [l for l in lines if not LINE.match(l)]
        assert bad == [], bad[:5]
        assert committed_steps(lines) == set(range(steps))
        order = [int(m.group(1)) for m in (re.search(r"<stdout>:step (\d+) rank 0 ", l) for l in lines) if m]
        assert order == sorted(order), "rank 0 committed a step twice or out of order"


def worker_pid_on(bed, host, marker):
    """The real worker's pid on `host` (the python process, not etrun's helpers)."""
    for pid in marked_on(bed, host, marker):
        try:
            argv = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
        except OSError:
            continue
        if argv[:2] == [PYTHON.encode(), HOROVOD_WORKER.encode()]:
            return pid
    return None


def test_a_static_allreduce_across_two_hosts_with_no_network_flags(bed, marker_env):
    r = subprocess.run(bed.exec_argv([ETRUN, "-np", "2", "-H", "h1:1,h2:1", PYTHON, HOROVOD_WORKER, "--static"]),
                       env=bed.env(horovod_env(marker_env)), capture_output=True, text=True,
                       timeout=120, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    lines = rank_lines(r.stdout)
    assert lines == {0: ["sum 2 rank 0 size 2"], 1: ["sum 2 rank 1 size 2"]}, r.stdout
    assert processes_with_marker(next(iter(marker_env.values()))) == []


@needs_root
def test_another_user_is_refused_while_two_real_workers_meet_on_this_machine(tmp_path, marker_env):
    # Given a 2-rank job of real workers on this machine run by root, the user nobody's PUT gets
    # 403 before and while they meet (hvd.init's Gloo rendezvous), the key is not stored, and the
    # workers' allreduce still completes.
    proc, port = gated_job(tmp_path, 2, [PYTHON, HOROVOD_WORKER, "--static"], env=horovod_env(marker_env))
    out, err, codes = meet_while_nobody_tries(tmp_path, proc, port)
    assert proc.returncode == 0, err.decode()
    assert rank_lines(out.decode()) == {0: ["sum 2 rank 0 size 2"], 1: ["sum 2 rank 1 size 2"]}, out.decode()
    assert "403" in codes and set(codes) <= {"403", "000"}, codes
    assert err.decode().count(USER_WARNING) == 1, err.decode()


def test_real_workers_start_and_finish_while_one_address_floods_the_store(tmp_path, marker_env):
    # Given a 2-rank job of real workers admitting 127.0.0.2, that address holds 4,300 idle
    # connections and 40 slow senders open: it is refused past its share, the workers' hvd.init()
    # and allreduce complete, and etrun's memory stays bounded.
    code, out, err = meet_under_flood(tmp_path, 2, [PYTHON, HOROVOD_WORKER, "--static"],
                                      env=horovod_env(marker_env))
    assert code == 0, err
    assert rank_lines(out) == {0: ["sum 2 rank 0 size 2"], 1: ["sum 2 rank 1 size 2"]}, out
    assert processes_with_marker(next(iter(marker_env.values()))) == []


def test_real_workers_grow_from_two_hosts_to_three_and_shrink_back(bed, tmp_path, marker_env):
    # The scale-up stall (the last step of the old world to the first of the new) is a reset of
    # real Horovod: shutdown, rendezvous of the new world, state.sync(); 0.19-0.25 s on an idle
    # machine, bounded here with room for a loaded CI.
    marker = next(iter(marker_env.values()))
    job = RealJob(bed, tmp_path, marker_env, ["h1", "h2"], steps=500)
    assert job.step_at(2), job.err()
    changed = job.set_hosts(["h1", "h2", "h3"])
    grown = job.step_at(3, after=changed)
    assert grown, job.err()
    stall = grown - job.out.last_before(r"<stdout>:step \d+ rank", grown)
    changed = job.set_hosts(["h1", "h3"])
    assert job.step_at(2, after=changed), job.err()
    assert job.finish() == 0, job.err()
    job.check_training(500)
    assert sizes_in_order(job.out.texts())[:3] == [2, 3, 2]
    print(f"real Horovod: scale-up stall {stall:.2f} s")
    assert stall <= 1.5, f"scale-up stall {stall:.2f} s"
    assert processes_with_marker(marker) == []


def test_a_killed_real_worker_is_blacklisted_and_the_others_train_on(bed, tmp_path, marker_env):
    # SIGKILL of h2's worker: its ring neighbour fails at once, the other survivor is freed by
    # etrun (it would block in Gloo until HOROVOD_GLOO_TIMEOUT_SECONDS, 120 s here).
    marker = next(iter(marker_env.values()))
    job = RealJob(bed, tmp_path, marker_env, ["h1", "h2", "h3"], steps=400,
                  extra=["--blacklist-cooldown-range", "600", "600"])
    assert job.step_at(3), job.err()
    victim = worker_pid_on(bed, "h2", marker)
    assert victim
    killed = time.monotonic()
    os.kill(victim, signal.SIGKILL)
    smaller = job.step_at(2, after=killed, timeout=60)
    assert smaller, job.err()
    assert job.finish() == 0, job.err()
    job.check_training(400)
    assert sizes_in_order(job.out.texts())[:2] == [3, 2]
    print(f"real Horovod: kill -> first step of the smaller world {smaller - killed:.2f} s")
    assert smaller - killed <= 5, f"kill -> first step of the smaller world {smaller - killed:.2f} s"
    assert processes_with_marker(marker) == []


def test_a_cut_link_costs_real_workers_at_most_five_seconds(bed, tmp_path, marker_env):
    # h3's link is cut mid-training while discovery still lists it: no RST reaches anyone. etrun
    # hears no heartbeat from h3 for --lost-host-timeout (3 s), blacklists it and fences the
    # survivors; the smaller world's first step must come within 5 s of the cut.
    marker = next(iter(marker_env.values()))
    job = RealJob(bed, tmp_path, marker_env, ["h1", "h2", "h3"], steps=400,
                  extra=["--blacklist-cooldown-range", "4", "5"])
    assert job.step_at(3), job.err()
    time.sleep(1.5)  # past the heartbeat's start: a steady world
    stranded = marked_on(bed, "h3", marker)
    assert stranded
    cut = time.monotonic()
    bed.cut("h3")
    try:
        smaller = job.step_at(2, after=cut, timeout=60)
        assert smaller, job.err()
    finally:
        bed.heal("h3")
    assert wait_until(lambda: not any(os.path.exists(f"/proc/{p}") for p in stranded), timeout=30)
    assert job.finish() == 0, job.err()
    job.check_training(400)
    assert sizes_in_order(job.out.texts())[:2] == [3, 2]
    print(f"real Horovod: cut -> first step of the smaller world {smaller - cut:.2f} s")
    assert smaller - cut <= 5, f"cut -> first step of the smaller world {smaller - cut:.2f} s\n{job.err()}"
    assert processes_with_marker(marker) == []


class PoolJob:
    """A job of real workers on a pool of this machine's slots; stdout timed line by line."""

    def __init__(self, pool, name, marker_env, steps, max_np=4):
        cmd = [ETRUN, "--pool", pool.name, "--job-name", name, "-np", "1", "--min-np", "1",
               "--max-np", str(max_np), PYTHON, HOROVOD_WORKER, "--steps", str(steps),
               "--step-seconds", "0.05"]
        self.proc = subprocess.Popen(cmd, env=horovod_env(dict(marker_env, HOROVOD_GLOO_TIMEOUT_SECONDS="120")),
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     stdin=subprocess.DEVNULL)
        self.out = Lines(self.proc.stdout)
        self.errors = Lines(self.proc.stderr)
        self.started = time.monotonic()

    def step_at(self, size, after=0.0, timeout=90.0):
        return self.out.first(rf"<stdout>:step \d+ rank \d+ size {size}$", after, timeout)

    def err(self):
        return "\n".join(self.errors.texts()[-40:])

    def finish(self, timeout=180):
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            # Still running: the assertion's message then shows where it stands (the last steps of
            # each rank and etrun's own lines) instead of only the timeout.
            steps = [t for t in self.out.texts() if "<stdout>:" in t][-12:]
            pytest.fail(f"job {self.proc.args[4]} still running after {timeout} s; last lines:\n"
                        + "\n".join(steps) + "\n" + self.err(), pytrace=False)
        self.out.thread.join(timeout=10)
        self.errors.thread.join(timeout=10)
        return code


def test_two_real_jobs_share_a_pool_and_move_its_slots(tmp_path, marker_env):
    # A pool of 4 slots: the first job holds all 4; a second one comes and the pool moves 2 to it
    # (the first job's world shrinks 4 -> 2 with its state); once the second is done the first
    # grows back to 4. Each job commits every step once.
    from test_pool import Pool, held
    marker = next(iter(marker_env.values()))
    pool = Pool(tmp_path, marker_env, slots=4)
    jobs = []
    try:
        one = PoolJob(pool, "one", marker_env, steps=600)
        jobs.append(one)
        assert one.step_at(4), one.err() + pool.text()
        two = PoolJob(pool, "two", marker_env, steps=100)
        jobs.append(two)
        shrunk = one.step_at(2, after=two.started)
        assert shrunk, one.err() + pool.text()
        assert two.step_at(2), two.err() + pool.text()
        assert held(pool.name) == {"one": 2, "two": 2}
        assert two.finish() == 0, two.err()
        assert one.step_at(4, after=time.monotonic()), one.err() + pool.text()
        assert one.finish() == 0, one.err()
    finally:
        for j in jobs:
            if j.proc.poll() is None:
                j.proc.kill()
        pool.stop()
    for job, steps in ((one, 600), (two, 100)):
        lines = job.out.texts()
        assert [l for l in lines if not LINE.match(l)] == []
        assert committed_steps(lines) == set(range(steps))
    assert sizes_in_order(one.out.texts())[:3] == [4, 2, 4]
    print(f"real Horovod: the second pool job's start -> the first's first step at 2 ranks "
          f"{shrunk - two.started:.2f} s")
    assert processes_with_marker(marker) == []
