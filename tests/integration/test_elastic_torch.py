"""torchrun semantics (`--elastic-mode restart`) with the real PyTorch example."""
import os
import re
import subprocess

from conftest import ETRUN, PYTHON, ROOT, processes_with_marker, wait_until

EXAMPLE = os.path.join(ROOT, "scripts/examples/torch_elastic.py")


def test_a_torch_job_restarts_into_each_new_world_and_resumes_from_its_checkpoint(tmp_path, marker_env):
    hosts = tmp_path / "hosts"
    hosts.write_text("localhost:2\n")
    script = tmp_path / "discover.sh"
    script.write_text(f"#!/bin/sh\ncat {hosts}\n")
    script.chmod(0o755)
    out_path = tmp_path / "out.txt"
    proc = subprocess.Popen(
        [ETRUN, "-np", "2", "--min-np", "1", "--elastic-mode", "restart", "--reset-limit", "5",
         "--discovery-interval", "0.2", "--host-discovery-script", str(script), PYTHON, EXAMPLE,
         "--steps", "60", "--step-seconds", "0.1", "--checkpoint", str(tmp_path / "ckpt.pt")],
        stdout=open(out_path, "wb"), stderr=subprocess.PIPE, env=dict(os.environ, **marker_env),
        stdin=subprocess.DEVNULL)
    text = lambda: out_path.read_text()
    assert wait_until(lambda: "step 10 world 2" in text(), timeout=120)
    hosts.write_text("localhost:2\n127.0.0.1:1\n")
    assert wait_until(lambda: re.search(r"step \d+ world 3", text()), timeout=120)
    hosts.write_text("localhost:2\n")
    rc = proc.wait(timeout=180)
    err = proc.stderr.read().decode()
    out = text()
    assert rc == 0, err
    assert "[0]<stdout>:done: 60 steps" in out
    starts = re.findall(r"rank (\d)/(\d): restart (\d), starting at step (\d+)", out)
    worlds = [(int(w), int(r)) for _, w, r, _ in starts]
    assert sorted(set(worlds)) == [(2, 0), (2, 2), (3, 1)]  # world 2, then 3, then 2 again
    # Each new world resumed where the checkpoint left off, not from scratch.
    assert all(int(step) > 0 for _, _, restart, step in starts if restart != "0")
    assert processes_with_marker(next(iter(marker_env.values()))) == []
