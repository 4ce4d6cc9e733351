"""The wheel (issue 37): scripts/package.sh makes it from the build under test; pip installs it
with --no-index into a fresh venv (with Debian's site packages, so that torch is there), and from
the venv alone etrun, `python -m etrun`, etrun-smoke and an SSH job on two bed hosts run; the
programs need only glibc, the wheel's tag names the glibc they need, and `pip uninstall` takes
back every file it put there."""
import hashlib
import os
import re
import shutil
import subprocess
import sys
import zipfile

import pytest

from conftest import ETRUN
from testbed import bed_fixture

BUILD = os.path.dirname(os.path.abspath(ETRUN))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PYTHON = "/usr/bin/python3"
# glibc's own libraries (and the kernel's vDSO), the only ones the wheel's programs may load.
GLIBC = {"linux-vdso.so.1", "libc.so.6", "libm.so.6", "libpthread.so.0", "libdl.so.2",
         "librt.so.1", "ld-linux-x86-64.so.2", "/lib64/ld-linux-x86-64.so.2"}


def cache_value(name):
    try:
        with open(os.path.join(BUILD, "CMakeCache.txt")) as f:
            for line in f:
                if line.startswith(name + ":"):
                    return line.split("=", 1)[1].strip()
    except OSError:
        return None
    return ""


def venv_works():
    r = subprocess.run([PYTHON, "-c", "import ensurepip, venv"], capture_output=True)
    return r.returncode == 0


pytestmark = [
    pytest.mark.skipif(cache_value("CMAKE_PROJECT_VERSION") is None,
                       reason="needs the CMake build directory of the etrun under test"),
    pytest.mark.skipif(bool(cache_value("ETRUN_SANITIZE")),
                       reason="a sanitizer build links shared libraries by design: the wheel is "
                              "made from the release build, and tested there"),
    pytest.mark.skipif(not venv_works(), reason="needs Debian's python3-venv (scripts/test.sh "
                                                "installs it)"),
]

bed = bed_fixture(hosts=2)


@pytest.fixture(scope="module")
def wheel():
    r = subprocess.run([os.path.join(ROOT, "scripts/package.sh")], capture_output=True, text=True,
                       timeout=600, env=dict(os.environ, ETRUN_BUILD_DIR=BUILD))
    assert r.returncode == 0, r.stderr
    made = [line for line in r.stdout.splitlines() if line.endswith(".whl")]
    assert len(made) == 1, r.stdout
    assert os.path.dirname(os.path.abspath(made[0])) == BUILD
    return made[0]


def tree(path):
    found = set()
    for root, dirs, files in os.walk(path):
        found.update(os.path.join(root, name) for name in dirs + files)
    return found


@pytest.fixture(scope="module")
def venv(wheel, tmp_path_factory):
    """A fresh venv with the wheel installed: (its folder, the files it had before)."""
    where = tmp_path_factory.mktemp("wheel") / "venv"
    subprocess.run([PYTHON, "-m", "venv", "--system-site-packages", str(where)], check=True,
                   timeout=120)
    before = tree(where)
    r = subprocess.run([str(where / "bin/python"), "-m", "pip", "install", "--no-index",
                        "--no-deps", "--disable-pip-version-check", wheel],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    return where, before


def venv_env(where, home, base=None):
    """Only the venv, the system's own tools and nothing of the build or source tree."""
    env = {k: v for k, v in (base or os.environ).items()
           if not k.startswith(("ETRUN_", "PYTHON", "VIRTUAL_ENV"))}
    env.update(PATH=f"{where}/bin:/usr/bin:/bin", HOME=str(home), VIRTUAL_ENV=str(where))
    return env


def run(where, args, home, timeout=120, **kwargs):
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout, cwd=home,
                          env=venv_env(where, home), stdin=subprocess.DEVNULL, **kwargs)


def newest_glibc(program):
    out = subprocess.run(["objdump", "-T", program], capture_output=True, text=True,
                         check=True).stdout
    return max(tuple(int(p) for p in v.split(".")) for v in re.findall(r"\bGLIBC_([\d.]+)\)", out))


def test_the_wheel_is_named_and_tagged_for_the_glibc_its_programs_need(wheel, venv):
    where, _ = venv
    need = max(newest_glibc(str(where / "bin" / name)) for name in ("etrun", "etrun-smoke"))
    tag = f"py3-none-manylinux_{need[0]}_{need[1]}_x86_64"
    assert os.path.basename(wheel) == f"etrun-{cache_value('CMAKE_PROJECT_VERSION')}-{tag}.whl"
    with zipfile.ZipFile(wheel) as z:
        info = [n for n in z.namelist() if n.endswith(".dist-info/WHEEL")]
        assert len(info) == 1
        assert f"Tag: {tag}\n" in z.read(info[0]).decode()
        assert "Root-Is-Purelib: false\n" in z.read(info[0]).decode()
    # The tag is what pip on this machine accepts: installed with --no-index, no other wheel.
    r = subprocess.run([str(where / "bin/python"), "-m", "pip", "show", "-f", "etrun"],
                       capture_output=True, text=True, check=True)
    assert "Version: " + cache_value("CMAKE_PROJECT_VERSION") in r.stdout


def test_its_programs_load_only_glibc_and_nothing_refers_to_the_build(venv):
    where, _ = venv
    for name in ("etrun", "etrun-smoke"):
        r = subprocess.run(["ldd", str(where / "bin" / name)], capture_output=True, text=True,
                           check=True)
        loaded = {line.split()[0] for line in r.stdout.splitlines() if line.strip()}
        assert loaded <= GLIBC, (name, r.stdout)
    r = subprocess.run(["ldd", str(where / "bin/etrun-agent")], capture_output=True, text=True)
    assert "not a dynamic executable" in r.stdout + r.stderr
    needles = [ROOT.encode(), BUILD.encode()]
    for path in tree(where):  # pip's own record of where the wheel came from aside
        if "etrun" in path and os.path.isfile(path) and not path.endswith(".pyc") \
                and ".dist-info" not in path:
            data = open(path, "rb").read()
            assert not any(n in data for n in needles), path


def test_etrun_and_python_m_etrun_run_jobs_from_the_venv_alone(venv, tmp_path):
    where, _ = venv
    assert shutil.which("etrun", path=venv_env(where, tmp_path)["PATH"]) == str(where / "bin/etrun")
    r = run(where, ["etrun", "--version"], tmp_path)
    assert r.returncode == 0 and r.stdout.startswith(
        f"etrun {cache_value('CMAKE_PROJECT_VERSION')}\n"), r.stdout + r.stderr
    r = run(where, ["python", "-m", "etrun", "-np", "2", "sh", "-c",
                    "echo rank $HOROVOD_RANK of $HOROVOD_SIZE"], tmp_path)
    assert r.returncode == 0, r.stderr
    assert sorted(r.stdout.splitlines()) == ["[0]<stdout>:rank 0 of 2", "[1]<stdout>:rank 1 of 2"]
    r = run(where, ["python", "-m", "etrun", "-np", "0", "true"], tmp_path)
    assert r.returncode == 2 and r.stderr.startswith("etrun: error: "), r.stderr  # its own code
    r = run(where, ["python", "-c", "import etrun; print(etrun.binary('etrun-smoke'))"], tmp_path)
    assert r.stdout.strip() == str(where / "bin/etrun-smoke"), r.stderr


def test_a_torch_job_runs_with_the_installed_example(venv, tmp_path):
    where, _ = venv
    example = where / "share/etrun/examples/torch_allreduce.py"
    r = run(where, ["etrun", "-np", "2", "python", str(example)], tmp_path, timeout=180)
    assert r.returncode == 0, r.stderr
    got = sorted(re.sub(r" on \S+:", ":", line) for line in r.stdout.splitlines())
    assert got == ["[0]<stdout>:rank 0/2: allreduce sum = 3 (expected 3)",
                   "[1]<stdout>:rank 1/2: allreduce sum = 3 (expected 3)"], r.stdout


def test_the_installed_discovery_script_and_etrun_smoke_work(venv, tmp_path):
    where, _ = venv
    hosts = tmp_path / "hosts.txt"
    hosts.write_text("localhost slots=2\n")
    script = f"{where}/share/etrun/discovery/hostfile.sh {hosts}"
    r = run(where, ["etrun", "-np", "2", "--min-np", "1", "--host-discovery-script", script,
                    "etrun-smoke", "-b", "8", "-e", "64K", "-n", "2", "-w", "1",
                    "--backend", "tcp"], tmp_path)
    assert r.returncode == 0, r.stderr
    lines = [line.split(":", 1)[1] for line in r.stdout.splitlines() if line.startswith("[0]")]
    assert lines[0].endswith(": allreduce (sum, float32) over 2 ranks, backend tcp"), lines
    assert lines[-1] == "# Wrong elements       : 0 (OK)", lines


def test_an_ssh_job_on_two_bed_hosts_runs_from_the_venv(venv, bed, tmp_path):
    """Once with the installed etrun-agent beside etrun (the bed's hosts share this file system:
    they run that one), once with it gone and h2's agent cache (root's ~/.cache, as h2 logs in)
    hidden behind an empty folder: the installed etrun then brings h2 the copy it carries."""
    where, _ = venv
    env = venv_env(where, bed.home, bed.env())
    env["PATH"] = f"{where}/bin:" + env["PATH"]  # the bed's ssh wrapper stays on PATH after it
    key = os.path.join(bed.home, ".ssh", "id_ed25519")

    def job():
        argv = ["etrun", "-np", "2", "-H", "h1:1,h2:1", "-i", key, "--log-level", "DEBUG", "sh",
                "-c", "echo rank $HOROVOD_RANK on $(hostname)"]
        r = subprocess.run(bed.exec_argv(argv), capture_output=True, text=True, timeout=120,
                           env=env, cwd=tmp_path, stdin=subprocess.DEVNULL)
        assert r.returncode == 0, r.stderr
        assert sorted(r.stdout.splitlines()) == ["[0]<stdout>:rank 0 on h1",
                                                 "[1]<stdout>:rank 1 on h2"]
        return re.findall(r"(h\d): no usable etrun there; sending this one", r.stderr)

    assert job() == []
    agent = where / "bin/etrun-agent"
    with open(agent, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    empty = tmp_path / "h2-cache"
    empty.mkdir()
    home_cache = os.path.expanduser("~/.cache")
    os.makedirs(home_cache, exist_ok=True)
    r = bed.run_host("h2", ["mount", "--bind", str(empty), home_cache])
    assert r.returncode == 0, r.stderr
    os.rename(agent, tmp_path / "agent")
    try:
        sent = job()
    finally:
        os.rename(tmp_path / "agent", agent)
        bed.run_host("h2", ["umount", home_cache])
    assert "h2" in sent
    # What h2 was sent, and kept, is the installed agent.
    assert os.listdir(empty / "etrun" / "agent") == [digest]


def test_pip_uninstall_takes_back_every_file_it_installed(venv):
    """Last in the module: the other tests use the installation."""
    where, before = venv
    r = subprocess.run([str(where / "bin/python"), "-m", "pip", "uninstall", "-y", "etrun"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    left = sorted(tree(where) - before)
    # pip leaves the shared folders it made for the man page and the completion (share/man,
    # share/bash-completion) empty, as it does for every wheel that brings such files; nothing of
    # etrun's own is left, not even an empty folder.
    assert [p for p in left if "etrun" in os.path.relpath(p, where) or os.path.isfile(p)] == []
    assert all(os.path.isdir(p) and not any(files for _, _, files in os.walk(p)) for p in left), left
    assert {os.path.relpath(p, where) for p in left} <= {"share", "share/man", "share/bash-completion"}
