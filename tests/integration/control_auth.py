"""The control endpoints' exchange (control/control_auth.h's header comment) written again in
Python from that comment, for tests that speak to etrun's job and pool endpoints directly, and
listeners that stand where a pool would: one that records every byte and answers like any plain
HTTP server, and a fake pool that knows a token and grants what the test says."""
import hashlib
import hmac
import json
import os
import socket
import threading


def mac(key, *parts):
    return hmac.new(key, "\n".join(parts).encode(), hashlib.sha256)


def read_message(sock):
    """One HTTP message: (first line, {lower-case header: value}, body), or None when the peer
    closed before a whole one came."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            return None
        data += chunk
    head, body = data.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0"))
    while len(body) < length:
        chunk = sock.recv(65536)
        if not chunk:
            return None
        body += chunk
    return lines[0], headers, body[:length]


class Client:
    """One connection to an endpoint, as ControlRequest makes it."""

    def __init__(self, token, port, address="127.0.0.1"):
        self.token = token.encode()
        self.sock = socket.create_connection((address, port), timeout=10)
        self.cn = os.urandom(32).hex()
        self.n = 0
        self.key = None

    def close(self):
        self.sock.close()

    def hello(self):
        self.sock.sendall(f"POST /auth HTTP/1.1\r\nHost: x\r\nEtrun-Auth: v1 hello {self.cn}\r\n"
                          f"Content-Length: 0\r\n\r\n".encode())
        first, headers, _ = read_message(self.sock)
        assert first.startswith("HTTP/1.1 200"), first
        v1, sn, proof = headers["etrun-auth"].split(" ")
        assert v1 == "v1" and hmac.compare_digest(
            proof, mac(self.token, "etrun-auth v1 server", self.cn, sn).hexdigest()), "no proof"
        self.key = mac(self.token, "etrun-auth v1 session", self.cn, sn).digest()

    def signed(self, method, target, body=b""):
        """The bytes of request N, signed; N moves on."""
        bh = hashlib.sha256(body).hexdigest()
        signature = mac(self.key, "etrun-auth v1 request", str(self.n), method, target, bh).hexdigest()
        data = (f"{method} {target} HTTP/1.1\r\nHost: x\r\nEtrun-Auth: v1 {self.n} {bh} {signature}\r\n"
                f"Content-Length: {len(body)}\r\n\r\n").encode() + body
        self.n += 1
        return data

    def send(self, data):
        """Sends raw bytes; returns (status, body, whether the answer is signed for request
        N - 1), or None when the server closed without answering."""
        self.sock.sendall(data)
        message = read_message(self.sock)
        if message is None:
            return None
        first, headers, body = message
        status = int(first.split()[1])
        ok = False
        fields = headers.get("etrun-auth", "").split(" ")
        if self.key is not None and len(fields) == 4 and fields[1] == str(self.n - 1):
            expect = mac(self.key, "etrun-auth v1 response", fields[1], str(status),
                         hashlib.sha256(body).hexdigest()).hexdigest()
            ok = fields[2] == hashlib.sha256(body).hexdigest() and hmac.compare_digest(fields[3], expect)
        return status, body, ok

    def request(self, method, target, body=b""):
        status, answer, ok = self.send(self.signed(method, target, body))
        assert ok, (status, answer)
        return status, answer


class Listener:
    """A TCP listener on 127.0.0.1 that serves each connection on a thread of its own and
    records every byte it receives. `serve(conn, record)` handles one connection; record(data)
    keeps what arrived."""

    def __init__(self, serve):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.received = bytearray()
        self.lock = threading.Lock()
        self.serve = serve
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def record(self, data):
        with self.lock:
            self.received += data

    def run(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self.handle, args=(conn,), daemon=True).start()

    def handle(self, conn):
        try:
            with conn:
                conn.settimeout(10)
                self.serve(conn, self.record)
        except OSError:
            pass

    def close(self):
        self.sock.close()

    def bytes(self):
        with self.lock:
            return bytes(self.received)


def plain_http(conn, record):
    """Any HTTP server: reads a request's head, answers 200 "{}", reads on until the client
    closes (recording all of it)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return
        record(chunk)
        data += chunk
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")
    while True:
        chunk = conn.recv(65536)
        if not chunk:
            return
        record(chunk)


class RecordingReader:
    """A socket's reads recorded: read_message over it keeps every byte."""

    def __init__(self, conn, record):
        self.conn, self.record = conn, record

    def recv(self, n):
        data = self.conn.recv(n)
        self.record(data)
        return data


def fake_pool(token, routes):
    """A pool endpoint that knows `token` and answers routes[(method, path)](body) ->
    (status, JSON value); every request must carry a valid signature."""
    key_token = token.encode()

    def serve(conn, record):
        reader = RecordingReader(conn, record)
        message = read_message(reader)
        if message is None:
            return
        _, headers, _ = message
        fields = headers.get("etrun-auth", "").split(" ")
        if fields[:2] != ["v1", "hello"]:
            conn.sendall(b"HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\n\r\n")
            return
        cn, sn = fields[2], os.urandom(32).hex()
        proof = mac(key_token, "etrun-auth v1 server", cn, sn).hexdigest()
        key = mac(key_token, "etrun-auth v1 session", cn, sn).digest()
        conn.sendall(f"HTTP/1.1 200 OK\r\nEtrun-Auth: v1 {sn} {proof}\r\nContent-Length: 0\r\n\r\n".encode())
        n = 0
        while True:
            message = read_message(reader)
            if message is None:
                return
            first, headers, body = message
            method, target, _ = first.split(" ")
            fields = headers.get("etrun-auth", "").split(" ")
            bh = hashlib.sha256(body).hexdigest()
            want = mac(key, "etrun-auth v1 request", str(n), method, target, bh).hexdigest()
            if len(fields) != 4 or fields[1] != str(n) or fields[2] != bh or fields[3] != want:
                conn.sendall(b"HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\n\r\n")
                return
            route = routes.get((method, target.split("?")[0]))
            status, value = route(body) if route else (404, {"error": "no such endpoint"})
            answer = json.dumps(value).encode()
            rh = hashlib.sha256(answer).hexdigest()
            signature = mac(key, "etrun-auth v1 response", str(n), str(status), rh).hexdigest()
            conn.sendall(f"HTTP/1.1 {status} X\r\nEtrun-Auth: v1 {n} {rh} {signature}\r\n"
                         f"Content-Length: {len(answer)}\r\n\r\n".encode() + answer)
            n += 1

    return serve


def start_time(pid):
    """/proc/<pid>/stat's field 22: when the process started (clock ticks since boot)."""
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[19])
