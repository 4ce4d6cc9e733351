"""Static local jobs through the real etrun binary: environment, output, exit codes, signals."""
import json
import os
import re
import signal
import subprocess
import time

import pytest

from conftest import (ETRUN, PYTHON, ROOT, WORKER, processes_with_marker, rank_lines, run_etrun,
                      wait_until)


def env_by_rank(stdout):
    return {rank: json.loads(lines[0]) for rank, lines in rank_lines(stdout.decode()).items()}


def test_worker_environment_for_two_local_host_names():
    # Given -np 3 over localhost:2,127.0.0.1:1, ranks are host-major and every spec variable is set.
    r = run_etrun(["-np", "3", "-H", "localhost:2,127.0.0.1:1", PYTHON, WORKER, "env",
                   "a b", "$HOME", "*"])
    assert r.returncode == 0, r.stderr
    env = env_by_rank(r.stdout)
    assert sorted(env) == [0, 1, 2]
    want = {
        0: ("localhost", 0, 0, 2, 0, 2, 0),
        1: ("localhost", 1, 1, 2, 0, 1, 0),
        2: ("127.0.0.1", 2, 0, 1, 1, 2, 1),
    }
    for rank, (host, r_, lr, ls, cr, cs, group) in want.items():
        e = env[rank]
        assert e["HOROVOD_HOSTNAME"] == host
        assert (e["HOROVOD_RANK"], e["HOROVOD_SIZE"]) == (str(r_), "3")
        assert (e["HOROVOD_LOCAL_RANK"], e["HOROVOD_LOCAL_SIZE"]) == (str(lr), str(ls))
        assert (e["HOROVOD_CROSS_RANK"], e["HOROVOD_CROSS_SIZE"]) == (str(cr), str(cs))
        assert e["HOROVOD_CONTROLLER"] == "gloo" and e["HOROVOD_CPU_OPERATIONS"] == "gloo"
        assert e["HOROVOD_GLOO_IFACE"] == "lo" and e["NCCL_SOCKET_IFNAME"] == "lo"
        assert e["PYTHONUNBUFFERED"] == "1"
        assert (e["RANK"], e["WORLD_SIZE"]) == (str(r_), "3")
        assert (e["LOCAL_RANK"], e["LOCAL_WORLD_SIZE"]) == (str(lr), str(ls))
        assert e["GROUP_RANK"] == str(group)
        assert e["MASTER_ADDR"] == "127.0.0.1" and 0 < int(e["MASTER_PORT"]) < 65536
        assert "HOROVOD_ELASTIC" not in e
        assert e["HOROVOD_GLOO_RENDEZVOUS_ADDR"] == "127.0.0.1"
        assert 0 < int(e["HOROVOD_GLOO_RENDEZVOUS_PORT"]) < 65536
        assert e["cwd"] == os.getcwd()
        assert e["argv"] == ["a b", "$HOME", "*"]  # argv as given: no shell re-parsing
    assert len({e["MASTER_PORT"] for e in env.values()}) == 1


def test_slot_variables_win_over_inherited_ones_and_tunables_are_exported():
    r = run_etrun(["-np", "2", "--fusion-threshold-mb", "32", "--cycle-time-ms", "7", "--tcp",
                   PYTHON, WORKER, "env"], env={"HOROVOD_RANK": "99", "RANK": "42"})
    assert r.returncode == 0, r.stderr
    env = env_by_rank(r.stdout)
    assert [env[i]["HOROVOD_RANK"] for i in (0, 1)] == ["0", "1"]
    assert [env[i]["RANK"] for i in (0, 1)] == ["0", "1"]
    assert env[0]["HOROVOD_FUSION_THRESHOLD"] == str(32 * 1048576)
    assert env[0]["HOROVOD_CYCLE_TIME"] == "7.0"
    assert env[0]["NCCL_IB_DISABLE"] == "1"


def test_every_line_of_eight_concurrent_ranks_arrives_once_whole_and_prefixed():
    n = 3000
    r = run_etrun(["-np", "8", PYTHON, WORKER, "spam", str(n)])
    assert r.returncode == 0, r.stderr
    # Output is a sequence of pieces, each ending at \n or \r (spec 7.1), each with its own
    # prefix. A \r-terminated piece may be followed by another rank's piece on the same
    # \n-line (as under horovodrun), so split on both terminators, keeping them.
    for stream, data, every in (("stdout", r.stdout, 1), ("stderr", r.stderr, 7)):
        pieces = re.findall(rb"[^\r\n]*[\r\n]", data)
        assert b"".join(pieces) == data  # nothing after the last terminator
        by_rank = {}
        for piece in pieces:
            m = re.match(rb"^\[(\d+)\]<%s>:" % stream.encode(), piece)
            if m is None:
                assert stream == "stderr" and piece.startswith(b"etrun"), piece  # etrun's own
                continue
            by_rank.setdefault(int(m.group(1)), []).append(piece[m.end():])
        assert sorted(by_rank) == list(range(8))
        for rank, got in by_rank.items():
            if stream == "stdout":
                want = [b"rank%d line %d " % (rank, i) + b"x" * (i % 50) + b"\n" for i in range(n)]
                # \r ends a piece: each progress update gets its own prefix; the final
                # unterminated line is ended by etrun.
                want += [b"progress 1\r", b"progress 2\r", b"bad utf8 \xff\xfe\xc3( end\n",
                         b"no newline at the end from rank%d\n" % rank]
            else:
                want = [b"err rank%d line %d\n" % (rank, i) for i in range(0, n, every)]
            assert got == want  # each once, in order, never split or glued to another rank's


def test_a_failing_rank_stops_the_others_and_its_code_is_etruns(marker_env):
    start = time.monotonic()
    r = run_etrun(["-np", "3", PYTHON, WORKER, "exit", "1", "7"], env=marker_env)
    assert r.returncode == 7
    err = r.stderr.decode()
    assert "etrun: error: rank 1 on localhost exited with code 7; stopped the other 2 ranks" in err
    assert time.monotonic() - start < 60  # the others were stopped, not waited out (600 s)
    assert processes_with_marker(next(iter(marker_env.values()))) == []


def test_a_rank_killed_by_a_signal_gives_128_plus_n():
    r = run_etrun(["-np", "2", "/bin/sh", "-c", 'if [ "$HOROVOD_RANK" = 1 ]; then kill -SEGV $$; fi; sleep 600'])
    assert r.returncode == 128 + signal.SIGSEGV
    assert b"rank 1 on localhost was killed by signal 11 (SIGSEGV)" in r.stderr


def start_sleeping_job(marker_env, extra=(), mode=("sleep", "2"), np=2):
    env = dict(os.environ)
    env.update(marker_env)
    proc = subprocess.Popen([ETRUN, "-np", str(np), *extra, PYTHON, WORKER, *mode],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                            stdin=subprocess.DEVNULL)
    ready = 0
    while ready < np:
        line = proc.stdout.readline()
        assert line, "etrun ended before its ranks were ready"
        ready += line.endswith(b"ready\n")
    return proc


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_a_signal_to_etrun_stops_every_rank_and_grandchild(marker_env, sig):
    marker = next(iter(marker_env.values()))
    proc = start_sleeping_job(marker_env)
    assert len(processes_with_marker(marker)) >= 6  # 2 ranks + 4 grandchildren
    proc.send_signal(sig)
    rc = proc.wait(timeout=60)
    assert rc == 128 + sig
    assert b"etrun: error: received %s: stopped 2 ranks" % signal.Signals(sig).name.encode() in proc.stderr.read()
    assert processes_with_marker(marker) == []


def test_sigkill_of_etrun_leaves_no_rank_or_grandchild_behind(marker_env):
    marker = next(iter(marker_env.values()))
    proc = start_sleeping_job(marker_env)
    proc.kill()
    proc.wait(timeout=10)
    assert wait_until(lambda: processes_with_marker(marker) == [], timeout=20)


def test_a_rank_ignoring_sigterm_is_killed_after_the_grace_period(marker_env):
    marker = next(iter(marker_env.values()))
    proc = start_sleeping_job(marker_env, extra=["--grace-period", "0.5"], mode=("ignore-term",), np=1)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 128 + signal.SIGTERM
    assert processes_with_marker(marker) == []


def test_sigusr1_is_forwarded_to_every_rank(marker_env):
    proc = start_sleeping_job(marker_env, mode=("usr1",), np=2)
    proc.send_signal(signal.SIGUSR1)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert out.count(b"<stdout>:got SIGUSR1\n") == 2


def test_output_filename_keeps_per_rank_copies_and_still_prints(tmp_path):
    r = run_etrun(["-np", "1", "--output-filename", str(tmp_path / "logs"), "/bin/sh", "-c",
                   "echo hello; echo oops >&2; printf tail"])
    assert r.returncode == 0, r.stderr
    assert r.stdout == b"[0]<stdout>:hello\n[0]<stdout>:tail\n"
    assert (tmp_path / "logs" / "rank.0" / "stdout").read_bytes() == b"hello\ntail"
    assert (tmp_path / "logs" / "rank.0" / "stderr").read_bytes() == b"oops\n"


def test_output_filename_pads_rank_directories_to_the_width_of_np_minus_one(tmp_path):
    r = run_etrun(["-np", "11", "--output-filename", str(tmp_path), "/bin/true"])
    assert r.returncode == 0, r.stderr
    assert sorted(os.listdir(tmp_path)) == ["rank.%02d" % i for i in range(11)]


def test_timestamp_prefixes():
    r = run_etrun(["-np", "1", "-prefix-timestamp", "/bin/echo", "hi"])
    assert re.fullmatch(rb"[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4}\[0\]<stdout>:hi\n", r.stdout)
    r = run_etrun(["-np", "1", "-prefix-timestamp", "--timestamp-format", "iso", "/bin/echo", "hi"])
    assert re.fullmatch(rb"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}[+-]\d{4} \[0\]<stdout>:hi\n", r.stdout)


def test_hostfile_with_comments_assigns_ranks_in_file_order(tmp_path):
    hostfile = tmp_path / "hosts"
    hostfile.write_text("# local hosts\n127.0.0.1 slots=1\n\nlocalhost slots=2  # two\n")
    r = run_etrun(["-np", "3", "-hostfile", str(hostfile), PYTHON, WORKER, "env"])
    assert r.returncode == 0, r.stderr
    env = env_by_rank(r.stdout)
    assert [env[i]["HOROVOD_HOSTNAME"] for i in range(3)] == ["127.0.0.1", "localhost", "localhost"]


def test_static_mode_starts_exactly_np_ranks_filling_hosts_in_order():
    r = run_etrun(["-np", "2", "-H", "localhost:3,127.0.0.1:1", PYTHON, WORKER, "env"])
    assert r.returncode == 0, r.stderr
    env = env_by_rank(r.stdout)
    assert sorted(env) == [0, 1] and {e["HOROVOD_HOSTNAME"] for e in env.values()} == {"localhost"}


@pytest.mark.parametrize("args, code, message", [
    (["-np", "2", "-H", "localhost:1", "/bin/true"], 2,
     "etrun: error: requested 2 processes but the hosts provide only 1 slot (localhost:1): add hosts or slots, or lower -np"),
    (["-np", "1", "-H", "gpu-node-7:1", "/bin/true"], 2,
     "etrun: error: cannot resolve host 'gpu-node-7'"),
    (["-np", "1", "-H", "localhost", "/bin/true"], 2, "etrun: error: invalid host 'localhost'"),
    (["-np", "1", "-hostfile", "/nonexistent/hosts", "/bin/true"], 2,
     "etrun: error: cannot read hostfile /nonexistent/hosts: No such file or directory"),
    (["-np", "2", "no-such-program-xyz"], 127,
     "etrun: error: cannot run 'no-such-program-xyz': command not found in PATH: check the command and PATH"),
    (["-np", "1", "--network-interface", "nope0", "/bin/true"], 2,
     "etrun: error: --network-interface nope0: no such interface with an IPv4 address on this machine"),
])
def test_bad_input_gets_one_clear_line_and_starts_nothing(args, code, message):
    r = run_etrun(args)
    assert r.returncode == code
    err = r.stderr.decode()
    assert err.startswith(message), err
    assert err.count("\n") == 1, err
    assert r.stdout == b""


def test_bad_hostfile_line_is_named(tmp_path):
    hostfile = tmp_path / "hosts"
    hostfile.write_text("localhost slots=1\nlocalhost2 slots=two\n")
    r = run_etrun(["-np", "1", "--hostfile", str(hostfile), "/bin/true"])
    assert r.returncode == 2
    assert r.stderr.decode() == f"etrun: error: {hostfile} line 2: 'slots=two' is not a whole number of slots: write e.g. slots=4\n"


def test_usage_errors_exit_2_with_one_line():
    for args in (["-np", "0", "/bin/true"], ["--min-nq", "2", "-np", "2", "/bin/true"], ["-np", "2"],
                 ["-np", "2", "--jsrun", "/bin/true"]):
        r = run_etrun(args)
        assert r.returncode == 2, args
        assert r.stderr.decode().startswith("etrun: error: ") and r.stderr.count(b"\n") == 1, (args, r.stderr)


def test_torch_distributed_allreduce_over_env_init():
    r = run_etrun(["-np", "2", PYTHON, os.path.join(ROOT, "scripts/examples/torch_allreduce.py")],
                  timeout=300)
    assert r.returncode == 0, r.stderr
    lines = rank_lines(r.stdout.decode())
    assert lines[0] == ["rank 0/2 on localhost: allreduce sum = 3 (expected 3)"]
    assert lines[1] == ["rank 1/2 on localhost: allreduce sum = 3 (expected 3)"]


def test_a_one_megabyte_line_arrives_whole():
    r = run_etrun(["-np", "2", PYTHON, "-c", "import sys; sys.stdout.write('y' * (1 << 20) + '\\n')"])
    assert r.returncode == 0, r.stderr
    for rank in (0, 1):
        assert b"[%d]<stdout>:" % rank + b"y" * (1 << 20) + b"\n" in r.stdout
    assert len(r.stdout) == 2 * (len(b"[0]<stdout>:") + (1 << 20) + 1)


def test_verbose_prints_each_rank_command_line_on_stderr():
    r = run_etrun(["-np", "1", "--verbose", "/bin/echo", "a b"])
    assert r.returncode == 0
    assert r.stdout == b"[0]<stdout>:a b\n"
    err = r.stderr.decode()
    assert re.search(r"^etrun: debug: rank 0 on localhost: HOROVOD_HOSTNAME=localhost HOROVOD_RANK=0 .* /bin/echo 'a b'$", err, re.M), err
