"""A Horovod elastic worker's notification service, written from the spec (stdlib only).

Classes are stubs named exactly as Horovod's (horovod.runner.common.util.network.PingRequest, ...,
horovod.runner.elastic.worker.HostsUpdatedRequest / HostUpdateResult), so Python's real `pickle`
resolves what the driver sends by reference, as a worker would. Frames are Horovod's Wire format:
HMAC-SHA256(key, body) | little-endian int32 length | pickle. A bad MAC gets no reply (as in
Horovod). Replies are pickled with this Python's highest protocol, as Horovod's cloudpickle does.

Prints "listening <port> <key hex>" when ready, then "notified <timestamp> <res int> <res type>"
per HostsUpdatedRequest; serves until stdin closes.
Options: --bad-service (answer pings as another service), --drop N (close the first N
notification connections without answering), --key HEX (use this key).
"""
import hashlib
import hmac
import os
import pickle
import socketserver
import struct
import sys
import threading


from horovod_classes import (AckResponse, HostsUpdatedRequest, HostUpdateResult, PingRequest,
                             PingResponse)

args = sys.argv[1:]
KEY = bytes.fromhex(args[args.index("--key") + 1]) if "--key" in args else os.urandom(32)
BAD_SERVICE = "--bad-service" in args
drops = [int(args[args.index("--drop") + 1]) if "--drop" in args else 0]
lock = threading.Lock()


def read_exact(rfile, n):
    data = rfile.read(n)
    if len(data) != n:
        raise EOFError
    return data


class Handler(socketserver.StreamRequestHandler):
    def handle(self):
        try:
            mac = read_exact(self.rfile, 32)
            (length,) = struct.unpack("<i", read_exact(self.rfile, 4))
            body = read_exact(self.rfile, length)
        except EOFError:
            return
        if not hmac.compare_digest(mac, hmac.new(KEY, body, hashlib.sha256).digest()):
            print("Traceback: Exception: Security error: digest did not match the message",
                  file=sys.stderr, flush=True)
            return
        request = pickle.loads(body)
        if isinstance(request, PingRequest):
            name = "some other service" if BAD_SERVICE else "worker notification service"
            response = PingResponse(name, self.client_address[0])
        elif isinstance(request, HostsUpdatedRequest):
            with lock:
                if drops[0] > 0:
                    drops[0] -= 1
                    return
                res = HostUpdateResult(request.res)
                print(f"notified {request.timestamp} {int(res)} {type(request.res).__name__}",
                      flush=True)
            response = AckResponse()
        else:
            return
        out = pickle.dumps(response, protocol=pickle.HIGHEST_PROTOCOL)
        self.wfile.write(hmac.new(KEY, out, hashlib.sha256).digest() + struct.pack("<i", len(out)) + out)


def main():
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(f"listening {server.server_address[1]} {KEY.hex()}", flush=True)
    sys.stdin.read()
    server.shutdown()


if __name__ == "__main__":
    main()
