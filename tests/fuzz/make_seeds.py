#!/usr/bin/python3
"""Writes the seed corpora of the discovery-output, host-list and Wire fuzz targets from the
examples of docs/horovod-compat.md (§2.1, §2.2, §2.4, §5.2, §5.7). The Wire frames wrap the
spec's pickle test vectors (tests/fuzz/corpus/pickle/vector*) under the spec's key bytes(range(32));
their MACs are the spec's. Run from the repository root; rerunning rewrites the same files."""
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


if __name__ == "__main__":
    main()
