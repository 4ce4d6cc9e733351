"""A rank for etrun's --mpi tests, run by Open MPI's mpirun (mpi4py from Debian).

    mpi_worker.py allreduce        allreduce(rank + 1) over COMM_WORLD, print the sum
    mpi_worker.py send             rank 0 sends 4 MiB to rank 1, which checks them
    mpi_worker.py env NAME...      print NAME=value for each NAME (after MPI_Init)
    mpi_worker.py exit RANK CODE   rank RANK exits with CODE without MPI_Finalize, the others wait
    mpi_worker.py sleep            print "ready", then sleep (for signal tests)
    mpi_worker.py usr1             print "got SIGUSR1" when it arrives, then exit 0
    mpi_worker.py pieces N         N lines "MPI <rank> <i>" on stdout and "err <rank> <i>" on
                                   stderr, each written in pieces (one write() per word), then
                                   "end <rank>" without a newline

Each line is written with one write() call: mpirun tags every write it reads, so a line written
in pieces (print() under PYTHONUNBUFFERED=1) would come out split.
"""
import os
import signal
import sys
import time

from mpi4py import MPI

COMM = MPI.COMM_WORLD
RANK = COMM.Get_rank()


def out(text):
    os.write(1, text.encode())


def main():
    mode = sys.argv[1]
    if mode == "allreduce":
        total = COMM.allreduce(RANK + 1, op=MPI.SUM)
        out("rank %d of %d: sum %d\n" % (RANK, COMM.Get_size(), total))
    elif mode == "send":
        # Large enough for Open MPI's shared-memory single-copy path (process_vm_readv).
        data = bytes(range(256)) * (16 * 1024)
        if RANK == 0:
            COMM.Send([data, MPI.BYTE], dest=1)
        elif RANK == 1:
            buf = bytearray(len(data))
            COMM.Recv([buf, MPI.BYTE], source=0)
            out("received %d bytes %s\n" % (len(buf), "intact" if buf == data else "CORRUPT"))
    elif mode == "env":
        out("".join("%s=%s\n" % (name, os.environ.get(name)) for name in sys.argv[2:]) +
            "argv=%r\n" % (sys.argv[2:],))
    elif mode == "exit":
        COMM.Barrier()
        if RANK == int(sys.argv[2]):
            os._exit(int(sys.argv[3]))  # no MPI_Finalize: mpirun aborts the job
        out("waiting\n")
        time.sleep(600)
    elif mode == "sleep":
        COMM.Barrier()
        out("ready\n")
        time.sleep(600)
    elif mode == "pieces":
        for i in range(int(sys.argv[2])):
            for word in ("MPI", " ", str(RANK), " ", str(i), "\n"):
                out(word)
            os.write(2, b"err ")
            os.write(2, ("%d %d\n" % (RANK, i)).encode())
        out("end ")
        out(str(RANK))
    elif mode == "usr1":
        got = []
        signal.signal(signal.SIGUSR1, lambda *_: got.append(1))
        COMM.Barrier()
        out("ready\n")
        deadline = time.monotonic() + 60
        while not got and time.monotonic() < deadline:
            time.sleep(0.01)
        out("got SIGUSR1\n" if got else "no signal\n")
    else:
        sys.exit("unknown mode " + mode)


if __name__ == "__main__":
    main()
