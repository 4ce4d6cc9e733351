"""A torch.distributed job under etrun: every rank contributes rank+1 to an allreduce.

    build/etrun -np 2 /usr/bin/python3 scripts/examples/torch_allreduce.py

etrun sets RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT, so the default env://
initialisation works unchanged (as it would under torchrun).
"""
import os
import sys

import torch
import torch.distributed as dist


def main():
    dist.init_process_group("gloo")  # env://
    rank, world = dist.get_rank(), dist.get_world_size()
    tensor = torch.tensor([float(rank + 1)])
    dist.all_reduce(tensor)
    expected = world * (world + 1) / 2
    print(f"rank {rank}/{world} on {os.environ.get('HOROVOD_HOSTNAME')}: "
          f"allreduce sum = {tensor.item():g} (expected {expected:g})")
    dist.destroy_process_group()
    return 0 if tensor.item() == expected else 1


if __name__ == "__main__":
    sys.exit(main())
