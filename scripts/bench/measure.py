"""Runs a launcher command with stdout to a file; reports wall time and the launcher's own peak
RSS (VmHWM of that one process, sampled until it exits: its children are not counted), then
checks that every rank's every line arrived exactly once.

usage: measure.py NAME OUTFILE NP LINES_PER_RANK PREFIX_REGEX -- COMMAND...
"""
import re
import subprocess
import sys
import time


def main():
    name, outfile, np, per_rank, prefix = sys.argv[1:6]
    cmd = sys.argv[sys.argv.index("--") + 1:]
    np, per_rank = int(np), int(per_rank)
    with open(outfile, "wb") as out:
        start = time.monotonic()
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.DEVNULL)
        peak_kb = 0
        while proc.poll() is None:
            try:
                with open(f"/proc/{proc.pid}/status") as f:
                    for line in f:
                        if line.startswith("VmHWM:"):
                            peak_kb = max(peak_kb, int(line.split()[1]))
            except OSError:
                pass
            time.sleep(0.01)
        wall = time.monotonic() - start
    counts = [0] * np
    bad = 0
    pattern = re.compile(prefix.encode() + rb"r(\d+) (\d+) x+$")
    expected_next = [0] * np
    with open(outfile, "rb") as f:
        for line in f:
            m = pattern.match(line.rstrip(b"\n"))
            if not m or len(line) < 66:
                bad += 1
                continue
            rank, seq = int(m.group(1)), int(m.group(2))
            if seq != expected_next[rank]:
                bad += 1
            expected_next[rank] = seq + 1
            counts[rank] += 1
    ok = proc.returncode == 0 and bad == 0 and all(c == per_rank for c in counts)
    print(f"{name}: {wall:.2f} s, launcher peak RSS {peak_kb / 1024:.1f} MB, "
          f"lines {sum(counts)}/{np * per_rank}, bad {bad}, rc {proc.returncode}"
          + ("" if ok else "  <-- OUTPUT CHECK FAILED"))
    print(f"RESULT {name} {wall:.4f} {peak_kb}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
