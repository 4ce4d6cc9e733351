"""A configurable stand-in rank for etrun's integration tests (stdlib only).

    worker.py env                 print this rank's launch environment as one JSON line
    worker.py exit RANK CODE      rank RANK exits with CODE, the others wait to be stopped
    worker.py spam N              print N numbered lines on stdout and stderr, mixed writes
    worker.py sleep [CHILDREN]    start CHILDREN grandchildren that sleep, print "ready", sleep
    worker.py ignore-term         ignore SIGTERM, print "ready", sleep
    worker.py usr1                print "got SIGUSR1" when it arrives, then exit 0
"""
import json
import os
import signal
import subprocess
import sys
import time

RANK = int(os.environ.get("HOROVOD_RANK", "-1"))


def out(text):
    sys.stdout.write(text)
    sys.stdout.flush()


def main():
    mode = sys.argv[1]
    if mode == "env":
        keys = [k for k in os.environ if k.startswith(("HOROVOD_", "NCCL_", "GLOO_"))] + [
            "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR",
            "MASTER_PORT", "PYTHONUNBUFFERED", "CUDA_VISIBLE_DEVICES"]
        out(json.dumps({k: os.environ.get(k) for k in keys} | {"cwd": os.getcwd(),
                        "argv": sys.argv[2:]}) + "\n")
    elif mode == "exit":
        if RANK == int(sys.argv[2]):
            time.sleep(0.2)
            sys.exit(int(sys.argv[3]))
        out("waiting\n")
        time.sleep(600)
    elif mode == "spam":
        n = int(sys.argv[2])
        for i in range(n):
            # Lines built from several writes, so a launcher that forwards write() calls as they
            # come would split them.
            os.write(1, b"rank%d " % RANK)
            os.write(1, b"line %d " % i + b"x" * (i % 50) + b"\n")
            if i % 7 == 0:
                os.write(2, b"err rank%d line %d\n" % (RANK, i))
        os.write(1, b"progress 1\rprogress 2\r")
        os.write(1, b"bad utf8 \xff\xfe\xc3( end\n")
        os.write(1, b"no newline at the end from rank%d" % RANK)
    elif mode == "sleep":
        for _ in range(int(sys.argv[2]) if len(sys.argv) > 2 else 0):
            subprocess.Popen(["sleep", "600"])
        out("ready\n")
        time.sleep(600)
    elif mode == "ignore-term":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        out("ready\n")
        time.sleep(600)
    elif mode == "usr1":
        got = []
        signal.signal(signal.SIGUSR1, lambda *_: got.append(1))
        out("ready\n")
        deadline = time.monotonic() + 60
        while not got and time.monotonic() < deadline:
            time.sleep(0.01)
        out("got SIGUSR1\n" if got else "no signal\n")
    else:
        sys.exit("unknown mode " + mode)


if __name__ == "__main__":
    main()
