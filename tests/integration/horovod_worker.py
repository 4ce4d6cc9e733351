"""A real Horovod 0.28.1 elastic worker (PyTorch, Gloo), for the real-Horovod tests: what a user's
training script does, printing what elastic_standin.py prints so the same checks read both.

    horovod_worker.py --steps N [--step-seconds S] [--static]

Elastic (default): `hvd.elastic.run` over a TorchState holding a small model, its optimizer and
the step; each step sleeps, allreduces the step number (checked: step * size) and a gradient
through hvd.DistributedOptimizer, then commits. Stdout (flushed, one line each), as the stand-in:
    step <k> rank <r> size <n>           step k (0-based) saved in a world of n (printed between
                                         the save and the host-update check, as the stand-in)
    reset: rank <old> -> <new> size <n>  after every reset
    done <steps> steps rank <r> size <n>  then exit 0
--static: hvd.init(), one Sum allreduce of ones, prints "sum <value> rank <r> size <n>", exits;
with --stuck-rank R, each rank prints "init rank <r> size <n>" after hvd.init(), rank R then stays
in stuck_before_allreduce() and the others wait in the allreduce.
It needs horovod on PYTHONPATH (scripts/horovod.sh installs it for the tests).
"""
import argparse
import sys
import time

import torch
import horovod.torch as hvd


def say(line):
    print(line, flush=True)


class State(hvd.elastic.TorchState):
    def commit(self):
        self.save()
        say(f"step {self.step - 1} rank {hvd.rank()} size {hvd.size()}")
        self.check_host_updates()


def elastic(args):
    hvd.init()
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    optimizer = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.01),
                                         named_parameters=model.named_parameters())
    state = State(model=model, optimizer=optimizer, step=0)
    last_rank = [hvd.rank()]

    def on_reset():
        say(f"reset: rank {last_rank[0]} -> {hvd.rank()} size {hvd.size()}")
        last_rank[0] = hvd.rank()

    state.register_reset_callbacks([on_reset])

    @hvd.elastic.run
    def train(state):
        while state.step < args.steps:
            time.sleep(args.step_seconds)
            total = hvd.allreduce(torch.tensor([float(state.step)]), op=hvd.Sum).item()
            if total != state.step * hvd.size():
                raise SystemExit(f"horovod_worker: allreduce of step {state.step} over "
                                 f"{hvd.size()} ranks gave {total}")
            optimizer.zero_grad()
            model(torch.ones(2, 4)).sum().backward()
            optimizer.step()
            state.step += 1
            state.commit()

    train(state)
    say(f"done {args.steps} steps rank {hvd.rank()} size {hvd.size()}")


def stuck_before_allreduce():
    """--stuck-rank: where that rank stays (the hang watchdog's verdict names this function)."""
    while True:
        time.sleep(3600)


def static(args):
    hvd.init()
    if args.stuck_rank >= 0:
        say(f"init rank {hvd.rank()} size {hvd.size()}")
        if hvd.rank() == args.stuck_rank:
            stuck_before_allreduce()
    total = hvd.allreduce(torch.ones(1), op=hvd.Sum).item()
    say(f"sum {total:g} rank {hvd.rank()} size {hvd.size()}")
    hvd.shutdown()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--step-seconds", type=float, default=0.05)
    parser.add_argument("--static", action="store_true")
    parser.add_argument("--stuck-rank", type=int, default=-1,
                        help="--static: this rank never reaches the allreduce the others wait in")
    args = parser.parse_args()
    (static if args.static else elastic)(args)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
