"""Elastic torch.distributed training under `etrun --elastic-mode restart` (torchrun semantics).

Whenever hosts come or go, or a rank fails, etrun stops every rank and starts the new world
afresh (RANK, WORLD_SIZE, MASTER_ADDR/PORT, TORCHELASTIC_RESTART_COUNT). The script therefore
checkpoints as it trains and resumes from the last checkpoint when it starts.

    etrun -np 2 --min-np 1 --elastic-mode restart --host-discovery-script ./discover.sh \\
        /usr/bin/python3 scripts/examples/torch_elastic.py --steps 60 --checkpoint /tmp/ckpt.pt
"""
import argparse
import os
import sys
import time

import torch
import torch.distributed as dist


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--step-seconds", type=float, default=0.2)
    parser.add_argument("--checkpoint", default="/tmp/etrun-torch-elastic.pt")
    args = parser.parse_args()

    dist.init_process_group("gloo")  # env://, set up by etrun
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = torch.nn.Linear(16, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    step = 0
    if os.path.exists(args.checkpoint):
        state = torch.load(args.checkpoint)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        step = state["step"]
    restart = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    print(f"rank {rank}/{world}: restart {restart}, starting at step {step}", flush=True)

    target = torch.arange(16, dtype=torch.float32)
    while step < args.steps:
        generator = torch.Generator().manual_seed(step * 1000 + rank)
        x = torch.randn(64, 16, generator=generator)
        loss = ((model(x).squeeze(1) - x @ target) ** 2).mean()
        optimizer.zero_grad()
        loss.backward()
        for p in model.parameters():  # average gradients over the world
            dist.all_reduce(p.grad)
            p.grad /= world
        optimizer.step()
        step += 1
        if rank == 0:
            if step % 5 == 0 or step == args.steps:
                tmp = args.checkpoint + ".tmp"
                torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                            "step": step}, tmp)
                os.replace(tmp, args.checkpoint)  # a restart never sees a half-written file
            if step % 10 == 0:
                print(f"step {step} world {world} loss {loss.item():.3f}", flush=True)
        time.sleep(args.step_seconds)
    if rank == 0:
        print(f"done: {args.steps} steps", flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
