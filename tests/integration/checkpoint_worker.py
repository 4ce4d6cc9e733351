"""A training rank that checkpoints and resumes, for the preemption tests (stdlib only).

    checkpoint_worker.py --steps N --dir DIR [--step-seconds S]

Each rank (HOROVOD_RANK) keeps its own checkpoint, DIR/rank<R>.ckpt: the next step to run,
replaced atomically after every step. It starts from its checkpoint (none: step 0) and prints,
flushed, one line each:
    resume <k> rank <r>       first, k the step it starts from
    step <k> rank <r>         step k done and checkpointed
    drained <k> rank <r>      SIGTERM came: the step under way was finished and checkpointed,
                              k is the next step; then exit 0
    done <n> rank <r>         every step done; exit 0
It also writes its pid to DIR/pid.<restart>.<r> (restart: SLURM_RESTART_COUNT, else 0).
"""
import argparse
import os
import signal
import sys
import time

RANK = int(os.environ.get("HOROVOD_RANK", "-1"))


def say(text):
    sys.stdout.write(f"{text} rank {RANK}\n")
    sys.stdout.flush()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--dir", required=True)
    parser.add_argument("--step-seconds", type=float, default=0.1)
    args = parser.parse_args()
    terminated = []
    signal.signal(signal.SIGTERM, lambda sig, frame: terminated.append(sig))
    restart = os.environ.get("SLURM_RESTART_COUNT", "0")
    with open(os.path.join(args.dir, f"pid.{restart}.{RANK}"), "w") as f:
        f.write(f"{os.getpid()}\n")
    checkpoint = os.path.join(args.dir, f"rank{RANK}.ckpt")
    try:
        with open(checkpoint) as f:
            step = int(f.read())
    except FileNotFoundError:
        step = 0
    say(f"resume {step}")
    while step < args.steps:
        time.sleep(args.step_seconds)
        with open(checkpoint + ".tmp", "w") as f:
            f.write(f"{step + 1}\n")
        os.replace(checkpoint + ".tmp", checkpoint)
        say(f"step {step}")
        step += 1
        if terminated:
            say(f"drained {step}")
            # Saved: later SIGTERMs (Slurm's and etrun's drain may both come) change nothing.
            # Without this, one arriving while the interpreter exits kills the rank by the
            # signal: Python restores the default action of the signals it handled then.
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            return 0
    say(f"done {args.steps}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
