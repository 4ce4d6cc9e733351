"""The hang watchdog (--hang-timeout, --hang-action) and `etrun dump` (issue 38): real processes,
real Horovod where it is built, two bed hosts over SSH. A rank that never reaches the collective
the others wait in is named with its function; every Python rank's stack arrives under its own
prefix; non-Python ranks show their kernel state; abort ends with 124 and leaves nothing; restart
gets an elastic job going again; the stack hook keeps the script's own sitecustomize and
Debian's. And when ranks fail in a cascade, etrun's last line names the one that failed first."""
import json
import os
import re
import signal
import subprocess
import threading
import time

import pytest

from conftest import ETRUN, PYTHON, processes_with_marker, rank_lines, run_etrun, wait_until
from testbed import bed_fixture

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "hang_worker.py")
HOROVOD_WORKER = os.path.join(HERE, "horovod_worker.py")
HOROVOD_PATH = os.environ.get("ETRUN_HOROVOD_PATH", "")
# hang_worker.py's two places.
WAITING = r"hang_worker\.py:\d+ \(wait_in_collective\)"
STUCK = r"hang_worker\.py:\d+ \(load_batch\)"

bed = bed_fixture(hosts=2)


class Job:
    """etrun running in the background, its stdout and stderr read on threads."""

    def __init__(self, argv, env, cwd=None):
        self.proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     stdin=subprocess.DEVNULL, cwd=cwd)
        self.out, self.err = [], []
        self.threads = [threading.Thread(target=self._read, args=(s, into), daemon=True)
                        for s, into in ((self.proc.stdout, self.out), (self.proc.stderr, self.err))]
        for t in self.threads:
            t.start()

    @staticmethod
    def _read(stream, into):
        for raw in stream:
            into.append(raw.decode(errors="replace").rstrip("\n"))

    def wait_for(self, pattern, stream="err", timeout=90):
        regex = re.compile(pattern)
        lines = self.err if stream == "err" else self.out
        found = []

        def seen():
            found[:] = [line for line in list(lines) if regex.search(line)]
            return bool(found)

        assert wait_until(seen, timeout=timeout, interval=0.05), \
            f"no line like {pattern!r}; stderr:\n" + "\n".join(self.err[-40:])
        return found[0]

    def finish(self, timeout=60):
        code = self.proc.wait(timeout=timeout)
        for t in self.threads:
            t.join(timeout=10)
        return code

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.finish()


def job_env(marker_env, extra=None):
    return dict(os.environ, **marker_env, **(extra or {}))


def events(path, name):
    with open(path) as f:
        return [e for e in map(json.loads, f) if e["event"] == name]


def stacks_by_rank(lines):
    """rank -> its stderr lines of faulthandler's dump."""
    return {rank: body for rank, body in rank_lines("\n".join(lines), "stderr").items()
            if any(re.match(r"^(Current thread|Thread) 0x[0-9a-f]+ \(most recent call first\):$", b)
                   for b in body)}


@pytest.mark.skipif(not HOROVOD_PATH, reason="real Horovod not built (scripts/horovod.sh, "
                                             "ETRUN_HOROVOD_PATH)")
def test_real_horovod_rank_stuck_before_an_allreduce_is_named_and_the_job_goes_on(marker_env, tmp_path):
    marker = next(iter(marker_env.values()))
    log = tmp_path / "events.jsonl"
    path = HOROVOD_PATH + (":" + os.environ["PYTHONPATH"] if os.environ.get("PYTHONPATH") else "")
    # 10 s: longer than four ranks importing torch on two busy cores, which print nothing.
    job = Job([ETRUN, "-np", "4", "--hang-timeout", "10", "--events-file", str(log), PYTHON,
               HOROVOD_WORKER, "--static", "--stuck-rank", "2"],
              job_env(marker_env, {"PYTHONPATH": path}))
    try:
        verdict = job.wait_for(r"^etrun: hang: ", timeout=120)
        assert re.fullmatch(
            r"etrun: hang: no output for \d+ s: ranks 0,1,3 wait in \S*mpi_ops\.py:\d+ "
            r"\(synchronize\); rank 2 on localhost is elsewhere: horovod_worker\.py:\d+ "
            r"\(stuck_before_allreduce\)", verdict), verdict
        # Every rank's whole dump came under its own prefix, its main thread in the worker.
        stacks = stacks_by_rank(job.err)
        assert sorted(stacks) == [0, 1, 2, 3], "\n".join(job.err[-60:])
        for rank, body in stacks.items():
            assert any(re.match(r'^  File ".*horovod_worker\.py", line \d+ in static$', b) for b in body)
        assert any("stuck_before_allreduce" in b for b in stacks[2])
        # dump: the job goes on, its ranks untouched.
        time.sleep(1)
        assert job.proc.poll() is None
        assert len([p for p in processes_with_marker(marker) if p != job.proc.pid]) >= 4
        [hang] = events(log, "hang")
        assert hang["odd_ranks"] == [2] and hang["action"] == "dump" and hang["verdict"] == verdict
    finally:
        code = job.stop()
    assert code == 128 + signal.SIGTERM
    assert wait_until(lambda: processes_with_marker(marker) == [], timeout=20)


def test_abort_across_two_bed_hosts_names_the_odd_rank_and_its_host_and_leaves_nothing(bed, marker_env,
                                                                                      tmp_path):
    marker = next(iter(marker_env.values()))
    key = os.path.join(bed.home, ".ssh", "id_ed25519")
    log = tmp_path / "events.jsonl"
    started = time.monotonic()
    r = subprocess.run(bed.exec_argv([ETRUN, "-np", "4", "-H", "h1:2,h2:2", "-i", key, "--hang-timeout",
                                      "3", "--hang-action", "abort", "--events-file", str(log), PYTHON,
                                      WORKER, "--stuck-rank", "3"]),
                       env=bed.env(job_env(marker_env)), capture_output=True, text=True, timeout=120,
                       stdin=subprocess.DEVNULL, cwd=tmp_path)
    assert r.returncode == 124, r.stderr
    lines = r.stderr.splitlines()
    verdicts = [line for line in lines if line.startswith("etrun: hang: ")]
    assert len(verdicts) == 1, r.stderr
    assert re.fullmatch(rf"etrun: hang: no output for \d+ s: ranks 0-2 wait in {WAITING}; rank 3 on h2 "
                        rf"is elsewhere: {STUCK}", verdicts[0]), verdicts[0]
    assert sorted(stacks_by_rank(lines)) == [0, 1, 2, 3], r.stderr
    assert lines[-1] == ("etrun: error: hung for 3 s (--hang-timeout): stopped 4 ranks "
                         "(--hang-action abort)"), r.stderr
    assert time.monotonic() - started < 60
    assert wait_until(lambda: processes_with_marker(marker) == [], timeout=20)
    [hang] = events(log, "hang")
    assert hang["odd_hosts"] == ["h2"] and hang["action"] == "abort"
    [end] = events(log, "job_end")
    assert end["exit_code"] == 124


def test_a_non_python_rank_shows_its_state_and_wait_channel(marker_env):
    marker = next(iter(marker_env.values()))
    r = run_etrun(["-np", "2", "--hang-timeout", "1", "--hang-action", "abort", "sh", "-c", "sleep 1000"],
                  env=marker_env, timeout=60)
    assert r.returncode == 124, r.stderr
    verdict = [line for line in r.stderr.decode().splitlines() if line.startswith("etrun: hang: ")]
    assert len(verdict) == 1, r.stderr
    # The shell may exec sleep or wait for it: then its child is shown too.
    assert re.fullmatch(r"etrun: hang: no output for \d+ s: ranks 0,1 on localhost have no Python "
                        r"stack: state S \(sleeping\), waits in \w+: (sh -c sleep 1000; its child: "
                        r"state S \(sleeping\), waits in \w+: )?sleep 1000", verdict[0]), verdict
    assert wait_until(lambda: processes_with_marker(marker) == [], timeout=20)


def test_etrun_dump_shows_every_stack_and_the_verdict_of_a_running_job(marker_env, tmp_path):
    marker = next(iter(marker_env.values()))
    name = "dump" + marker[-8:]
    job = Job([ETRUN, "-np", "3", "--hang-timeout", "600", "--job-name", name, PYTHON, WORKER,
               "--stuck-rank", "1"], job_env(marker_env))
    try:
        for rank in range(3):
            job.wait_for(rf"^\[{rank}\]<stdout>:started rank {rank}$", stream="out", timeout=60)
        time.sleep(0.5)  # each in its place
        r = subprocess.run([ETRUN, "dump", name], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        lines = r.stdout.splitlines()
        assert re.fullmatch(rf"etrun: dump of '{name}': ranks 0,2 wait in {WAITING}; rank 1 on "
                            rf"localhost is elsewhere: {STUCK}", lines[-1]), r.stdout
        for rank in range(3):
            assert any(re.match(rf"^\[{rank}\]<stack>:Current thread 0x", line) for line in lines), r.stdout
        # The stacks went to the job's own output too, and nothing stopped.
        job.wait_for(r"^\[1\]<stderr>:  File \".*hang_worker\.py\", line \d+ in load_batch$")
        assert job.proc.poll() is None
        r = subprocess.run([ETRUN, "dump", name, "--json"], capture_output=True, text=True, timeout=60)
        document = json.loads(r.stdout)
        assert document["odd_ranks"] == [1]
        assert [x["rank"] for x in document["ranks"]] == [0, 1, 2]
        r = subprocess.run([ETRUN, "dump", "no-such-job-" + marker[-8:]], capture_output=True, text=True,
                           timeout=30)
        assert r.returncode == 1 and r.stderr.startswith("etrun: error: ") and r.stderr.count("\n") == 1
    finally:
        job.stop()
    assert wait_until(lambda: processes_with_marker(marker) == [], timeout=20)


def test_restart_gets_an_elastic_restart_mode_job_going_again(marker_env, tmp_path):
    hosts = tmp_path / "discover.sh"
    hosts.write_text("#!/bin/sh\necho localhost:3\n")
    hosts.chmod(0o755)
    log = tmp_path / "events.jsonl"
    r = run_etrun(["-np", "3", "--min-np", "3", "--host-discovery-script", str(hosts), "--elastic-mode",
                   "restart", "--hang-timeout", "2", "--hang-action", "restart", "--events-file", str(log),
                   PYTHON, WORKER, "--stuck-rank", "1", "--once", str(tmp_path)],
                  env=marker_env, timeout=120, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    by_rank = rank_lines(r.stdout.decode())
    assert {rank: sorted(lines) for rank, lines in by_rank.items()} == {
        rank: [f"done rank {rank}", f"started rank {rank}"] for rank in range(3)}, r.stdout
    [hang] = events(log, "hang")
    assert hang["action"] == "restart" and hang["odd_ranks"] == [1]
    assert len(events(log, "round")) >= 2


def test_the_stack_hook_keeps_the_scripts_own_sitecustomize_and_debians(tmp_path):
    probe = ("import os, sys; m = sys.modules.get('sitecustomize'); "
             "print(getattr(m, '__file__', None), os.environ.get('ETRUN_STACK_OWNER') == str(os.getpid()), "
             "getattr(m, 'MINE', False))")
    own = tmp_path / "own"
    own.mkdir()
    (own / "sitecustomize.py").write_text("MINE = True\nprint('own sitecustomize ran', flush=True)\n")
    env = {"PYTHONPATH": str(own)}
    r = run_etrun(["-np", "1", "--hang-timeout", "100", PYTHON, "-c", probe], env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode().splitlines() == [
        "[0]<stdout>:own sitecustomize ran", f"[0]<stdout>:{own}/sitecustomize.py True True"]
    # No sitecustomize of the user's: Debian's own runs, as without etrun.
    debian = subprocess.run([PYTHON, "-c", "import sitecustomize; print(sitecustomize.__file__)"],
                            capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"})
    r = run_etrun(["-np", "1", "--hang-timeout", "100", PYTHON, "-c", probe], timeout=60,
                  env={"PYTHONPATH": ""})
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode().splitlines() == [f"[0]<stdout>:{debian.stdout.strip()} True False"]
    # Without --hang-timeout nothing of etrun's is on the rank's PYTHONPATH.
    r = run_etrun(["-np", "1", PYTHON, "-c", "import os; print(os.environ.get('PYTHONPATH', ''))"],
                  env={"PYTHONPATH": str(own)}, timeout=60)
    assert r.stdout.decode().splitlines()[-1] == f"[0]<stdout>:{own}"


def test_an_exported_hang_timeout_leaves_mpi_jobs_alone():
    """A site profile may export ETRUN_HANG_TIMEOUT: --mpi jobs (mpirun's ranks, not etrun's to
    dump) run as before; only an explicit --hang-timeout with --mpi is refused."""
    r = run_etrun(["--mpi", "-np", "1", "true"], env={"ETRUN_HANG_TIMEOUT": "300",
                                                       "OMPI_ALLOW_RUN_AS_ROOT": "1",
                                                       "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}, timeout=60)
    assert r.returncode == 0, r.stderr
    r = run_etrun(["--mpi", "-np", "1", "--hang-timeout", "5", "true"], timeout=30)
    assert r.returncode == 2
    assert r.stderr.decode() == ("etrun: error: --mpi and --hang-timeout cannot be used together: "
                                 "mpirun's ranks are not etrun's to dump; leave out one of them\n")


@pytest.mark.parametrize("args,env,message", [
    (["--hang-action", "abort"], {}, "etrun: error: --hang-action acts on a hang that --hang-timeout "
                                     "SECONDS (or $ETRUN_HANG_TIMEOUT) detects: give one"),
    (["--hang-timeout", "0"], {}, "etrun: error: --hang-timeout: expected seconds from 0.001 to 1e9, "
                                  "got 0"),
    (["--hang-timeout", "inf"], {}, None),
    ([], {"ETRUN_HANG_TIMEOUT": "soon"}, "etrun: error: ETRUN_HANG_TIMEOUT: expected seconds from 0.001 "
                                         "to 1e9, got 'soon': set it to a number such as 300, or unset it"),
    (["--hang-timeout", "5", "--hang-action", "restart"], {},
     "etrun: error: --hang-action restart treats the odd ranks' hosts as failed, which only an elastic "
     "job survives: add --min-np (or --host-discovery-script), or use --hang-action abort"),
    (["--hang-timeout", "5", "--hang-action", "later"], {}, None),
])
def test_bad_hang_flags_are_one_line_and_start_nothing(args, env, message, tmp_path):
    flag = tmp_path / "ran"
    r = run_etrun(["-np", "1", *args, "touch", str(flag)], env=env, timeout=30)
    assert r.returncode == 2
    lines = r.stderr.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith("etrun: error: "), r.stderr
    if message:
        assert lines[0] == message
    assert not flag.exists()


# A cascade: rank $FIRST prints its error and exits 7, still holding its output open (a child), so
# its end reaches etrun late; its peers see it go (the flag file) and fail with connection errors.
CASCADE = """
if [ "$HOROVOD_RANK" = "$FIRST" ]; then
  sleep 0.5
  (sleep 5) &
  echo "ValueError: bad batch 17" >&2
  touch "$FLAG"
  exit 7
fi
while [ ! -e "$FLAG" ]; do sleep 0.02; done
sleep 0.2
echo "RuntimeError: Connection closed by peer" >&2
exit 1
"""


def test_a_cascade_across_two_hosts_ends_naming_the_rank_that_failed_first(bed, marker_env, tmp_path):
    marker = next(iter(marker_env.values()))
    key = os.path.join(bed.home, ".ssh", "id_ed25519")
    env = job_env(marker_env, {"FIRST": "5", "FLAG": str(tmp_path / "flag")})
    r = subprocess.run(bed.exec_argv([ETRUN, "-np", "8", "-H", "h1:4,h2:4", "-i", key, "sh", "-c",
                                      CASCADE]),
                       env=bed.env(env), capture_output=True, text=True, timeout=120,
                       stdin=subprocess.DEVNULL, cwd=tmp_path)
    assert r.returncode == 7, r.stderr
    assert r.stderr.splitlines()[-1] == ('etrun: error: rank 5 on h2 exited with code 7: "ValueError: '
                                         'bad batch 17"; stopped the other 7 ranks'), r.stderr
    assert wait_until(lambda: processes_with_marker(marker) == [], timeout=20)
