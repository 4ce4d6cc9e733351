"""A stand-in for a Horovod Gloo worker's hvd.init(), written from the spec (stdlib only).

It speaks to etrun's rendezvous server exactly as Horovod's C++ HTTP client does (spec 4.5: one
new TCP connection per request, `Host` without port, `Content-Length` always, status = second
token, body length from a header spelled exactly `Content-Length`) and performs the six scope
rendezvous of spec 4.6 with the rank variables etrun gave it. Each scope's "Gloo pair addresses"
are real listening sockets, and the barrier after the exchange is a real TCP full mesh, as in
Gloo's connectFullMesh. Values carry binary noise that must come back byte for byte.

The listeners bind as Gloo's do (gloo_device.py): the global, local and cross scopes (and the
stand-in's own final check) on the address of the interface named by HOROVOD_GLOO_IFACE on this
host, or of the host name when it is unset or empty; the process-set scopes on the host name's
address. An interface missing here terminates the worker as Gloo's exception in hvd.init()
does: "... Unable to find address for: <iface>" on stderr, exit 134.

    horovod_standin.py [--print-addresses]   (also prints "bound <scope> <ip>" per scope)

Prints "rendezvous ok rank <r>" and exits 0 on success; raises (exit 1) on any deviation.
"""
import hashlib
import os
import socket
import struct
import sys
import time

import gloo_device

ADDR = os.environ["HOROVOD_GLOO_RENDEZVOUS_ADDR"]
PORT = int(os.environ["HOROVOD_GLOO_RENDEZVOUS_PORT"])
PRINT_ADDRESSES = "--print-addresses" in sys.argv[1:]


def http(method, path, body=b"", raw=None):
    """One request on a new connection; returns (status, body)."""
    s = socket.create_connection((ADDR, PORT), timeout=30)
    try:
        if raw is None:
            raw = (f"{method} {path} HTTP/1.1\r\nHost: {ADDR}\r\n"
                   f"Content-Length: {len(body)}\r\n\r\n").encode() + body
        s.sendall(raw)
        # Read by Content-Length, then close: the server may keep the connection open.
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = s.recv(65536)
            assert chunk, "connection closed before the response headers"
            data += chunk
        head, _, rest = data.partition(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        status = int(lines[0].split(b" ")[1])
        lengths = [l for l in lines[1:] if l.startswith(b"Content-Length: ")]
        assert len(lengths) == 1, f"no exact Content-Length header in {head!r}"
        n = int(lengths[0].split(b": ")[1])
        while len(rest) < n:
            chunk = s.recv(65536)
            assert chunk, "connection closed before the body ended"
            rest += chunk
        assert len(rest) == n, f"body {len(rest)} bytes, Content-Length {n}"
    finally:
        s.close()
    return status, rest


pack_address = gloo_device.pack_address


def scope_rendezvous(scope, rank, size, ip):
    """Gloo's rendezvous and connectFullMesh for one scope, listening on ip."""
    if PRINT_ADDRESSES:
        print(f"bound {scope} {ip}")
    listener = socket.socket()
    listener.bind((ip, 0))
    listener.listen(size)
    port = listener.getsockname()[1]
    assert http("PUT", f"/{scope}/rank_{rank}", socket.gethostname().encode())[0] == 200
    for i in range(rank):
        status, _ = http("GET", f"/{scope}/rank_{i}")
        assert status in (200, 404), status
    blob = b"".join(pack_address(ip, port, rank, peer) for peer in range(size) if peer != rank)
    assert http("PUT", f"/{scope}/{rank}", blob)[0] == 200
    peer_ports = {}
    deadline = time.monotonic() + 30
    for i in range(size):
        if i == rank:
            continue
        while http("GET", f"/{scope}/{i}")[0] != 200:  # a missing key is an immediate 404
            assert time.monotonic() < deadline, f"{scope}/{i} never appeared"
            time.sleep(0.01)
        status, value = http("GET", f"/{scope}/{i}")
        assert status == 200
        pip, pport = gloo_device.unpack_address(value)
        want = b"".join(pack_address(pip, pport, i, p) for p in range(size) if p != i)
        assert value == want, f"{scope}/{i}: value changed in transit"
        peer_ports[i] = (pip, pport)
    # Barrier over the mesh: tell every peer we are here, hear from every peer.
    for i, p in peer_ports.items():
        with socket.create_connection(p, timeout=30) as c:
            c.sendall(struct.pack("<I", rank))
    heard = set()
    listener.settimeout(30)
    while len(heard) < size - 1:
        c, _ = listener.accept()
        with c:
            heard.add(struct.unpack("<I", c.recv(4))[0])
    listener.close()
    assert heard == set(peer_ports), (heard, peer_ports)
    assert http("DELETE", f"/{scope}/{rank}")[0] == 200


def main():
    env = {k: int(os.environ["HOROVOD_" + k]) for k in
           ("RANK", "SIZE", "LOCAL_RANK", "LOCAL_SIZE", "CROSS_RANK", "CROSS_SIZE")}
    host = os.environ["HOROVOD_HOSTNAME"]
    lr = env["LOCAL_RANK"]
    set_hash = hashlib.sha1(",".join(map(str, range(env["SIZE"]))).encode() + b",").hexdigest()[:16]
    try:  # hvd.init() creates the main context's device first
        main_ip = gloo_device.main_context_address()
        set_ip = gloo_device.process_set_address()
    except gloo_device.EnforceNotMet as e:
        sys.stdout.flush()
        sys.stderr.write("terminate called after throwing an instance of 'gloo::EnforceNotMet'\n"
                         f"  what():  {e}\n")
        sys.stderr.flush()
        os._exit(134)
    scopes = [
        ("global", env["RANK"], env["SIZE"], main_ip),
        (f"local_{host}", lr, env["LOCAL_SIZE"], main_ip),
        (f"cross_{lr}", env["CROSS_RANK"], env["CROSS_SIZE"], main_ip),
        (f"global_process_set_hash_{set_hash}", env["RANK"], env["SIZE"], set_ip),
        (f"local_{host}_process_set_hash_{set_hash}", lr, env["LOCAL_SIZE"], set_ip),
        (f"cross_{lr}_process_set_hash_{set_hash}", env["CROSS_RANK"], env["CROSS_SIZE"], set_ip),
    ]
    if env["RANK"] == 0:
        # Malformed requests are answered and do no harm.
        assert http("GET", "/a/b/c")[0] == 400
        assert http(None, None, raw=b"PUT /global/x HTTP/1.1\r\nHost: x\r\n\r\n")[0] == 411
        assert http(None, None, raw=b"NONSENSE\r\n\r\n")[0] == 400
        assert http("POST", "/global/x", b"1")[0] == 405
    for scope, r, n, ip in scopes:
        scope_rendezvous(scope, r, n, ip)
    # Everyone has sent every DELETE once this ad-hoc rendezvous completes.
    scope_rendezvous("final_check", env["RANK"], env["SIZE"], main_ip)
    if env["RANK"] == 0:
        for scope, _, _, _ in scopes[:3]:  # planned scopes: cleared whole once all members finished
            assert http("GET", f"/{scope}/0")[0] == 404, scope
            assert http("GET", f"/{scope}/rank_0")[0] == 404, scope
        for scope, _, _, _ in scopes[3:]:  # ad-hoc scopes: deleted key by key
            assert http("GET", f"/{scope}/0")[0] == 404, scope
            assert http("GET", f"/{scope}/rank_0")[0] == 200, scope
    print(f"rendezvous ok rank {env['RANK']}")


if __name__ == "__main__":
    sys.exit(main())
