"""scripts/package.sh makes a Debian package of the build under test; installed with dpkg -i on
this machine it runs etrun -cb and a static job from /usr/bin, and dpkg -r removes it again.
Needs root and no etrun package installed already (it is never replaced)."""
import os
import re
import shutil
import subprocess

import pytest

from conftest import ETRUN

BUILD = os.path.dirname(os.path.abspath(ETRUN))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def installed():
    r = subprocess.run(["dpkg-query", "-W", "-f", "${Status}", "etrun"], capture_output=True)
    return b"install ok installed" in r.stdout


pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="dpkg -i needs root"),
    pytest.mark.skipif(shutil.which("dpkg") is None or shutil.which("cpack") is None,
                       reason="needs dpkg and CPack"),
    pytest.mark.skipif(not os.path.exists(os.path.join(BUILD, "CMakeCache.txt")),
                       reason="needs the CMake build directory of the etrun under test"),
]


def test_the_debian_package_installs_runs_and_removes_cleanly(tmp_path):
    if installed():
        pytest.skip("an etrun package is installed on this machine; not replacing it")
    r = subprocess.run([os.path.join(ROOT, "scripts/package.sh")], capture_output=True,
                       timeout=600, env=dict(os.environ, ETRUN_BUILD_DIR=BUILD))
    assert r.returncode == 0, r.stderr
    debs = [line for line in r.stdout.decode().splitlines() if line.endswith(".deb")]
    assert len(debs) == 1, r.stdout
    deb = debs[0]
    info = subprocess.run(["dpkg-deb", "-f", deb, "Package", "Version", "Depends"],
                          capture_output=True, check=True).stdout.decode()
    assert "Package: etrun" in info and "Version: 0.1.0" in info
    # etrun links every library but glibc's statically (issue 37): libc6 is all it needs.
    depends = info.split("Depends:", 1)[1].strip()
    assert re.fullmatch(r"libc6 \(>= 2\.\d+\)", depends), info
    r = subprocess.run(["dpkg", "-i", deb], capture_output=True, timeout=120)
    try:
        assert r.returncode == 0, r.stderr
        assert installed()
        r = subprocess.run(["/usr/bin/etrun", "-cb"], capture_output=True, timeout=60, cwd=tmp_path)
        assert r.returncode == 0 and b"Available Launch Modes" in r.stdout
        r = subprocess.run(["/usr/bin/etrun", "-np", "2", "sh", "-c", "echo rank $HOROVOD_RANK"],
                           capture_output=True, timeout=60, cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        assert sorted(r.stdout.decode().splitlines()) == ["[0]<stdout>:rank 0", "[1]<stdout>:rank 1"]
        assert os.path.exists("/usr/share/man/man1/etrun.1") or shutil.which("help2man") is None
        assert os.path.exists("/usr/share/etrun/discovery/hostfile.sh")
    finally:
        removed = subprocess.run(["dpkg", "-r", "etrun"], capture_output=True, timeout=120)
    assert removed.returncode == 0, removed.stderr
    assert not installed() and not os.path.exists("/usr/bin/etrun")
