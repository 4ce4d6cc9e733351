#!/usr/bin/python3
"""Makes etrun's wheel from an installed tree (scripts/package.sh runs it after
`cmake --install --strip`), with nothing but Python's standard library and binutils' objdump.

    scripts/wheel.py TREE VERSION OUTDIR   ->  OUTDIR/etrun-VERSION-py3-none-manylinux_2_NN_ARCH.whl

TREE/bin's programs go to the wheel's scripts (pip puts them beside the environment's python),
TREE/share to its data (the environment's share/: discovery scripts, examples, man page,
completion), python/etrun/ (for `python -m etrun`) to site-packages. Each program must need no
shared library but glibc's; the platform tag says the newest glibc symbol version any of them
needs (objdump -T), so pip installs the wheel only where it will load. The zip's entries are
sorted and dated SOURCE_DATE_EPOCH (default 1980-01-01): the same tree makes the same wheel."""
import base64
import hashlib
import os
import platform
import re
import subprocess
import sys
import time
import zipfile

SOURCE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = os.path.join(SOURCE, "python", "etrun")
# glibc's own libraries: what manylinux lets a wheel take from the system, less libstdc++, libgcc_s
# and the X11/GL ones, which etrun links statically or does not use.
GLIBC_LIBRARIES = {"libc.so.6", "libm.so.6", "libpthread.so.0", "libdl.so.2", "librt.so.1",
                   "libutil.so.1", "libresolv.so.2", "ld-linux-x86-64.so.2",
                   "ld-linux-aarch64.so.1"}
SUMMARY = "horovodrun-compatible launcher for distributed training"
DESCRIPTION = """\
etrun starts, watches and resizes distributed training jobs: the flags, worker environment,
rendezvous protocol and elastic notifications of Horovod's horovodrun in a native binary, with
remote ranks over SSH, through a command (kubectl exec) or in Slurm allocations, Open MPI's
mpirun mode, a shared GPU pool and etrun-smoke, an allreduce smoke test.

    pip install etrun
    etrun -np 2 python train.py
    python -m etrun -np 4 -H node1:2,node2:2 python train.py

The programs need only glibc; the wheel's platform tag names the oldest glibc they load with.
"""


def fail(message):
    print(f"wheel.py: error: {message}", file=sys.stderr)
    sys.exit(1)


def is_elf(path):
    with open(path, "rb") as f:
        return f.read(4) == b"\x7fELF"


def glibc_needs(path):
    """(newest GLIBC_ version the program's dynamic symbols need, or None; its NEEDED libraries)."""
    r = subprocess.run(["objdump", "-T", "-p", path], capture_output=True, text=True)
    if r.returncode != 0:
        if "not a dynamic object" in r.stderr or "no dynamic symbol" in r.stderr.lower():
            return None, []  # a static program (etrun-agent) needs nothing at all
        fail(f"objdump -T -p {path}: {r.stderr.strip()}")
    needed = re.findall(r"^\s+NEEDED\s+(\S+)", r.stdout, re.M)
    versions = {tuple(int(p) for p in v.split(".")) for v in re.findall(r"\bGLIBC_(\d+\.\d+(?:\.\d+)?)\b", r.stdout)}
    return (max(versions) if versions else None), needed


def record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def main():
    if len(sys.argv) != 4:
        fail("usage: scripts/wheel.py TREE VERSION OUTDIR (TREE: what `cmake --install --prefix TREE` made)")
    tree, version, outdir = sys.argv[1:]
    bindir = os.path.join(tree, "bin")
    if not os.path.isfile(os.path.join(bindir, "etrun")):
        fail(f"{bindir}/etrun does not exist: run `cmake --install BUILD --prefix {tree}` first")

    entries = []  # (name in the wheel, path on disk, executable)
    data = f"etrun-{version}.data"
    newest = None
    for name in sorted(os.listdir(bindir)):
        path = os.path.join(bindir, name)
        if is_elf(path):
            needs, libraries = glibc_needs(path)
            foreign = sorted(set(libraries) - GLIBC_LIBRARIES)
            if foreign:
                fail(f"{path} needs {', '.join(foreign)}, which a wheel cannot count on: build it "
                     f"with -DETRUN_STATIC_LIBS=ON (and etrun-smoke without NCCL: etrun-smoke-tcp)")
            if needs and (newest is None or needs > newest):
                newest = needs
        entries.append((f"{data}/scripts/{name}", path, True))
    for root, dirs, files in os.walk(os.path.join(tree, "share")):
        dirs.sort()
        for name in sorted(files):
            path = os.path.join(root, name)
            relative = os.path.relpath(path, tree)
            entries.append((f"{data}/data/{relative}", path, os.access(path, os.X_OK)))
    for name in sorted(os.listdir(PACKAGE)):
        if name.endswith(".py"):
            entries.append((f"etrun/{name}", os.path.join(PACKAGE, name), False))
    if newest is None:
        fail(f"no program in {bindir} links glibc dynamically: cannot tell which glibc it needs")

    machine = platform.machine()
    tag = f"py3-none-manylinux_{newest[0]}_{newest[1]}_{machine}"
    info = f"etrun-{version}.dist-info"
    metadata = (f"Metadata-Version: 2.1\nName: etrun\nVersion: {version}\nSummary: {SUMMARY}\n"
                f"Requires-Python: >=3.8\nDescription-Content-Type: text/markdown\n\n{DESCRIPTION}")
    wheel = (f"Wheel-Version: 1.0\nGenerator: etrun scripts/wheel.py\nRoot-Is-Purelib: false\n"
             f"Tag: {tag}\n")

    epoch = int(os.environ.get("SOURCE_DATE_EPOCH", "315532800"))
    stamp = time.gmtime(max(epoch, 315532800))[:6]
    os.makedirs(outdir, exist_ok=True)
    target = os.path.join(outdir, f"etrun-{version}-{tag}.whl")
    partial = target + ".partial"
    records = []
    with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as z:
        def add(name, content, executable):
            item = zipfile.ZipInfo(name, date_time=stamp)
            item.compress_type = zipfile.ZIP_DEFLATED
            # pip keeps the executable bit of an entry whose mode has one (scripts, discovery).
            item.external_attr = ((0o755 if executable else 0o644) | 0o100000) << 16
            z.writestr(item, content)
            records.append(record_line(name, content))

        for name, path, executable in entries:
            with open(path, "rb") as f:
                add(name, f.read(), executable)
        add(f"{info}/METADATA", metadata.encode(), False)
        add(f"{info}/WHEEL", wheel.encode(), False)
        add(f"{info}/top_level.txt", b"etrun\n", False)
        records.append(f"{info}/RECORD,,")
        item = zipfile.ZipInfo(f"{info}/RECORD", date_time=stamp)
        item.compress_type = zipfile.ZIP_DEFLATED
        item.external_attr = 0o100644 << 16
        z.writestr(item, "\n".join(records) + "\n")
    os.replace(partial, target)
    print(target)


if __name__ == "__main__":
    main()
