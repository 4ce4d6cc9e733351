"""Bad inputs, one table for every mode (issue 22): static, elastic, --mpi and pool jobs given a
missing command, an absurd -np or slot count, a host that cannot be reached, or a discovery
script that hangs, prints garbage or fails. Each run must end with at most a few lines on stderr
(etrun's last one its error, the rest tools' own), nothing on stdout, the documented exit code
(docs/exit-codes.md), a job_end event whose cause is that error line, and no process left behind.
"""
import json
import os
import shutil
import signal
import subprocess
import uuid

import pytest

from conftest import ETRUN, processes_with_marker, run_etrun, wait_until

# A reserved test range (RFC 2544): nothing answers there.
UNREACHABLE = "198.18.255.254"
NO_MPIRUN = shutil.which("mpirun") is None

# Discovery scripts by name: what they do.
SCRIPTS = {
    "two": "echo localhost:2\n",
    "typo": "echo localhost:100000000\n",
    "hangs": "sleep 600\n",
    "garbage": "echo 'this is not a host line!'\n",
    "fails": "echo 'cannot list the hosts' >&2\nexit 3\n",
}

# (id, mode, etrun's arguments before the command, command, exit code, how the cause begins).
# "{script:NAME}" is a discovery script of SCRIPTS; a pool job names the pool of its mode.
CASES = [
    ("static-missing-command", "static", ["-np", "2"], ["nosuchcmd-xyz"], 127,
     "cannot run 'nosuchcmd-xyz': command not found in PATH"),
    ("static-absurd-np", "static", ["-np", "100000"], ["true"], 2,
     "100000 ranks need about 300064 open files"),
    ("static-unreachable-host", "static",
     ["-np", "1", "-H", f"{UNREACHABLE}:1", "--ssh-connect-timeout", "1"], ["true"], 255,
     f"rank 0 on {UNREACHABLE} exited with code 255"),
    ("elastic-missing-command", "elastic",
     ["-np", "2", "--min-np", "1", "--host-discovery-script", "{script:two}"], ["nosuchcmd-xyz"],
     127, "cannot run 'nosuchcmd-xyz': command not found in PATH"),
    ("elastic-absurd-np", "elastic",
     ["-np", "100000", "--min-np", "100000", "--host-discovery-script", "{script:two}"], ["true"],
     2, "the open-file limit"),
    ("elastic-absurd-slots", "elastic",
     ["-np", "2", "--min-np", "1", "--host-discovery-script", "{script:typo}"], ["true"], 1,
     "the host discovery script printed a bad line 1: at most 4096 slots per host"),
    ("elastic-unreachable-host", "elastic",
     ["-np", "1", "--min-np", "1", "-H", f"{UNREACHABLE}:1", "--ssh-connect-timeout", "1"],
     ["true"], 255, f"every rank failed; last: worker {UNREACHABLE}[0] exited with code 255"),
    ("elastic-script-hangs", "elastic",
     ["-np", "1", "--min-np", "1", "--discovery-timeout", "1", "--host-discovery-script",
      "{script:hangs}"], ["true"], 1, "the host discovery script failed (timed out after 1.0 s)"),
    ("elastic-script-prints-garbage", "elastic",
     ["-np", "1", "--min-np", "1", "--host-discovery-script", "{script:garbage}"], ["true"], 1,
     "the host discovery script printed a bad line 1"),
    ("elastic-script-fails", "elastic",
     ["-np", "1", "--min-np", "1", "--host-discovery-script", "{script:fails}"], ["true"], 1,
     "the host discovery script failed (exit code 3): cannot list the hosts"),
    ("mpi-missing-command", "mpi", ["--mpi", "-np", "2"], ["nosuchcmd-xyz"], 127,
     "cannot run 'nosuchcmd-xyz': command not found in PATH"),
    ("mpi-missing-command-said-by-mpirun", "mpi", ["--mpi", "-np", "2", "--mpi-args=-x FOO=1"],
     ["nosuchcmd-xyz"], 127, "cannot run 'nosuchcmd-xyz' on "),
    ("mpi-absurd-np", "mpi", ["--mpi", "-np", "100000"], ["true"], 2,
     "100000 ranks need about 300064 open files"),
    ("mpi-unreachable-host", "mpi",
     ["--mpi", "-np", "1", "-H", f"{UNREACHABLE}:1",
      "--mpi-args=-mca plm_rsh_args '-o ConnectTimeout=1 -o BatchMode=yes'"], ["true"], 255,
     "mpirun could not start or reach its daemon on every host"),
    ("pool-missing-command", "pool", ["-np", "1"], ["nosuchcmd-xyz"], 127,
     "cannot run 'nosuchcmd-xyz': command not found in PATH"),
    ("pool-absurd-np", "pool", ["-np", "100000"], ["true"], 2, "the open-file limit"),
    ("pool-unreachable-host", "pool-unreachable", ["-np", "1", "--ssh-connect-timeout", "1"],
     ["true"], 255, f"every rank failed; last: worker {UNREACHABLE}[0] exited with code 255"),
]


def pool_answers(name):
    return run_etrun(["pool", "status", name], timeout=20).returncode == 0


@pytest.fixture(scope="module")
def pools(tmp_path_factory):
    """Two pool daemons for the table: one lending this machine's slots, one a host nothing
    answers on. Each gets its own marker, so no case's check sees them."""
    log_dir = tmp_path_factory.mktemp("pools")
    marker = "ETRUN_TEST_MARKER=" + uuid.uuid4().hex
    started = {}
    for mode, hosts in (("pool", "localhost:2"), ("pool-unreachable", f"{UNREACHABLE}:1")):
        name = "bad" + uuid.uuid4().hex[:8]
        log = open(log_dir / f"{name}.log", "wb")
        proc = subprocess.Popen([ETRUN, "pool", "start", name, "-H", hosts, "--gpus", "none"],
                                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env={**os.environ, marker.split("=")[0]: marker.split("=")[1]})
        started[mode] = (name, proc, log)
        assert wait_until(lambda: pool_answers(name), timeout=10), (log_dir / f"{name}.log").read_text()
    yield {mode: name for mode, (name, _, _) in started.items()}
    for name, proc, log in started.values():
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=10)
        log.close()
    assert wait_until(lambda: not processes_with_marker(marker), timeout=10)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_a_bad_input_ends_with_a_few_lines_its_code_a_cause_and_nothing_running(
        case, tmp_path, marker, marker_env, request):
    name, mode, args, command, code, cause = case
    if mode == "mpi" and NO_MPIRUN:
        pytest.skip("needs Open MPI's mpirun")
    scripts = {}
    for script, body in SCRIPTS.items():
        path = tmp_path / f"{script}.sh"
        path.write_text("#!/bin/sh\n" + body)
        path.chmod(0o755)
        scripts[f"{{script:{script}}}"] = str(path)
    args = [scripts.get(a, a) for a in args]
    if mode.startswith("pool"):
        args = ["--pool", request.getfixturevalue("pools")[mode]] + args
    events = tmp_path / "events.jsonl"
    r = run_etrun(["--events-file", str(events)] + args + command, env=marker_env, timeout=60)

    lines = r.stderr.decode().splitlines()
    assert r.returncode == code, r.stderr.decode()
    assert r.stdout == b""
    assert 1 <= len(lines) <= 3, lines
    assert lines[-1].startswith("etrun: error: " + cause), lines
    recorded = [json.loads(l) for l in events.read_text().splitlines()]
    assert recorded[0]["event"] == "job_start"
    assert recorded[-1]["event"] == "job_end"
    assert recorded[-1]["exit_code"] == code
    assert recorded[-1]["cause"] == lines[-1][len("etrun: error: "):]
    assert wait_until(lambda: not processes_with_marker(marker), timeout=10), \
        processes_with_marker(marker)


# A host name beginning with '-' (issue 35): `-H=-G:1 --remote-shell 'ssh {host}'` ran
# `ssh -G sh -s`. Every way a name enters is refused in one line, and the remote shell, which
# would leave a marker with the words it got, never runs.
# (id, etrun's arguments before the command, extra environment, exit code, the one line after
# "etrun: error: "). "{hosts}", "{script}" and "{rsh}" are files the test writes.
WHY = "host names cannot begin with '-' (ssh or a remote shell would read '-G' as an option)"
OPTION_HOSTS = [
    ("-H", ["-np", "1", "-H=-G:1"], {}, 2,
     f"invalid host '-G:1' in -H '-G:1': {WHY}: give each host's name or address, like "
     "worker-0:2,worker-1:2"),
    ("-H-elastic", ["-np", "1", "--min-np", "1", "-H", "localhost:1,-G:1"], {}, 2,
     f"invalid host '-G:1' in -H 'localhost:1,-G:1': {WHY}: give each host's name or address, "
     "like worker-0:2,worker-1:2"),
    ("hostfile", ["-np", "1", "--hostfile", "{hosts}"], {}, 2,
     f"{{hosts}} line 2: invalid host name '-G': {WHY}: give the host's name or address, like "
     "'worker-0 slots=4'"),
    ("discovery-script", ["-np", "1", "--min-np", "1", "--host-discovery-script", "{script}"], {}, 1,
     f"the host discovery script printed a bad line 1: {WHY}, got \"-G:1\": fix the script; it "
     "must print host:slots lines"),
    ("slurm-allocation", ["-np", "1"], {"SLURM_JOB_ID": "42", "SLURM_JOB_NODELIST": "-G"}, 2,
     f"inside Slurm allocation 42: SLURM_JOB_NODELIST=\"-G\" names node '-G': {WHY} (or give -H, "
     "or --ignore-slurm)"),
]


@pytest.mark.parametrize("case", OPTION_HOSTS, ids=[c[0] for c in OPTION_HOSTS])
def test_a_host_name_beginning_with_a_dash_is_refused_and_no_remote_shell_runs(
        case, tmp_path, marker, marker_env):
    name, args, env, code, message = case
    ran = tmp_path / "remote-shell-ran"
    files = {"{hosts}": tmp_path / "hosts", "{script}": tmp_path / "discover.sh",
             "{rsh}": tmp_path / "rsh.sh"}
    files["{hosts}"].write_text("# -G first: rank 0 would start there\n-G slots=1\nlocalhost slots=1\n")
    files["{script}"].write_text("#!/bin/sh\necho -G:1\n")
    files["{rsh}"].write_text(f'#!/bin/sh\necho "$@" >> {ran}\nexit 1\n')
    for f in (files["{script}"], files["{rsh}"]):
        f.chmod(0o755)
    args = [str(files.get(a, a)) for a in args]
    message = message.replace("{hosts}", str(files["{hosts}"]))
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")} | marker_env | env
    r = subprocess.run([ETRUN] + args + ["--remote-shell", f"{files['{rsh}']} {{host}}", "true"],
                       capture_output=True, timeout=60, env=env, stdin=subprocess.DEVNULL)
    assert r.stderr.decode() == f"etrun: error: {message}\n"
    assert (r.returncode, r.stdout) == (code, b"")
    assert not ran.exists(), ran.read_text()
    assert wait_until(lambda: not processes_with_marker(marker), timeout=10), \
        processes_with_marker(marker)


def test_a_pool_given_a_host_name_beginning_with_a_dash_does_not_start(tmp_path, marker_env):
    # `etrun pool start -H` takes the same rule: nothing is started, nothing is registered.
    name = "dash" + uuid.uuid4().hex[:8]
    r = run_etrun(["pool", "start", name, "--hosts=-G:1", "--gpus", "none"], env=marker_env,
                  timeout=30)
    assert r.stderr.decode() == (f"etrun: error: invalid host '-G:1' in -H '-G:1': {WHY}: give each "
                                 "host's name or address, like worker-0:2,worker-1:2\n")
    assert (r.returncode, r.stdout) == (2, b"")
    assert run_etrun(["pool", "status", name], timeout=20).returncode != 0


def test_a_pool_whose_discovery_script_prints_a_dashed_name_takes_no_such_host(tmp_path, marker_env):
    # The pool's discovery runs go through the same parse: the line is refused (the pool warns
    # and keeps the hosts it had, none here), so no job is ever granted the name.
    script = tmp_path / "discover.sh"
    script.write_text("#!/bin/sh\necho -G:1\n")
    script.chmod(0o755)
    name = "dash" + uuid.uuid4().hex[:8]
    log = tmp_path / "pool.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([ETRUN, "pool", "start", name, "--host-discovery-script", str(script),
                                 "--gpus", "none"], stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env={**os.environ, **marker_env})
    try:
        said = (f"pool '{name}': the host discovery script printed a bad line 1: {WHY}, got "
                "\"-G:1\": keeping the hosts")
        assert wait_until(lambda: said in log.read_text(), timeout=20), log.read_text()
        # Asked before its first allocation, a pool without hosts dies (PoolState::Status reads
        # the allocation it has not made yet): wait for it.
        assert wait_until(lambda: "allocation (held/target" in log.read_text(), timeout=20), \
            log.read_text()
        r = run_etrun(["pool", "status", name, "--json"], timeout=20)
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["hosts"] == []
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=10)
