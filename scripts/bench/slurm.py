"""Launch through Slurm: one srun step per host, each running etrun's agent that forks the host's
ranks (what etrun does inside an allocation), against Slurm's own launch of the whole job as one
step, the bare per-host steps, and etrun over SSH, on a real Slurm 22.05 cluster on the test bed
(scripts/slurmbed.py: slurmctld on this machine, one slurmd per bed host h1..hK, each host with its
own network namespace, name and sshd).

For K = 2, 4, 8 hosts (a freshly started cluster each; --hosts 8,16 for the scale table) and R = 1,
4 ranks per host (--ranks 1,4,8,16), one `salloc -N K --ntasks-per-node=R` runs this file's driver,
which times inside that one allocation (salloc's own allocation time excluded), interleaved round
by round (each round starts at the next variant), K*R ranks started by:
  etrun srun      etrun -np K*R CMD: one step per host, `srun --overlap --jobid=J --nodes=1
                  --ntasks=1 --nodelist=hI --quiet sh -c '<agent bootstrap>'`, all at once; each
                  host's agent forks its R ranks
  per-rank floor  K*R steps of one task running CMD, from a shell loop (`srun ... &`, then wait):
                  etrun's design before the agents (--per-rank-floor; off by default)
  one step        srun --overlap -N K --ntasks-per-node=R CMD: the whole job one step (Slurm's
                  own launcher, the "mpirun" of this table)
  K steps x R     K concurrent `srun -N1 -n R -w hI CMD` (one step per host, as a per-host
                  launcher would start them; R > 1 only)
  K steps, fork R K concurrent `srun -N1 -n1 -w hI sh -c 'R x CMD &; wait'`: one task per host
                  that forks its host's ranks, the floor of etrun's agents
  etrun ssh       etrun -np K*R -H h1:R,...,hK:R CMD over the hosts' sshd
Each variant runs twice a round: CMD = /bin/true, timed from start to exit (launch + teardown),
and CMD = a script appending the wall clock (ns) to a file, which gives when the first and last
rank started (launch alone). Also recorded: the whole machine's busy CPU per /bin/true run
(/proc/stat, other tenants included), the launcher side's share of it (the reaped descendants:
etrun, srun clients, shell loops) and, for 2 s before and after each cell, how busy the machine is
with other work.

What a step costs. Each srun is a client process of its own (plugins, a munge credential, its
I/O and message listeners), asks slurmctld to create the step (one RPC, handled under slurmctld's
job write lock, the whole job table's: concurrent creations queue one at a time), then sends the
launch to the node's slurmd, which forks a slurmstepd for the step; the step's end is another RPC
to slurmctld. Per-rank steps pay this K*R times at once, per-host steps K times (one step for the
job: once, the slurmds fanning the launch out). On the bed every daemon and client shares this
machine's cores, so concurrent per-rank steps mostly queue for CPU.

But a step with more than one task on a node pays a fixed ~100 ms at exit: slurmstepd, once its
first task has exited and others have not yet been reaped, sleeps 100 ms to report them in one
message (`_wait_for_all_tasks` in src/slurmd/slurmstepd/mgr.c: "To limit the amount of traffic
back we will sleep a bit"). One task per step (per-rank steps, or a per-host task that forks the
ranks itself) never waits there.

SSH sessions run as a throwaway user (created here, removed at exit) whose ~/.bashrc is empty:
root's here runs `pyenv init` (~0.36 s per session, once per rank), which srun never runs.
BENCH_USER=root measures SSH as root instead.
usage: slurm.py ETRUN [--runs N] [--hosts 2,4,8] [--ranks 1,4] [--per-rank-floor] [--json FILE]
       (RUNS=N in the environment sets the default of --runs, 20)
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

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import slurmbed  # noqa: E402

SRUN_RANK = "srun --overlap --jobid=$SLURM_JOB_ID --nodes=1 --ntasks=1 --nodelist={node} --quiet"


# -- the driver: runs inside the allocation (salloc ... slurm.py --drive SPEC OUT) ------------------

def _busy_jiffies():
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    return sum(fields) - fields[3] - fields[4]  # all but idle and iowait


def _children_cpu():
    """CPU seconds of the reaped descendants: the launcher's side (etrun, srun clients, the
    shell loops; not slurmctld, slurmd, slurmstepd, sshd or the ranks)."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _run(argv, env):
    r = subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, timeout=120)
    return r.returncode, r.stderr.decode(errors="replace").strip()


def drive(spec_path, out_path):
    with open(spec_path) as f:
        spec = json.load(f)
    ranks, stamps = spec["ranks"], spec["stamps"]
    hz = os.sysconf("SC_CLK_TCK")
    variants = spec["variants"]
    res = {v["name"]: {"true": [], "cpu": [], "client_cpu": [], "first": [], "last": [],
                       "stamp_exit": []}
           for v in variants}
    failures = []
    for round_ in range(-spec["warmup"], spec["runs"]):
        for i in range(len(variants)):
            v = variants[(i + round_) % len(variants)]
            env = dict(os.environ)
            if v["drop_slurm"]:
                env = {k: x for k, x in env.items() if not k.startswith("SLURM_")}
            env.update(v["env"])
            for what in ("true", "stamp"):
                argv = [a.replace("{cmd}", spec["cmd"][what]) for a in v["argv"]]
                if what == "stamp":
                    open(stamps, "w").close()
                cpu0, client0 = _busy_jiffies(), _children_cpu()
                wall0, t0 = time.time_ns(), time.perf_counter()
                rc, err = _run(argv, env)
                took, cpu = time.perf_counter() - t0, (_busy_jiffies() - cpu0) / hz
                client = _children_cpu() - client0
                if what == "stamp":
                    with open(stamps) as f:
                        starts = sorted(int(x) for x in f.read().split())
                    if rc == 0 and len(starts) != ranks:
                        rc, err = -1, "%d ranks started, not %d" % (len(starts), ranks)
                if rc != 0:
                    failures.append("%s (%s): exit %d: %s" % (v["name"], what, rc, err[-500:]))
                    continue
                if round_ < 0:
                    continue
                r = res[v["name"]]
                if what == "true":
                    r["true"].append(took)
                    r["cpu"].append(cpu)
                    r["client_cpu"].append(client)
                else:
                    r["first"].append((starts[0] - wall0) / 1e9)
                    r["last"].append((starts[-1] - wall0) / 1e9)
                    r["stamp_exit"].append(took)
        print(".", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    with open(out_path, "w") as f:
        json.dump({"results": res, "failures": failures}, f)


# -- the harness: a cluster per K, one allocation per (K, R) --------------------------------------

def _variants(etrun, nodes, r, ssh, per_rank_floor):
    k = len(nodes)
    n = k * r
    each = lambda cmd: "p=; for h in %s; do %s & p=\"$p $!\"; done; s=0; " \
                       "for x in $p; do wait $x || s=1; done; exit $s" % (" ".join(nodes), cmd)
    per_rank = "p=; for h in %s; do for i in $(seq %d); do %s {cmd} & p=\"$p $!\"; done; " \
               "done; s=0; for x in $p; do wait $x || s=1; done; exit $s" \
               % (" ".join(nodes), r, SRUN_RANK.format(node="$h"))
    v = [("etrun srun", [etrun, "-np", str(n), "{cmd}"], False, {})]
    if per_rank_floor:
        v.append(("per-rank floor", ["bash", "-c", per_rank], False, {}))
    # srun takes the job from the allocation's SLURM_JOB_ID
    v.append(("one step", ["srun", "--overlap", "-N", str(k), "--ntasks-per-node=%d" % r, "--quiet",
                           "{cmd}"], False, {}))
    if r > 1:
        v.append(("K steps x R", ["bash", "-c", each(
            "srun --overlap --jobid=$SLURM_JOB_ID -N1 -n%d -w $h --quiet {cmd}" % r)], False, {}))
    fork = "for i in $(seq %d); do {cmd} & done; wait" % r
    v.append(("K steps, fork R", ["bash", "-c", each(
        "srun --overlap --jobid=$SLURM_JOB_ID -N1 -n1 -w $h --quiet sh -c '%s'" % fork)],
        False, {}))
    ssh_argv, ssh_env = ssh
    hosts = ",".join("%s:%d" % (h, r) for h in nodes)
    v.append(("etrun ssh", ssh_argv + [etrun, "-np", str(n), "-H", hosts, "{cmd}"], True, ssh_env))
    return [{"name": name, "argv": argv, "drop_slurm": drop, "env": env}
            for name, argv, drop, env in v]


class SshUser:
    """A throwaway user with an empty ~/.bashrc whose sessions log in with a bed's key (the
    bed's sshd takes its one authorized_keys file for every user). None of it with
    BENCH_USER=root. Removed by close()."""

    def __init__(self, work):
        root = os.environ.get("BENCH_USER") == "root"
        self.name = "root" if root else "etrunslurm%d" % (os.getpid() % 100000)
        self.home = os.path.join(work, "sshhome")
        self.made = False
        if self.name == "root":
            return
        os.makedirs(os.path.join(self.home, ".ssh"), mode=0o700)
        open(os.path.join(self.home, ".bashrc"), "w").close()
        # "*": no password, but not a locked account (sshd without PAM refuses locked ones).
        subprocess.run(["useradd", "-M", "-d", self.home, "-s", "/bin/bash", "-p", "*",
                        self.name], check=True)
        self.made = True

    def use_bed(self, bed):
        """(argv prefix, environment) running etrun as the user against `bed`."""
        if self.name == "root":
            return [], {}
        for f in ("id_ed25519", "known_hosts"):
            shutil.copy(os.path.join(bed.home, ".ssh", f), os.path.join(self.home, ".ssh", f))
        subprocess.run(["chown", "-R", "%s:%s" % (self.name, self.name), self.home], check=True)
        return (["setpriv", "--reuid", self.name, "--regid", self.name, "--init-groups"],
                {"HOME": self.home, "USER": self.name, "LOGNAME": self.name})

    def close(self):
        if self.made:
            subprocess.run(["userdel", "-f", self.name], stderr=subprocess.DEVNULL)
            self.made = False


def background_cpu(seconds=2.0):
    """Cores the machine keeps busy while this benchmark runs nothing (other builds and tests;
    the load average would count the benchmark's own bursts of srun processes)."""
    before = _busy_jiffies()
    time.sleep(seconds)
    return (_busy_jiffies() - before) / os.sysconf("SC_CLK_TCK") / seconds


def _stats(xs):
    return {"n": len(xs), "mean": statistics.fmean(xs), "median": statistics.median(xs),
            "sd": statistics.stdev(xs) if len(xs) > 1 else 0.0, "min": min(xs), "max": max(xs)}


def measure(cluster, etrun, k, r, runs, work, user, per_rank_floor=False):
    nodes = cluster.nodes[:k]
    stamps = os.path.join(work, "stamps")
    stamp = os.path.join(work, "stamp.sh")
    with open(stamp, "w") as f:
        f.write("#!/bin/sh\nexec date +%%s%%N >> %s\n" % stamps)
    os.chmod(stamp, 0o755)
    open(stamps, "w").close()
    os.chmod(stamps, 0o666)
    variants = _variants(etrun, nodes, r, user.use_bed(cluster.bed), per_rank_floor)
    spec = {"ranks": k * r, "stamps": stamps, "runs": runs, "warmup": 1, "variants": variants,
            "cmd": {"true": "/bin/true", "stamp": stamp}}
    spec_path, out_path = os.path.join(work, "spec.json"), os.path.join(work, "out.json")
    with open(spec_path, "w") as f:
        json.dump(spec, f)
    if os.path.exists(out_path):
        os.unlink(out_path)
    argv = ["salloc", "-Q", "-N", str(k), "--ntasks-per-node=%d" % r, "/usr/bin/python3",
            os.path.abspath(__file__), "--drive", spec_path, out_path]
    quiet_before = background_cpu()
    print("K=%d R=%d: " % (k, r), end="", file=sys.stderr, flush=True)
    proc = subprocess.run(cluster.exec_argv(argv), env=cluster.env(), stdin=subprocess.DEVNULL)
    quiet_after = background_cpu()
    if proc.returncode != 0 or not os.path.exists(out_path):
        raise RuntimeError("salloc -N%d with the driver failed (exit %d)" % (k, proc.returncode))
    with open(out_path) as f:
        out = json.load(f)
    cell = {"hosts": k, "ranks_per_host": r, "ranks": k * r, "runs": runs,
            "background_cores": [quiet_before, quiet_after],
            "failures": out["failures"], "variants": {}}
    for name, x in out["results"].items():
        cell["variants"][name] = {key: _stats(vals) for key, vals in x.items() if vals}
        cell["variants"][name]["raw"] = x
    return cell


LABELS = {
    "etrun srun": "etrun, one srun step and agent per host",
    "per-rank floor": "floor: {n} x `srun -N1 -n1` at once",
    "one step": "one step: `srun -N{k} --ntasks-per-node={r}`",
    "K steps x R": "{k} x `srun -N1 -n{r}` at once",
    "K steps, fork R": "{k} x `srun -N1 -n1` forking {r}",
    "etrun ssh": "etrun over SSH, -H h1:{r},...",
}


def report(cell):
    k, r, n = cell["hosts"], cell["ranks_per_host"], cell["ranks"]
    print("\nK=%d hosts x R=%d (%d ranks), %d runs each, interleaved; other work on the "
          "machine before/after: %.2f / %.2f of %d cores busy"
          % (k, r, n, cell["runs"], cell["background_cores"][0], cell["background_cores"][1],
             os.cpu_count()))
    print("  %-44s %-30s %-18s %s" % ("", "/bin/true: start -> exit, ms", "ranks started, ms",
                                      "CPU s/run"))
    print("  %-44s %-30s %-18s %s" % ("", "mean  median  sd  [min-max]", "first / last (med)",
                                      "launcher / machine"))
    ms = lambda s: "%.0f" % (s * 1e3)
    for name, v in cell["variants"].items():
        if "true" not in v:
            print("  %-44s failed" % LABELS[name].format(k=k, r=r, n=n))
            continue
        t = v["true"]
        started = "%s / %s" % (ms(v["first"]["median"]), ms(v["last"]["median"])) \
            if "last" in v else "-"
        print("  %-44s %-30s %-18s %.2f / %.2f" % (
            LABELS[name].format(k=k, r=r, n=n),
            "%s  %s  %s  [%s-%s]" % (ms(t["mean"]), ms(t["median"]), ms(t["sd"]), ms(t["min"]),
                                      ms(t["max"])), started, v["client_cpu"]["mean"],
            v["cpu"]["mean"]))
    v = cell["variants"]
    for other, what in (("K steps, fork R", "its floor (a step per host forking the ranks)"),
                        ("one step", "Slurm's one step for the job")):
        if "true" in v.get("etrun srun", {}) and "true" in v.get(other, {}):
            e, f = v["etrun srun"], v[other]
            print("  etrun / %s: %.2fx to exit (median), %.2fx to the last rank started"
                  % (what, e["true"]["median"] / f["true"]["median"],
                     e["last"]["median"] / f["last"]["median"]))
    for msg in cell["failures"][:5]:
        print("  FAILED: " + msg)


def main():
    if sys.argv[1:2] == ["--drive"]:
        drive(sys.argv[2], sys.argv[3])
        return
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("etrun")
    p.add_argument("--runs", type=int, default=int(os.environ.get("RUNS", "20")))
    p.add_argument("--hosts", default="2,4,8")
    p.add_argument("--ranks", default="1,4")
    p.add_argument("--per-rank-floor", action="store_true",
                   help="also time K*R one-task steps at once (etrun's design before the agents)")
    p.add_argument("--json", help="write every cell, raw times included, to this file")
    a = p.parse_args()
    sys.stdout.reconfigure(line_buffering=True)  # the table between stderr's progress lines
    etrun = os.path.realpath(a.etrun)
    hosts = [int(x) for x in a.hosts.split(",")]
    ranks = [int(x) for x in a.ranks.split(",")]
    # SIGTERM and SIGHUP unwind like Ctrl-C (even where SIGINT came in ignored, as it does for
    # a background job of a script): the finally blocks take the clusters down.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda signum, _: sys.exit(128 + signum))
    work = tempfile.mkdtemp(prefix="etrun-bench-slurm-")
    os.chmod(work, 0o755)  # the SSH user reads the stamp script and writes the stamps
    user = None
    cells = []
    ok = True
    try:
        user = SshUser(work)
        for k in hosts:
            try:
                cluster = slurmbed.up(os.path.join(work, "bed%d" % k), hosts=k, cpus=max(ranks))
            except slurmbed.Unsupported as e:
                print(e)
                sys.exit(slurmbed.SKIP_EXIT)
            try:
                for r in ranks:
                    cell = measure(cluster, etrun, k, r, a.runs, work, user, a.per_rank_floor)
                    cells.append(cell)
                    report(cell)
                    ok = ok and not cell["failures"]
            finally:
                cluster.down()
    finally:
        if user is not None:
            user.close()
        shutil.rmtree(work, ignore_errors=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"date": time.strftime("%Y-%m-%d"), "machine": os.uname().nodename,
                       "cells": cells}, f, indent=1)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:  # the clusters are down already (main's finally blocks)
        print("\nslurm.py: interrupted", file=sys.stderr)
        sys.exit(130)
