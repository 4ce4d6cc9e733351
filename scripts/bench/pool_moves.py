"""Pool move benchmark (issue 12): how long slots take to move between two training jobs of one
`etrun pool`, with Horovod-protocol stand-ins that take 1.5 s to start (`import torch,
horovod.torch`) and commit every --step-seconds.

On 8 CPU slots: training 1 alone (8), training 2 arrives (4/4), training 2's priority 10000
(5/3), training 1 ends (8). For the priority change and the job's end it reports the time from
the command (or the job's etrun exiting) to both jobs training at their new sizes, whichever is
later: the new world formed (rank 0's "reset: ... size N" line, where training goes on) and, for
reference, the first step committed at the new size (one step later). Target: <= 2 s plus one
commit interval. Every line is timestamped on arrival.
usage: pool_moves.py ETRUN [STEP_SECONDS]
"""
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from elastic import Lines, STANDIN  # noqa: E402


def held(etrun, pool):
    r = subprocess.run([etrun, "pool", "status", pool, "--json"], capture_output=True)
    if r.returncode != 0:
        return None
    return {j["job"]: j["held"] + j["releasing"] for j in json.loads(r.stdout)["jobs"]}


def wait_held(etrun, pool, want, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if held(etrun, pool) == want:
            return
        time.sleep(0.05)
    raise TimeoutError(f"pool never held {want}: {held(etrun, pool)}")


def job(etrun, pool, name, work, step_seconds):
    steps = os.path.join(work, name + ".steps")
    proc = subprocess.Popen(
        [etrun, "--pool", pool, "--job-name", name, "-np", "1", "--min-np", "1", "--max-np", "8",
         "/usr/bin/python3", STANDIN, "--steps", "100000", "--step-seconds", str(step_seconds),
         "--startup-seconds", "1.5", "--steps-file", steps, "--timeout", "120"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    return proc, Lines(proc.stdout), steps


def main():
    etrun = os.path.abspath(sys.argv[1])
    step_seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 0.5
    work = tempfile.mkdtemp()
    pool = "bench" + uuid.uuid4().hex[:6]
    daemon = subprocess.Popen([etrun, "pool", "start", pool, "-H", "localhost:8", "--gpus", "none",
                               "--min-hold", "1s"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    procs = [daemon]
    try:
        deadline = time.monotonic() + 10
        while held(etrun, pool) is None and time.monotonic() < deadline:
            time.sleep(0.05)
        p1, out1, steps1 = job(etrun, pool, "train1", work, step_seconds)
        procs.append(p1)
        out1.first(r"<stdout>:step \d+ rank \d+ size 8")
        p2, out2, steps2 = job(etrun, pool, "train2", work, step_seconds)
        procs.append(p2)
        out2.first(r"<stdout>:step \d+ rank \d+ size 4")
        out1.first(r"<stdout>:step \d+ rank \d+ size 4")
        wait_held(etrun, pool, {"train1": 4, "train2": 4})
        time.sleep(2 * step_seconds)

        t0 = time.monotonic()
        subprocess.run([etrun, "pool", "priority", "train2", "10000", "--pool", pool], check=True,
                       capture_output=True)
        a = out1.first(r"\[0\]<stdout>:reset: rank \d+ -> \d+ size 3", after=t0)
        b = out2.first(r"\[0\]<stdout>:reset: rank \d+ -> \d+ size 5", after=t0)
        priority_s = max(a, b) - t0
        priority_step_s = max(out1.first(r"<stdout>:step \d+ rank \d+ size 3", after=t0),
                              out2.first(r"<stdout>:step \d+ rank \d+ size 5", after=t0)) - t0
        time.sleep(2 * step_seconds)

        with open(steps1 + ".tmp", "w") as f:
            f.write("1")  # rank 0 ends training at its next commit
        os.replace(steps1 + ".tmp", steps1)
        p1.wait(timeout=60)
        t1 = time.monotonic()
        end_s = out2.first(r"\[0\]<stdout>:reset: rank \d+ -> \d+ size 8", after=t1) - t1
        end_step_s = out2.first(r"<stdout>:step \d+ rank \d+ size 8", after=t1) - t1
        with open(steps2 + ".tmp", "w") as f:
            f.write("1")
        os.replace(steps2 + ".tmp", steps2)
        p2.wait(timeout=60)
    finally:
        for p in reversed(procs):
            if p.poll() is None:
                p.terminate()
                p.wait(timeout=20)
    target = 2 + step_seconds
    print(f"pool moves, 8 slots, stand-ins at 1.5 s start-up, a commit every {step_seconds:g} s:")
    for name, value, step in (("priority change 4/4 -> 5/3", priority_s, priority_step_s),
                              ("job end 5/3 -> 8", end_s, end_step_s)):
        verdict = "PASS" if value <= target else "FAIL"
        print(f"  {name:28s} both training at the new sizes after {value:.2f} s "
              f"(target <= {target:g} s) {verdict}; first step committed at them {step:.2f} s")
    return 0 if max(priority_s, end_s) <= target else 1


if __name__ == "__main__":
    sys.exit(main())
