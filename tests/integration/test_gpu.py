"""GPU slots (--gpus-per-rank, --ranks-per-gpu) through the real binary, with a fake nvidia-smi on
PATH that lists four GPUs: each rank's CUDA_VISIBLE_DEVICES, static and elastic, and the errors."""
import json
import os
import subprocess

from conftest import ETRUN, PYTHON, WORKER, rank_lines


def fake_gpus(tmp_path, count=4, exit_code=0):
    """PATH with an nvidia-smi that lists `count` GPUs for -L (and fails any other use)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    smi = bin_dir / "nvidia-smi"
    smi.write_text("#!/bin/sh\n"
                   "[ \"$1\" = -L ] || exit 64\n"
                   f"i=0; while [ $i -lt {count} ]; do\n"
                   "  echo \"GPU $i: NVIDIA Fake GPU (UUID: GPU-0000000$i)\"; i=$((i+1)); done\n"
                   f"exit {exit_code}\n")
    smi.chmod(0o755)
    return f"{bin_dir}:{os.environ['PATH']}"


def devices_by_rank(stdout):
    return {rank: json.loads(lines[0])["CUDA_VISIBLE_DEVICES"]
            for rank, lines in rank_lines(stdout.decode()).items()}


def run(args, path, **env):
    """Runs etrun with PATH = `path`, no inherited CUDA_VISIBLE_DEVICES, and `env` added."""
    full = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    full.update(PATH=path, **env)
    return subprocess.run([ETRUN] + args, capture_output=True, timeout=120, env=full,
                          stdin=subprocess.DEVNULL)


def test_gpus_per_rank_gives_each_local_rank_its_own_gpus(tmp_path):
    r = run(["-np", "2", "--gpus-per-rank", "2", PYTHON, WORKER, "env"], fake_gpus(tmp_path))
    assert r.returncode == 0, r.stderr
    assert devices_by_rank(r.stdout) == {0: "0,1", 1: "2,3"}
    assert r.stderr == b""


def test_ranks_per_gpu_lets_neighbouring_ranks_share_a_gpu(tmp_path):
    r = run(["-np", "4", "--ranks-per-gpu", "2", PYTHON, WORKER, "env"], fake_gpus(tmp_path))
    assert r.returncode == 0, r.stderr
    assert devices_by_rank(r.stdout) == {0: "0", 1: "0", 2: "1", 3: "1"}


def test_without_the_flags_cuda_visible_devices_is_left_alone(tmp_path):
    path = fake_gpus(tmp_path)
    r = run(["-np", "2", PYTHON, WORKER, "env"], path)
    assert devices_by_rank(r.stdout) == {0: None, 1: None}
    r = run(["-np", "2", PYTHON, WORKER, "env"], path, CUDA_VISIBLE_DEVICES="3")
    assert devices_by_rank(r.stdout) == {0: "3", 1: "3"}


def test_the_launchers_own_cuda_visible_devices_is_divided_among_ranks(tmp_path):
    # A scheduler gave etrun GPUs 5,6,7: ranks share those, and nvidia-smi is not asked.
    r = run(["-np", "3", "--gpus-per-rank", "1", PYTHON, WORKER, "env"], fake_gpus(tmp_path, 0, 9),
            CUDA_VISIBLE_DEVICES="5,6,7")
    assert r.returncode == 0, r.stderr
    assert devices_by_rank(r.stdout) == {0: "5", 1: "6", 2: "7"}


def test_asking_for_more_gpus_than_the_host_has_fails_before_any_rank_starts(tmp_path):
    r = run(["-np", "3", "--gpus-per-rank", "2", PYTHON, WORKER, "env"], fake_gpus(tmp_path))
    assert r.returncode == 2
    assert r.stdout == b""
    assert r.stderr.decode() == (
        "etrun: error: --gpus-per-rank 2: 3 ranks on this host need 6 GPUs but it has 4 "
        "(nvidia-smi -L): lower -np, lower --gpus-per-rank or add hosts\n")
    r = run(["-np", "5", "--ranks-per-gpu", "1", PYTHON, WORKER, "env"], fake_gpus(tmp_path))
    assert r.returncode == 2
    assert "need 5 GPUs but it has 4" in r.stderr.decode()


def test_a_failing_nvidia_smi_is_an_error_and_a_missing_one_a_warning(tmp_path):
    r = run(["-np", "1", "--gpus-per-rank", "1", PYTHON, WORKER, "env"], fake_gpus(tmp_path, 0, 9))
    assert r.returncode == 2
    assert r.stderr.decode() == (
        "etrun: error: --gpus-per-rank 1: nvidia-smi -L failed (exit code 9): check the NVIDIA "
        "driver, or leave the flag out\n")
    empty = tmp_path / "empty"
    empty.mkdir()
    r = run(["-np", "2", "--gpus-per-rank", "1", PYTHON, WORKER, "env"], str(empty))
    assert r.returncode == 0, r.stderr
    assert devices_by_rank(r.stdout) == {0: "0", 1: "1"}
    assert r.stderr.decode() == (
        "etrun: warning: --gpus-per-rank 1: no nvidia-smi on PATH, so this host's GPUs are not "
        "counted; ranks get GPUs by local rank unchecked\n")


def test_elastic_ranks_get_gpus_by_local_rank(tmp_path):
    r = run(["-np", "2", "--min-np", "1", "-H", "localhost:2", "--ranks-per-gpu", "1",
             PYTHON, WORKER, "env"], fake_gpus(tmp_path))
    assert r.returncode == 0, r.stderr
    assert devices_by_rank(r.stdout) == {0: "0", 1: "1"}


def test_an_elastic_rank_beyond_the_gpus_fails_to_start(tmp_path):
    script = tmp_path / "discover.sh"
    script.write_text("#!/bin/sh\necho localhost:3\n")
    script.chmod(0o755)
    r = run(["-np", "3", "--host-discovery-script", str(script), "--gpus-per-rank", "2",
             PYTHON, WORKER, "env"], fake_gpus(tmp_path))
    assert r.returncode == 127
    assert ("etrun: error: cannot start localhost[2]: --gpus-per-rank 2: local rank 2 needs GPUs "
            "4-5 but this host has 4 (nvidia-smi -L): lower --max-np or the host's slots\n"
            in r.stderr.decode())
