"""A worker for the hang watchdog's tests (test_hang.py), without Horovod: every rank prints
"started rank <r>", then rank --stuck-rank waits in load_batch() and the others in
wait_in_collective(), both for ever, as a job whose one rank never reaches the collective.
--once DIR: only each rank's first run hangs (it creates DIR/rank<r>); a later run prints
"done rank <r>" and exits 0, as a job that a restart gets going again."""
import argparse
import os
import sys
import time


def wait_in_collective():
    while True:
        time.sleep(3600)


def load_batch():
    while True:
        time.sleep(3600)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--stuck-rank", type=int, default=0)
    parser.add_argument("--once")
    args = parser.parse_args()
    rank = int(os.environ["HOROVOD_RANK"])
    mark = os.path.join(args.once, f"rank{rank}") if args.once else None
    if mark and os.path.exists(mark):
        print(f"done rank {rank}", flush=True)
        return 0
    print(f"started rank {rank}", flush=True)
    if mark:
        open(mark, "w").close()
    if rank == args.stuck_rank:
        load_batch()
    wait_in_collective()


if __name__ == "__main__":
    sys.exit(main())
