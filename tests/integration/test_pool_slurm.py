"""The shared pool on a real Slurm allocation (tests/integration/slurmbed.py: slurmctld here, a
slurmd per test-bed host h1..h3, each with its own network namespace and name): `etrun pool start`
with no host flags inside the allocation takes its nodes, and pool jobs, whether started inside
the allocation or from a shell outside it, start their ranks on the pool's nodes through
`srun --jobid=<the pool's allocation>` (the pool's grant says so per host); a node that is the
job's own machine runs its rank as a local process. Every rank prints its host, Slurm step and pool
slot on stderr before it starts the Horovod-protocol stand-in. Skipped with one line where the
machine cannot run the cluster."""
import json
import os
import re
import subprocess
import uuid

from conftest import ETRUN, PYTHON, processes_with_marker, rank_lines, wait_until
from slurmbed import cluster_fixture
from test_elastic_protocol import STANDIN, committed_steps, sizes_in_order
from test_multihost import LINE, marked_on

cluster = cluster_fixture(hosts=3)

NODES = ["h1", "h2", "h3"]
# What each rank says first: its host, its Slurm step ("none": not started through srun) and its
# pool slot; then the stand-in trains.
SAY = 'echo "host $(hostname) step ${SLURM_STEP_ID:-none} slot $ETRUN_POOL_SLOT" >&2; exec "$0" "$@"'


def job_argv(pool, name, min_np, max_np, steps, steps_file=None):
    argv = [ETRUN, "--pool", pool, "--job-name", name, "-np", str(min_np), "--min-np", str(min_np),
            "--max-np", str(max_np), "sh", "-c", SAY, PYTHON, STANDIN, "--steps", str(steps),
            "--step-seconds", "0.05", "--timeout", "120"]
    return argv + (["--steps-file", str(steps_file)] if steps_file else [])


def shell(argv):
    return " ".join("'" + a.replace("'", "'\\''") + "'" for a in argv)


def starts(err_text):
    """(host, step, slot) of every rank start in a job's stderr."""
    out = []
    for lines in rank_lines(err_text, "stderr").values():
        for line in lines:
            m = re.fullmatch(r"host (\S+) step (\S+) slot (\S+)", line)
            if m:
                out.append(m.groups())
    return out


def check_training(out_text):
    """Every step committed once, by whole lines only; returns the number of steps."""
    lines = out_text.splitlines()
    bad = [l for l in lines if not LINE.match(l)]
    assert bad == [], bad[:5]
    done = {int(m.group(1)) for m in (re.search(r"<stdout>:done (\d+) steps", l) for l in lines) if m}
    assert len(done) == 1, lines[-5:]
    steps = done.pop()
    assert committed_steps(lines) == set(range(steps))
    return steps


def finish_at(steps_file, out_path, extra=10):
    """Ends a steps-file job a few steps after its last committed one."""
    last = max(committed_steps(out_path.read_text(errors="replace").splitlines()), default=0)
    tmp = steps_file.with_suffix(".tmp")
    tmp.write_text(str(last + 1 + extra))
    os.replace(tmp, steps_file)


def trains_at(path, size, after=0):
    if not path.exists():
        return False
    pattern = re.compile(rf"<stdout>:step \d+ rank \d+ size {size}$")
    return any(pattern.search(l) for l in path.read_text(errors="replace").splitlines()[after:])


def scancel(cluster, name):
    cluster.run_launcher(["scancel", "--name", name], timeout=30)


def test_a_pool_inside_salloc_lends_its_nodes_to_a_job_inside_and_one_from_outside(
        cluster, tmp_path, marker_env):
    # salloc's shell (on the launching machine, no node) runs the pool with no host flags and job
    # `inside`, which gets all 3 nodes; job `outside` starts from a plain shell (no SLURM_*) with
    # --pool NAME: the pool moves one slot to it at `inside`'s next commit. Every rank of both runs
    # on a pool node as a step of the pool's allocation, on the node its pool slot names.
    marker = next(iter(marker_env.values()))
    name = "sp" + uuid.uuid4().hex[:8]
    p = {k: tmp_path / k for k in ("events", "pool.err", "status", "a.out", "a.err", "a.rc",
                                   "a.steps", "b.out", "b.err", "b.steps", "salloc.out")}
    inside = job_argv(name, "inside", 1, 3, 1000000, p["a.steps"])
    script = tmp_path / "inside.sh"
    script.write_text(
        f"#!/bin/sh\n"
        f"{shell([ETRUN, 'pool', 'start', name, '--gpus', 'none', '--min-hold', '0', '--events-file', str(p['events'])])}"
        f" 2>{p['pool.err']} &\n"
        f"i=0; until {ETRUN} pool status {name} >/dev/null 2>&1; do\n"
        f"  i=$((i+1)); [ $i -lt 300 ] || exit 3; sleep 0.1; done\n"
        f"{ETRUN} pool status {name} >{p['status']}\n"
        f"{shell(inside)} >{p['a.out']} 2>{p['a.err']}\n"
        f"echo $? >{p['a.rc']}\n"
        f"{ETRUN} pool stop {name}\n"
        f"wait\n")
    script.chmod(0o755)
    env = cluster.env(dict(os.environ, **marker_env))
    salloc = subprocess.Popen(cluster.exec_argv(["salloc", "-N3", "-J", name, str(script)]), env=env,
                              stdout=open(p["salloc.out"], "wb"), stderr=subprocess.STDOUT,
                              stdin=subprocess.DEVNULL)
    outside = None
    try:
        assert wait_until(lambda: trains_at(p["a.out"], 3), timeout=60), \
            p["salloc.out"].read_text() + (p["a.err"].read_text() if p["a.err"].exists() else "")
        shown = p["a.out"].read_text().count("\n")
        outside = subprocess.Popen(cluster.exec_argv(job_argv(name, "outside", 1, 3, 1000000, p["b.steps"])),
                                   env=env, stdout=open(p["b.out"], "wb"), stderr=open(p["b.err"], "wb"),
                                   stdin=subprocess.DEVNULL)
        assert wait_until(lambda: trains_at(p["b.out"], 1) and trains_at(p["a.out"], 2, shown), timeout=60), \
            p["b.err"].read_text() + p["a.err"].read_text()
        # The pool lends h1..h3 once each: the two jobs' slots are the three nodes, none shared.
        status = json.loads(cluster.run_launcher([ETRUN, "pool", "status", name, "--json"], env=env,
                                                 timeout=30).stdout)
        slots = {j["job"]: sorted(j["slots"]) for j in status["jobs"]}
        assert len(slots["inside"]) == 2 and len(slots["outside"]) == 1, status
        assert sorted(slots["inside"] + slots["outside"]) == NODES, status
        assert marked_on(cluster.bed, slots["outside"][0], marker), "no process of the job on its node"
        # `outside` ends first (then `inside` may grow again), then `inside` and the pool.
        finish_at(p["b.steps"], p["b.out"])
        assert outside.wait(timeout=60) == 0, p["b.err"].read_text()
        finish_at(p["a.steps"], p["a.out"])
        assert salloc.wait(timeout=60) == 0, p["salloc.out"].read_text()
    finally:
        for proc in (outside, salloc):
            if proc is not None and proc.poll() is None:
                proc.kill()
        scancel(cluster, name)
    assert p["a.rc"].read_text().strip() == "0", p["a.err"].read_text()
    text = p["status"].read_text()
    assert f"hosts: h1:1 h2:1 h3:1\n" in text, text
    assert re.search(r"Ranks elsewhere start through: srun --overlap --jobid=\d+ --nodes=1 "
                     r"--ntasks=1 --nodelist=\{host\} --quiet\n", text), text
    for out, err, sizes in ((p["a.out"], p["a.err"], [3, 2]), (p["b.out"], p["b.err"], [1])):
        check_training(out.read_text())
        assert sizes_in_order(out.read_text().splitlines())[:len(sizes)] == sizes
        ranks = starts(err.read_text())
        assert len(ranks) >= sizes[0], ranks
        for host, step, slot in ranks:
            assert host in NODES and re.fullmatch(r"\d+", step) and slot == f"{host}/0", ranks
    allocations = [e["held"] for e in map(json.loads, p["events"].read_text().splitlines())
                   if e["event"] == "pool_allocation"]
    assert allocations.index({"inside": 3}) < allocations.index({"inside": 2, "outside": 1}), allocations
    assert allocations[-1] == {}, allocations  # `inside` left before the pool stopped
    assert wait_until(lambda: processes_with_marker(marker) == [], timeout=20), \
        [open(f"/proc/{q}/cmdline").read() for q in processes_with_marker(marker)]
    cluster.wait_idle()


def test_a_pool_in_an_sbatch_job_runs_its_own_nodes_rank_locally_and_others_through_srun(
        cluster, tmp_path, marker_env):
    # The batch script runs on h1: the pool (open to other machines with --listen) and job
    # `inside`, whose h1 rank is a local process and h2's and h3's srun steps. Then job `outside`
    # from the launching machine (--pool h1:PORT with the pool's token, and ETRUN_POOL_TRUST_START=1
    # to take the pool's srun routes): h1 is no machine of its own, so all three of its ranks are
    # srun steps of the pool's allocation.
    marker = next(iter(marker_env.values()))
    name = "sp" + uuid.uuid4().hex[:8]
    port = 7070  # in h1's own network namespace
    p = {k: tmp_path / k for k in ("token", "a.out", "a.err", "a.rc", "release", "job.out")}
    script = tmp_path / "job.sh"
    script.write_text(
        f"#!/bin/sh\n"
        f"{ETRUN} pool start {name} --gpus none --listen 0.0.0.0:{port} &\n"
        f"i=0; until {ETRUN} pool status {name} >/dev/null 2>&1; do\n"
        f"  i=$((i+1)); [ $i -lt 300 ] || exit 3; sleep 0.1; done\n"
        f"{ETRUN} pool token {name} >{p['token']}.tmp && mv {p['token']}.tmp {p['token']}\n"
        f"{shell(job_argv(name, 'inside', 3, 3, 20))} >{p['a.out']} 2>{p['a.err']}\n"
        f"echo $? >{p['a.rc']}\n"
        f"i=0; until [ -e {p['release']} ]; do i=$((i+1)); [ $i -lt 1200 ] || break; sleep 0.1; done\n"
        f"{ETRUN} pool stop {name}\n"
        f"wait\n"
        f"echo script done\n")
    script.chmod(0o755)
    env = cluster.env(dict(os.environ, **marker_env))
    try:
        r = cluster.run_launcher(["sbatch", "-N3", "-J", name, "-o", str(p["job.out"]), str(script)],
                                 env=env, timeout=60)
        assert r.returncode == 0, r.stderr
        assert wait_until(lambda: p["a.rc"].exists() and p["token"].exists(), timeout=90), \
            p["job.out"].read_text() if p["job.out"].exists() else "no output file"
        token = p["token"].read_text().strip()
        # The pool is reached by address: its srun routes are taken because the user says so.
        b = cluster.run_launcher(job_argv(f"h1:{port}", "outside", 3, 3, 20),
                                 env=dict(env, ETRUN_POOL_TOKEN=token, ETRUN_POOL_TRUST_START="1"), timeout=90)
        p["release"].touch()
        assert wait_until(lambda: "script done" in p["job.out"].read_text(), timeout=60), \
            p["job.out"].read_text()
    finally:
        p["release"].touch()
        scancel(cluster, name)
    assert p["a.rc"].read_text().strip() == "0", p["a.err"].read_text()
    assert b.returncode == 0, b.stderr
    for out, err, through_srun in ((p["a.out"].read_text(), p["a.err"].read_text(), {"h2", "h3"}),
                                   (b.stdout, b.stderr, set(NODES))):
        assert check_training(out) == 20
        ranks = starts(err)
        assert sorted(host for host, _, _ in ranks) == NODES, ranks
        for host, step, slot in ranks:
            assert slot == f"{host}/0", ranks
            assert (re.fullmatch(r"\d+", step) is not None) == (host in through_srun), ranks
    assert wait_until(lambda: processes_with_marker(marker) == [], timeout=20), \
        [open(f"/proc/{q}/cmdline").read() for q in processes_with_marker(marker)]
    cluster.wait_idle()
