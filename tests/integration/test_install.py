"""`cmake --install` of the build under test into a throwaway prefix: the installed tree runs on
its own (static, elastic with an installed discovery script, -cb), refers to neither the source
nor the build directory, and brings a man page and a bash completion."""
import os
import shutil
import subprocess

import pytest

from conftest import ETRUN

BUILD = os.path.dirname(os.path.abspath(ETRUN))
SOURCE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

pytestmark = pytest.mark.skipif(
    not os.path.exists(os.path.join(BUILD, "CMakeCache.txt")) or shutil.which("cmake") is None,
    reason="needs the CMake build directory of the etrun under test")


@pytest.fixture(scope="module")
def prefix(tmp_path_factory):
    root = tmp_path_factory.mktemp("install")
    r = subprocess.run(["cmake", "--install", BUILD, "--prefix", str(root / "usr")],
                       capture_output=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    # Run it from elsewhere: a copy of the tree, as a package would put it on another machine.
    moved = root / "elsewhere"
    shutil.copytree(root / "usr", moved, symlinks=True)
    shutil.rmtree(root / "usr")
    return moved


def run(prefix, args, cwd, **kwargs):
    env = {"PATH": f"{prefix}/bin:/usr/bin:/bin", "HOME": str(cwd)}
    return subprocess.run(args, capture_output=True, timeout=120, cwd=cwd, env=env, **kwargs)


def test_the_installed_tree_has_binaries_scripts_man_page_and_completion(prefix):
    for path in ["bin/etrun", "bin/etrun-smoke", "share/etrun/discovery/hostfile.sh",
                 "share/etrun/discovery/slurm.sh", "share/etrun/discovery/kubernetes.sh",
                 "share/etrun/discovery/local_gpus.sh", "share/etrun/examples/elastic_demo.sh",
                 "share/etrun/examples/torch_elastic.py", "share/bash-completion/completions/etrun"]:
        assert os.path.exists(prefix / path), path
    for script in ["bin/etrun", "share/etrun/discovery/hostfile.sh", "share/etrun/examples/elastic_demo.sh"]:
        assert os.access(prefix / script, os.X_OK), script
    if shutil.which("help2man"):
        page = (prefix / "share/man/man1/etrun.1").read_text()
        assert page.startswith('.\\" DO NOT MODIFY') and '.TH ETRUN "1"' in page
        assert "\\-\\-host\\-discovery\\-script" in page


def test_nothing_installed_refers_to_the_source_or_build_tree(prefix):
    needles = [SOURCE.encode(), BUILD.encode()]
    for root, _, files in os.walk(prefix):
        for name in files:
            data = open(os.path.join(root, name), "rb").read()
            for needle in needles:
                assert needle not in data, (name, needle)


def test_the_installed_etrun_runs_static_elastic_and_check_build_jobs(prefix, tmp_path):
    etrun = str(prefix / "bin/etrun")
    r = run(prefix, [etrun, "-np", "2", "sh", "-c", 'echo rank $HOROVOD_RANK'], tmp_path)
    assert r.returncode == 0, r.stderr
    assert sorted(r.stdout.decode().splitlines()) == ["[0]<stdout>:rank 0", "[1]<stdout>:rank 1"]
    hosts = tmp_path / "hosts.txt"
    hosts.write_text("localhost slots=2\n")
    script = f"{prefix}/share/etrun/discovery/hostfile.sh {hosts}"
    r = run(prefix, [etrun, "-np", "2", "--min-np", "1", "--host-discovery-script", script,
                     "--elastic-mode", "restart", "sh", "-c", 'echo size $HOROVOD_SIZE'], tmp_path)
    assert r.returncode == 0, r.stderr
    assert sorted(r.stdout.decode().splitlines()) == ["[0]<stdout>:size 2", "[1]<stdout>:size 2"]
    r = run(prefix, [etrun, "-cb"], tmp_path)
    assert r.returncode == 0 and b"Available Launch Modes" in r.stdout
    r = run(prefix, [str(prefix / "bin/etrun-smoke"), "--help"], tmp_path)
    assert r.returncode == 0, r.stderr


def test_the_bash_completion_completes_verbs_flags_and_job_names(prefix, tmp_path):
    completion = prefix / "share/bash-completion/completions/etrun"

    def complete(*words):
        line = " ".join(words)
        script = (f"source {completion}; COMP_WORDS=({line}); COMP_CWORD={len(words) - 1}; "
                  f"_etrun; printf '%s\\n' \"${{COMPREPLY[@]}}\"")
        r = run(prefix, ["bash", "-c", script], tmp_path)
        assert r.returncode == 0, r.stderr
        return r.stdout.decode().split()

    assert complete("etrun", "st") == ["status"]
    assert complete("etrun", "sc") == ["scale"]
    assert complete("etrun", "du") == ["dump"]
    assert complete("etrun", "po") == ["pool"]
    assert complete("etrun", "pool", "pr") == ["priority"]
    assert "--min-hold" in complete("etrun", "pool", "start", "--min")
    assert "--priority" in complete("etrun", "--pri")
    assert "--host-discovery-script" in complete("etrun", "--host-d")
    assert "--recovery-grace" in complete("etrun", "-np", "2", "--rec")
    assert "--add" in complete("etrun", "scale", "--a")
