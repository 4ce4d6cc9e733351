"""Benchmarks across hosts with their own addresses, names and interfaces: the cluster test bed
(scripts/testbed.py: K network namespaces h1..hK, each with its own sshd, eth0 and 198.18
address; the launcher's side is a bridge). No network flag is given to etrun anywhere.

  launch    K = 2, 4, 8 hosts, one `/bin/true` rank each, launch + teardown (hyperfine, mean):
            etrun, mpirun (Open MPI's ssh launcher) and the floor: K `ssh hI /bin/true` in
            parallel. Target: etrun within 1.2x of the floor at every K.
  elastic   Horovod-protocol stand-ins (1.5 s start-up, Gloo-ring stall, 30 s Gloo timeout) on
            h1,h2 -> h1,h2,h3 -> h1,h3: first step, scale-up and scale-down training stalls.
            Targets: stalls <= 0.25 s.
  partition h3's link cut mid-training (discovery still lists it): cut -> first step of the
            smaller world. Target: <= 5 s (Gloo's timeout would be 30 s).
  partition-real  the same with real Horovod 0.28.1 workers (tests/integration/horovod_worker.py;
            PyTorch, Gloo), from ETRUN_HOROVOD_PATH or built by scripts/horovod.sh.
  elastic8x8  64 stand-ins on h1..h8 (8 each, one agent per host) that grow by h9 (72), lose h9
            to a link cut (64) and shrink by h8 (56): first step, each change's training stall
            (cut -> first step of the smaller world for the cut), and rank 0's committed steps,
            which must be every step once. Targets: stalls <= 0.25 s, the cut <= 5 s.
  preflight  8 hosts, one trivial Python rank each, with and without --preflight, taken in turns
            (RUNS pairs, median): what the pre-flight adds to a job's wall time, and what it
            measured (its own seconds, median stream, largest round trip). Target: <= 1 s added.

Sessions run as root, whose ~/.bashrc here runs `pyenv init` (~0.36 s): every SSH session pays
it, the floor's and etrun's once per rank, mpirun's once per host.
usage: cluster.py ETRUN [launch] [elastic] [partition] [partition-real] [elastic8x8] [preflight]
       (default: all six)
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
sys.path.insert(0, HERE)
import testbed  # noqa: E402
from elastic import STANDIN, Lines, discovery  # noqa: E402


def launch(bed, etrun, runs):
    ok = True
    for k in (2, 4, 8):
        names = [h.name for h in bed.hosts[:k]]
        hosts = ",".join(f"{n}:1" for n in names)
        floor = "bash -c 'p=; for h in %s; do ssh $h /bin/true & p=\"$p $!\"; done; " \
                "for x in $p; do wait $x || exit 1; done'" % " ".join(names)
        cmds = [("floor", floor), ("etrun", f"{etrun} -np {k} -H {hosts} /bin/true")]
        if shutil.which("mpirun"):
            cmds.append(("mpirun", f"mpirun --oversubscribe --mca routed direct -np {k} "
                                   f"-H {','.join(names)} /bin/true"))
        out = tempfile.mktemp(suffix=".json")
        argv = ["hyperfine", "-N", "--warmup", "2", "--runs", str(runs), "--export-json", out]
        for name, cmd in cmds:
            argv += ["-n", name, cmd]
        env = bed.env(dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1"))
        subprocess.run(bed.exec_argv(argv), env=env, check=True, stdout=subprocess.DEVNULL)
        r = {x["command"]: x["mean"] for x in json.load(open(out))["results"]}
        os.unlink(out)
        ratio = r["etrun"] / r["floor"]
        ok = ok and ratio <= 1.2
        mpi = f", mpirun {r['mpirun'] * 1e3:.0f} ms" if "mpirun" in r else ""
        print(f"  K={k}: floor {r['floor'] * 1e3:.0f} ms, etrun {r['etrun'] * 1e3:.0f} ms "
              f"({ratio:.2f}x the floor, target <= 1.2){mpi}: {'PASS' if ratio <= 1.2 else 'FAIL'}")
    return ok


REAL_WORKER = os.path.join(ROOT, "tests", "integration", "horovod_worker.py")


def horovod_path():
    """Where real Horovod is installed for the tests (scripts/horovod.sh builds it if needed)."""
    if os.environ.get("ETRUN_HOROVOD_PATH"):
        return os.environ["ETRUN_HOROVOD_PATH"]
    r = subprocess.run([os.path.join(ROOT, "scripts", "horovod.sh")], capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(r.stderr.strip())
    return r.stdout.strip().splitlines()[-1]


def start_job(bed, etrun, hosts, extra=(), real=False, slots=1):
    set_hosts, script = discovery(hosts, slots)
    env = dict(os.environ, HOROVOD_GLOO_TIMEOUT_SECONDS="30")
    worker = ["/usr/bin/python3", STANDIN, "--steps", "1000000", "--step-seconds", "0.05",
              "--timeout", "120", "--startup-seconds", "1.5", "--ring-stall"]
    if real:
        env["PYTHONPATH"] = horovod_path()
        worker = ["/usr/bin/python3", REAL_WORKER, "--steps", "1000000", "--step-seconds", "0.05"]
    env = bed.env(env)
    start = time.monotonic()
    proc = subprocess.Popen(
        bed.exec_argv([etrun, "-np", str(len(hosts) * slots), "--min-np", "1", "--discovery-interval", "0.1",
                       "--host-discovery-script", script, *extra, *worker]),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, env=env)
    out = Lines(proc.stdout)
    Lines(proc.stderr)
    return proc, out, set_hosts, start


def stop(proc):
    proc.terminate()
    proc.wait(timeout=60)


def elastic(bed, etrun):
    proc, out, set_hosts, start = start_job(bed, etrun, ["h1", "h2"])
    ms = lambda s: f"{s * 1000:.0f} ms"
    try:
        first = out.first(r"<stdout>:step 0 rank") - start
        stalls = {}
        for name, names, size in (("up", ["h1", "h2", "h3"], 3), ("down", ["h1", "h3"], 2)):
            time.sleep(1.0)
            changed = set_hosts(names)
            step = out.first(rf"<stdout>:step \d+ rank \d+ size {size}$", after=changed)
            stalls[name] = step - out.last_before(r"<stdout>:step \d+ rank", step)
    finally:
        stop(proc)
    ok = max(stalls.values()) <= 0.25
    print(f"  first step {ms(first)} (workers start in 1.5 s); scale-up stall {ms(stalls['up'])}, "
          f"scale-down stall {ms(stalls['down'])} (target <= 250 ms): {'PASS' if ok else 'FAIL'}")
    return ok


def partition(bed, etrun, tries, real=False):
    ok = True
    for _ in range(tries):
        proc, out, set_hosts, _ = start_job(bed, etrun, ["h1", "h2", "h3"], real=real)
        try:
            out.first(r"<stdout>:step \d+ rank \d+ size 3$")
            time.sleep(1.5)  # past the heartbeat's start: a steady world
            cut = time.monotonic()
            bed.cut("h3")
            try:
                step = out.first(r"<stdout>:step \d+ rank \d+ size 2$", after=cut, timeout=60)
            finally:
                bed.heal("h3")
        finally:
            stop(proc)
        took = step - cut
        ok = ok and took <= 5
        print(f"  link cut -> first step of the smaller world {took * 1000:.0f} ms "
              f"(target <= 5 s; Gloo's timeout 30 s): {'PASS' if took <= 5 else 'FAIL'}")
    return ok


def busy_seconds():
    """CPU seconds the whole machine has been busy (all but idle and iowait)."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    return (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


def elastic_8x8(bed, etrun):
    eight = [f"h{i}" for i in range(1, 9)]
    machine_cpu = busy_seconds()
    proc, out, set_hosts, start = start_job(bed, etrun, eight, slots=8)
    ms = lambda s: f"{s * 1000:.0f} ms"
    took = {}
    try:
        took["first step"] = out.first(r"<stdout>:step \d+ rank \d+ size 64$") - start
        time.sleep(1.5)
        changed = set_hosts(eight + ["h9"])
        step = out.first(r"<stdout>:step \d+ rank \d+ size 72$", after=changed)
        took["grow by h9: stall"] = step - out.last_before(r"<stdout>:step \d+ rank", step)
        time.sleep(1.5)
        cut = time.monotonic()
        bed.cut("h9")
        try:
            step = out.first(r"<stdout>:step \d+ rank \d+ size 64$", after=cut, timeout=60)
            took["h9's link cut -> first step of 64"] = step - cut
        finally:
            bed.heal("h9")
        time.sleep(1.5)
        changed = set_hosts(eight[:7])
        step = out.first(r"<stdout>:step \d+ rank \d+ size 56$", after=changed)
        took["shrink by h8: stall"] = step - out.last_before(r"<stdout>:step \d+ rank", step)
        time.sleep(1.0)
        with open(f"/proc/{proc.pid}/stat") as f:  # etrun's own CPU, its threads included
            fields = f.read().rsplit(")", 1)[1].split()
        etrun_cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        machine_cpu = busy_seconds() - machine_cpu
        wall = time.monotonic() - start
    finally:
        stop(proc)
    with out.lock:
        steps = [int(m.group(1)) for _, text in out.lines
                 for m in [re.search(r"<stdout>:step (\d+) rank 0 size", text)] if m]
    once = steps == list(range(len(steps)))
    ok = once and took["h9's link cut -> first step of 64"] <= 5 and all(
        v <= 0.25 for k, v in took.items() if k.endswith("stall"))
    for name, value in took.items():
        print(f"  {name}: {ms(value)}")
    print(f"  rank 0 committed steps 0..{len(steps) - 1}, each once: {once}")
    print(f"  CPU over the {wall:.0f} s: etrun {etrun_cpu:.1f} s, the whole machine {machine_cpu:.1f} s "
          f"of {os.cpu_count()} cores (the stand-ins, sshds, agents)")
    print(f"  targets: stalls <= 250 ms, the cut <= 5 s, every step once: {'PASS' if ok else 'FAIL'}")
    return ok


def preflight(bed, etrun, runs):
    """A job's wall time with and without --preflight on 8 hosts, in turns; the pre-flight's event."""
    work = tempfile.mkdtemp(prefix="etrun-bench-preflight-")
    with open(os.path.join(work, "train.py"), "w") as f:
        f.write('print("up")\n')
    hosts = ",".join(f"{h.name}:1" for h in bed.hosts[:8])
    events = os.path.join(work, "events.jsonl")

    def run(*flags):
        started = time.monotonic()
        r = subprocess.run(bed.exec_argv([etrun, "-np", "8", "-H", hosts, *flags, "/usr/bin/python3",
                                          "train.py"]),
                           env=bed.env(), capture_output=True, text=True, cwd=work, timeout=300)
        if r.returncode != 0:
            raise RuntimeError("etrun %s failed (%d): %s" % (" ".join(flags), r.returncode, r.stderr))
        return time.monotonic() - started

    try:
        run(), run("--preflight")  # agents cached, logins warm
        plain, checked, facts = [], [], []
        for _ in range(runs):
            plain.append(run())
            checked.append(run("--preflight", "--events-file", events))
            with open(events) as f:
                facts.append([e for e in map(json.loads, f) if e["event"] == "preflight"][0])
            os.unlink(events)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    median = lambda xs: sorted(xs)[len(xs) // 2]
    added = median(checked) - median(plain)
    print("  without --preflight  %.3f s (median of %d)" % (median(plain), runs))
    print("  with --preflight     %.3f s: +%.3f s (target <= 1 s)" % (median(checked), added))
    print("  pre-flight itself    %.3f s, median stream %.0f Mbit/s, round trips up to %.2f ms" % (
        median([f["seconds"] for f in facts]), median([f["median_mbit_s"] for f in facts]),
        median([f["max_rtt_ms"] for f in facts])))
    return added <= 1.0


def main():
    etrun = os.path.realpath(sys.argv[1])
    parts = sys.argv[2:] or ["launch", "elastic", "partition", "partition-real", "elastic8x8", "preflight"]
    work = tempfile.mkdtemp(prefix="etrun-bench-bed-")
    try:
        bed = testbed.up(os.path.join(work, "bed"), hosts=9 if "elastic8x8" in parts else 8)
    except testbed.Unsupported as e:
        print(e)
        sys.exit(testbed.SKIP_EXIT)
    ok = True
    try:
        if "launch" in parts:
            print("launch + teardown, one /bin/true per host:")
            ok = launch(bed, etrun, int(os.environ.get("RUNS", "10"))) and ok
        if "elastic" in parts:
            print("elastic 2 -> 3 -> 2 across hosts (stand-ins as Horovod):")
            ok = elastic(bed, etrun) and ok
        if "partition" in parts:
            print("partition of one of 3 hosts:")
            ok = partition(bed, etrun, int(os.environ.get("TRIES", "3"))) and ok
        if "partition-real" in parts:
            print("partition of one of 3 hosts, real Horovod 0.28.1 workers:")
            ok = partition(bed, etrun, int(os.environ.get("TRIES", "3")), real=True) and ok
        if "elastic8x8" in parts:
            print("elastic 8 x 8 -> 9 x 8 -> link cut -> 7 x 8 (stand-ins as Horovod):")
            ok = elastic_8x8(bed, etrun) and ok
        if "preflight" in parts:
            print("--preflight on 8 hosts, one trivial rank each:")
            ok = preflight(bed, etrun, int(os.environ.get("RUNS", "10"))) and ok
    finally:
        bed.down()
        shutil.rmtree(work, ignore_errors=True)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
