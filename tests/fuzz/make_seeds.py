#!/usr/bin/python3
"""Writes the seed corpora of the discovery-output, host-list and Wire fuzz targets from the
examples of docs/horovod-compat.md (§2.1, §2.2, §2.4, §5.2, §5.7). The Wire frames wrap the
spec's pickle test vectors (tests/fuzz/corpus/pickle/vector*) under the spec's key bytes(range(32));
their MACs are the spec's. The control-auth seeds are programs of tests/fuzz/control_auth_fuzz.cc
(its ops: raw bytes, the client's hello, a signed request, a hello's answer), their MACs computed
here from control/control_auth.h's header comment. Run from the repository root; rerunning
rewrites the same files."""
import hashlib
import hmac
import os
import struct

CORPUS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def write(target, name, data):
    os.makedirs(os.path.join(CORPUS, target), exist_ok=True)
    with open(os.path.join(CORPUS, target, name), "wb") as f:
        f.write(data.encode() if isinstance(data, str) else data)


# §2.4: what discovery scripts print, good and bad.
DISCOVERY = {
    "two_hosts": "host-1:2\nhost-2:4\n",
    "crlf": "host-1:2\r\nhost-2:4\r\n",
    "no_slots": "node-a\nnode-b:3\n",
    "blank_lines_and_spaces": "\n  a:1\n\n\tb : 2 \n\n",
    "duplicate": "a:2\nb:1\na:3\n",
    "zero_slots": "a:0\nb:1\n",
    "empty": "",
    "ip_addresses": "127.0.0.1:1\n10.0.0.5:8\n",
    "negative": "a:-1\n",
    "two_colons": "a:1:2\n",
    "junk_slots": "a:x\n",
    "bad_name": "user@a:1\n",
    "option_like": "a:1\n-G:1\n",
    "big_counts": "a:2147483647\nb:2147483647\n",
}
# §2.1 (-H) and §2.2 (hostfile): both parsers get every seed.
HOSTS = {
    "flag_two": "worker-0:2,worker-1:2",
    "flag_mixed": "localhost:3,127.0.0.1:1",
    "flag_spaces": " a:1 , b:2 ",
    "flag_zero": "a:0",
    "flag_trailing_comma": "a:1,",
    "flag_bare": "a",
    "flag_ipv6": "[::1]:2",
    "flag_twice": "a:1,a:2",
    "flag_big": "a:2147483647,b:2147483647,c:1",
    "flag_option_like": "a:1,-G:1",
    "file_simple": "host slots=4\n",
    "file_max_slots": "host slots=4 max_slots=8\n",
    "file_comments": "# hosts\n\nnode-a slots=4  # fast\nnode-b\n\tnode-c slots=2\n",
    "file_crlf": "a slots=1\r\nb slots=2\r\n",
    "file_no_equals": "a slots\n",
    "file_twice": "a slots=1\na slots=2\n",
    "file_slots_twice": "a slots=1 slots=2\n",
    "file_only_comments": "# nothing\n\n",
    "file_option_like": "a slots=1\n-G slots=2\n",
}


def frame(key, body, length=None):
    mac = hmac.new(key, body, hashlib.sha256).digest()
    return mac + struct.pack("<i", len(body) if length is None else length) + body


def main():
    for name, text in DISCOVERY.items():
        write("discovery_output", name, text)
    for name, text in HOSTS.items():
        write("host_slots", name, text)
    key = bytes(range(32))
    pickles = os.path.join(CORPUS, "pickle")
    names = ["ping_request", "ping_response", "ack_response", "hosts_updated_added",
             "hosts_updated_removed_added", "hosts_updated_name_form", "worker_addresses",
             "worker_addresses_two_nics"]
    for i, name in enumerate(names):
        with open(os.path.join(pickles, "vector%d" % i), "rb") as f:
            body = f.read()
        write("wire", name, frame(key, body))
    with open(os.path.join(pickles, "vector0"), "rb") as f:
        ping = f.read()
    good = frame(key, ping)
    write("wire", "empty_body", frame(key, b""))
    write("wire", "truncated", good[:50])
    write("wire", "header_only", good[:36])
    write("wire", "trailing_bytes", good + b"\x00extra")
    write("wire", "wrong_mac", bytes([good[0] ^ 1]) + good[1:])
    write("wire", "negative_length", frame(key, ping, length=-1))
    write("wire", "big_endian_length", good[:32] + struct.pack(">i", len(ping)) + ping)
    write("wire", "oversized_length", frame(key, ping, length=1 << 30))

    control_auth_seeds()


# control_auth_fuzz.cc's fixed token and server nonce; the client's nonce is 0x11 * 32.
AUTH_TOKEN = b"0123456789abcdef" * 4
AUTH_SN = "22" * 32
AUTH_CN = "11" * 32


def field(data, scale=1):
    """A field of the fuzz target's input: its length / scale as one byte, then the bytes
    (padded with spaces to a multiple of `scale`)."""
    data = data.encode() if isinstance(data, str) else data
    data += b" " * (-len(data) % scale)
    assert len(data) // scale < 256
    return bytes([len(data) // scale]) + data


def auth_mac(key, *parts):
    return hmac.new(key, "\n".join(parts).encode(), hashlib.sha256).hexdigest()


def signed_raw(n, method, target, body):
    """A raw HTTP request signed as request `n` of the session of AUTH_CN and AUTH_SN."""
    key = hmac.new(AUTH_TOKEN, f"etrun-auth v1 session\n{AUTH_CN}\n{AUTH_SN}".encode(), hashlib.sha256).digest()
    bh = hashlib.sha256(body.encode()).hexdigest()
    mac = auth_mac(key, "etrun-auth v1 request", str(n), method, target, bh)
    return (f"{method} {target} HTTP/1.1\r\nHost: x\r\nEtrun-Auth: v1 {n} {bh} {mac}\r\n"
            f"Content-Length: {len(body)}\r\n\r\n{body}")


def control_auth_seeds():
    nonce = field(bytes([0x11] * 32))
    hello = bytes([1])

    def request(method, target, body, flip=0, where=(0, 0)):
        return bytes([2]) + field(method) + field(target) + field(body, 4) + bytes([flip, *where])

    def raw(text):
        return bytes([0]) + field(text, 16)

    raw_hello = f"POST /auth HTTP/1.1\r\nHost: x\r\nEtrun-Auth: v1 hello {AUTH_CN}\r\nContent-Length: 0\r\n\r\n"
    proof = auth_mac(AUTH_TOKEN, "etrun-auth v1 server", AUTH_CN, AUTH_SN)
    seeds = {
        "hello_then_requests": nonce + hello + request("GET", "/status", "") +
        request("POST", "/jobs", '{"name":"a"}') + request("DELETE", "/jobs/a", ""),
        "flipped_bit": nonce + hello + request("POST", "/jobs/a/sync", '{"live":{}}', 1, (1, 35)),
        "replayed_raw": nonce + raw(raw_hello) + raw(signed_raw(0, "POST", "/stop", "")) +
        raw(signed_raw(0, "POST", "/stop", "")),
        "raw_in_order": nonce + raw(raw_hello) + raw(signed_raw(0, "GET", "/status", "")) +
        raw(signed_raw(1, "POST", "/priority", '{"job":"a","priority":7}')),
        "bearer": nonce + raw(f"GET /status HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {AUTH_TOKEN.decode()}\r\n\r\n"),
        "no_hello": nonce + raw(signed_raw(0, "GET", "/status", "")),
        "second_hello": nonce + hello + hello + request("GET", "/status", ""),
        "big_body": nonce + hello + request("POST", "/jobs", "x" * 1000),
        "chunked": nonce + raw(raw_hello) + raw(signed_raw(0, "POST", "/jobs", "").replace(
            "Content-Length: 0", "Transfer-Encoding: chunked") + "0\r\n\r\n"),
        "hello_answers": nonce + bytes([3]) + field(f"v1 {AUTH_SN} {proof}") +
        bytes([3]) + field(f"v1 {AUTH_SN} {proof[:-1]}0") + bytes([3]) + field("HTTP/1.1 200 OK"),
    }
    for name, data in seeds.items():
        write("control_auth", name, data)


if __name__ == "__main__":
    main()
