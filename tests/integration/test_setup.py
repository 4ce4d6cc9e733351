"""scripts/deps.sh's ensure_packages when another apt or dpkg holds the package locks: it says so
in one line and waits (at most ETRUN_APT_LOCK_TIMEOUT seconds) before it runs apt-get, instead
of failing at once with apt's "Could not get lock". The real dpkg is never touched: the lock is
a file of the test's (ETRUN_APT_LOCKS) held with flock(1), and apt-get and dpkg-query are fakes
first on PATH; the fake apt-get records when it ran, its arguments, and whether the lock was
free then."""
import os
import shutil
import subprocess
import time

import pytest

from conftest import ROOT

DEPS = os.path.join(ROOT, "scripts", "deps.sh")

pytestmark = pytest.mark.skipif(shutil.which("flock") is None, reason="needs flock (util-linux)")


def fakes(tmp_path):
    """A bin folder with a dpkg-query that reports nothing installed and an apt-get that logs
    each call: its arguments and whether it could take the lock at once (flock -n)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "dpkg-query").write_text("#!/bin/sh\nexit 1\n")
    (bin_dir / "apt-get").write_text(
        "#!/bin/sh\n"
        'if flock -n "$ETRUN_APT_LOCKS" true; then free=free; else free=held; fi\n'
        'echo "$free $*" >> "$APT_LOG"\n')
    for f in bin_dir.iterdir():
        f.chmod(0o755)
    return bin_dir


def ensure(tmp_path, timeout):
    lock = tmp_path / "lock-frontend"
    lock.touch()
    env = dict(os.environ, PATH=f"{fakes(tmp_path)}:/usr/bin:/bin", ETRUN_APT_LOCKS=str(lock),
               ETRUN_APT_LOCK_TIMEOUT=str(timeout), APT_LOG=str(tmp_path / "apt.log"))
    script = f"source {DEPS}; ensure_packages etrun-no-such-package"
    return lock, env, ["bash", "-c", script]


def apt_calls(tmp_path):
    log = tmp_path / "apt.log"
    return log.read_text().splitlines() if log.exists() else []


def test_a_held_lock_is_waited_for_with_one_line_then_apt_runs(tmp_path):
    lock, env, argv = ensure(tmp_path, timeout=30)
    holder = subprocess.Popen(["flock", str(lock), "sleep", "2"])
    try:
        time.sleep(0.3)  # the holder has the lock
        started = time.monotonic()
        r = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
        took = time.monotonic() - started
    finally:
        holder.wait()
    assert r.returncode == 0, r.stderr
    waiting = [l for l in r.stderr.splitlines() if "waiting" in l]
    assert waiting == [f"etrun: another apt or dpkg is running ({lock} is held by pid "
                       f"{holder.pid}): waiting for it, at most 30 s (ETRUN_APT_LOCK_TIMEOUT)"]
    assert took >= 1.0
    calls = apt_calls(tmp_path)
    assert [c.split()[0] for c in calls] == ["free", "free"]  # apt ran only once it was free
    assert all("-o DPkg::Lock::Timeout=30" in c for c in calls)
    assert "update" in calls[0] and "install" in calls[1]


def test_a_lock_held_past_the_bound_fails_with_one_line_and_apt_never_runs(tmp_path):
    lock, env, argv = ensure(tmp_path, timeout=1)
    holder = subprocess.Popen(["flock", str(lock), "sleep", "30"])
    try:
        time.sleep(0.3)
        r = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    finally:
        holder.kill()
        holder.wait()
    assert r.returncode != 0
    errors = [l for l in r.stderr.splitlines() if l.startswith("etrun: error:")]
    assert errors == [f"etrun: error: another apt or dpkg still holds the package lock ({lock}, "
                      f"pid {holder.pid}) after 1 s: let it finish (or stop it), then run this "
                      f"again"]
    assert apt_calls(tmp_path) == []


def test_free_locks_mean_no_wait_and_no_line(tmp_path):
    _, env, argv = ensure(tmp_path, timeout=30)
    r = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "waiting" not in r.stderr
    assert [c.split()[0] for c in apt_calls(tmp_path)] == ["free", "free"]
