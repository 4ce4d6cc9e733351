"""Real Horovod's hvd.init() under etrun and under horovodrun, same machine, same run.

Each rank is this file in worker mode: it imports horovod.torch (about 1 s of CPU per process),
takes time.time() just before hvd.init() and just after, and writes both (with its start time and
CPU seconds, kept in --json) to a file of its own. The measure is max(after) - max(before) over the ranks: from the last rank's arrival at
hvd.init() to the last rank's return from it (Gloo's rendezvous through the launcher's HTTP store
and the full mesh of pair connections). Arrival, not launch: N processes importing torch on a few
cores arrive seconds apart, and that is the machine's, not the launcher's.

For each N of --ranks (default 2, 4, 8, 16), --runs repetitions (default 3) of each launcher,
alternating (etrun first in even runs, horovodrun first in odd ones), after one uncounted warm-up
of each at N = 2. Both get the same command and --gloo-timeout-seconds (120, so that a slow
horovodrun init at 16 ranks on a loaded machine is measured rather than failed):

  etrun       ETRUN -np N --gloo-timeout-seconds 120 /usr/bin/python3 THIS --worker DIR
  horovodrun  /usr/bin/python3 SITE/bin/horovodrun --gloo -np N -H localhost:N
              --gloo-timeout-seconds 120 /usr/bin/python3 THIS --worker DIR

Real Horovod 0.28.1 (PyTorch, Gloo) comes from scripts/horovod.sh (built once into a cache,
docs/real-horovod.md), or from $ETRUN_HOROVOD_PATH when set. Also printed, for information: the
launch-to-last-return time (launcher start to the last rank's return from hvd.init()), the
1-minute load average before each run (it counts the bench's own ranks of the runs before: 16
importing ranks alone take it towards 16) and others' CPU: the cores other processes kept busy
on average during the run (the machine's busy time from /proc/stat less the CPU time of the
launcher and the ranks it reaped), and listen overflows: connections the machine dropped during
the run because a listen queue was full (TcpExt ListenOverflows, machine-wide). Horovod's
HTTPStore polls a missing key every 10 ms on a new connection; horovodrun's Python server
listens with socketserver's queue of 5, so at 8 and 16 ranks SYNs are dropped and each waits
for the kernel's retransmission (1 s, then 2 s, ...): 106 of them in one 16-rank horovodrun run
here, none under etrun.

With other work on the machine, the import phase, and so launch-to-last-return, differs by more
than the launchers: Linux's autogroup scheduling (/proc/sys/kernel/sched_autogroup_enabled)
shares the CPU between sessions, and horovodrun starts each worker in a session of its own while
etrun's ranks share etrun's session. Under others' builds, 16 ranks took 19 s to import under
etrun and 7 s when each rank was wrapped in `setsid -w` (2026-11-26, load 15). The measure, which
starts at the last arrival, was 1.06 s both ways (one run each).

Targets (issue 29): hvd.init() at 16 ranks >= 20x faster under etrun than under horovodrun, at
8 ranks >= 10x (ratio of the medians). Every run must finish within --timeout (default 180 s)
with all N ranks reporting a world of N.

Every process a run starts carries a marker in its environment and the run's folder on its
command line; after each run, on exit and on Ctrl-C, SIGTERM or SIGHUP, whatever still carries
them is killed (horovodrun puts its workers in sessions of their own, etrun in process groups).
Each run's output goes to a file in a temporary folder, removed at the end unless a run failed.

usage: rendezvous_real.py ETRUN [--ranks 2,4,8,16] [--runs 3] [--timeout 180] [--json FILE]
Exit status: 0 when every run succeeded and both targets pass, 1 otherwise.
"""
import argparse
import json
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

STARTED = time.time()  # a rank's start, before its imports
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PYTHON = "/usr/bin/python3"
MARKER = "ETRUN_BENCH_RENDEZVOUS_REAL"
GLOO_TIMEOUT_S = 120
TARGETS = {16: 20.0, 8: 10.0}  # N -> minimum horovodrun/etrun ratio of the median hvd.init()


def worker(out_dir, started):
    """One rank: when it started, the two timestamps around hvd.init() and its CPU seconds
    before and after, in OUT_DIR/rank-<rank>."""
    import horovod.torch as hvd  # noqa: F401 (imports torch)
    cpu_before, before = time.process_time(), time.time()
    hvd.init()
    after, cpu_after = time.time(), time.process_time()
    path = os.path.join(out_dir, "rank-%d" % hvd.rank())
    with open(path + ".tmp", "w") as f:
        f.write("%.6f %.6f %.6f %d %.3f %.3f\n" % (started, before, after, hvd.size(), cpu_before,
                                                  cpu_after))
    os.rename(path + ".tmp", path)


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def horovod_site():
    """The directory holding real Horovod (scripts/horovod.sh's), or exits with its reason."""
    if os.environ.get("ETRUN_HOROVOD_PATH"):
        return os.environ["ETRUN_HOROVOD_PATH"]
    r = subprocess.run([os.path.join(ROOT, "scripts", "horovod.sh")], stdout=subprocess.PIPE,
                       text=True)  # its one line goes to our stderr
    lines = r.stdout.split()
    if r.returncode != 0 or not lines:
        print("FAIL real Horovod unavailable (scripts/horovod.sh exit %d, its line above)"
              % r.returncode)
        sys.exit(1)
    return lines[-1]


def marked_pids(marker, folder):
    """Live processes whose environment holds marker or whose command line names folder."""
    found = []
    needles = (marker.encode(), folder.encode())
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = f.read()
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read()
            with open(f"/proc/{pid}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if state != b"Z" and (needles[0] in env or needles[1] in cmd):
            found.append(int(pid))
    return found


def command_line(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()[:120]
    except OSError:
        return "?"


def kill_marked(marker, folder, grace=0.0):
    """Gives the processes marked as this bench's `grace` seconds to end, then SIGKILLs them
    until none is left; returns the command lines of those it killed."""
    deadline = time.monotonic() + grace
    while marked_pids(marker, folder) and time.monotonic() < deadline:
        time.sleep(0.05)
    killed = {}
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        pids = marked_pids(marker, folder)
        if not pids:
            break
        for pid in pids:
            killed.setdefault(pid, command_line(pid))
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.05)
    return list(killed.values())


def busy_cpu_s():
    """CPU seconds the whole machine has spent busy (not idle, not waiting for I/O) since boot."""
    with open("/proc/stat") as f:
        ticks = [int(x) for x in f.readline().split()[1:9]]
    return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")


def children_cpu_s():
    """CPU seconds of this process's reaped descendants (a launcher and the ranks it reaped)."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def listen_overflows():
    """The machine's count of connections dropped because a listen queue was full (TcpExt
    ListenOverflows: the client's SYN goes unanswered and its kernel sends it again after 1 s,
    then 2 s, ...)."""
    with open("/proc/net/netstat") as f:
        lines = f.read().splitlines()
    for names, values in zip(lines[::2], lines[1::2]):
        if names.startswith("TcpExt:"):
            return int(dict(zip(names.split(), values.split()))["ListenOverflows"])
    return 0


class Bench:
    def __init__(self, etrun, site, work, timeout):
        self.etrun = etrun
        self.site = site
        self.work = work
        self.timeout = timeout
        self.marker = "%d-%d" % (os.getpid(), time.time_ns())
        self.proc = None
        self.count = 0
        path = site + (":" + os.environ["PYTHONPATH"] if os.environ.get("PYTHONPATH") else "")
        self.env = dict(os.environ, PYTHONPATH=path, **{MARKER: self.marker})

    def command(self, launcher, n, out_dir):
        rank = [PYTHON, os.path.abspath(__file__), "--worker", out_dir]
        gloo = ["--gloo-timeout-seconds", str(GLOO_TIMEOUT_S)]
        if launcher == "etrun":
            return [self.etrun, "-np", str(n), *gloo, *rank]
        return [PYTHON, os.path.join(self.site, "bin", "horovodrun"), "--gloo", "-np", str(n),
                "-H", "localhost:%d" % n, *gloo, *rank]

    def run(self, launcher, n):
        """One job: a dict with init (s), launch (s), load, others (cores), or error."""
        self.count += 1
        out_dir = os.path.join(self.work, "%03d-%s-%d" % (self.count, launcher, n))
        os.makedirs(out_dir)
        with open("/proc/loadavg") as f:
            load = float(f.read().split()[0])
        result = {"launcher": launcher, "n": n, "load": load}
        log_path = out_dir + ".log"
        with open(log_path, "wb") as log_file:
            start, busy, ours = time.time(), busy_cpu_s(), children_cpu_s()
            overflows = listen_overflows()
            self.proc = subprocess.Popen(self.command(launcher, n, out_dir), env=self.env,
                                         stdin=subprocess.DEVNULL, stdout=log_file,
                                         stderr=subprocess.STDOUT, start_new_session=True)
            try:
                code = self.proc.wait(timeout=self.timeout)
            except subprocess.TimeoutExpired:
                code = None
            finally:
                self.stop()
            wall = time.time() - start
            result["others"] = max(0.0, busy_cpu_s() - busy - (children_cpu_s() - ours)) / wall
            result["overflows"] = listen_overflows() - overflows
        left = kill_marked(self.marker, out_dir, grace=2.0)
        stamps = []
        for name in sorted(os.listdir(out_dir)):
            if name.startswith("rank-") and not name.endswith(".tmp"):
                with open(os.path.join(out_dir, name)) as f:
                    started, before, after, size, cpu_before, cpu_after = f.read().split()
                stamps.append((float(before), float(after), int(size)))
                result.setdefault("ranks", []).append({
                    "rank": int(name[5:]), "started": float(started) - start,
                    "before": float(before) - start, "after": float(after) - start,
                    "cpu_before": float(cpu_before), "cpu_after": float(cpu_after)})
        if code is None:
            result["error"] = "no exit within %d s" % self.timeout
        elif code != 0:
            result["error"] = "exit %d" % code
        elif len(stamps) != n or any(size != n for _, _, size in stamps):
            result["error"] = "%d of %d ranks reported a world of %d" % (
                sum(size == n for _, _, size in stamps), n, n)
        elif left:
            result["error"] = "%d processes still running 2 s after the launcher's exit: %s" % (
                len(left), "; ".join(left))
        if "error" in result:
            with open(log_path, "rb") as f:
                tail = f.read()[-600:].decode(errors="replace").strip().splitlines()
            result["error"] += " (%s: %s)" % (log_path, " | ".join(tail[-3:]))
        if stamps:
            result["init"] = max(a for _, a, _ in stamps) - max(b for b, _, _ in stamps)
            result["launch"] = max(a for _, a, _ in stamps) - start
        return result

    def stop(self):
        """Ends the current launcher: SIGTERM to its group, SIGKILL after 5 s, then reaps it."""
        p, self.proc = self.proc, None
        if p is None:
            return
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGTERM)
                p.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                pass
        try:
            os.killpg(p.pid, signal.SIGKILL)  # whatever stayed in its group
        except OSError:
            pass
        p.wait()


def median(values):
    return statistics.median(values) if values else None


def fmt(value, digits=2):
    return "—" if value is None else "%.*f" % (digits, value)


def main():
    if sys.argv[1:2] == ["--worker"]:
        worker(sys.argv[2], STARTED)
        return 0
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("etrun")
    p.add_argument("--ranks", default="2,4,8,16")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--timeout", type=float, default=180)
    p.add_argument("--json", help="write every run to this file")
    a = p.parse_args()
    sys.stdout.reconfigure(line_buffering=True)
    ranks = [int(x) for x in a.ranks.split(",")]
    if a.runs < 1 or min(ranks) < 1:
        raise SystemExit("rendezvous_real: --runs and every --ranks entry must be at least 1")
    etrun = os.path.realpath(a.etrun)
    if not os.access(etrun, os.X_OK):
        raise SystemExit(f"rendezvous_real: {a.etrun} is not an executable (build etrun, or "
                         "set ETRUN)")
    site = horovod_site()
    # SIGTERM and SIGHUP unwind like Ctrl-C: the finally below ends the launcher and its ranks.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda signum, _: sys.exit(128 + signum))
    work = tempfile.mkdtemp(prefix="etrun-bench-hvdinit-")
    bench = Bench(etrun, site, work, a.timeout)
    runs = []
    try:
        log(f"rendezvous_real: etrun {etrun}, horovod {site}, work {work}")
        for launcher in ("etrun", "horovodrun"):
            r = bench.run(launcher, 2)
            log(f"  warm-up {launcher} N=2: " + r.get("error", "init %.3f s" % r["init"]))
        for n in ranks:
            for i in range(a.runs):
                order = ("etrun", "horovodrun") if i % 2 == 0 else ("horovodrun", "etrun")
                for launcher in order:
                    r = bench.run(launcher, n)
                    r["rep"] = i
                    runs.append(r)
                    log(f"  N={n} run {i + 1} {launcher}: load {r['load']:.2f}, others "
                        f"{r['others']:.2f} cores, listen overflows {r['overflows']}, " +
                        ("FAILED: " + r["error"] if "error" in r else
                         "init %.3f s, launch to last return %.2f s" % (r["init"], r["launch"])))
    except KeyboardInterrupt:
        log(f"rendezvous_real: interrupted (output so far: {work})")
        return 130
    finally:
        bench.stop()
        left = kill_marked(bench.marker, work)
        if left:
            log(f"rendezvous_real: killed {len(left)} processes left behind: " + "; ".join(left))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"etrun": etrun, "horovod": site, "runs": runs}, f, indent=1)

    ok = True
    medians = {}
    print(f"== real Horovod hvd.init(), last rank's arrival -> last rank's return, median of "
          f"{a.runs} (min-max); {os.cpu_count()} cores")
    print("| N | etrun hvd.init() s | horovodrun hvd.init() s | horovodrun / etrun | "
          "launch to last return s, etrun / horovodrun | listen overflows, etrun / horovodrun | "
          "load (1 min) | others' CPU, cores |")
    print("|---|---|---|---|---|---|---|---|")
    for n in ranks:
        cells = []
        for launcher in ("etrun", "horovodrun"):
            good = [r for r in runs if r["n"] == n and r["launcher"] == launcher and "error" not in r]
            inits = [r["init"] for r in good]
            medians[(n, launcher)] = median(inits)
            cells.append("%s (%s–%s)" % (fmt(median(inits)), fmt(min(inits, default=None)),
                                        fmt(max(inits, default=None))) if inits else "failed")
        e, h = medians[(n, "etrun")], medians[(n, "horovodrun")]
        ratio = "%.1f×" % (h / e) if e and h else "—"
        launch = [median([r["launch"] for r in runs if r["n"] == n and r["launcher"] == x
                          and "error" not in r]) for x in ("etrun", "horovodrun")]
        drops = [median([r["overflows"] for r in runs if r["n"] == n and r["launcher"] == x])
                 for x in ("etrun", "horovodrun")]
        loads = [r["load"] for r in runs if r["n"] == n]
        others = [r["others"] for r in runs if r["n"] == n]
        print(f"| {n} | {cells[0]} | {cells[1]} | {ratio} | {fmt(launch[0], 1)} / "
              f"{fmt(launch[1], 1)} | {fmt(drops[0], 0)} / {fmt(drops[1], 0)} | "
              f"{min(loads):.2f}–{max(loads):.2f} | "
              f"{min(others):.2f}–{max(others):.2f} |")
    failed = [r for r in runs if "error" in r]
    for r in failed:
        print(f"  FAILED: {r['launcher']} N={r['n']} run {r['rep'] + 1}: {r['error']}")
    if failed:
        ok = False
        print(f"FAIL {len(failed)} of {len(runs)} runs failed (their output: {work})")
    else:
        shutil.rmtree(work, ignore_errors=True)
        print(f"PASS all {len(runs)} runs: every rank reported its world, nothing left behind")
    for n, target in sorted(TARGETS.items()):
        e, h = medians.get((n, "etrun")), medians.get((n, "horovodrun"))
        if not e or not h:
            ok = False
            print(f"FAIL N={n}: not measured (target horovodrun / etrun >= {target:.0f}x)")
            continue
        passed = h / e >= target
        ok = ok and passed
        print(f"{'PASS' if passed else 'FAIL'} N={n}: hvd.init() etrun {e:.2f} s, horovodrun "
              f"{h:.2f} s: {h / e:.1f}x (target >= {target:.0f}x)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
