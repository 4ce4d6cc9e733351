"""Benchmark rank: writes SIZE bytes of 66-byte lines ("r<rank> <seq> xxx...\n") to stdout."""
import os
import sys

rank = int(os.environ.get("HOROVOD_RANK", os.environ.get("OMPI_COMM_WORLD_RANK", "0")))
size = int(sys.argv[1]) if len(sys.argv) > 1 else 20 << 20
lines = []
for i in range(size // 66):
    head = b"r%d %d " % (rank, i)
    lines.append(head + b"x" * (65 - len(head)) + b"\n")
block = b"".join(lines)
out = sys.stdout.buffer.raw
view = memoryview(block)
for start in range(0, len(block), 1 << 16):
    out.write(view[start:start + (1 << 16)])
