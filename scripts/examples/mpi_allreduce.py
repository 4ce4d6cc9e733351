"""Smallest MPI job for etrun --mpi: every rank adds its rank + 1 with an allreduce (mpi4py).

    build/etrun --mpi -np 4 /usr/bin/python3 scripts/examples/mpi_allreduce.py
"""
import os

from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
total = comm.allreduce(rank + 1, op=MPI.SUM)
local_rank = os.environ.get("OMPI_COMM_WORLD_LOCAL_RANK", "?")
# One write per line: mpirun tags each write it reads, so pieces of a line would each get a tag.
os.write(1, f"rank {rank}/{size} (local rank {local_rank}): allreduce sum = {total} "
            f"(expected {size * (size + 1) // 2})\n".encode())
