"""A stand-in for an unmodified Horovod elastic worker (hvd.elastic.run + state.commit()), written
from the spec (stdlib only; Debian's /usr/bin/python3).

    elastic_standin.py --steps N [--step-seconds S] [--log FILE] [--timeout T]
                       [--record-dir DIR] [--steps-file FILE] [--startup-seconds S] [--ring-stall]

What the launcher sees is what a real worker does (spec 4.4-4.6, 5, 6.11):
  * hvd.init(): the first time with the HOROVOD_* rank variables; on every reset after
    `GET /rank_and_size/<HOROVOD_HOSTNAME>:<HOROVOD_LOCAL_RANK>` (rank -1 -> abort, status 134);
    then the six scope rendezvous of spec 4.6, byte for byte as Horovod's C++ HTTP client. Each
    scope's "Gloo pair addresses" are real listening sockets and the barrier is a real TCP mesh.
    They bind as Gloo's devices do (gloo_device.py): the global, local and cross scopes on the
    address of the interface named by HOROVOD_GLOO_IFACE on this host (unset or empty: the host
    name's address), the process-set scopes on the host name's address.
  * first entry into the elastic run (never after resets): a worker notification service
    (ThreadingTCPServer on 0.0.0.0, random port, key os.urandom(32), Horovod's Wire frames, stub
    classes named as Horovod's, real pickle) registered with
    `PUT /worker_addresses/<host>:<local_rank>` sent by urllib as Horovod's worker does.
  * a training loop over the `global` scope's mesh (rank 0 keeps one connection to every other
    rank, fresh per round): state.sync() broadcasts rank 0's committed step; each step sleeps,
    runs a sum-allreduce of the step number (checked), then commit() = save + check_host_updates
    (rank 0 drains its notifications, keeps timestamps strictly greater than the last seen one,
    ORs the flags and broadcasts (prev_ts, new_ts, flags, done)). A timestamp advance raises
    HostsUpdatedInterrupt on every rank (-> reset); a broken connection is a HorovodInternalError
    (-> restore the last committed step, reset).

Stdout (flushed, one line each):
    step <k> rank <r> size <n>         step k (0-based) committed in a world of n
    reset: rank <old> -> <new> size <n>  after rank_and_size answered a real rank
    done <steps> steps rank <r> size <n>  then exit 0
Exit status: 0 done; 134 removed (rank -1: "<host>[<lr>] has been removed from elastic job" on
stderr) or any failure inside init() (HTTP request failed 3 times, rendezvous timeout, mesh
connection failure, "Unable to find address for: <iface>" when HOROVOD_GLOO_IFACE names no
interface of this host), as the real worker's std::terminate; 1 failed worker_addresses
registration, any protocol deviation ("elastic_standin: protocol deviation: ..." on stderr) or
any other error.

Faithful quirks: notifications queued on rank 0 are discarded at the end of every reset
(State.on_reset), and timestamps equal to the last seen one are ignored, so a test should wait for
a `step ... size <new>` line before it triggers the next change and should not reuse a timestamp.
Deliberate difference: state.sync() is never skipped (Horovod skips it after a removal-only
update; spec 6.11 allows either), so a newcomer can never wait for a broadcast nobody sends.

Soak options (scripts/soak/chaos.py; both off by default, and then nothing above changes):
  --record-dir DIR   every stdout line gets a unique tag, "p<pid>#<n> <line>", and is also written
                     to DIR/<host>_<local rank>_<pid>.out after it was printed; the state's history
                     goes to DIR/<host>_<local rank>_<pid>.steps, one line per event (one write(2)):
                       sync <step> <sid> <nonce> <rank> <size>   a round started from state <sid>
                       commit <step> <parent sid> <sid> <rank> <size>
                       done <steps> <sid> <rank> <size>
                     A state id (sid) names a committed state: sid = hash(parent sid, step, nonce),
                     where the nonce is drawn by rank 0 at every state.sync(), so a step redone
                     after a restore gets a new sid and the states form a tree; the final state's
                     chain back to the root (sid 0) must hold every step exactly once.
  --steps-file FILE  when FILE exists it holds the total number of steps, overriding --steps; only
                     rank 0 reads it (at every commit) and its `done` flag is final, so the ranks
                     never disagree about the end.

Facts of real workers (both off by default): --startup-seconds S sleeps before the first
hvd.init(), as `import torch, horovod.torch` takes ~1.5 s; --ring-stall makes a peer's death look as
it did with real Horovod 0.28.1 on the test bed (issue 27): the dead rank's ring predecessor fails at
once, every other survivor, often rank 0 itself, blocks in a receive from a live survivor (rank 0,
which sees the death in this star-shaped mesh, tells the others which rank died). Gloo signals an
error only on the broken connection, and a failed worker keeps its old mesh open until its next
hvd.init() has met, so a blocked survivor is freed only when its own connection is destroyed
(etrun cutting the world's mesh: ss -K of the published pair addresses) or after
HOROVOD_GLOO_TIMEOUT_SECONDS; destroying its sockets to the dead host alone (the fence of issue 20)
frees nobody else. The pair addresses are in Gloo's own 136-byte layout, so etrun reads them as it
reads real Gloo's.

--log FILE appends every event, prefixed "<unix time> <host>:<local_rank> pid <pid>", with
O_APPEND (all workers may share one file). Every socket operation has a timeout (--timeout,
default 60 s), the rendezvous polls use HOROVOD_GLOO_TIMEOUT_SECONDS (default 30 s).

Importing this module has no side effects beyond registering the stub classes in sys.modules
(a test may use them to build or decode Horovod pickles).
"""
import argparse
import base64
import errno
import fcntl
import hashlib
import hmac
import io
import operator
import os
import pickle
import queue
import select
import socket
import socketserver
import struct
import sys
import threading
import time
import traceback
import urllib.error
import urllib.request


# ---------------------------------------------------------------------------------------------
# Horovod's classes, by their real module paths, so `pickle` resolves them by reference.

import gloo_device
from horovod_classes import (AckResponse, HostsUpdatedRequest, HostUpdateResult, PingRequest,
                             PingResponse)

SERVICE_NAME = "worker notification service"
SIOCGIFADDR = 0x8915
MAX_FRAME = 1 << 20


# ---------------------------------------------------------------------------------------------
# Errors and exits

class HorovodInternalError(Exception):
    """A collective failed (a peer died, closed, or timed out). `peer`: the rank whose connection
    failed, when known."""

    def __init__(self, message, peer=None):
        super().__init__(message)
        self.peer = peer


class HostsUpdatedInterrupt(Exception):
    def __init__(self, skip_sync):
        super().__init__(skip_sync)
        self.skip_sync = skip_sync


class Abort(Exception):
    """What Horovod's background thread throws during init: std::terminate, status 134."""


class Deviation(Exception):
    """The launcher did something an unmodified worker would not cope with."""


class Ctx:
    """Process-wide settings and the current rank variables."""
    timeout = 60.0
    record_dir = None
    out_seq = 0
    steps_file = None
    gloo_timeout = 30.0
    log_path = None
    host = os.environ.get("HOROVOD_HOSTNAME", "")
    local_rank_id = os.environ.get("HOROVOD_LOCAL_RANK", "")
    ranks = {}
    ring_stall = False


_log_lock = threading.Lock()


def log(msg):
    if not Ctx.log_path:
        return
    line = f"{time.time():.3f} {Ctx.host}:{Ctx.local_rank_id} pid {os.getpid()} {msg}\n"
    with _log_lock:
        fd = os.open(Ctx.log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)


def _record_path(suffix):
    return os.path.join(Ctx.record_dir, f"{Ctx.host}_{Ctx.local_rank_id}_{os.getpid()}.{suffix}")


def _append(path, line):
    # One write(2) per line with O_APPEND: a SIGKILL leaves whole lines only.
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def say(line):
    if Ctx.record_dir:
        # Printed first, then filed: a kill in between leaves the file one line short, never
        # the output (the soak allows that for the last line of a killed process only).
        line = f"p{os.getpid()}#{Ctx.out_seq} {line}"
        Ctx.out_seq += 1
        print(line, flush=True)
        _append(_record_path("out"), line)
    else:
        print(line, flush=True)
    log(line)


def record(line):
    if Ctx.record_dir:
        _append(_record_path("steps"), line)


def state_id(parent, step, nonce):
    digest = hashlib.sha1(f"{parent}:{step}:{nonce}".encode()).digest()
    return int.from_bytes(digest[:7], "big") or 1  # 56 bits: fits struct "<q"; 0 is the root


def steps_from_file(default):
    """The total from --steps-file (rank 0 only), else `default`; a missing, half-written or
    garbled file means "not yet"."""
    if not Ctx.steps_file:
        return default
    try:
        with open(Ctx.steps_file) as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return default


def die(code, *lines):
    """Exit now (from any thread) after flushing, with lines on stderr."""
    try:
        sys.stdout.flush()
    except Exception:
        pass
    for line in lines:
        sys.stderr.write(line + "\n")
        log("stderr: " + line)
    log(f"exit {code}")
    try:
        sys.stderr.flush()
    except Exception:
        pass
    os._exit(code)


def deviation(msg):
    die(1, f"elastic_standin: protocol deviation: {msg}")


def terminate(msg, detail=None, kind="std::runtime_error"):
    lines = [f"elastic_standin: {detail}"] if detail else []
    lines += [f"terminate called after throwing an instance of '{kind}'", f"  what():  {msg}"]
    die(134, *lines)


def recv_exact(sock, n):
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise EOFError(f"connection closed after {len(data)} of {n} bytes")
        data += chunk
    return data


# ---------------------------------------------------------------------------------------------
# Interfaces

def ipv4_interfaces():
    """[(ifname, primary IPv4)] of the local interfaces that have one, in if_nameindex order."""
    out = []
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        for _, name in socket.if_nameindex():
            try:
                req = struct.pack("256s", name.encode()[:15])
                ip = socket.inet_ntoa(fcntl.ioctl(s.fileno(), SIOCGIFADDR, req)[20:24])
            except OSError:
                continue
            out.append((name, ip))
    finally:
        s.close()
    return out


def notification_addresses(port):
    """{ifname: [(ip, port)]} filtered by HOROVOD_GLOO_IFACE with substring semantics (spec 5.1)."""
    nics = os.environ.get("HOROVOD_GLOO_IFACE") or None
    result = {}
    for name, ip in ipv4_interfaces():
        if nics is not None and name not in nics:
            continue
        result.setdefault(name, []).append((ip, port))
    if not result and nics:
        raise RuntimeError(f"no local interface with an IPv4 address matches HOROVOD_GLOO_IFACE={nics!r}")
    return result


# ---------------------------------------------------------------------------------------------
# Rendezvous HTTP, as Horovod's C++ HTTPStore (spec 4.5)

def _http_once(method, path, body, timeout):
    addr = os.environ["HOROVOD_GLOO_RENDEZVOUS_ADDR"]
    port = int(os.environ["HOROVOD_GLOO_RENDEZVOUS_PORT"])
    with socket.create_connection((addr, port), timeout=timeout) as s:
        s.sendall((f"{method} {path} HTTP/1.1\r\nHost: {addr}\r\n"
                   f"Content-Length: {len(body)}\r\n\r\n").encode() + body)
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = s.recv(65536)
            if not chunk:
                if not data:
                    return 0, b""  # closed before a status line: status 0, retried by Horovod
                raise Deviation(f"{method} {path}: connection closed inside the response headers "
                                f"{data!r}")
            data += chunk
        head, _, rest = data.partition(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        first = lines[0].split(b" ")
        if len(first) < 2 or not first[0].startswith(b"HTTP/") or not first[1].isdigit():
            raise Deviation(f"{method} {path}: bad status line {lines[0]!r}")
        status = int(first[1])
        lengths = [l for l in lines[1:] if l.startswith(b"Content-Length:")]
        if len(lengths) != 1:
            raise Deviation(f"{method} {path}: need exactly one header spelled 'Content-Length' "
                            f"(Horovod's client ignores other spellings): {head!r}")
        try:
            n = int(lengths[0].split(b":", 1)[1].strip())
        except ValueError:
            raise Deviation(f"{method} {path}: bad {lengths[0]!r}")
        while len(rest) < n:
            chunk = s.recv(65536)
            if not chunk:
                raise Deviation(f"{method} {path}: body {len(rest)} bytes, Content-Length {n}")
            rest += chunk
        if len(rest) != n:
            raise Deviation(f"{method} {path}: {len(rest)} body bytes, Content-Length {n}")
    return status, rest


def http(method, path, body=b"", timeout=None):
    """HTTPStore::PerformHTTP: statuses other than 200/404 and connection errors are retried
    after 500 ms, 3 attempts in all, then "HTTP request failed." aborts the worker."""
    timeout = timeout or Ctx.timeout
    why = None
    for attempt in range(1, 4):
        try:
            status, data = _http_once(method, path, body, timeout)
            why = f"status {status}" if status else "connection closed before a status line"
        except socket.timeout:
            # Horovod's client would wait forever; a re-sent rank_and_size would double count.
            raise Abort(f"{method} {path}: no answer within {timeout:g} s")
        except OSError as e:
            status, data, why = 0, b"", f"{type(e).__name__}: {e}"
        if status in (200, 404):
            return status, data
        sys.stderr.write(f"elastic_standin: {method} {path}: attempt {attempt} failed ({why}); "
                         f"retrying as Horovod's HTTPStore does\n")
        log(f"http {method} {path} attempt {attempt} failed: {why}")
        if attempt < 3:
            time.sleep(0.5)
    raise Abort(f"HTTP request failed. ({method} {path}: {why})")


def expect(status, want, what):
    if status != want:
        raise Deviation(f"{what}: status {status}, expected {want}")


# ---------------------------------------------------------------------------------------------
# Scope rendezvous (Gloo connectFullMesh + Horovod Rendezvous(), spec 4.6)

pack_address, unpack_address = gloo_device.pack_address, gloo_device.unpack_address
ADDR_LEN = gloo_device.ADDRESS_BYTES


def scope_rendezvous(scope, rank, size, ip, keep_rank0=False):
    """Listens on ip (see gloo_device). Returns the kept connections: with keep_rank0, rank 0
    keeps {peer: socket} for every other rank and every other rank keeps {0: socket}, and every
    rank keeps its ring links, {"next": its connection to rank+1, "prev": rank-1's to it} (what a
    survivor blocks on with --ring-stall: Mesh._block_in_ring); else {}."""
    if not (0 <= rank < size):
        raise Deviation(f"scope {scope}: rank {rank} outside size {size}")
    log(f"bind {scope} {ip}")
    listener = socket.socket()
    kept = {}
    try:
        listener.bind((ip, 0))
        listener.listen(max(size, 1))
        listener.settimeout(Ctx.timeout)
        port = listener.getsockname()[1]
        expect(http("PUT", f"/{scope}/rank_{rank}", socket.gethostname().encode())[0], 200,
               f"PUT /{scope}/rank_{rank}")
        for i in range(rank):
            http("GET", f"/{scope}/rank_{i}")  # 200 or 404 are both fine
        blob = b"".join(pack_address(ip, port, rank, p) for p in range(size) if p != rank)
        expect(http("PUT", f"/{scope}/{rank}", blob)[0], 200, f"PUT /{scope}/{rank}")
        peers = {}
        deadline = time.monotonic() + Ctx.gloo_timeout
        for i in range(size):
            if i == rank:
                continue
            while http("GET", f"/{scope}/{i}")[0] != 200:
                if time.monotonic() > deadline:
                    raise Abort(f"Gloo rendezvous: {scope}/{i} did not appear within "
                                f"{Ctx.gloo_timeout:g} s (HOROVOD_GLOO_TIMEOUT_SECONDS)")
                time.sleep(0.01)
            status, value = http("GET", f"/{scope}/{i}")
            expect(status, 200, f"second GET /{scope}/{i}")
            if len(value) < ADDR_LEN:
                raise Deviation(f"{scope}/{i}: value of {len(value)} bytes")
            pip, pport = unpack_address(value)
            want = b"".join(pack_address(pip, pport, i, p) for p in range(size) if p != i)
            if value != want:
                raise Deviation(f"{scope}/{i}: value changed in transit ({len(value)} bytes, "
                                f"expected {len(want)})")
            peers[i] = (pip, pport)
        # Barrier over the mesh: tell every peer we are here, hear from every peer.
        try:
            for i, addr in peers.items():
                c = socket.create_connection(addr, timeout=Ctx.timeout)
                c.sendall(struct.pack("<II", rank, size))
                if keep_rank0 and rank != 0 and i == 0:
                    kept[0] = c
                elif keep_rank0 and i == (rank + 1) % size:
                    kept["next"] = c
                else:
                    c.close()
                if keep_rank0 and i == (rank + 1) % size and "next" not in kept:
                    kept["next"] = socket.fromfd(c.fileno(), c.family, c.type)  # the same link
            heard = set()
            while len(heard) < size - 1:
                c, _ = listener.accept()
                c.settimeout(Ctx.timeout)
                r, n = struct.unpack("<II", recv_exact(c, 8))
                if n != size or r == rank or r in heard or r >= size:
                    c.close()
                    raise Deviation(f"scope {scope}: mesh connection from rank {r} size {n} "
                                    f"(I am rank {rank} of {size}; heard {sorted(heard)}): "
                                    f"stale or foreign rendezvous value?")
                heard.add(r)
                if keep_rank0 and rank == 0:
                    kept[r] = c
                    if r == (rank - 1) % size:
                        kept["prev"] = socket.fromfd(c.fileno(), c.family, c.type)
                elif keep_rank0 and r == (rank - 1) % size:
                    kept["prev"] = c
                else:
                    c.close()
        except (OSError, EOFError) as e:
            raise Abort(f"Gloo connectFullMesh failed for scope {scope}: {type(e).__name__}: {e}")
        expect(http("DELETE", f"/{scope}/{rank}")[0], 200, f"DELETE /{scope}/{rank}")
        return kept
    except BaseException:
        for c in kept.values():
            c.close()
        raise
    finally:
        listener.close()


# ---------------------------------------------------------------------------------------------
# The global mesh collectives

class Mesh:
    def __init__(self, rank, size, conns):
        self.rank, self.size = rank, size
        self.ring = {k: conns.pop(k) for k in ("next", "prev") if k in conns}
        self.conns = conns

    def close(self):
        for c in list(self.conns.values()) + list(self.ring.values()):
            try:
                c.close()
            except OSError:
                pass
        self.conns, self.ring = {}, {}

    def _send(self, peer, data):
        try:
            self.conns[peer].sendall(data)
        except OSError as e:
            self._peer_died(peer, f"send to rank {peer}: {type(e).__name__}: {e}",
                            e.errno == errno.ECONNABORTED)

    def _recv(self, peer, tag, fmt):
        try:
            got = recv_exact(self.conns[peer], 1)
            if Ctx.ring_stall and got == b"X":  # rank 0 saw rank `dead` die
                dead = struct.unpack("<q", recv_exact(self.conns[peer], 8))[0]
                self._ring_fail(dead, f"rank {dead} died (told by rank 0)")
            data = got + recv_exact(self.conns[peer], struct.calcsize(fmt))
        except socket.timeout:
            raise HorovodInternalError(f"rank {peer}: nothing received within {Ctx.timeout:g} s")
        except (OSError, EOFError) as e:
            self._peer_died(peer, f"receive from rank {peer}: {type(e).__name__}: {e}",
                            getattr(e, "errno", None) == errno.ECONNABORTED)
        if data[:1] != tag:
            raise Deviation(f"mesh message {data[:1]!r} from rank {peer}, expected {tag!r} "
                            f"(the stand-ins disagree about the protocol step)")
        return struct.unpack(fmt, data[1:])

    def _peer_died(self, peer, message, aborted=False):
        """A connection to `peer` broke. Without --ring-stall every survivor fails at once. With
        it, the survivors behave as real Gloo's ring did under real Horovod 0.28.1 (issue 27,
        the test bed): rank 0 tells the others which rank died; the dead rank's ring predecessor
        fails at once; every other survivor blocks in a receive from its ring successor
        (_block_in_ring), which Gloo signals only when that connection itself breaks: the
        failed survivors keep theirs open (run() closes a failed mesh only once the next
        hvd.init() has met), so it takes etrun cutting the world's mesh (ss -K of the published
        pair addresses) or HOROVOD_GLOO_TIMEOUT_SECONDS. `aborted`: the socket was destroyed on
        this side (ss -K: ECONNABORTED), so this rank's own operation fails at once, as on a real
        pair; that frees nobody else (etrun's old fence of a lost host's address alone left a
        survivor blocked). Rank 0 cannot tell a fenced live peer from a dead one: it tells the
        others either way (a fenced world fences them too)."""
        if not Ctx.ring_stall:
            raise HorovodInternalError(message, peer)
        if self.rank == 0:
            for other in sorted(self.conns):
                if other != peer:
                    try:
                        self.conns[other].sendall(b"X" + struct.pack("<q", peer))
                    except OSError:
                        pass
        if aborted:
            raise HorovodInternalError(message, peer)
        self._ring_fail(peer, message)

    def _ring_fail(self, dead, message):
        if self.rank != (dead - 1) % self.size:
            message = self._block_in_ring(dead)
        raise HorovodInternalError(message, dead)

    def _block_in_ring(self, dead):
        """Waits as a survivor in a ring step does: for data from its ring successor (rank+1, a
        live one: the dead rank's predecessor fails instead), which never comes, until that
        connection breaks or Gloo's timeout. Returns the message of the error that ends it."""
        link = self.ring.get("next")
        log(f"ring stall: rank {dead} died; blocked in a recv for up to {Ctx.gloo_timeout:g} s")
        deadline = time.monotonic() + Ctx.gloo_timeout
        while link is not None and time.monotonic() < deadline:
            ready, _, _ = select.select([link], [], [], deadline - time.monotonic())
            if ready:
                try:
                    if not link.recv(65536):
                        return "Connection closed by peer"
                except OSError as e:
                    return f"Read error: {e.strerror}"
        if link is None:
            time.sleep(Ctx.gloo_timeout)
        return f"Timed out waiting {Ctx.gloo_timeout * 1000:.0f}ms for recv operation to complete"

    def broadcast(self, tag, fmt, values):
        if self.rank == 0:
            msg = tag + struct.pack(fmt, *values)
            for peer in sorted(self.conns):
                self._send(peer, msg)
            return tuple(values)
        return self._recv(0, tag, fmt)

    def allreduce_sum(self, value):
        if self.rank == 0:
            total = value
            for peer in sorted(self.conns):
                total += self._recv(peer, b"G", "<q")[0]
            msg = b"R" + struct.pack("<q", total)
            for peer in sorted(self.conns):
                self._send(peer, msg)
            return total
        self._send(0, b"G" + struct.pack("<q", value))
        return self._recv(0, b"R", "<q")[0]


# ---------------------------------------------------------------------------------------------
# hvd.init() / hvd.shutdown()

RANK_VARS = ("RANK", "SIZE", "LOCAL_RANK", "LOCAL_SIZE", "CROSS_RANK", "CROSS_SIZE")


def read_env_ranks():
    try:
        return {k: int(os.environ["HOROVOD_" + k]) for k in RANK_VARS}
    except (KeyError, ValueError) as e:
        raise Deviation(f"bad or missing HOROVOD_* rank variable: {e}")


def rank_and_size():
    host, lr = Ctx.host, Ctx.ranks["LOCAL_RANK"]
    status, body = http("GET", f"/rank_and_size/{host}:{lr}")
    if status != 200:
        raise Deviation(f"GET /rank_and_size/{host}:{lr} answered {status} {body!r} (Horovod's "
                        f"worker would parse an empty body as rank 0)")
    try:
        fields = [int(x) for x in body.decode("ascii").split(",")]
    except (UnicodeDecodeError, ValueError):
        fields = []
    if len(fields) != 6:
        raise Deviation(f"rank_and_size body {body!r}: want six comma-separated integers")
    log(f"rank_and_size {body.decode()}")
    if fields[0] == -1:
        if fields != [-1] * 6:
            raise Deviation(f"rank_and_size body {body!r}: rank -1 but other fields not -1")
        terminate(f"{host}[{lr}] has been removed from elastic job")
    new = dict(zip(RANK_VARS, fields))
    if not (0 <= new["RANK"] < new["SIZE"] and 0 <= new["LOCAL_RANK"] < new["LOCAL_SIZE"]
            and 0 <= new["CROSS_RANK"] < new["CROSS_SIZE"]):
        raise Deviation(f"rank_and_size body {body!r}: inconsistent values")
    if new["LOCAL_RANK"] != lr:
        raise Deviation(f"rank_and_size body {body!r}: local rank changed from {lr} (a process is "
                        f"identified by host:local_rank for its whole life)")
    return new


def init(first, mesh_holder):
    """hvd.init(); on a reset, GET rank_and_size first. Leaves the global mesh in mesh_holder."""
    if first:
        Ctx.ranks = read_env_ranks()
    else:
        old = Ctx.ranks["RANK"]
        Ctx.ranks = rank_and_size()
        for k in RANK_VARS:
            os.environ["HOROVOD_" + k] = str(Ctx.ranks[k])
        say(f"reset: rank {old} -> {Ctx.ranks['RANK']} size {Ctx.ranks['SIZE']}")
    r = Ctx.ranks
    host, lr = Ctx.host, r["LOCAL_RANK"]
    set_hash = hashlib.sha1(",".join(map(str, range(r["SIZE"]))).encode() + b",").hexdigest()[:16]
    log(f"init rank {r['RANK']} size {r['SIZE']} local {lr}/{r['LOCAL_SIZE']} "
        f"cross {r['CROSS_RANK']}/{r['CROSS_SIZE']}")
    # Each hvd.init() creates its Gloo devices afresh: the main context's, then the process sets'.
    main_ip = gloo_device.main_context_address()
    set_ip = gloo_device.process_set_address()
    conns = scope_rendezvous("global", r["RANK"], r["SIZE"], main_ip, keep_rank0=True)
    mesh_holder[0] = Mesh(r["RANK"], r["SIZE"], conns)
    for scope, rank, size, ip in (
            (f"local_{host}", lr, r["LOCAL_SIZE"], main_ip),
            (f"cross_{lr}", r["CROSS_RANK"], r["CROSS_SIZE"], main_ip),
            (f"global_process_set_hash_{set_hash}", r["RANK"], r["SIZE"], set_ip),
            (f"local_{host}_process_set_hash_{set_hash}", lr, r["LOCAL_SIZE"], set_ip),
            (f"cross_{lr}_process_set_hash_{set_hash}", r["CROSS_RANK"], r["CROSS_SIZE"], set_ip)):
        scope_rendezvous(scope, rank, size, ip)
    log(f"init done rank {r['RANK']} size {r['SIZE']}")


# ---------------------------------------------------------------------------------------------
# Worker notification service (spec 5)

class _Unpickler(pickle.Unpickler):
    """Real pickle, but only Horovod's request classes (and what the enum name form needs)."""
    ALLOWED = {
        ("horovod.runner.common.util.network", "PingRequest"): PingRequest,
        ("horovod.runner.elastic.worker", "HostsUpdatedRequest"): HostsUpdatedRequest,
        ("horovod.runner.elastic.worker", "HostUpdateResult"): HostUpdateResult,
        ("_operator", "or_"): operator.or_,
        ("operator", "or_"): operator.or_,
    }

    def find_class(self, module, name):
        if (module, name) == ("builtins", "getattr"):
            def safe_getattr(obj, attr):
                if obj is not HostUpdateResult or attr not in HostUpdateResult.__members__:
                    raise pickle.UnpicklingError(f"getattr({obj!r}, {attr!r}) not allowed")
                return getattr(obj, attr)
            return safe_getattr
        try:
            return self.ALLOWED[(module, name)]
        except KeyError:
            raise pickle.UnpicklingError(f"global {module}.{name} not allowed")


def frame(key, obj):
    body = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    return hmac.new(key, body, hashlib.sha256).digest() + struct.pack("<i", len(body)) + body


class NotificationService:
    def __init__(self, state):
        self.key = os.urandom(32)
        self.state = state
        service = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self):
                service.handle(self.request, self.client_address[0])

        class Server(socketserver.ThreadingTCPServer):
            daemon_threads = True
            allow_reuse_address = True

        self.server = Server(("0.0.0.0", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def handle(self, sock, client_ip):
        try:
            sock.settimeout(Ctx.timeout)
            first = sock.recv(1)
            if not first:
                return  # a bare connect/close (a reachability probe): ignored, as EOFError is
            head = first + recv_exact(sock, 35)
            (length,) = struct.unpack("<i", head[32:36])
            if not (0 < length <= MAX_FRAME):
                deviation(f"notification frame length {length} (bytes {head[32:36].hex()}; "
                          f"must be little-endian int32)")
            body = recv_exact(sock, length)
        except (OSError, EOFError) as e:
            deviation(f"incomplete notification frame from {client_ip}: {type(e).__name__}: {e}")
        if not hmac.compare_digest(head[:32], hmac.new(self.key, body, hashlib.sha256).digest()):
            deviation(f"notification frame from {client_ip}: digest did not match the message "
                      f"(the key registered in worker_addresses must be used)")
        try:
            request = _Unpickler(io.BytesIO(body)).load()
        except Exception as e:
            deviation(f"notification pickle {body.hex()}: {type(e).__name__}: {e}")
        if isinstance(request, PingRequest):
            response = PingResponse(SERVICE_NAME, client_ip)
            log(f"ping from {client_ip}")
        elif isinstance(request, HostsUpdatedRequest):
            ts, res = getattr(request, "timestamp", None), getattr(request, "res", None)
            if type(ts) is not int or isinstance(res, bool) or not isinstance(res, int) \
                    or not 0 <= int(res) <= 3:
                deviation(f"HostsUpdatedRequest with timestamp {ts!r} res {res!r}")
            res = HostUpdateResult(int(res))
            self.state.on_hosts_updated(ts, res)
            log(f"notified {ts} {int(res)}")
            response = AckResponse()
        else:
            deviation(f"unexpected notification request {request!r}")
        try:
            sock.sendall(frame(self.key, response))
        except OSError:
            pass  # the driver went away; Horovod ignores BrokenPipeError too

    def register(self):
        """PUT /worker_addresses/<host>:<local_rank>, as horovod put_data_into_kvstore (urllib)."""
        addresses = notification_addresses(self.port)
        value = pickle.dumps((addresses, self.key), protocol=pickle.HIGHEST_PROTOCOL)
        body = base64.b64encode(value)
        addr = os.environ["HOROVOD_GLOO_RENDEZVOUS_ADDR"]
        port = int(os.environ["HOROVOD_GLOO_RENDEZVOUS_PORT"])
        url = f"http://{addr}:{port}/worker_addresses/{Ctx.host}:{Ctx.ranks['LOCAL_RANK']}"
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        try:
            resp = opener.open(urllib.request.Request(url, data=body, method="PUT"),
                               timeout=Ctx.timeout)
            resp.close()
            code = resp.getcode()
        except urllib.error.HTTPError as e:
            code = e.code
        except OSError as e:
            raise RuntimeError(f"PUT {url} failed: {type(e).__name__}: {e}")
        if code != 200:
            raise RuntimeError(f"PUT {url} answered {code}")
        log(f"registered {addresses} key {self.key.hex()}")


# ---------------------------------------------------------------------------------------------
# The elastic state and run loop (horovod/common/elastic.py)

class State:
    def __init__(self, steps):
        self.steps = steps
        self.step = 0
        self.saved = 0
        self.sid = 0  # id of the committed state (see --record-dir); 0 is the initial state
        self.nonce = 0
        self.last_ts = 0
        self.messages = queue.Queue()

    def on_hosts_updated(self, timestamp, res):
        self.messages.put((timestamp, res))

    def on_reset(self):
        self.messages = queue.Queue()  # notifications queued during the reset are dropped

    def restore(self):
        self.step = self.saved

    def sync(self, mesh):
        nonce = int.from_bytes(os.urandom(7), "big")
        # The total travels with the state: rank 0 may have decided it (--steps-file) before a
        # reset that brought in a worker who has not heard it.
        self.saved, self.sid, self.nonce, self.steps = mesh.broadcast(
            b"S", "<qqqq", (self.saved, self.sid, nonce, self.steps))
        self.step = self.saved
        record(f"sync {self.saved} {self.sid} {self.nonce} {mesh.rank} {mesh.size}")

    def commit(self, mesh):
        self.saved = self.step
        parent, self.sid = self.sid, state_id(self.sid, self.step - 1, self.nonce)
        record(f"commit {self.step - 1} {parent} {self.sid} {mesh.rank} {mesh.size}")
        say(f"step {self.step - 1} rank {mesh.rank} size {mesh.size}")
        return self.check_host_updates(mesh)

    def check_host_updates(self, mesh):
        prev = last = self.last_ts
        flags = HostUpdateResult.no_update
        messages = self.messages
        while True:
            try:
                ts, res = messages.get_nowait()
            except queue.Empty:
                break
            if ts > last:
                last = ts
                flags |= res
        total = steps_from_file(self.steps) if mesh.rank == 0 else self.steps
        done = int(self.step >= total)
        prev, self.last_ts, flags, done = mesh.broadcast(
            b"D", "<qqBB", (prev, last, int(flags), done))
        if Ctx.steps_file and done:
            # Rank 0 read the total: its word is final, also when a reset comes first (after it,
            # training is over: the loop's condition, not another step, says so).
            self.steps = self.step
        if self.last_ts > prev:
            log(f"hosts updated {prev} -> {self.last_ts} flags {flags}")
            raise HostsUpdatedInterrupt(flags == HostUpdateResult.removed)
        if not Ctx.steps_file and bool(done) != (self.step >= self.steps):
            raise Deviation(f"rank 0 says done={done} at step {self.step} of {self.steps}")
        return bool(done)


def train(state, mesh, step_seconds):
    while state.step < state.steps:
        time.sleep(step_seconds)
        total = mesh.allreduce_sum(state.step)
        if total != state.step * mesh.size:
            raise Deviation(f"allreduce of step {state.step} over {mesh.size} ranks gave {total}: "
                            f"ranks disagree on the step")
        state.step += 1
        if state.commit(mesh):
            break


def run(args):
    Ctx.timeout = args.timeout
    Ctx.gloo_timeout = float(os.environ.get("HOROVOD_GLOO_TIMEOUT_SECONDS") or 30)
    Ctx.log_path = args.log
    Ctx.record_dir = args.record_dir
    Ctx.steps_file = args.steps_file
    Ctx.host = os.environ.get("HOROVOD_HOSTNAME") or "localhost"
    if os.environ.get("HOROVOD_ELASTIC", "") in ("", "0"):
        raise Deviation("HOROVOD_ELASTIC is not set to a true value")
    Ctx.ring_stall = args.ring_stall
    state = State(args.steps)
    holder = [None]
    time.sleep(args.startup_seconds)
    log(f"first init as rank {os.environ.get('HOROVOD_RANK')} size {os.environ.get('HOROVOD_SIZE')}")

    def do_init(first):
        try:
            init(first, holder)
        except Abort as e:
            terminate(str(e), detail="hvd.init() failed in the background thread")
        except gloo_device.EnforceNotMet as e:
            terminate(str(e), kind="gloo::EnforceNotMet")

    do_init(True)
    Ctx.local_rank_id = str(Ctx.ranks["LOCAL_RANK"])
    log(f"start rank {Ctx.ranks['RANK']} size {Ctx.ranks['SIZE']} pid {os.getpid()}")
    # First entry into hvd.elastic.run: register the notification service, once per process.
    service = NotificationService(state)
    try:
        service.register()
    except RuntimeError as e:
        die(1, f"elastic_standin: worker_addresses registration failed: {e}",
            "RuntimeError: " + str(e))
    while True:
        mesh = holder[0]
        try:
            state.sync(mesh)  # never skipped (see the module docstring)
            train(state, mesh, args.step_seconds)
            break
        except HorovodInternalError as e:
            log(f"HorovodInternalError: {e}; restore step {state.saved}")
            state.restore()
        except HostsUpdatedInterrupt as e:
            log(f"HostsUpdatedInterrupt skip_sync={e.skip_sync} (state.sync() runs anyway)")
        if Ctx.ring_stall:
            # As real Horovod: the failed context's connections stay open until the next
            # hvd.init() has met (see Mesh._peer_died), so a survivor blocked on one stays blocked.
            do_init(False)
            mesh.close()
        else:
            mesh.close()  # hvd.shutdown()
            do_init(False)
        state.on_reset()
    mesh = holder[0]
    mesh.close()
    record(f"done {state.steps} {state.sid} {mesh.rank} {mesh.size}")
    say(f"done {state.steps} steps rank {mesh.rank} size {mesh.size}")
    log("exit 0")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--step-seconds", type=float, default=0.05)
    parser.add_argument("--log")
    parser.add_argument("--timeout", type=float, default=60.0,
                        help="seconds for every socket operation (default 60)")
    parser.add_argument("--record-dir", help="soak evidence: tagged lines and state history")
    parser.add_argument("--steps-file", help="total steps, decided by rank 0 when the file exists")
    parser.add_argument("--startup-seconds", type=float, default=0.0,
                        help="sleep this long before the first hvd.init() (import torch, horovod)")
    parser.add_argument("--ring-stall", action="store_true",
                        help="on a peer's death, survivors other than its ring predecessor block "
                             "until HOROVOD_GLOO_TIMEOUT_SECONDS, as in Gloo's ring")
    args = parser.parse_args(argv)
    try:
        run(args)
    except Deviation as e:
        deviation(str(e))
    except SystemExit:
        raise
    except BaseException:
        die(1, *traceback.format_exc().rstrip().split("\n"))
    try:
        sys.stdout.flush()
    finally:
        os._exit(0)


if __name__ == "__main__":
    main()
