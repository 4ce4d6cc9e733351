"""Elastic reaction benchmark: a 2 -> 3 -> 2 job of Horovod-protocol stand-in workers
(tests/integration/elastic_standin.py) under etrun, driven by a discovery script that reads a
file this harness edits. Every line etrun and the workers print is timestamped on arrival.

Reports, per discovery interval: time to the first committed step; for each change, the time
from editing the hosts file to the first step at the new size, and etrun's own share of it:
  notify: change seen by etrun (or, for workers started ahead, the last of them in) -> rank 0
          acknowledged the notification
  spawn:  every worker in (barrier complete) -> the new round's ranks started
and the training stall of each change: from the last step of the old world to the first step of
the new one. Then, with workers that behave as Horovod's (--startup-seconds 1.5, a Gloo ring that
blocks a survivor until HOROVOD_GLOO_TIMEOUT_SECONDS=30 when a peer dies), the stalls of a scale-up
and a scale-down and the time from SIGKILLing the last rank to the first step of the smaller world
(issue 15's targets: <= 0.25 s, <= 0.15 s, <= 5 s).
usage: elastic.py ETRUN INTERVAL...
"""
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
STANDIN = os.path.join(ROOT, "tests/integration/elastic_standin.py")


class Lines:
    def __init__(self, stream):
        self.lines = []  # (monotonic time, text)
        self.lock = threading.Lock()
        threading.Thread(target=self._read, args=(stream,), daemon=True).start()

    def _read(self, stream):
        for raw in stream:
            with self.lock:
                self.lines.append((time.monotonic(), raw.decode(errors="replace").rstrip("\n")))

    def last_before(self, pattern, before):
        regex = re.compile(pattern)
        with self.lock:
            found = [t for t, text in self.lines if t < before and regex.search(text)]
        return found[-1] if found else None

    def first(self, pattern, after=0.0, timeout=120.0):
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                for t, text in self.lines:
                    if t >= after and regex.search(text):
                        return t
            time.sleep(0.002)
        raise TimeoutError(f"no line matching {pattern!r}")


def discovery(first_hosts, slots=1):
    """A discovery script printing a hosts file (`slots` each), and a function that rewrites the
    file at once (returning when it did); the file starts with `first_hosts`."""
    work = tempfile.mkdtemp()
    hosts = os.path.join(work, "hosts")

    def set_hosts(names):
        with open(hosts + ".tmp", "w") as f:
            f.write("".join(f"{h}:{slots}\n" for h in names))
        os.replace(hosts + ".tmp", hosts)
        return time.monotonic()

    set_hosts(first_hosts)
    script = os.path.join(work, "discover.sh")
    with open(script, "w") as f:
        f.write(f"#!/bin/sh\ncat {hosts}\n")
    os.chmod(script, 0o755)
    return set_hosts, script


def run(etrun, interval):
    host3 = socket.gethostname()
    set_hosts, script = discovery(["localhost", "127.0.0.1"])
    start = time.monotonic()
    proc = subprocess.Popen(
        [etrun, "--verbose", "-np", "2", "--min-np", "1", "--discovery-interval", str(interval),
         "--host-discovery-script", script, "/usr/bin/python3", STANDIN, "--steps", "1000000",
         "--step-seconds", "0.01", "--timeout", "120"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    out, err = Lines(proc.stdout), Lines(proc.stderr)
    result = {"first_step": out.first(r"<stdout>:step 0 rank") - start}
    for name, names, size in (("up", ["localhost", "127.0.0.1", host3], 3),
                              ("down", ["localhost", host3], 2)):
        time.sleep(0.5)
        changed = set_hosts(names)
        step = out.first(rf"<stdout>:step \d+ rank \d+ size {size}$", after=changed)
        result[name + "_stall"] = step - out.last_before(r"<stdout>:step \d+ rank", step)
        seen = err.first(r"host change seen", after=changed)
        acked = err.first(r"acknowledged the host change", after=changed)
        # Workers started ahead: rank 0 is told once the last of them is in, not at once.
        in_ahead = err.last_before(r"started ahead is in \(0 to go\)", acked)
        if in_ahead is not None and in_ahead >= seen:
            seen = in_ahead
        all_in = err.first(r"workers of round \d+ are in", after=changed)
        started = err.first(r"round \d+ started", after=all_in)
        result[name] = step - changed
        result[name + "_poll"] = seen - changed
        result[name + "_notify"] = acked - seen
        result[name + "_spawn"] = started - all_in
        result[name + "_workers"] = (step - changed) - (seen - changed) - (acked - seen) - (started - all_in)
    proc.terminate()
    proc.wait(timeout=60)
    return result


def standin_pid(host, marker):
    """The pid of the stand-in started for `host` (by its environment)."""
    for pid in os.listdir("/proc"):
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = f.read().split(b"\0")
        except OSError:
            continue
        if marker in env and b"HOROVOD_HOSTNAME=" + host.encode() in env:
            return int(pid)
    return None


def run_realistic(etrun):
    """Stalls of a scale-up and a scale-down, and crash recovery, with workers that start in
    1.5 s and whose ring blocks a survivor for the Gloo timeout."""
    host3 = socket.gethostname()
    set_hosts, script = discovery(["localhost", "127.0.0.1"])
    marker = f"ETRUN_BENCH_MARKER={os.getpid()}".encode()
    env = dict(os.environ, HOROVOD_GLOO_TIMEOUT_SECONDS="30",
               ETRUN_BENCH_MARKER=str(os.getpid()))
    proc = subprocess.Popen(
        [etrun, "-np", "2", "--min-np", "1", "--discovery-interval", "0.1",
         "--host-discovery-script", script, "/usr/bin/python3", STANDIN, "--steps", "1000000",
         "--step-seconds", "0.05", "--timeout", "120", "--startup-seconds", "1.5", "--ring-stall"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, env=env)
    out = Lines(proc.stdout)
    Lines(proc.stderr)
    result = {}
    out.first(r"<stdout>:step 0 rank")
    for name, names, size in (("up", ["localhost", "127.0.0.1", host3], 3),
                              ("down", ["localhost", host3], 2),
                              ("up again", ["localhost", host3, "127.0.0.1"], 3)):
        time.sleep(1.0)
        changed = set_hosts(names)
        step = out.first(rf"<stdout>:step \d+ rank \d+ size {size}$", after=changed)
        result[name] = step - out.last_before(r"<stdout>:step \d+ rank", step)
    time.sleep(1.0)
    victim = standin_pid("127.0.0.1", marker)  # the last rank: rank 2
    killed = time.monotonic()
    os.kill(victim, 9)
    step = out.first(r"<stdout>:step \d+ rank \d+ size 2$", after=killed, timeout=120)
    result["crash"] = step - killed
    proc.terminate()
    proc.wait(timeout=60)
    return result


def main():
    etrun = sys.argv[1]
    horovodrun = {"first_step": 3.8, "up": 2.7, "down": 1.2}  # real Horovod, 1 s poll; measured here (issue)
    ms = lambda s: f"{s * 1000:7.1f} ms"
    ok = True
    for interval in map(float, sys.argv[2:]):
        r = run(etrun, interval)
        print(f"--discovery-interval {interval:g}")
        print(f"  first step            {ms(r['first_step'])}   (horovodrun {horovodrun['first_step']} s)")
        for name in ("up", "down"):
            print(f"  scale {name:4s} reaction    {ms(r[name])}, training stall {ms(r[name + '_stall'])}   (horovodrun {horovodrun[name]} s): "
                  f"poll wait {ms(r[name + '_poll'])}, etrun notify {ms(r[name + '_notify'])}, "
                  f"etrun spawn {ms(r[name + '_spawn'])}, workers {ms(r[name + '_workers'])}")
        own = max(r["up_notify"], r["up_spawn"], r["down_notify"], r["down_spawn"])
        print(f"  etrun's own steps: max {ms(own)} (target <= 10 ms each): {'PASS' if own <= 0.010 else 'FAIL'}")
        ok = ok and own <= 0.010
    r = run_realistic(etrun)
    print("stand-ins at 1.5 s start-up, Gloo ring stall with a 30 s timeout, --discovery-interval 0.1")
    for name, target in (("up", 0.25), ("down", 0.15)):
        print(f"  scale-{name:4s} training stall {ms(r[name])}   (target <= {target:g} s; horovodrun "
              f"{'1.8-2.0' if name == 'up' else '0.12-0.15'} s with real Horovod): "
              f"{'PASS' if r[name] <= target else 'FAIL'}")
    print(f"  SIGKILL -> first step of the smaller world {ms(r['crash'])}   (target <= 5 s; "
          f"horovodrun 30.1 s with real Horovod): {'PASS' if r['crash'] <= 5 else 'FAIL'}")
    print("(workers are Python stand-ins of Horovod's protocol, not real Horovod: compare the ratios "
          "with horovodrun only in a run with real Horovod workers)")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
