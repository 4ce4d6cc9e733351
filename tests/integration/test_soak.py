"""The chaos soak (scripts/soak.sh): one real 60 s run against the built etrun (Horovod stand-ins,
then a short PyTorch restart-mode job), and the soak's checkers fed broken evidence, so a soak
that passes means something."""
import importlib.util
import os
import subprocess

from conftest import ETRUN, ROOT

SOAK = os.path.join(ROOT, "scripts", "soak.sh")
_spec = importlib.util.spec_from_file_location("chaos", os.path.join(ROOT, "scripts", "soak", "chaos.py"))
chaos = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(chaos)


def test_a_60_second_soak_with_pytorch_and_pool_phases_passes():
    env = dict(os.environ, ETRUN_BUILD_DIR=os.path.dirname(ETRUN))
    r = subprocess.run([SOAK, "60", "--torch-seconds", "30", "--pool-seconds", "30"],
                       capture_output=True, text=True, timeout=480, env=env,
                       stdin=subprocess.DEVNULL)
    out = r.stdout
    assert r.returncode == 0, out[-6000:] + r.stderr[-2000:]
    assert "soak: [" in out and " seed " in out.splitlines()[0]
    assert "verdict: PASS" in out.splitlines()[-1]
    assert "phase 1 figures:" in out and "phase 2 figures:" in out
    assert "phase 3 figures:" in out


def test_soak_sh_refuses_a_bad_duration():
    r = subprocess.run([SOAK, "soon"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2
    assert r.stderr == ("soak.sh: error: SECONDS: expected a positive number of seconds, "
                        "got 'soon'\n")


def test_the_soak_names_a_missing_etrun_binary(tmp_path):
    r = subprocess.run([SOAK, "5", "--torch-seconds", "0"], capture_output=True, text=True,
                       timeout=30, env=dict(os.environ, ETRUN_BUILD_DIR=str(tmp_path)))
    assert r.returncode == 2
    assert f"{tmp_path}/etrun is missing: build first" in r.stderr


# A history: round 1 (nonce 1) commits steps 0-2 as states 10, 11, 12; a rank dies during step 3,
# whose state 13 only one process committed; round 2 resumes state 12 and commits 3-4 as 23, 24.
GOOD = {
    "a_0_1": ["sync 0 0 1 0 2", "commit 0 0 10 0 2", "commit 1 10 11 0 2", "commit 2 11 12 0 2",
              "sync 3 12 2 0 1", "commit 3 12 23 0 1", "commit 4 23 24 0 1", "done 5 24 0 1"],
    "b_0_2": ["sync 0 0 1 1 2", "commit 0 0 10 1 2", "commit 1 10 11 1 2", "commit 2 11 12 1 2",
              "commit 3 12 13 1 2"],
}


def test_the_step_checker_passes_a_history_with_an_abandoned_branch():
    assert chaos.check_steps(GOOD, 5) == ([], 5)


def test_the_step_checker_catches_a_step_done_twice():
    bad = {"a_0_1": ["sync 0 0 1 0 1", "commit 0 0 10 0 1", "commit 1 10 11 0 1",
                     "commit 1 11 12 0 1", "done 3 12 0 1"]}
    failures, _ = chaos.check_steps(bad, 3)
    assert any("duplicated [1], missing [2]" in f for f in failures), failures


def test_the_step_checker_catches_a_gap_and_the_wrong_total():
    bad = {"a_0_1": ["sync 0 0 1 0 1", "commit 0 0 10 0 1", "commit 2 10 12 0 1", "done 2 12 0 1"]}
    failures, _ = chaos.check_steps(bad, 3)
    assert "training ended after 2 steps, expected 3" in failures
    assert any("missing [1]" in f for f in failures), failures


def test_the_step_checker_catches_a_resume_from_a_state_nobody_committed():
    bad = {k: list(v) for k, v in GOOD.items()}
    bad["a_0_1"][4] = "sync 3 99 2 0 1"
    failures, _ = chaos.check_steps(bad, 5)
    assert "a_0_1: resumed state 99 that nobody committed" in failures
    assert "a_0_1: committed step 3 on state 12 but held state 99" in failures


def test_the_step_checker_catches_two_worlds_committing_at_once():
    bad = {k: list(v) for k, v in GOOD.items()}
    bad["c_0_3"] = ["sync 3 12 2 0 1", "commit 3 12 23 0 1", "commit 4 23 24 0 1", "done 5 24 0 1"]
    failures, _ = chaos.check_steps(bad, 5)
    assert any("committed by 2 processes in a world of 1" in f for f in failures), failures


def test_the_step_checker_catches_ranks_that_end_in_different_states():
    bad = {k: list(v) for k, v in GOOD.items()}
    bad["b_0_2"].append("done 4 13 0 1")
    failures, _ = chaos.check_steps(bad, 5)
    assert any("ranks ended in different states" in f for f in failures), failures


def out_lines(pid, label, bodies):
    return [f"[{label}]<stdout>:p{pid}#{i} {b}" for i, b in enumerate(bodies)]


def copy_of(pid, bodies):
    return [f"p{pid}#{i} {b}" for i, b in enumerate(bodies)]


def test_the_output_checker_allows_only_a_killed_ranks_last_line_to_miss_its_copy():
    bodies = ["step 0 rank 0 size 2", "step 1 rank 0 size 2"]
    text = "\n".join(out_lines(7, 0, bodies) + out_lines(8, 1, bodies)) + "\n"
    copies = {7: copy_of(7, bodies), 8: copy_of(8, bodies[:1])}
    assert chaos.check_output(text, copies, unclean_pids={8}) == ([], 4)
    failures, _ = chaos.check_output(text, copies, unclean_pids=set())
    assert failures == ["pid 8: etrun printed 2 lines, its own copy has 1: "
                        "'p8#1 step 1 rank 0 size 2' is not in it"]


def test_the_output_checker_catches_lost_duplicated_and_untagged_lines():
    bodies = ["a", "b", "c"]
    lost = "\n".join(out_lines(7, 0, bodies)[:2]) + "\n"
    failures, _ = chaos.check_output(lost, {7: copy_of(7, bodies)}, set())
    assert failures == ["pid 7: 1 of its lines are missing from etrun's output or differ, "
                        "e.g. 'p7#2 c'"]
    doubled = out_lines(7, 0, bodies)
    doubled.insert(1, doubled[0])
    failures, _ = chaos.check_output("\n".join(doubled), {7: copy_of(7, bodies)}, set())
    assert any("duplicated [0]" in f for f in failures), failures
    failures, _ = chaos.check_output("[0]<stdout>:hello\n", {}, set())
    assert failures == ["untagged line in etrun's stdout: '[0]<stdout>:hello'"]


def test_the_flatness_check_catches_growing_rss_and_passes_flat_rss():
    flat = [(t, 10000 + (t % 3) * 100, 20, []) for t in range(30)]
    assert chaos.check_flat(flat, 0, 29, "rss", 0.2, 4096, 1)[0] == []
    growing = [(t, 10000 + t * 1000, 20, []) for t in range(30)]
    failures, figures = chaos.check_flat(growing, 0, 29, "rss", 0.2, 4096, 1)
    assert figures == (19000, 39000) and failures == [
        "rss grew: first third peak 19000, last third peak 39000"]


def test_the_zombie_check_catches_an_unreaped_child():
    samples = [(t * 0.5, 0, 0, [42] if t >= 2 else [43] if t == 1 else []) for t in range(12)]
    assert chaos.check_zombies(samples) == ["etrun left child 42 a zombie for over 3 s"]
