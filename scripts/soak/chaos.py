"""Chaos soak for etrun's elastic mode (run through scripts/soak.sh; Debian's /usr/bin/python3,
stdlib only for the Horovod phase).

    chaos.py [--seconds 60] [--seed N] [--torch-seconds 30] [--keep DIR] [--etrun build/etrun]

Phase 1 runs an elastic etrun job of Horovod stand-in workers (tests/integration/
elastic_standin.py with --record-dir and --steps-file) on this machine's local host names
(localhost, 127.0.0.1 and the hostname when it is local) while a seeded driver, one action at a
time, kills ranks (SIGKILL, SIGTERM), pauses them (SIGSTOP, then SIGCONT before --elastic-timeout),
edits the hosts file that the discovery script prints (add, remove, flap, change slots), makes
the script print garbage once in a while and hang past --discovery-timeout once, and scales the
job with `etrun scale --remove/--add`. After --seconds it stops, puts the hosts back, writes the
total step count (a little past the last committed step) to the steps file and lets the job end.
Phase 2 (--torch-seconds, 0 skips it) runs scripts/examples/torch_elastic.py under
`--elastic-mode restart` with fewer, gentler actions. Phase 3 (--pool-seconds, 0 skips it) runs
`etrun pool start` on 8 slots while stand-in trainings join it (--pool, random min/max and
priority), finish, get SIGKILLed, change priority, and the pool itself is restarted; it checks
that no pool slot ever had processes of two jobs (sampling /proc), that no allocation event holds
more slots than exist, and that every job that finished committed each step exactly once.

Then it checks, and prints one line per failed check and a verdict:
  1. exit code 0, and a job_end event with exit_code 0;
  2. the final state's history (the stand-ins' sid chain) holds every step exactly once, in order,
     every process committed on top of the state it held, restores only resumed committed states;
  3. every line a rank printed (tagged p<pid>#<n>) is in etrun's output exactly once, in order,
     and matches the rank's own copy (a killed rank's last line may be missing from its copy);
  4. no process with the job's marker is left, etrun's fds and zombie children do not pile up,
     the control registry entry is gone, this process has the fds it started with;
  5. etrun's RSS is flat: the last third's peak is within 20% + 4 MiB of the first third's, and
     with 5 minutes of chaos or more, its RSS at the end is within 1 MiB of its RSS at 1 minute.
Exit code: 0 pass, 1 a check failed, 2 bad usage or setup (e.g. no etrun binary).
The seed is printed first; --seed replays the same sequence of actions (the timing of the job,
and so what each action hits, still varies).
"""
import argparse
import collections
import datetime
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PYTHON = "/usr/bin/python3"
STANDIN = os.path.join(ROOT, "tests", "integration", "elastic_standin.py")
TORCH_EXAMPLE = os.path.join(ROOT, "scripts", "examples", "torch_elastic.py")
LINE_RE = re.compile(r"^\[(\d+)\]<stdout>:p(\d+)#(\d+) (.*)$")

T0 = time.monotonic()


def say(msg):
    print(f"soak: [{time.monotonic() - T0:7.2f}s] {msg}", flush=True)


# ---------------------------------------------------------------------------------------------
# /proc helpers

def processes_with_marker(marker):
    """{pid: cmdline} of live (non-zombie) processes whose environment contains marker."""
    found = {}
    needle = marker.encode()
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if needle not in f.read():
                    continue
            with open(f"/proc/{pid}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
            if state != b"Z":
                found[int(pid)] = cmd
        except OSError:
            continue
    return found


def has_marker(pid, marker):
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return marker.encode() in f.read()
    except OSError:
        return False


def own_fd_count():
    return len(os.listdir("/proc/self/fd"))


def local_host_names():
    """localhost, 127.0.0.1 and this machine's name if etrun would treat it as local: it must
    resolve to 127.0.0.1 or to an address of an interface (other 127.x addresses are remote)."""
    names = ["localhost", "127.0.0.1"]
    name = socket.gethostname()
    if name in names:
        return names
    try:
        addrs = socket.gethostbyname_ex(name)[2]
    except OSError:
        return names
    for addr in addrs:
        if addr == "127.0.0.1":
            return names + [name]
        if addr.startswith("127."):
            continue
        try:
            with socket.socket() as s:
                s.bind((addr, 0))  # binds only to an address of this machine
            return names + [name]
        except OSError:
            continue
    return names


# ---------------------------------------------------------------------------------------------
# The job, its discovery script and the sampler

class Discovery:
    """A discovery script that prints a hosts file the driver replaces atomically; a `garbage`
    file makes its next run print garbage, a `hang` file makes its next run sleep."""

    def __init__(self, workdir, hosts):
        self.dir = workdir
        self.hosts_path = os.path.join(workdir, "hosts")
        self.script = os.path.join(workdir, "discover.sh")
        self.hosts = {}
        self.write(hosts)
        with open(self.script, "w") as f:
            f.write(f"""#!/bin/sh
# Written by scripts/soak/chaos.py: prints {self.hosts_path}, or garbage, or hangs, once.
d='{workdir}'
if [ -e "$d/hang" ]; then rm -f "$d/hang"; exec sleep 600; fi
if [ -e "$d/garbage" ]; then rm -f "$d/garbage"; printf 'localhost:two\\n::: ###\\n'; exit 0; fi
exec cat "$d/hosts"
""")
        os.chmod(self.script, 0o755)

    def write(self, hosts):
        self.hosts = dict(hosts)
        tmp = self.hosts_path + ".tmp"
        with open(tmp, "w") as f:
            f.write("".join(f"{h}:{n}\n" for h, n in self.hosts.items()))
        os.replace(tmp, self.hosts_path)  # the script never sees a half-written file

    def touch(self, name):
        open(os.path.join(self.dir, name), "w").close()

    def clear_tricks(self):
        for name in ("hang", "garbage"):
            try:
                os.unlink(os.path.join(self.dir, name))
            except FileNotFoundError:
                pass


class Job:
    def __init__(self, etrun, workdir, name, args, env):
        self.etrun, self.name, self.env = etrun, name, env
        self.out_path = os.path.join(workdir, f"{name}.out")
        self.err_path = os.path.join(workdir, f"{name}.err")
        self.events_path = os.path.join(workdir, f"{name}.events.jsonl")
        with open(self.out_path, "wb") as out, open(self.err_path, "wb") as err:
            self.proc = subprocess.Popen(
                [etrun, "--job-name", name, "--events-file", self.events_path, *args],
                stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=env)
        self.samples = []  # (t, rss_kib, fds, zombie pids)
        self.blacklisted = set()  # from the events file, read as it grows
        self._events_seen = 0
        self._stop = threading.Event()
        self._sampler = threading.Thread(target=self._sample, daemon=True)
        self._sampler.start()

    def _sample(self):
        pid = self.proc.pid
        while not self._stop.wait(0.25):
            try:
                with open(f"/proc/{pid}/status") as f:
                    rss = next(int(l.split()[1]) for l in f if l.startswith("VmRSS:"))
                fds = len(os.listdir(f"/proc/{pid}/fd"))
                with open(f"/proc/{pid}/task/{pid}/children") as f:
                    children = f.read().split()
            except (OSError, StopIteration):
                continue  # exited (or exiting)
            zombies = []
            for child in children:
                try:
                    with open(f"/proc/{child}/stat", "rb") as f:
                        if f.read().rsplit(b")", 1)[1].split()[0] == b"Z":
                            zombies.append(int(child))
                except OSError:
                    pass
            self.samples.append((time.monotonic(), rss, fds, zombies))

    def stop_sampling(self):
        self._stop.set()
        self._sampler.join()

    def etrun_cmd(self, args, timeout=60):
        try:
            return subprocess.run([self.etrun, *args], capture_output=True, text=True,
                                  timeout=timeout, env=self.env, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            return subprocess.CompletedProcess(args, -1, "", f"timed out after {timeout} s")

    def status(self):
        r = self.etrun_cmd(["status", self.name, "--json"], timeout=10)
        if r.returncode != 0:
            return None
        try:
            return json.loads(r.stdout)
        except ValueError:
            return None

    def running_ranks(self):
        """The running ranks of the current world ([] while the job resets or finishes)."""
        s = self.status() or {}
        if s.get("state") != "running":
            return []
        return [r for r in s.get("ranks", [])
                if r.get("state") == "running" and r.get("pid") and r.get("rank") is not None]

    def events(self):
        """The events so far (whole lines only); also keeps self.blacklisted up to date."""
        try:
            with open(self.events_path) as f:
                lines = f.read().split("\n")[:-1]
        except OSError:
            return []
        events = [json.loads(line) for line in lines]
        for e in events[self._events_seen:]:
            if e["event"] == "host_blacklisted":
                self.blacklisted.add(e["host"])
            elif e["event"] == "host_resurrected":
                self.blacklisted.discard(e["host"])
        self._events_seen = len(events)
        return events

    def wait_event(self, predicate, timeout):
        """Waits until some event after those seen so far matches; False on timeout."""
        start = len(self.events())
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.proc.poll() is None:
            if any(predicate(e) for e in self.events()[start:]):
                return True
            time.sleep(0.05)
        return False

    def discovered(self):
        """The host list of the last discovery event, as {host: slots}."""
        found = [e for e in self.events() if e["event"] == "discovery"]
        return {h["host"]: h["slots"] for h in found[-1]["hosts"]} if found else {}


# ---------------------------------------------------------------------------------------------
# The chaos driver

class Chaos:
    def __init__(self, rng, job, discovery, pool, marker, max_slots, min_pause, max_pause,
                 failures_blacklist=True, record_dir=None):
        self.rng, self.job, self.disc, self.pool = rng, job, discovery, pool
        self.record_dir = record_dir
        self.failures_blacklist = failures_blacklist
        self.marker, self.max_slots = marker, max_slots
        self.min_pause, self.max_pause = min_pause, max_pause
        self.counts = collections.Counter()
        self.hung = False
        self.removed_by_scale = None
        self.overrides = {}  # host -> slots, or None for removed: what `etrun scale` set
        self.scale_results = []

    def expected_hosts(self):
        """What etrun should list: the hosts file with the scale overrides applied."""
        hosts = {h: n for h, n in self.disc.hosts.items() if h not in self.overrides}
        hosts.update({h: n for h, n in self.overrides.items() if n is not None})
        return hosts

    def can_lose(self, host, ranks):
        """Whether the job survives losing `host` (a failure, removal or drain), by Horovod's
        rules (spec 6.5): a failure that leaves every host of the round blacklisted ends the job
        (step 4), and so does a new round without any host of the previous one, which carries the
        state ("no previous host remaining", step 6). Those ends are by design, so the soak only
        takes a host away while another host of the world, healthy and still listed, survives."""
        if self.record_dir and not self.steady(ranks):
            self.counts["skipped_unsteady"] += 1
            return False
        self.job.events()
        listed = set(self.expected_hosts())
        others = {r["host"] for r in ranks} - {host} - self.job.blacklisted
        if others & listed:
            return True
        self.counts["skipped_last_host"] += 1
        return False

    def steady(self, ranks):
        """Whether every rank of the world has committed a step in the current round, and no
        listed host is in a blacklist cooldown (whose end starts a new round by itself). A rank
        lost while a round's Gloo rendezvous runs leaves the others waiting for it until
        HOROVOD_GLOO_TIMEOUT_SECONDS and then aborting (134), as Horovod's workers do; the job
        then ends with "every rank failed". That is by design, so the soak takes hosts and ranks
        away only from a world that is training."""
        events = self.job.events()
        if self.job.blacklisted & set(self.expected_hosts()):
            return False
        rounds = [e for e in events if e["event"] == "round"]
        status = self.job.status() or {}
        if not rounds or len(ranks) != status.get("world_size"):
            return False
        opened = datetime.datetime.fromisoformat(rounds[-1]["ts"].replace("Z", "+00:00"))
        for r in ranks:
            path = os.path.join(self.record_dir,
                                f"{r['host']}_{r['local_rank']}_{r['pid']}.steps")
            try:
                if os.stat(path).st_mtime <= opened.timestamp():
                    return False
                with open(path, "rb") as f:
                    f.seek(max(0, os.path.getsize(path) - 300))
                    last = f.read().decode(errors="replace").rstrip("\n").split("\n")[-1].split()
            except OSError:
                return False
            if len(last) != 6 or last[0] != "commit" or last[4:] != [str(r["rank"]),
                                                                    str(len(ranks))]:
                return False
        return True

    def settle_discovery(self):
        """Waits (up to 5 s) until etrun has seen the hosts file as it is now, so the next action
        reads a status that already reflects this edit."""
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and self.job.proc.poll() is None:
            if self.job.discovered() == self.expected_hosts():
                return
            time.sleep(0.05)

    def signal_rank(self, sig, what):
        ranks = self.job.running_ranks()
        if not ranks:
            return None
        r = self.rng.choice(ranks)
        if self.failures_blacklist and not self.can_lose(r["host"], ranks):
            return None
        if not has_marker(r["pid"], self.marker):
            return None  # already gone (and the pid must be ours)
        try:
            os.kill(r["pid"], sig)
        except ProcessLookupError:
            return None
        if self.failures_blacklist:  # let etrun blacklist the host before the next action
            self.job.wait_event(lambda e: e["event"] == "host_blacklisted"
                                and e["host"] == r["host"], 10)
        return f"{what} rank {r['rank']} (label {r['label']}) on {r['host']} pid {r['pid']}"

    def kill9(self):
        return self.signal_rank(signal.SIGKILL, "SIGKILL")

    def term(self):
        return self.signal_rank(signal.SIGTERM, "SIGTERM")

    def stop_cont(self):
        ranks = self.job.running_ranks()
        if not ranks:
            return None
        r = self.rng.choice(ranks)
        pause = self.rng.uniform(0.3, 2.0)
        if not has_marker(r["pid"], self.marker):
            return None
        try:
            os.kill(r["pid"], signal.SIGSTOP)
            time.sleep(pause)
        except ProcessLookupError:
            return None
        finally:
            try:
                os.kill(r["pid"], signal.SIGCONT)
            except ProcessLookupError:
                pass
        return f"SIGSTOP rank {r['rank']} on {r['host']} pid {r['pid']} for {pause:.1f} s"

    def add_host(self):
        free = [h for h in self.pool if h not in self.disc.hosts]
        if not free:
            return None
        host, slots = self.rng.choice(free), self.rng.randint(1, self.max_slots)
        self.disc.write({**self.disc.hosts, host: slots})
        self.settle_discovery()
        return f"discovery: add {host}:{slots}"

    def pick_removable(self):
        if len(self.disc.hosts) < 2:
            return None
        host = self.rng.choice(sorted(self.disc.hosts))
        ranks = self.job.running_ranks()
        if not ranks or not self.can_lose(host, ranks):
            return None
        return host

    def remove_host(self):
        host = self.pick_removable()
        if not host:
            return None
        self.disc.write({h: n for h, n in self.disc.hosts.items() if h != host})
        self.settle_discovery()
        return f"discovery: remove {host}"

    def flap(self):
        host = self.pick_removable()
        if not host:
            return None
        before = dict(self.disc.hosts)
        gone = self.rng.uniform(0.4, 2.0)
        self.disc.write({h: n for h, n in before.items() if h != host})
        time.sleep(gone)
        self.disc.write(before)
        self.settle_discovery()
        return f"discovery: flap {host} (gone {gone:.1f} s)"

    def slots(self):
        host = self.rng.choice(sorted(self.disc.hosts))
        n = self.rng.randint(1, self.max_slots)
        if self.disc.hosts[host] == n:
            return None
        if n < self.disc.hosts[host] and self.record_dir and not self.steady(
                self.job.running_ranks()):
            self.counts["skipped_unsteady"] += 1
            return None
        self.disc.write({**self.disc.hosts, host: n})
        self.settle_discovery()
        return f"discovery: {host} now {n} slots"

    def garbage(self):
        self.disc.touch("garbage")
        self.job.wait_event(lambda e: e["event"] == "discovery_failed", 5)
        return "discovery: garbage for one run"

    def hang(self):
        if self.hung:
            return None
        self.hung = True
        self.disc.touch("hang")
        return "discovery: hang past --discovery-timeout once"

    def scale(self, args):
        t = time.monotonic()
        r = self.job.etrun_cmd(["scale", self.job.name, *args, "--timeout", "20s"], timeout=40)
        took = time.monotonic() - t
        self.scale_results.append((args, r.returncode, r.stderr.strip(), took))
        outcome = "ok" if r.returncode == 0 else f"exit {r.returncode}: {r.stderr.strip()}"
        return f"etrun scale {' '.join(args)}: {outcome} ({took:.1f} s)"

    def scale_remove(self):
        ranks = self.job.running_ranks()
        hosts = sorted({r["host"] for r in ranks})
        if len(hosts) < 2:
            return None
        host = self.rng.choice(hosts)
        if not self.can_lose(host, ranks):
            return None
        self.removed_by_scale = host
        self.overrides[host] = None
        return self.scale(["--remove", host])

    def scale_add(self):
        host = self.removed_by_scale or self.rng.choice(self.pool)
        self.removed_by_scale = None
        self.overrides[host] = 1
        return self.scale(["--add", f"{host}:1"])

    def run(self, seconds, actions, scheduled=()):
        """Runs weighted `actions` [(name, weight)] for `seconds`; `scheduled` [(fraction, name)]
        run once each when that fraction of the time has passed."""
        names = [a for a, _ in actions]
        weights = [w for _, w in actions]
        pending = sorted(scheduled)
        end = time.monotonic() + seconds
        start = time.monotonic()
        while time.monotonic() < end and self.job.proc.poll() is None:
            time.sleep(self.rng.uniform(self.min_pause, self.max_pause))
            if time.monotonic() >= end or self.job.proc.poll() is not None:
                break
            scheduled_now = pending and time.monotonic() - start >= pending[0][0] * seconds
            name = pending[0][1] if scheduled_now else self.rng.choices(names, weights)[0]
            what = getattr(self, name)()
            if what:
                if scheduled_now:
                    pending.pop(0)  # a skipped one is tried again after the next pause
                self.counts[name] += 1
                say(what)


# ---------------------------------------------------------------------------------------------
# Checks (pure functions over the evidence; each returns a list of failure strings)

def read_records(record_dir):
    """{process key: [lines]} from the stand-ins' .steps files, and {pid: [lines]} from .out."""
    steps, outs = {}, {}
    for name in sorted(os.listdir(record_dir)):
        path = os.path.join(record_dir, name)
        with open(path, errors="replace") as f:
            lines = f.read().split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        if name.endswith(".steps"):
            steps[name[:-6]] = lines
        elif name.endswith(".out"):
            outs[int(name[:-4].rsplit("_", 1)[1])] = lines
    return steps, outs


def check_steps(records, total):
    """records: {process: [sync/commit/done lines]} -> (failures, final chain length)."""
    failures = []
    commits = {}  # sid -> (step, parent, size)
    committers = collections.defaultdict(set)
    syncs, dones = [], []
    for proc, lines in records.items():
        held = None  # the sid this process holds
        seen = set()
        for line in lines:
            f = line.split()
            try:
                if f[0] == "sync":
                    step, sid = int(f[1]), int(f[2])
                    syncs.append((proc, step, sid))
                    held = sid
                elif f[0] == "commit":
                    step, parent, sid, size = int(f[1]), int(f[2]), int(f[3]), int(f[5])
                    if held is not None and parent != held:
                        failures.append(f"{proc}: committed step {step} on state {parent} but "
                                        f"held state {held}")
                    if sid in seen:
                        failures.append(f"{proc}: committed state {sid} (step {step}) twice")
                    seen.add(sid)
                    if sid in commits and commits[sid][:2] != (step, parent):
                        failures.append(f"state {sid}: committed as step {step} on {parent} by "
                                        f"{proc} but as step {commits[sid][0]} on "
                                        f"{commits[sid][1]} elsewhere")
                    commits.setdefault(sid, (step, parent, size))
                    committers[sid].add(proc)
                    held = sid
                elif f[0] == "done":
                    dones.append((proc, int(f[1]), int(f[2])))
                else:
                    raise ValueError(f[0])
            except (IndexError, ValueError):
                failures.append(f"{proc}: unreadable record {line!r}")
    for proc, step, sid in syncs:
        if sid == 0:
            if step != 0:
                failures.append(f"{proc}: resumed the initial state at step {step}")
        elif sid not in commits:
            failures.append(f"{proc}: resumed state {sid} that nobody committed")
        elif commits[sid][0] + 1 != step:
            failures.append(f"{proc}: resumed state {sid} (after step {commits[sid][0]}) as "
                            f"step {step}")
    if not dones:
        return failures + ["no rank recorded the end of training (done)"], 0
    finals = {(steps, sid) for _, steps, sid in dones}
    if len(finals) != 1:
        return failures + [f"ranks ended in different states: {sorted(finals)}"], 0
    (steps, sid), = finals
    if total is not None and steps != total:
        failures.append(f"training ended after {steps} steps, expected {total}")
    chain = []
    while sid != 0 and len(chain) <= steps + 1:
        if sid not in commits:
            failures.append(f"state {sid} in the final history was never committed")
            break
        step, parent, size = commits[sid]
        if len(committers[sid]) > size:
            failures.append(f"state {sid} (step {step}) committed by {len(committers[sid])} "
                            f"processes in a world of {size}: two worlds at once?")
        chain.append(step)
        sid = parent
    chain.reverse()
    if chain != list(range(steps)):
        counts = collections.Counter(chain)
        dup = sorted(s for s, n in counts.items() if n > 1)
        gaps = sorted(set(range(steps)) - set(chain))
        failures.append(f"the final state's history is not steps 0..{steps - 1} once each: "
                        f"{len(chain)} commits, duplicated {dup[:10]}, missing {gaps[:10]}")
    return failures, len(chain)


def check_output(out_text, copies, unclean_pids):
    """out_text: etrun's stdout; copies: {pid: the rank's own lines}; unclean_pids: pids that did
    not exit 0 (their last line may be missing from their copy). -> (failures, lines checked)."""
    failures = []
    seen = collections.defaultdict(list)  # pid -> [(n, body)]
    labels = collections.defaultdict(set)
    stray = 0
    for line in out_text.split("\n"):
        if not line:
            continue
        m = LINE_RE.match(line)
        if not m:
            stray += 1
            if stray <= 3:
                failures.append(f"untagged line in etrun's stdout: {line[:120]!r}")
            continue
        label, pid, n, body = int(m.group(1)), int(m.group(2)), int(m.group(3)), m.group(4)
        seen[pid].append((n, f"p{pid}#{n} {body}"))
        labels[pid].add(label)
    if stray > 3:
        failures.append(f"{stray} untagged lines in etrun's stdout in all")
    checked = 0
    for pid in sorted(set(seen) | set(copies)):
        got = [text for _, text in seen.get(pid, [])]
        nums = [n for n, _ in seen.get(pid, [])]
        copy = copies.get(pid, [])
        checked += len(got)
        if len(labels[pid]) > 1:
            failures.append(f"pid {pid}: lines under several labels {sorted(labels[pid])}")
        if nums != list(range(len(nums))):
            dup = sorted(n for n, c in collections.Counter(nums).items() if c > 1)
            failures.append(f"pid {pid}: etrun printed lines #{nums[:5]}... out of order, "
                            f"duplicated {dup[:5]} or missing some ({len(nums)} lines)")
            continue
        if got[:len(copy)] != copy:
            missing = [l for l in copy if l not in got] or copy
            failures.append(f"pid {pid}: {len(missing)} of its lines are missing from etrun's "
                            f"output or differ, e.g. {missing[0]!r}")
        elif len(got) > len(copy) + (1 if pid in unclean_pids else 0):
            failures.append(f"pid {pid}: etrun printed {len(got)} lines, its own copy has "
                            f"{len(copy)}: {got[len(copy)]!r} is not in it")
    return failures, checked


def check_flat(samples, start, end, what, slack_frac, slack_abs, index):
    """The last third's peak of samples[index] within start..end is at most the first third's
    peak * (1 + slack_frac) + slack_abs."""
    window = [s for s in samples if start <= s[0] <= end]
    third = (end - start) / 3
    if len(window) < 9 or not any(s[0] >= end - third for s in window):
        return [f"{what}: too few samples ({len(window)}): did etrun end early?"], None
    first = max(s[index] for s in window if s[0] <= start + third)
    last = max(s[index] for s in window if s[0] >= end - third)
    figures = (first, last)
    if last > first * (1 + slack_frac) + slack_abs:
        return [f"{what} grew: first third peak {first}, last third peak {last}"], figures
    return [], figures


def rss_after_minutes(samples, start, end, limit_kib=1024):
    """etrun's RSS one minute into the chaos and at its end. With at least five minutes of chaos,
    the end may be at most limit_kib above the one-minute figure (issue 11: a long job holds
    memory for its live ranks only). Returns (failures, (one_min, end) or None)."""
    if end - start < 90:
        return [], None
    one_min = [s[1] for s in samples if start + 55 <= s[0] <= start + 65]
    last = [s[1] for s in samples if end - 10 <= s[0] <= end]
    if not one_min or not last:
        return [f"etrun's RSS: no samples at 1 min ({len(one_min)}) or at the end ({len(last)})"], None
    figures = (max(one_min), max(last))
    if end - start >= 300 and figures[1] - figures[0] > limit_kib:
        return [f"etrun's RSS grew {figures[1] - figures[0]} KiB from 1 min ({figures[0]} KiB) to "
                f"the end ({figures[1]} KiB): more than {limit_kib} KiB"], figures
    return [], figures


def check_zombies(samples, limit_s=3.0):
    """A child that stays a zombie for more than limit_s was not reaped."""
    first_seen, failures = {}, []
    for t, _, _, zombies in samples:
        for z in zombies:
            first_seen.setdefault(z, t)
            if t - first_seen[z] > limit_s and z not in [f[0] for f in failures]:
                failures.append((z, f"etrun left child {z} a zombie for over {limit_s:g} s"))
    return [f for _, f in failures]


def read_events(path):
    events = []
    try:
        with open(path) as f:
            for line in f:
                if line.endswith("\n"):
                    events.append(json.loads(line))
    except (OSError, ValueError) as e:
        return [], [f"events file {path}: {e}"]
    return events, []


def check_events(events):
    failures = []
    ends = [e for e in events if e["event"] == "job_end"]
    if len(ends) != 1:
        failures.append(f"{len(ends)} job_end events")
    elif ends[0]["exit_code"] != 0:
        failures.append(f"job_end: exit_code {ends[0]['exit_code']}, cause {ends[0]['cause']!r}")
    started = collections.Counter(e["pid"] for e in events if e["event"] == "rank_started")
    exited = collections.Counter(e["pid"] for e in events if e["event"] == "rank_exited")
    if started != exited:
        failures.append(f"rank processes started but never reported exited: "
                        f"{sorted((started - exited).keys())[:10]}; exited twice or unstarted: "
                        f"{sorted((exited - started).keys())[:10]}")
    return failures


def unclean(events):
    return {e["pid"] for e in events if e["event"] == "rank_exited" and e.get("code") != 0}


def check_leaks(marker, registry, fds_before):
    failures = []
    deadline = time.monotonic() + 10
    while processes_with_marker(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = processes_with_marker(marker)
    for pid, cmd in sorted(left.items()):
        failures.append(f"leaked process {pid}: {cmd[:150]}")
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    if os.path.isdir(registry) and os.listdir(registry):
        failures.append(f"control registry not cleaned up: {os.listdir(registry)}")
    if own_fd_count() != fds_before:
        failures.append(f"the soak's own fds: {fds_before} before, {own_fd_count()} after")
    return failures


# ---------------------------------------------------------------------------------------------
# Phases

def wait_exit(job, timeout):
    try:
        return job.proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        say(f"etrun did not end within {timeout} s: SIGTERM")
        job.proc.terminate()
        try:
            return job.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            job.proc.kill()
            return job.proc.wait()


def max_committed(record_dir):
    records, _ = read_records(record_dir)
    best = -1
    for lines in records.values():
        for line in lines:
            f = line.split()
            if f and f[0] == "commit":
                best = max(best, int(f[1]))
    return best


def horovod_phase(args, rng, etrun, work, env, pool, marker):
    fds_before = own_fd_count()
    record_dir = os.path.join(work, "records")
    os.mkdir(record_dir)
    steps_file = os.path.join(work, "total_steps")
    disc = Discovery(work, {"localhost": 2, "127.0.0.1": 1})
    initial = dict(disc.hosts)
    job = Job(etrun, work, "soak-hvd", [
        "-np", "3", "--min-np", "1", "--max-np", "5",
        "--host-discovery-script", disc.script, "--discovery-interval", "0.3",
        "--discovery-timeout", "3", "--blacklist-cooldown-range", "2", "5",
        "--elastic-timeout", "60", "--grace-period", "2",
        PYTHON, STANDIN, "--steps", str(10 ** 9), "--step-seconds", "0.05", "--timeout", "30",
        "--record-dir", record_dir, "--steps-file", steps_file], env)
    say(f"phase 1: Horovod stand-ins, etrun pid {job.proc.pid}, hosts {pool}, "
        f"{args.seconds} s of chaos")
    failures = []
    chaos = Chaos(rng, job, disc, pool, marker, max_slots=2, min_pause=0.4, max_pause=2.0,
                  record_dir=record_dir)
    t_start = time.monotonic()
    actions = [("kill9", 4), ("term", 3), ("stop_cont", 3), ("add_host", 2), ("remove_host", 2),
               ("flap", 2), ("slots", 1), ("garbage", 1), ("hang", 1)]
    scheduled = [(0.3, "scale_remove"), (0.6, "scale_add")] if args.seconds >= 20 else []
    chaos.run(args.seconds, actions, scheduled)
    t_chaos_end = time.monotonic()
    # Quiesce: undo the overrides, put the hosts back, let it settle, then name the end.
    if chaos.overrides:
        say(chaos.scale(["--clear"]))
        chaos.overrides = {}
    disc.clear_tricks()

    def settle():
        deadline = time.monotonic() + 60
        mark = max_committed(record_dir)
        while job.proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.5)
            if max_committed(record_dir) >= mark + 10:
                break

    # The initial hosts come back first beside the ones listed now: writing the initial list at
    # once could drop every host of the current world (say, the last survivor is a host chaos
    # added), and a round without any host of the previous one ends the job by design (spec 6.5
    # step 6), as can_lose() avoids during the chaos. Once the world has grown onto them, the
    # extra hosts go.
    merged = dict(disc.hosts)
    merged.update(initial)
    disc.write(merged)
    settle()
    if merged != initial:
        # Until a host of the initial list that is not in a cooldown trains in the world.
        deadline = time.monotonic() + 60
        while job.proc.poll() is None and time.monotonic() < deadline:
            job.events()
            world = {r["host"] for r in job.running_ranks()}
            if (world - job.blacklisted) & set(initial):
                break
            time.sleep(0.5)
        disc.write(initial)
        settle()
    target = max_committed(record_dir) + 40
    tmp = steps_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(f"{target}\n")
    os.replace(tmp, steps_file)
    say(f"chaos stopped; the job ends after step {target - 1} ({target} steps)")
    rc = wait_exit(job, 180)
    job.stop_sampling()
    say(f"etrun exited with {rc}")
    if rc != 0:
        failures.append(f"etrun exited with {rc}, expected 0; stderr ends: "
                        f"{open(job.err_path, errors='replace').read()[-400:]!r}")
    events, f = read_events(job.events_path)
    failures += f + check_events(events)
    records, copies = read_records(record_dir)
    f, chain = check_steps(records, target)
    failures += f
    with open(job.out_path, errors="replace") as fh:
        f, lines = check_output(fh.read(), copies, unclean(events))
    failures += f
    f, rss = check_flat(job.samples, t_start, t_chaos_end, "etrun's RSS (KiB)", 0.2, 4096, 1)
    failures += f
    f, rss_minutes = rss_after_minutes(job.samples, t_start, t_chaos_end)
    failures += f
    f, fds = check_flat(job.samples, t_start, t_chaos_end, "etrun's open fds", 0.0, 16, 2)
    failures += f
    failures += check_zombies(job.samples)
    failures += check_leaks(marker, os.path.join(env["XDG_RUNTIME_DIR"], "etrun"), fds_before)
    kinds = collections.Counter(e["event"] for e in events)
    exits = collections.Counter(e.get("reason") for e in events if e["event"] == "rank_exited")
    say(f"phase 1 figures: actions {dict(chaos.counts)}; {chain} steps in the final history, "
        f"{sum(len(v) for v in records.values())} state records from {len(records)} processes; "
        f"{lines} output lines checked; events: {kinds['round']} rounds, {kinds['reset']} resets, "
        f"{kinds['host_blacklisted']} blacklists, {kinds['host_resurrected']} resurrections, "
        f"{kinds['discovery_failed']} failed discovery runs, {kinds['rank_started']} rank "
        f"processes ({dict(exits)}); etrun RSS peak first/last third {rss} KiB, fds {fds}"
        + (f"; etrun RSS at 1 min / at the end {rss_minutes} KiB" if rss_minutes else ""))
    for args_, rc_, err, took in chaos.scale_results:
        if rc_ not in (0, 1) or (rc_ == 1 and "did not reach the new size" not in err):
            failures.append(f"etrun scale {' '.join(args_)}: exit {rc_}: {err}")
    return failures


def torch_phase(args, rng, etrun, work, env, pool, marker):
    fds_before = own_fd_count()
    disc = Discovery(work, {"localhost": 2})
    steps = max(40, int(args.torch_seconds * 5))
    job = Job(etrun, work, "soak-torch", [
        "-np", "2", "--min-np", "1", "--max-np", "3", "--elastic-mode", "restart",
        "--host-discovery-script", disc.script, "--discovery-interval", "0.3",
        "--discovery-timeout", "3", "--grace-period", "2",
        PYTHON, TORCH_EXAMPLE, "--steps", str(steps), "--step-seconds", "0.1",
        "--checkpoint", os.path.join(work, "torch-ckpt.pt")], env)
    say(f"phase 2: PyTorch restart mode, etrun pid {job.proc.pid}, {steps} steps, "
        f"{args.torch_seconds} s of gentler chaos")
    chaos = Chaos(rng, job, disc, pool, marker, max_slots=1, min_pause=3.0, max_pause=6.0,
                  failures_blacklist=False)
    chaos.run(args.torch_seconds, [("kill9", 1), ("term", 1), ("stop_cont", 1), ("add_host", 1),
                                   ("remove_host", 1)])
    disc.write({"localhost": 2})
    say("chaos stopped; waiting for the job to finish its steps")
    rc = wait_exit(job, 240)
    job.stop_sampling()
    say(f"etrun exited with {rc}")
    failures = []
    if rc != 0:
        failures.append(f"torch job: etrun exited with {rc}, expected 0; stderr ends: "
                        f"{open(job.err_path, errors='replace').read()[-400:]!r}")
    events, f = read_events(job.events_path)
    failures += [f"torch job: {x}" for x in f + check_events(events)]
    with open(job.out_path, errors="replace") as fh:
        out = fh.read()
    # A rank killed after rank 0 printed "done" (but before every rank exited) restarts the
    # world, which resumes at the final checkpoint and prints "done" again: torchrun does that too.
    done_seen = False
    starts = []
    for line in out.split("\n"):
        if re.fullmatch(rf"\[\d+\]<stdout>:done: {steps} steps", line):
            done_seen = True
        m = re.search(r"<stdout>:rank (\d+)/(\d+): restart (\d+), starting at step (\d+)$", line)
        if m:
            starts.append(m.groups())
            if done_seen and int(m.group(4)) != steps:
                failures.append(f"torch job: after 'done' a world started at step {m.group(4)}, "
                                f"not at the final checkpoint ({steps})")
    if not done_seen:
        failures.append(f"torch job: no 'done: {steps} steps' line")
    by_restart = collections.defaultdict(set)
    for rank, world, restart, step in starts:
        by_restart[int(restart)].add((int(world), int(step)))
    last = 0
    for restart in sorted(by_restart):
        if len(by_restart[restart]) != 1:
            failures.append(f"torch job: restart {restart}: ranks disagree on world/step "
                            f"{sorted(by_restart[restart])}")
        step = min(s for _, s in by_restart[restart])
        if step < last:
            failures.append(f"torch job: restart {restart} resumed at step {step}, before the "
                            f"step {last} an earlier restart had reached")
        last = max(last, step)
    failures += [f"torch job: {x}" for x in check_leaks(
        marker, os.path.join(env["XDG_RUNTIME_DIR"], "etrun"), fds_before)]
    kinds = collections.Counter(e["event"] for e in events)
    say(f"phase 2 figures: actions {dict(chaos.counts)}; {len(by_restart)} worlds "
        f"(restart counts {sorted(by_restart)}), {kinds['reset']} resets, "
        f"{kinds['rank_started']} rank processes")
    return failures


# ---------------------------------------------------------------------------------------------
# Phase 3: the shared pool (issue 12)

class PoolJob:
    """A stand-in training on the pool; ends when its steps file appears."""

    def __init__(self, etrun, work, name, env, rng):
        self.name = name
        self.dir = os.path.join(work, name)
        self.records = os.path.join(self.dir, "records")
        os.makedirs(self.records)
        self.steps_file = os.path.join(self.dir, "steps")
        self.min_np = rng.randint(1, 3)
        self.max_np = self.min_np + rng.randint(0, 5)
        self.priority = rng.choice([1000, 5000, 5000, 10000, 20000])
        self.killed = False
        self.total = None
        self.out = open(os.path.join(self.dir, "out"), "wb")
        self.proc = subprocess.Popen(
            [etrun, "--pool", env["ETRUN_SOAK_POOL"], "--job-name", name, "--priority",
             str(self.priority), "-np", str(self.min_np), "--min-np", str(self.min_np),
             "--max-np", str(self.max_np), "--grace-period", "2",
             PYTHON, STANDIN, "--steps", "1000000", "--step-seconds", "0.05",
             "--startup-seconds", str(rng.choice([0.0, 0.5, 1.5])), "--record-dir", self.records,
             "--steps-file", self.steps_file, "--timeout", "120"],
            stdout=self.out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)

    def finish(self):
        self.total = max_committed(self.records) + 1 + 10
        with open(self.steps_file + ".tmp", "w") as f:
            f.write(str(self.total))
        os.replace(self.steps_file + ".tmp", self.steps_file)


def pool_slot_owners(marker, job_var="ETRUN_SOAK_JOB"):
    """{pool slot: {job}} of live processes with the marker: their ETRUN_POOL_SLOT, and the job
    named by `job_var` in their environment."""
    owners = collections.defaultdict(set)
    slot_key, job_key = b"ETRUN_POOL_SLOT=", job_var.encode() + b"="
    for pid in processes_with_marker(marker):
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = f.read().split(b"\0")
        except OSError:
            continue
        slot = job = None
        for kv in env:
            if kv.startswith(slot_key):
                slot = kv[len(slot_key):].decode()
            elif kv.startswith(job_key):
                job = kv[len(job_key):].decode()
        if slot is not None:
            owners[slot].add(job)
    return owners


def start_pool(etrun, work, env, name, generation):
    log = open(os.path.join(work, f"pool{generation}.log"), "wb")
    proc = subprocess.Popen([etrun, "pool", "start", name, "-H", "localhost:8", "--gpus", "none",
                             "--min-hold", "1s", "--events-file",
                             os.path.join(work, f"pool{generation}.jsonl")],
                            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
    for _ in range(100):
        r = subprocess.run([etrun, "pool", "status", name, "--json"], capture_output=True, env=env)
        if r.returncode == 0:
            return proc
        time.sleep(0.05)
    raise RuntimeError(f"pool {name} did not come up")


def pool_phase(args, rng, etrun, work, env, marker):
    """Jobs arriving, finishing, crashing and changing priority on one pool of 8 slots, and the
    pool itself restarted now and then; sampled all along for a slot with two jobs' processes."""
    name = "soak" + uuid.uuid4().hex[:6]
    env = dict(env, ETRUN_SOAK_POOL=name)
    generation = 0
    pool = start_pool(etrun, work, env, name, generation)
    say(f"phase 3: pool {name} (8 slots), {args.pool_seconds} s of jobs arriving, finishing, "
        f"crashing, changing priority; the pool restarted now and then")
    jobs, running, clashes, samples = [], [], [], [0]
    stop = threading.Event()

    def watch():
        while not stop.is_set():
            for slot, owners in pool_slot_owners(marker).items():
                if len(owners) > 1:
                    clashes.append((round(time.monotonic() - T0, 2), slot, sorted(owners)))
            samples[0] += 1
            time.sleep(0.05)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    counts = collections.Counter()
    end = time.monotonic() + args.pool_seconds
    try:
        while time.monotonic() < end:
            time.sleep(rng.uniform(0.5, 2.5))
            running = [j for j in running if j.proc.poll() is None]
            action = rng.choices(["arrive", "finish", "crash", "priority", "restart_pool"],
                                 [4 if len(running) < 4 else 0, 2, 1, 2, 1])[0]
            if action == "arrive":
                job = PoolJob(etrun, work, f"job{len(jobs)}",
                              dict(env, ETRUN_SOAK_JOB=f"job{len(jobs)}"), rng)
                jobs.append(job)
                running.append(job)
            elif action == "finish" and running:
                job = rng.choice(running)
                if job.total is None and max_committed(job.records) >= 0:
                    job.finish()
                else:
                    continue
            elif action == "crash" and running:
                job = rng.choice(running)
                job.killed = True
                job.proc.send_signal(signal.SIGKILL)  # etrun itself; its guardian kills the ranks
            elif action == "priority" and running:
                job = rng.choice(running)
                subprocess.run([etrun, "pool", "priority", job.name,
                                str(rng.choice([1000, 5000, 10000, 30000])), "--pool", name],
                               capture_output=True, env=env)
            elif action == "restart_pool":
                pool.send_signal(signal.SIGTERM)
                pool.wait(timeout=10)
                time.sleep(rng.uniform(0.2, 2.0))
                generation += 1
                pool = start_pool(etrun, work, env, name, generation)
            else:
                continue
            counts[action] += 1
        say("pool chaos stopped; finishing the running jobs")
        for job in jobs:
            if job.proc.poll() is None and job.total is None:
                job.finish()
        failures = []
        for job in jobs:
            try:
                rc = job.proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                job.proc.kill()
                rc = job.proc.wait()
                failures.append(f"pool {job.name}: did not finish within 120 s")
            job.out.close()
            if job.killed:
                continue
            if rc != 0:
                with open(os.path.join(job.dir, "out"), errors="replace") as f:
                    failures.append(f"pool {job.name}: etrun exited with {rc}; output ends "
                                    f"{f.read()[-300:]!r}")
                continue
            records, _ = read_records(job.records)
            steps_failures, _ = check_steps(records, job.total)
            failures += [f"pool {job.name}: {x}" for x in steps_failures[:3]]
    finally:
        stop.set()
        watcher.join(timeout=10)
        if pool.poll() is None:
            pool.send_signal(signal.SIGTERM)
            pool.wait(timeout=10)
    failures += [f"pool: slot {slot} had processes of {owners} at once (t={t} s)"
                 for t, slot, owners in clashes[:5]]
    for g in range(generation + 1):
        with open(os.path.join(work, f"pool{g}.jsonl")) as f:
            for line in f:
                e = json.loads(line)
                if e["event"] == "pool_allocation" and sum(e["held"].values()) > e["total"]:
                    failures.append(f"pool (run {g}): {sum(e['held'].values())} slots held of "
                                    f"{e['total']} at t={e['t']}")
    left = processes_with_marker(marker)
    if left:
        failures.append(f"pool: processes left behind: {sorted(left)[:5]}")
    say(f"phase 3 figures: actions {dict(counts)}; {len(jobs)} jobs "
        f"({sum(j.killed for j in jobs)} killed), {generation} pool restarts, "
        f"{samples[0]} slot samples")
    return failures


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=60, help="chaos time of phase 1")
    parser.add_argument("--seed", type=int, help="replays a run (printed at the start)")
    parser.add_argument("--torch-seconds", type=float, default=30,
                        help="chaos time of the PyTorch phase (0: skip it)")
    parser.add_argument("--pool-seconds", type=float, default=30,
                        help="chaos time of the shared-pool phase (0: skip it)")
    parser.add_argument("--keep", metavar="DIR", help="work in DIR and keep it (default: a "
                        "temporary directory, removed when the soak passes)")
    parser.add_argument("--etrun", default=os.path.join(ROOT, "build", "etrun"))
    args = parser.parse_args(argv)
    # SIGTERM/SIGHUP unwind like Ctrl-C, so the `finally` below kills the job's processes.
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda signum, frame: sys.exit(128 + signum))
    if not os.access(args.etrun, os.X_OK):
        print(f"soak: error: {args.etrun} is missing: build first (cmake -S . -B build "
              f"-DCMAKE_BUILD_TYPE=Release && cmake --build build -j2)", file=sys.stderr)
        return 2
    if args.seconds <= 0 or args.torch_seconds < 0 or args.pool_seconds < 0:
        print("soak: error: --seconds must be positive, --torch-seconds and --pool-seconds not "
              "negative",
              file=sys.stderr)
        return 2
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 32)
    say(f"seed {seed} (replay: scripts/soak.sh {args.seconds:g} --seed {seed} "
        f"--torch-seconds {args.torch_seconds:g} --pool-seconds {args.pool_seconds:g})")
    rng = random.Random(seed)
    if args.keep:
        os.makedirs(args.keep, exist_ok=True)
        work = os.path.abspath(args.keep)
    else:
        work = tempfile.mkdtemp(prefix="etrun-soak-")
    runtime = os.path.join(work, "run")
    os.makedirs(runtime, mode=0o700, exist_ok=True)
    marker = "ETRUN_SOAK_MARKER=" + uuid.uuid4().hex
    env = dict(os.environ, XDG_RUNTIME_DIR=runtime, ETRUN_SOAK_MARKER=marker.split("=", 1)[1])
    pool = local_host_names()
    if len(pool) < 3:
        say(f"note: {socket.gethostname()} is not a local name here; hosts are {pool} only")
    failures = []
    try:
        hvd_dir = os.path.join(work, "hvd")
        os.mkdir(hvd_dir)
        failures += horovod_phase(args, rng, args.etrun, hvd_dir, env, pool, marker)
        if args.torch_seconds > 0:
            torch_dir = os.path.join(work, "torch")
            os.mkdir(torch_dir)
            failures += torch_phase(args, rng, args.etrun, torch_dir, env, pool, marker)
        if args.pool_seconds > 0:
            pool_dir = os.path.join(work, "pool")
            os.mkdir(pool_dir)
            failures += pool_phase(args, rng, args.etrun, pool_dir, env, marker)
    finally:
        for pid in processes_with_marker(marker):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
    for f in failures:
        say(f"FAIL: {f}")
    if failures:
        say(f"verdict: FAIL ({len(failures)} problems; seed {seed}; evidence kept in {work})")
        return 1
    say(f"verdict: PASS (seed {seed})")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
