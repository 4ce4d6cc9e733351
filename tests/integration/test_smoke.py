"""etrun-smoke under the real etrun: the CPU (TCP ring) path end to end, its table, its errors."""
import os
import re
import socket
import subprocess

import pytest

from conftest import ETRUN, ROOT, rank_lines, run_etrun

SMOKE = os.path.join(os.path.dirname(os.path.abspath(ETRUN)), "etrun-smoke")
ROW = re.compile(r"^ +(\d+) +(\d+) +float +sum +(\d+\.\d\d) +(\d+\.\d{3}) +(\d+\.\d{3}) +(\d+)$")
# 8 B to 1 MiB by x4, few iterations: every size, quickly.
SWEEP = ["-b", "8", "-e", "1M", "-f", "4", "-n", "3", "-w", "1"]
SIZES = [8 * 4 ** k for k in range(9)]  # 8 .. 524288


def table(stdout):
    """Rank 0's lines, and the rows parsed as (bytes, count, time, algbw, busbw, wrong)."""
    lines = rank_lines(stdout.decode()).get(0, [])
    rows = []
    for line in lines:
        m = ROW.match(line)
        if m:
            rows.append((int(m[1]), int(m[2]), float(m[3]), float(m[4]), float(m[5]), int(m[6])))
    return lines, rows


def closed_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def gpu_present():
    return any(name.startswith("nvidia") and name[6:].isdigit() for name in os.listdir("/dev"))


def nccl_built():
    out = subprocess.run([SMOKE, "--help"], capture_output=True, text=True, check=True).stdout
    return "backends in this build: tcp nccl" in out


def test_three_ranks_over_tcp_print_one_checked_row_per_size():
    r = run_etrun(["-np", "3", SMOKE, *SWEEP, "--backend", "tcp"], timeout=60)
    assert r.returncode == 0, r.stderr
    by_rank = rank_lines(r.stdout.decode())
    assert list(by_rank) == [0]  # only rank 0 reports
    lines, rows = table(r.stdout)
    assert lines[0].startswith("# etrun-smoke v") and lines[0].endswith(
        ": allreduce (sum, float32) over 3 ranks, backend tcp")
    assert lines[1] == ("# 8 B to 512 KiB (x4), 3 timed and 1 warm-up allreduces per size, "
                        "every element checked")
    for rank in range(3):
        nxt = (rank + 1) % 3
        assert any(re.match(r"^#  rank %d pid \d+ on localhost: tcp 127\.0\.0\.1:\d+, sends to "
                            r"rank %d at 127\.0\.0\.1:\d+$" % (rank, nxt), l) for l in lines), lines
    assert [row[0] for row in rows] == SIZES
    for size, count, time_us, algbw, busbw, wrong in rows:
        assert count == size // 4
        assert time_us > 0
        assert wrong == 0
        assert busbw == pytest.approx(algbw * 4 / 3, abs=0.002)
    assert lines[-1] == "# Wrong elements       : 0 (OK)"
    assert re.match(r"^# Avg bus bandwidth    : \d+\.\d{3} GB/s$", lines[-2])


def test_one_rank_needs_no_network_and_has_no_bus_bandwidth():
    r = run_etrun(["-np", "1", SMOKE, "-b", "1K", "-e", "64K", "-n", "2", "-w", "0",
                   "--backend", "tcp"], timeout=60)
    assert r.returncode == 0, r.stderr
    lines, rows = table(r.stdout)
    assert any(re.match(r"^#  rank 0 pid \d+ on localhost: tcp, alone \(no network\)$", l)
               for l in lines), lines
    assert [row[0] for row in rows] == [1024 << k for k in range(7)]
    assert all(row[4] == 0 and row[5] == 0 for row in rows)


def test_default_backend_is_tcp_without_a_gpu():
    if gpu_present():
        pytest.skip("a GPU is present: the default is nccl where built with it")
    r = run_etrun(["-np", "2", SMOKE, "-b", "64", "-e", "64", "-n", "1", "-w", "0"], timeout=60)
    assert r.returncode == 0, r.stderr
    lines, rows = table(r.stdout)
    assert lines[0].endswith("over 2 ranks, backend tcp")
    assert [row[0] for row in rows] == [64] and rows[0][5] == 0


def test_a_rank_that_corrupts_data_makes_the_table_count_it_and_etrun_fail():
    # Given rank 1 adding 1 to one element it sends, every rank ends with one wrong element
    # per size: 3 per row with 3 ranks.
    r = run_etrun(["-np", "3", SMOKE, *SWEEP, "--backend", "tcp"], timeout=60,
                  env={"ETRUN_SMOKE_TEST_CORRUPT_RANK": "1"})
    assert r.returncode == 1, r.stderr
    lines, rows = table(r.stdout)
    assert [row[0] for row in rows] == SIZES
    assert [row[5] for row in rows] == [3] * len(SIZES)
    assert lines[-1] == "# Wrong elements       : 27 (FAILED)"
    errors = rank_lines(r.stderr.decode(), "stderr")
    assert errors[0] == ["etrun-smoke: error: 27 wrong elements in 9 of 9 sizes (first at 8 B): "
                         "the network or a device corrupts data"]
    assert 1 not in errors and 2 not in errors  # one voice


def test_bad_flags_are_one_line_and_exit_2_alone_and_under_etrun():
    r = subprocess.run([SMOKE, "-n", "0"], capture_output=True, timeout=30)
    assert r.returncode == 2
    assert r.stderr == (b"etrun-smoke: error: -n: expected a whole number from 1 to 1000000, "
                        b"got '0'\n")
    assert r.stdout == b""
    r = run_etrun(["-np", "2", SMOKE, "-e", "1Q"], timeout=60)
    assert r.returncode == 2
    errors = rank_lines(r.stderr.decode(), "stderr")
    assert any(lines == ["etrun-smoke: error: -e: expected a size such as 8, 512K or 64M, got '1Q'"]
               for lines in errors.values()), r.stderr


def test_help_lists_the_flags_and_the_backends_built():
    r = subprocess.run([SMOKE, "--help"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0
    assert r.stdout.startswith("usage: etrun -np N etrun-smoke [flags]\n")
    for flag in ("--minbytes", "--maxbytes", "--stepfactor", "--iters", "--warmup_iters",
                 "--backend", "--timeout"):
        assert flag in r.stdout


def test_outside_etrun_it_says_how_to_run_it():
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOROVOD_")}
    r = subprocess.run([SMOKE], capture_output=True, env=env, timeout=30)
    assert r.returncode == 2
    assert r.stderr == (b"etrun-smoke: error: HOROVOD_SIZE is not set: etrun-smoke runs under "
                        b"etrun, e.g. etrun -np 2 etrun-smoke\n")


def test_an_unreachable_store_is_one_line_naming_it():
    port = closed_port()
    env = dict(os.environ, HOROVOD_RANK="0", HOROVOD_SIZE="2", HOROVOD_LOCAL_RANK="0",
               HOROVOD_GLOO_RENDEZVOUS_ADDR="127.0.0.1", HOROVOD_GLOO_RENDEZVOUS_PORT=str(port))
    r = subprocess.run([SMOKE, "--backend", "tcp", "--timeout", "2"], capture_output=True,
                       env=env, timeout=30)
    assert r.returncode == 1
    assert r.stderr.decode() == ("etrun-smoke: error: rank 0: rendezvous store: cannot connect "
                                 "to 127.0.0.1:%d: Connection refused\n" % port)


def test_a_rank_that_never_joins_makes_the_others_fail_after_the_timeout():
    # Given rank 1 exiting at once instead of running the test, rank 0 gives up after 1 s.
    script = 'if [ "$HOROVOD_RANK" = 1 ]; then exit 0; fi; exec "$0" --backend tcp --timeout 1'
    r = run_etrun(["-np", "2", "/bin/sh", "-c", script, SMOKE], timeout=60)
    assert r.returncode == 1
    errors = rank_lines(r.stderr.decode(), "stderr")
    assert len(errors[0]) == 1
    assert re.match(r"^etrun-smoke: error: rank 0: timed out after 1 s waiting for tcp_1 in the "
                    r"rendezvous store 127\.0\.0\.1:\d+$", errors[0][0]), errors


def test_nccl_without_a_gpu_fails_with_a_clear_line():
    if gpu_present():
        pytest.skip("a GPU is present")
    r = run_etrun(["-np", "1", SMOKE, "--backend", "nccl", "-e", "1K"], timeout=60)
    errors = rank_lines(r.stderr.decode(), "stderr")
    if nccl_built():
        assert r.returncode == 1
        assert re.match(r"^etrun-smoke: error: rank 0: --backend nccl: no (usable )?CUDA device"
                        r".*: use --backend tcp on machines without GPUs$", errors[0][0]), errors
    else:
        assert r.returncode == 2
        assert errors[0] == ["etrun-smoke: error: --backend nccl: this etrun-smoke was built "
                             "without CUDA/NCCL (CMake looks under /usr/local/cuda); use "
                             "--backend tcp"]
    assert len(errors[0]) == 1


def test_smoke_script_runs_two_cpu_ranks_and_passes_arguments_through():
    if gpu_present():
        pytest.skip("a GPU is present: the script would use every GPU")
    env = dict(os.environ, ETRUN_BUILD_DIR=os.path.dirname(os.path.abspath(ETRUN)))
    r = subprocess.run([os.path.join(ROOT, "scripts", "smoke.sh"), "-b", "4K", "-e", "4K",
                        "-n", "2"], capture_output=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    lines, rows = table(r.stdout)
    assert lines[0].endswith("over 2 ranks, backend tcp")
    assert [row[0] for row in rows] == [4096] and rows[0][5] == 0
    r = subprocess.run([os.path.join(ROOT, "scripts", "smoke.sh"), "-np", "3", "-e", "1Z"],
                       capture_output=True, env=env, timeout=60)
    assert r.returncode == 2  # the flag reached etrun-smoke
    assert b"got '1Z'" in r.stderr
