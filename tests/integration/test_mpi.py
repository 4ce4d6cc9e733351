"""--mpi through the real binary: Open MPI's mpirun runs real mpi4py ranks (as root, as CI does).

Open MPI's --tag-output prefixes each line with [<jobid>,<rank>]<stdout>: (jobid 1 here).
"""
import json
import os
import re
import shutil
import signal
import subprocess

import pytest

from conftest import ETRUN, PYTHON, processes_with_marker, run_etrun, wait_until

MPI_WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "mpi_worker.py")

pytestmark = pytest.mark.skipif(shutil.which("mpirun") is None, reason="needs Open MPI's mpirun")


def mpi_lines(text, stream="stdout"):
    """Maps rank -> line bodies carrying Open MPI's [1,<rank>]<stream>: tag."""
    out = {}
    for line in text.splitlines():
        m = re.match(r"^(?:.*?)\[1,(\d+)\]<%s>:(.*)$" % stream, line)
        if m:
            out.setdefault(int(m.group(1)), []).append(m.group(2))
    return out


def fake_program(tmp_path, name, body):
    """A directory holding an executable `name` script; returns a PATH that finds it first."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    path = bin_dir / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return f"{bin_dir}:{os.environ['PATH']}"


def test_mpi4py_allreduce_over_three_ranks():
    r = run_etrun(["--mpi", "-np", "3", PYTHON, MPI_WORKER, "allreduce"])
    assert r.returncode == 0, r.stderr
    lines = mpi_lines(r.stdout.decode())
    assert lines == {rank: [f"rank {rank} of 3: sum 6"] for rank in range(3)}


@pytest.mark.skipif(shutil.which("strace") is None, reason="needs strace")
def test_large_messages_work_where_process_vm_readv_is_blocked():
    # As in containers whose seccomp profile forbids process_vm_readv: strace makes it fail with
    # EPERM in etrun, mpirun and the ranks. etrun notices and turns Open MPI's single-copy path
    # off; without that, Open MPI prints "Read -1, expected 4194304, errno = 1".
    r = subprocess.run(["strace", "-f", "-qq", "-o", "/dev/null", "-e", "trace=process_vm_readv",
                        "-e", "inject=process_vm_readv:error=EPERM",
                        ETRUN, "--mpi", "--verbose", "-np", "2", PYTHON, MPI_WORKER, "send"],
                       capture_output=True, timeout=120, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    err = r.stderr.decode()
    assert "Read -1" not in err, err
    assert " -x OMPI_MCA_btl_vader_single_copy_mechanism " in err
    assert mpi_lines(r.stdout.decode()) == {1: ["received 4194304 bytes intact"]}


def test_failing_rank_exit_code_is_etruns():
    # mpirun aborts the other ranks and exits with the first failing rank's code.
    r = run_etrun(["--mpi", "-np", "3", PYTHON, MPI_WORKER, "exit", "1", "3"], timeout=60)
    assert r.returncode == 3, r.stderr
    assert b"Exit code:    3" in r.stderr  # mpirun's own report


def test_verbose_prints_horovodruns_command_and_env_reaches_ranks(marker_env):
    r = run_etrun(["--mpi", "--verbose", "-np", "2", "--fusion-threshold-mb", "32",
                   "--mpi-args=-x 'EXTRA=a b'", PYTHON, MPI_WORKER, "env",
                   "HOROVOD_FUSION_THRESHOLD", "EXTRA", "HOROVOD_RANK", "a b", "$HOME"],
                  env=marker_env)
    assert r.returncode == 0, r.stderr
    err = r.stderr.decode()
    command = [line for line in err.splitlines() if line.startswith("etrun: debug: mpirun ")]
    assert len(command) == 1, err
    assert command[0].startswith(
        "etrun: debug: mpirun --allow-run-as-root --tag-output -np 2 -H localhost:2 -bind-to none "
        "-map-by slot -mca pml ob1 -mca btl '^openib' -mca btl_tcp_if_include lo "
        "-x NCCL_SOCKET_IFNAME=lo -x "), command[0]
    assert " -x ETRUN_TEST_MARKER " in command[0] and " -x HOROVOD_FUSION_THRESHOLD " in command[0]
    assert command[0].endswith(
        f" -x 'EXTRA=a b' {PYTHON} {MPI_WORKER} env HOROVOD_FUSION_THRESHOLD EXTRA HOROVOD_RANK "
        "'a b' '$HOME'"), command[0]
    lines = mpi_lines(r.stdout.decode())
    for rank in (0, 1):
        assert lines[rank] == [f"HOROVOD_FUSION_THRESHOLD={32 * 1048576}", "EXTRA=a b",
                               "HOROVOD_RANK=None", "a b=None", "$HOME=None",
                               "argv=['HOROVOD_FUSION_THRESHOLD', 'EXTRA', 'HOROVOD_RANK', 'a b', "
                               "'$HOME']"]


def test_timestamps_and_output_files_are_open_mpis(tmp_path):
    out_dir = tmp_path / "logs"
    r = run_etrun(["--mpi", "-np", "2", "-prefix-timestamp", "--output-filename", str(out_dir),
                   PYTHON, MPI_WORKER, "allreduce"])
    assert r.returncode == 0, r.stderr
    for line in r.stdout.decode().splitlines():
        assert re.match(r"^\w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d \d{4}\[1,[01]\]<stdout>:rank", line), line
    for rank in (0, 1):
        text = (out_dir / "1" / f"rank.{rank}" / "stdout").read_text()
        assert text.endswith(f"[1,{rank}]<stdout>:rank {rank} of 2: sum 3\n"), text


def test_sigterm_stops_mpirun_and_every_rank(marker, marker_env):
    env = dict(os.environ, **marker_env)
    p = subprocess.Popen([ETRUN, "--mpi", "-np", "2", PYTHON, MPI_WORKER, "sleep"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        for _ in range(2):
            assert p.stdout.readline().endswith(b"ready\n")
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=30)
        assert p.returncode == 128 + signal.SIGTERM, err
        assert b"etrun: error: received SIGTERM: stopped mpirun" in err
        assert wait_until(lambda: not processes_with_marker(marker)), processes_with_marker(marker)
    finally:
        p.kill()
        p.wait()


def test_sigusr1_reaches_the_ranks_through_mpirun():
    p = subprocess.Popen([ETRUN, "--mpi", "-np", "2", PYTHON, MPI_WORKER, "usr1"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        for _ in range(2):
            assert p.stdout.readline().endswith(b"ready\n")
        p.send_signal(signal.SIGUSR1)
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
        assert sorted(out.decode().splitlines()) == ["[1,0]<stdout>:got SIGUSR1",
                                                      "[1,1]<stdout>:got SIGUSR1"]
    finally:
        p.kill()
        p.wait()


def test_ranks_do_not_outlive_a_killed_etrun(marker, marker_env):
    env = dict(os.environ, **marker_env)
    p = subprocess.Popen([ETRUN, "--mpi", "-np", "2", PYTHON, MPI_WORKER, "sleep"],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    try:
        for _ in range(2):
            assert p.stdout.readline().endswith(b"ready\n")
        p.kill()
        p.wait()
        # mpirun gets SIGTERM (parent-death signal) and stops its ranks itself.
        assert wait_until(lambda: not processes_with_marker(marker), timeout=30), \
            processes_with_marker(marker)
    finally:
        p.kill()
        p.wait()


def test_no_mpirun_on_path_is_an_error_before_anything_starts(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    r = run_etrun(["--mpi", "-np", "2", "/bin/true"], env={"PATH": str(empty)})
    assert r.returncode == 127
    assert r.stderr.decode() == (
        "etrun: error: --mpi: no mpirun on PATH: install Open MPI (Debian: apt-get install "
        "openmpi-bin) or leave out --mpi to launch with Gloo\n")


def test_an_mpirun_that_is_not_open_mpi_is_refused(tmp_path):
    path = fake_program(tmp_path, "mpirun",
                        'if [ "$1" = --version ]; then echo "HYDRA build details:"; '
                        'echo "    MPICH Version: 4.0.2"; exit 0; fi\n'
                        f'touch {tmp_path}/ran; exit 0\n')
    r = run_etrun(["--mpi", "-np", "2", "/bin/true"], env={"PATH": path})
    assert r.returncode == 1
    assert r.stderr.decode() == (
        f"etrun: error: --mpi: {tmp_path}/bin/mpirun is MPICH (HYDRA build details:): etrun runs "
        "Open MPI's mpirun only; put Open MPI first on PATH or leave out --mpi to launch with "
        "Gloo\n")
    assert not (tmp_path / "ran").exists()


def test_mpirun_gets_its_argv_without_a_shell_and_its_exit_code_comes_back(tmp_path):
    # A stand-in mpirun that reports Open MPI, records its argv one word per line, and exits 42.
    record = tmp_path / "argv"
    path = fake_program(tmp_path, "mpirun",
                        'if [ "$1" = --version ]; then echo "mpirun (Open MPI) 4.1.4"; exit 0; fi\n'
                        f'for a in "$@"; do printf "%s\\n" "$a"; done > {record}\nexit 42\n')
    r = run_etrun(["--mpi", "-np", "2", "-H", "localhost:1,127.0.0.1:1", "-p", "2222", "-i",
                   "/k ey", "--binding-args", "--rankfile 'my file'", "/bin/echo", "a b", "*"],
                  env={"PATH": path})
    assert r.returncode == 42, r.stderr
    argv = record.read_text().split("\n")[:-1]
    assert argv[:8] == ["--allow-run-as-root", "--tag-output", "-np", "2", "-H",
                        "localhost:1,127.0.0.1:1", "--rankfile", "my file"]
    assert argv[8:18] == ["-mca", "pml", "ob1", "-mca", "btl", "^openib", "-mca", "plm_rsh_args",
                          "-p 2222 -i /k ey", "-mca"]
    assert argv[-3:] == ["/bin/echo", "a b", "*"]


def test_hostfile_becomes_the_h_list(tmp_path):
    record = tmp_path / "argv"
    path = fake_program(tmp_path, "mpirun",
                        'if [ "$1" = --version ]; then echo "mpirun (Open MPI) 4.1.4"; exit 0; fi\n'
                        f'for a in "$@"; do printf "%s\\n" "$a"; done > {record}\n')
    hostfile = tmp_path / "hosts"
    hostfile.write_text("# two names of this machine\nlocalhost slots=2\n127.0.0.1 slots=1\n")
    r = run_etrun(["--mpi", "-np", "3", "-hostfile", str(hostfile), "/bin/true"], env={"PATH": path})
    assert r.returncode == 0, r.stderr
    argv = record.read_text().split("\n")
    assert argv[4:6] == ["-H", "localhost:2,127.0.0.1:1"]


def test_elastic_flags_with_mpi_are_a_usage_error():
    r = run_etrun(["--mpi", "-np", "2", "--min-np", "1", "/bin/true"])
    assert r.returncode == 2
    assert r.stderr.decode().startswith("etrun: error: --mpi and --min-np/--min-num-proc cannot be "
                                        "used together")


def test_lines_written_in_pieces_come_out_whole_per_rank_and_stream():
    # Given 4 ranks that each write 300 lines on stdout and on stderr one word per write(), all
    # at once (mpirun tags every fragment it reads and glues ranks' fragments together), every
    # line arrives once, whole, behind its rank's tag, and the unterminated last line gets a
    # newline. Fails with plain mpirun output (etrun before issue 13 passed it through).
    n, ranks = 300, 4
    r = run_etrun(["--mpi", "-np", str(ranks), PYTHON, MPI_WORKER, "pieces", str(n)], timeout=120)
    assert r.returncode == 0, r.stderr
    out = r.stdout.decode()
    assert out.endswith("\n")
    want = sorted([f"[1,{k}]<stdout>:MPI {k} {i}" for k in range(ranks) for i in range(n)] +
                  [f"[1,{k}]<stdout>:end {k}" for k in range(ranks)])
    assert sorted(out.splitlines()) == want
    err = [line for line in r.stderr.decode().splitlines() if line.startswith("[1,")]
    assert sorted(err) == sorted(f"[1,{k}]<stderr>:err {k} {i}" for k in range(ranks) for i in range(n))
    for k in range(ranks):  # each rank's lines in its own order
        mine = [line for line in out.splitlines() if line.startswith(f"[1,{k}]<stdout>:MPI")]
        assert mine == [f"[1,{k}]<stdout>:MPI {k} {i}" for i in range(n)]


def test_output_filename_files_hold_whole_lines_too(tmp_path):
    # mpirun's own --output-filename files hold the fragments it reads; etrun writes them from the
    # whole lines, in mpirun's layout (DIR/1/rank.<r>/{stdout,stderr}).
    out_dir = tmp_path / "logs"
    r = run_etrun(["--mpi", "-np", "2", "--output-filename", str(out_dir), PYTHON, MPI_WORKER,
                   "pieces", "100"], timeout=120)
    assert r.returncode == 0, r.stderr
    for k in range(2):
        out = (out_dir / "1" / f"rank.{k}" / "stdout").read_text().splitlines()
        assert out == [f"[1,{k}]<stdout>:MPI {k} {i}" for i in range(100)] + [f"[1,{k}]<stdout>:end {k}"]
        err = (out_dir / "1" / f"rank.{k}" / "stderr").read_text().splitlines()
        assert err == [f"[1,{k}]<stderr>:err {k} {i}" for i in range(100)]


def test_a_missing_command_is_etruns_one_line_and_127_with_a_cause(tmp_path):
    # Issue 22's run: Open MPI would print its box and exit 134 with an empty job_end cause; on
    # this machine etrun checks the command first, as the other modes do.
    events = tmp_path / "events.jsonl"
    r = run_etrun(["--mpi", "-np", "2", "--events-file", str(events), "nosuchcmd-xyz"], timeout=60)
    assert r.returncode == 127
    assert r.stdout == b""
    assert r.stderr.decode() == ("etrun: error: cannot run 'nosuchcmd-xyz': command not found in "
                                 "PATH: check the command and PATH\n")
    end = [json.loads(l) for l in events.read_text().splitlines()][-1]
    assert end["event"] == "job_end" and end["exit_code"] == 127
    assert end["cause"].startswith("cannot run 'nosuchcmd-xyz'")


@pytest.mark.parametrize("case", ["command missing where mpirun looks", "no daemon on the host"])
def test_a_launch_failure_mpirun_reports_is_etruns_one_line_code_and_cause(tmp_path, case):
    # Issue 22: mpirun's box and its own exit code (134, 1) become etrun's one line, with the
    # code the other modes give the cause (127 for a command not found, 255 for a host whose
    # daemon cannot be started) and that line as job_end's cause. --verbose shows the box.
    events = tmp_path / "events.jsonl"
    if case == "command missing where mpirun looks":
        # --mpi-args may give the ranks another PATH, so etrun leaves the check to mpirun.
        args = ["-np", "2", "--mpi-args=-x FOO=1", "nosuchcmd-xyz"]
        code = 127
        line = ("etrun: error: cannot run 'nosuchcmd-xyz' on {}: command not found in PATH "
                "(mpirun): check the command and PATH there")
    else:
        # A host that answers but has no Open MPI: the remote shell cannot run orted.
        agent = tmp_path / "agent"
        agent.write_text("#!/bin/sh\necho 'bash: line 1: orted: command not found' >&2\nexit 127\n")
        agent.chmod(0o755)
        args = ["-np", "1", "-H", "198.18.0.9:1", f"--mpi-args=-mca plm_rsh_agent {agent}", "true"]
        code = 255
        line = ("etrun: error: mpirun could not start or reach its daemon on every host (bash: line "
                "1: orted: command not found): check that each host answers ssh without a "
                "password and has Open MPI installed")
    r = run_etrun(["--mpi", "--events-file", str(events)] + args, timeout=60)
    assert r.returncode == code, r.stderr
    node = os.uname().nodename.split(".")[0]
    etrun_lines = [l for l in r.stderr.decode().splitlines() if l.startswith("etrun:")]
    assert etrun_lines == [line.format(node)]
    assert b"-----" not in r.stderr and b"failed to start" not in r.stdout  # no box, no summary
    end = [json.loads(l) for l in events.read_text().splitlines()][-1]
    assert end == {**end, "event": "job_end", "exit_code": code,
                   "cause": line.format(node)[len("etrun: error: "):]}
    verbose = run_etrun(["--mpi", "--verbose"] + args, timeout=60)
    assert verbose.returncode == code
    assert b"etrun: debug: mpirun: ----------" in verbose.stderr
