"""The rendezvous store against other users and floods, through the real binary, while a job of
Horovod stand-in workers (horovod_standin.py) uses it: another user of this machine is refused
(403, nothing stored, one warning), and thousands of idle connections and slow senders from one
address are refused past that address's share (503) while the job meets and finishes and
etrun's memory stays bounded (docs/security.md, "Rendezvous access")."""
import os
import resource
import selectors
import socket
import subprocess
import threading
import time

import pytest

from conftest import ETRUN, PYTHON, rank_lines, store_get, wait_until

STANDIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "horovod_standin.py")
USER_WARNING = ("refused rendezvous connections from user 65534 on this machine (only the job's user "
                "may use its store)")
PER_PEER = 4096  # HttpLimits::max_connections_per_peer


def gated_job(tmp_path, np, command, extra=(), env=None):
    """Starts `etrun -np NP -H localhost:NP` whose ranks wait for tmp_path/go before they exec
    `command` (rank 0 first writes the store's port). Returns (process, port)."""
    go, port_file = tmp_path / "go", tmp_path / "port"
    script = (f'if [ "$HOROVOD_RANK" = 0 ]; then echo "$HOROVOD_GLOO_RENDEZVOUS_PORT" > {port_file}.tmp && '
              f'mv {port_file}.tmp {port_file}; fi; while [ ! -e {go} ]; do sleep 0.05; done; exec "$@"')
    proc = subprocess.Popen([ETRUN, "-np", str(np), "-H", f"localhost:{np}", *extra, "sh", "-c", script,
                             "gate", *command], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, env=env)
    if not wait_until(port_file.exists, timeout=60):
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"the job never started: {err.decode()}")
    return proc, int(port_file.read_text())


def release(tmp_path):
    (tmp_path / "go").touch()


def as_nobody(*curl_args):
    """curl run as the user nobody; returns the HTTP code it printed ("000": no answer)."""
    r = subprocess.run(["runuser", "-u", "nobody", "--", "curl", "-s", "-o", "/dev/null", "-w", "%{http_code}",
                        "--max-time", "20", *curl_args], capture_output=True, text=True, timeout=60)
    return r.stdout


def vm_rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="runs curl as the user nobody: needs root")


@needs_root
def meet_while_nobody_tries(tmp_path, proc, port):
    """The user nobody's PUT and GET on the store of gated_job's `proc` get 403 and store nothing
    (root's GET: 404); then the workers are released, and nobody keeps trying to PUT while they
    meet. Returns (stdout, stderr, nobody's HTTP codes)."""
    codes = []
    try:
        url = f"http://127.0.0.1:{port}/global/evil"
        assert as_nobody("-X", "PUT", "--data", "evil", url) == "403"
        assert as_nobody(url) == "403"
        assert store_get(port, "/global/evil") == 404
        stop = threading.Event()

        def keep_trying():
            while not stop.is_set():
                codes.append(as_nobody("-X", "PUT", "--data", "evil", url))

        trier = threading.Thread(target=keep_trying)
        trier.start()
        release(tmp_path)
        out, err = proc.communicate(timeout=120)
        stop.set()
        trier.join()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return out, err, codes


def test_another_user_of_this_machine_is_refused_and_the_workers_still_meet(tmp_path):
    # Given a job of 4 stand-ins run by root, nobody's PUT and GET get 403 before and while the
    # workers meet; the key is not stored (root's GET: 404); the job finishes; one warning line.
    proc, port = gated_job(tmp_path, 4, [PYTHON, STANDIN])
    out, err, codes = meet_while_nobody_tries(tmp_path, proc, port)
    assert proc.returncode == 0, err.decode()
    assert rank_lines(out.decode()) == {r: [f"rendezvous ok rank {r}"] for r in range(4)}
    assert "403" in codes and set(codes) <= {"403", "000"}, codes  # 000: etrun had exited
    assert err.decode().count(USER_WARNING) == 1, err.decode()


class Flood:
    """Connections from 127.0.0.2 to the store until stopped: `idle` ones that never send and
    `slow` ones that announce a 20 MB body and send two bytes of it. Each the server closes at
    its read timeout is replaced by a new one, so the flood stays up; each refused (503) is
    counted and not replaced."""

    def __init__(self, port, idle, slow):
        self.port, self.idle, self.slow = port, idle, slow
        self.sel = selectors.DefaultSelector()
        self.refused = {"idle": 0, "slow": 0}
        self.open = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _connect(self, kind):
        s = socket.socket()
        s.bind(("127.0.0.2", 0))
        s.settimeout(10)
        try:
            s.connect(("127.0.0.1", self.port))
        except OSError:
            s.close()
            return
        if kind == "slow":
            s.sendall(b"PUT /global/slow HTTP/1.1\r\nHost: x\r\nContent-Length: 20000000\r\n\r\nxx")
        s.setblocking(False)
        self.sel.register(s, selectors.EVENT_READ, kind)
        self.open += 1

    def start(self):
        for _ in range(self.slow):
            self._connect("slow")
        for _ in range(self.idle):
            self._connect("idle")
        self.thread.start()

    def _run(self):
        while not self.stop.is_set():
            for key, _ in self.sel.select(timeout=0.1):
                s, kind = key.fileobj, key.data
                try:
                    data = s.recv(4096)
                except OSError:
                    data = b""
                refused = data.startswith(b"HTTP/1.1 503")
                self.refused[kind] += refused
                self.sel.unregister(s)
                s.close()
                self.open -= 1
                if not refused and not self.stop.is_set():
                    self._connect(kind)

    def close(self):
        self.stop.set()
        self.thread.join()
        for key in list(self.sel.get_map().values()):
            key.fileobj.close()


def meet_under_flood(tmp_path, np, command, env=None):
    """gated_job(NP, command) admitting 127.0.0.2, which opens 40 slow senders and 4,300 idle
    connections (4,096 is one address's share) and keeps them up; once refusals come back the
    workers are released and meet. Checks that the flood was refused past its share, in one
    warning, and that etrun's RSS stayed bounded. Returns (etrun's exit code, stdout, stderr)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard < 6000:
        pytest.skip(f"needs 6,000 open files, the limit is {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    proc, port = gated_job(tmp_path, np, command, ["--rendezvous-allow", "127.0.0.2/32"], env=env)
    flood = Flood(port, idle=PER_PEER + 204, slow=40)
    rss = [vm_rss_kib(proc.pid)]
    try:
        flood.start()
        assert wait_until(lambda: flood.refused["idle"] >= 150 and flood.refused["slow"] >= 20, timeout=60), \
            flood.refused
        rss.append(vm_rss_kib(proc.pid))
        release(tmp_path)
        while proc.poll() is None and len(rss) < 1200:
            rss.append(vm_rss_kib(proc.pid))
            time.sleep(0.1)
        out, err = proc.communicate(timeout=120)
    finally:
        flood.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    text = err.decode()
    assert text.count("refused rendezvous connections from 127.0.0.2: it has 4096 open") == 1, text
    # ~4,100 open connections and 13 reserved 20 MB bodies (reserved, barely touched): +13 MiB on
    # the 2-core development VM (8.6 MiB before, 22 MiB at the peak). An AddressSanitizer etrun
    # keeps freed blocks in its quarantine and their shadow beside them (+56 MiB in CI,
    # 2026-11-29); its bound is four times the plain one, still far below the 800 MB that 40
    # unbounded 20 MB bodies would take. A ThreadSanitizer etrun keeps shadow memory beside all it
    # touches (+52 MiB here, 2026-11-29; +91 MiB before the store's threads had a shard each): the
    # same bound.
    sanitized = "ASAN_OPTIONS" in os.environ or "TSAN_OPTIONS" in os.environ
    bound = 4 * 48 * 1024 if sanitized else 48 * 1024
    assert max(rss) - rss[0] < bound, (rss[0], max(rss))
    return proc.returncode, out.decode(), text


def test_a_flood_from_one_address_is_refused_past_its_share_while_the_job_meets(tmp_path):
    # Given a job of 4 stand-ins admitting 127.0.0.2, that address opens 40 slow senders and
    # 4,300 idle connections (4,096 is one address's share) and keeps them up: the connections
    # past its share and the bodies past its share of bytes get 503 at once, the workers (from
    # 127.0.0.1) meet and finish, one warning names the address, and etrun's RSS stays bounded.
    code, out, err = meet_under_flood(tmp_path, 4, [PYTHON, STANDIN])
    assert code == 0, err
    assert rank_lines(out) == {r: [f"rendezvous ok rank {r}"] for r in range(4)}
