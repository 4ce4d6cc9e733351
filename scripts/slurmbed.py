#!/usr/bin/python3
"""A real Slurm cluster on the cluster test bed: slurmctld here, one slurmd per bed host.

    slurmbed.py up --dir D [--hosts K] [--cpus C] [--tag N]   start Slurm on the bed in D (made
                                                              first if D holds none)
    slurmbed.py show --dir D                                  the cluster as JSON
    slurmbed.py env --dir D                                   `export SLURM_CONF=...` for a shell
    slurmbed.py exec --dir D -- CMD...                        CMD on the launcher's side
    slurmbed.py host --dir D NAME -- CMD...                   CMD on host NAME
    slurmbed.py down --dir D | --all                          stop it (and the bed if up made it)

On a bed with tag N (scripts/testbed.py) it runs Debian's Slurm 22.05 (slurm-wlm) and munge,
everything of it under D/slurm and private to the bed:
  * munged with a key of its own (D/slurm/munge/munge.key) and socket D/slurm/munge.sock, which
    slurm.conf names (AuthInfo=socket=...): the machine's /etc/munge and munged are not used;
  * slurmctld in this machine's namespaces, cluster `etbdN`, SlurmctldHost = this machine's host
    name with the bed's launcher address (198.18.N.1), which the hosts reach; its port is a free
    one of 17000-17999;
  * per host hI a slurmd in hI's network, UTS and mount namespaces (nsenter into the bed's host,
    not `ip netns exec`, which remounts /sys), NodeName=hI NodeAddr=<its address> CPUs=C
    (default 4, more than the machine may have: SlurmdParameters=config_overrides), port 6818;
    one partition `bed` (the default) with every node;
  * ProctrackType=proctrack/linuxproc, TaskPlugin=task/none, no accounting, no cgroups;
    select/cons_tres by CPU; ReturnToService=1, SlurmdTimeout=5, MessageTimeout=3,
    batch_sched_delay=0: nodes come up idle within a second, a batch job starts within one, a
    node whose slurmd died is DOWN within about 15 s and back once its slurmd registers; one
    set DOWN by `scontrol update` stays down until State=RESUME (ReturnToService=2 would
    return it at its slurmd's next registration, within seconds).
Clients find the cluster through SLURM_CONF=D/slurm/slurm.conf alone (the controller's and the
nodes' addresses are in it), on the launcher's side and on the hosts. The daemons carry
ETRUN_SLURMBED=etbdN in their environment (slurmstepd inherits it), the jobs' processes (batch
scripts, tasks, salloc's command) SLURM_CLUSTER_NAME=etbdN: `down` kills every process carrying
one of them and their descendants, and the Slurm clients (srun, salloc, ...) whose SLURM_CONF
names the cluster (not any other process with that SLURM_CONF: a shell that exported it stays),
then removes D/slurm; `down --all` kills the daemons and jobs of every bed's Slurm (the beds
stay: `testbed.py down --all`). Everything runs as root; munged's socket may sit below a
directory others cannot enter (munged --force).

Where the machine cannot run it (not root, no namespaces, slurm-wlm or munge missing) `up`
prints one line saying why and exits 77; the Python API raises testbed.Unsupported.

Python (Debian's /usr/bin/python3, stdlib only):
    c = slurmbed.up(D, hosts=3, cpus=4)    # -> Cluster (a bed made in D, or the bed there)
    c.bed, c.name, c.conf, c.port, c.nodes
    c.env(), c.host_env()                  # SLURM_CONF set, inherited SLURM_* dropped
    c.run_launcher(cmd), c.run_host("h1", cmd), c.exec_argv(cmd), c.host_argv("h1", cmd)
    c.node_states(), c.wait_idle(["h2"], timeout=30)
    c.slurmd_pid("h2"), c.start_slurmd("h2")   # e.g. after killing it or rebooting the host
    c.down(); slurmbed.load(D); slurmbed.down_all()
"""
import argparse
import importlib.util
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def _load_testbed():
    # One module object for scripts/testbed.py whoever loads it first (tests/integration's
    # testbed.py registers it under this name), so its exception classes are the same.
    mod = sys.modules.get("etrun_testbed")
    if mod is None:
        spec = importlib.util.spec_from_file_location("etrun_testbed",
                                                      os.path.join(HERE, "testbed.py"))
        mod = importlib.util.module_from_spec(spec)
        sys.modules["etrun_testbed"] = mod
        spec.loader.exec_module(mod)
    return mod


tb = _load_testbed()
Unsupported = tb.Unsupported
SKIP_EXIT = tb.SKIP_EXIT
SUBDIR = "slurm"
STATE = "slurm.json"
MARK = "ETRUN_SLURMBED"  # in the daemons' environment: ETRUN_SLURMBED=<cluster name>
DAEMON_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"
DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("srun", "sbatch", "salloc", "squeue", "sinfo", "scontrol", "scancel")
CLIENT_COMMS = {c.encode() for c in CLIENTS + ("sattach", "sbcast", "sstat", "sacct", "strigger",
                                                "sprio", "sshare", "sdiag", "sreport")}
SLURMD_PORT = 6818
PORTS = range(17000, 18000)  # below the usual ephemeral range (32768-60999)
CLUSTER_RE = re.compile(rb"^(?:%s|SLURM_CLUSTER_NAME)=%s\d+$" % (MARK.encode(),
                                                                  tb.PREFIX.encode()))


class SlurmBedError(tb.BedError):
    """Starting or using a bed's Slurm failed (not for want of support)."""


def _which(tool):
    return shutil.which(tool, path=DAEMON_PATH)


def _check_supported():
    tb._check_supported()  # root, iproute2, util-linux, ssh
    missing = [t for t in DAEMONS + CLIENTS if _which(t) is None]
    if missing:
        raise Unsupported("slurmbed: missing %s (Debian packages slurm-wlm and munge: "
                          "scripts/test.sh installs them, or apt-get install slurm-wlm munge)"
                          % ", ".join(missing))


def _free_port(tag):
    """A port of PORTS nothing listens on, trying 17000+tag first (SO_REUSEADDR, as slurmctld
    binds: the TIME_WAIT connections of a cluster that was just stopped do not count)."""
    for port in [PORTS[0] + tag] + list(PORTS):
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(("0.0.0.0", port))
                return port
            except OSError:
                continue
    raise SlurmBedError("slurmbed: no free port in %d-%d for slurmctld" % (PORTS[0], PORTS[-1]))


def _tail(path, lines=5):
    try:
        with open(path, errors="replace") as f:
            return " | ".join(line.strip() for line in f.readlines()[-lines:])
    except OSError:
        return "(no log)"


class Cluster:
    """A bed's Slurm, started by up() or read back by load(). Not thread-safe; down() is
    idempotent."""

    def __init__(self, bed, cpus, port, owns_bed):
        self.bed = bed
        self.cpus = cpus
        self.port = port
        self.owns_bed = owns_bed          # down() tears the bed down too
        self.dir = os.path.join(bed.dir, SUBDIR)
        self.name = "%s%d" % (tb.PREFIX, bed.tag)
        self.conf = os.path.join(self.dir, "slurm.conf")
        self.munge_socket = os.path.join(self.dir, "munge.sock")
        self.nodes = [h.name for h in bed.hosts]

    def path(self, *parts):
        return os.path.join(self.dir, *parts)

    # -- what callers use -------------------------------------------------------------------

    def _slurm_env(self, env):
        env = {k: v for k, v in env.items() if not k.startswith("SLURM_")}
        env["SLURM_CONF"] = self.conf
        return env

    def env(self, base=None):
        """The environment for launcher-side commands: the bed's (HOME, PATH with its ssh) with
        SLURM_CONF set and no SLURM_* variable inherited from base (default os.environ)."""
        return self._slurm_env(self.bed.env(base))

    def host_env(self, base=None):
        """The environment for commands on a host: base (default os.environ) with SLURM_CONF
        set and no other SLURM_* variable."""
        return self._slurm_env(dict(os.environ if base is None else base))

    def exec_argv(self, cmd):
        """argv running cmd on the launcher's side (the bed's exec_argv); pass env=env()."""
        return self.bed.exec_argv(cmd)

    def host_argv(self, name, cmd, cwd=None):
        """argv running cmd on host `name` (the bed's host_argv); pass env=host_env()."""
        return self.bed.host_argv(name, cmd, cwd)

    def run_launcher(self, cmd, env=None, **kwargs):
        """subprocess.run of cmd on the launcher's side with env() (text, captured)."""
        kwargs.setdefault("capture_output", True)
        kwargs.setdefault("text", True)
        return subprocess.run(self.exec_argv(cmd), env=self.env(env), **kwargs)

    def run_host(self, name, cmd, env=None, **kwargs):
        """subprocess.run of cmd on host `name` with host_env() (text, captured)."""
        kwargs.setdefault("capture_output", True)
        kwargs.setdefault("text", True)
        return subprocess.run(self.host_argv(name, cmd), env=self.host_env(env), **kwargs)

    def node_states(self):
        """{node: sinfo's state}, e.g. "idle", "idle*" (not responding), "down", "allocated",
        "mixed", "drained". Raises SlurmBedError if slurmctld does not answer."""
        r = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %T"], capture_output=True, text=True,
                           env=self.host_env(), timeout=30)
        if r.returncode != 0:
            raise SlurmBedError("slurmbed: sinfo failed: %s (slurmctld log: %s)"
                                % (r.stderr.strip(), self.path("log", "slurmctld.log")))
        return dict(line.split(None, 1) for line in r.stdout.splitlines() if line.strip())

    def wait_idle(self, nodes=None, timeout=30):
        """Waits until every node of `nodes` (default: all) is idle and responding. Raises
        SlurmBedError naming the other states after `timeout` seconds."""
        want = list(nodes or self.nodes)
        deadline = time.monotonic() + timeout
        while True:
            try:
                states = self.node_states()
            except (SlurmBedError, subprocess.TimeoutExpired):
                states = {}
            if all(states.get(n) == "idle" for n in want):
                return
            if time.monotonic() > deadline:
                raise SlurmBedError(
                    "slurmbed: nodes not idle after %g s: %s (logs: %s)"
                    % (timeout, ", ".join("%s %s" % (n, states.get(n, "?")) for n in want
                                          if states.get(n) != "idle"), self.path("log")))
            time.sleep(0.02)

    def slurmd_pid(self, name):
        """PID of host `name`'s slurmd, or None if it is not running."""
        try:
            with open(self.path("run", "slurmd.%s.pid" % name)) as f:
                pid = int(f.read())
            with open("/proc/%d/environ" % pid, "rb") as f:
                if ("SLURM_CONF=" + self.conf).encode() in f.read().split(b"\0"):
                    return pid
        except (OSError, ValueError):
            pass
        return None

    def start_slurmd(self, name):
        """Starts host `name`'s slurmd (again: after it was killed, or the host rebooted). The
        node returns to service once it registers: wait_idle([name])."""
        self._start_slurmds([name])

    def down(self):
        """Kills the cluster's daemons, clients and jobs (see the module doc), removes D/slurm,
        then the bed if up() made it. Idempotent."""
        marks = {("%s=%s" % (MARK, self.name)).encode(),
                 ("SLURM_CLUSTER_NAME=%s" % self.name).encode()}
        conf = b"SLURM_CONF=" + self.conf.encode()
        _kill(lambda environ: not marks.isdisjoint(environ),
              lambda comm, environ: comm in CLIENT_COMMS and conf in environ)
        shutil.rmtree(self.dir, ignore_errors=True)
        if self.owns_bed:
            self.bed.down()

    def to_json(self):
        return {"dir": self.dir, "name": self.name, "conf": self.conf, "port": self.port,
                "cpus": self.cpus, "nodes": self.nodes, "owns_bed": self.owns_bed,
                "controller": "%s(%s)" % (self.bed.machine_name, self.bed.launcher_address),
                "env": {"SLURM_CONF": self.conf}, "bed": self.bed.to_json()}

    # -- starting one -----------------------------------------------------------------------

    def _daemon_env(self):
        return {"PATH": DAEMON_PATH, "SLURM_CONF": self.conf, MARK: self.name}

    def _write_files(self):
        os.makedirs(self.dir, mode=0o755)
        os.chmod(self.dir, 0o755)  # munged: its socket's directory must be open to all
        for sub in ("ctld", "log", "run"):
            os.makedirs(self.path(sub))
        for n in self.nodes:
            os.makedirs(self.path("spool", n))
        os.makedirs(self.path("munge"), mode=0o700)
        key = self.path("munge", "munge.key")
        fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(os.urandom(1024))
        tb._write(self.path("plugstack.conf"), "")  # no SPANK plugin of the machine's
        p = self.path
        nodes = "".join("NodeName=%s NodeAddr=%s CPUs=%d State=UNKNOWN\n"
                        % (h.name, h.address, self.cpus) for h in self.bed.hosts)
        tb._write(self.conf, f"""\
# The Slurm cluster of the etrun test bed {self.bed.bridge}, written by scripts/slurmbed.py;
# all of it is in {self.dir}.
ClusterName={self.name}
SlurmctldHost={self.bed.machine_name or socket.gethostname()}({self.bed.launcher_address})
SlurmctldPort={self.port}
SlurmdPort={SLURMD_PORT}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={self.munge_socket}
StateSaveLocation={p("ctld")}
SlurmdSpoolDir={p("spool", "%n")}
SlurmctldPidFile={p("run", "slurmctld.pid")}
SlurmdPidFile={p("run", "slurmd.%n.pid")}
SlurmctldLogFile={p("log", "slurmctld.log")}
SlurmdLogFile={p("log", "slurmd.%n.log")}
SlurmctldDebug=info
SlurmdDebug=info
PlugStackConfig={p("plugstack.conf")}
MailProg=/bin/true
# No cgroups: slurmd runs in a host's namespaces, not a machine of its own.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
# Nodes claim more CPUs than the machine has: take the configured count, do not drain them.
SlurmdParameters=config_overrides
# Quick to come up, quick to notice a dead slurmd, quick to return it to service once its
# slurmd registers again. Not 2: that also returns a node set DOWN by scontrol within seconds.
ReturnToService=1
SlurmdTimeout=5
MessageTimeout=3
InactiveLimit=0
# Slurm's SIGKILL after its SIGTERM to a step: past etrun's own --grace-period (5 s), as on real
# clusters (default 30 s), so that a drain etrun runs is not cut short by Slurm on a busy machine
# (2 s was: a rank finishing its step was killed mid-drain in test_slurm_preempt).
KillWait=6
# A batch job starts within a second (not after the default 3 s batch_sched_delay).
SchedulerParameters=batch_sched_delay=0
{nodes}PartitionName=bed Nodes=ALL Default=YES MaxTime=INFINITE State=UP
""")

    def _start(self, what, argv, log):
        r = subprocess.run(argv, env=self._daemon_env(), stdin=subprocess.DEVNULL,
                           capture_output=True, text=True, timeout=30)
        if r.returncode != 0:
            raise SlurmBedError("slurmbed: %s failed (exit %d): %s (log: %s)"
                                % (what, r.returncode, (r.stderr or r.stdout).strip()
                                   or _tail(log), log))

    def _start_munged(self):
        log = self.path("munge", "munged.log")
        # --force: the socket may sit below a directory only root can enter (pytest's tmp).
        self._start("munged", [_which("munged"), "--force",
                               "--key-file=" + self.path("munge", "munge.key"),
                               "--socket=" + self.munge_socket,
                               "--pid-file=" + self.path("munge", "munged.pid"),
                               "--log-file=" + log,
                               "--seed-file=" + self.path("munge", "munged.seed")], log)

    def _start_slurmctld(self):
        log = self.path("log", "slurmctld.log")
        self._start("slurmctld", [_which("slurmctld"), "-f", self.conf], log)
        deadline = time.monotonic() + 15
        while True:
            try:
                socket.create_connection((self.bed.launcher_address, self.port), 0.5).close()
                return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise SlurmBedError("slurmbed: slurmctld does not listen on %s:%d after 15 s: %s "
                                    "(log: %s)" % (self.bed.launcher_address, self.port,
                                                   _tail(log), log))
            time.sleep(0.01)

    def _start_slurmds(self, names):
        procs = []
        for n in names:
            argv = self.host_argv(n, [_which("slurmd"), "-f", self.conf, "-N", n], cwd="/")
            procs.append((n, subprocess.Popen(argv, env=self._daemon_env(),
                                              stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                              stderr=subprocess.STDOUT, text=True)))
        for n, proc in procs:  # slurmd forks into the background once it has read its config
            out, _ = proc.communicate(timeout=30)
            if proc.returncode != 0:
                log = self.path("log", "slurmd.%s.log" % n)
                raise SlurmBedError("slurmbed: slurmd on %s failed (exit %d): %s (log: %s)"
                                    % (n, proc.returncode, out.strip() or _tail(log), log))


def _scan():
    """{pid: (ppid, comm, environ entries)} of the live processes but zombies."""
    out = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open("/proc/%s/stat" % pid, "rb") as f:
                head, _, tail = f.read().rpartition(b")")
            fields = tail.split()
            if fields[0] == b"Z":
                continue
            with open("/proc/%s/environ" % pid, "rb") as f:
                out[int(pid)] = (int(fields[1]), head.partition(b"(")[2], f.read().split(b"\0"))
        except (OSError, IndexError, ValueError):
            continue
    return out


def _kill(is_marked, is_client=lambda comm, environ: False):
    """SIGKILLs, until none is left, every process whose environment is_marked(entries) and
    their descendants, and every process that is_client(comm, entries), but this process and
    its ancestors. Returns how many it killed."""
    spared = set()
    pid = os.getpid()
    while pid > 1:
        spared.add(pid)
        try:
            with open("/proc/%d/stat" % pid, "rb") as f:
                pid = int(f.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, ValueError):
            break
    killed = set()
    deadline = time.monotonic() + 10
    while True:
        procs = _scan()
        doomed = {p for p, (_, _, env) in procs.items() if is_marked(env)}
        grew = True
        while grew:  # descendants, which may have dropped the marks from their environment
            more = {p for p, (ppid, _, _) in procs.items() if ppid in doomed} - doomed
            doomed |= more
            grew = bool(more)
        doomed |= {p for p, (_, comm, env) in procs.items() if is_client(comm, env)}
        doomed -= spared
        if not doomed:
            return len(killed)
        if time.monotonic() > deadline:
            raise SlurmBedError("slurmbed: processes %s survive SIGKILL" % sorted(doomed))
        for p in doomed:
            try:
                os.kill(p, signal.SIGKILL)
                killed.add(p)
            except OSError:
                pass
        time.sleep(0.01)


def up(directory, hosts=None, cpus=4, tag=None, prefix="h", timeout=30):
    """Starts Slurm on the bed in `directory`, making one of `hosts` (default 3) hosts there
    first if it holds none (tag and prefix are for that bed; a bed there must match hosts and
    tag where given). Returns the Cluster once every node is idle.
    Raises Unsupported where this machine cannot run it, SlurmBedError/testbed.BedError on any
    other failure (then nothing of it is left, nor the bed if it made it)."""
    _check_supported()
    if cpus < 1:
        raise SlurmBedError("slurmbed: --cpus must be at least 1, not %d" % cpus)
    directory = os.path.abspath(directory)
    if os.path.exists(os.path.join(directory, SUBDIR, STATE)):
        raise SlurmBedError("slurmbed: %s holds a Slurm cluster already: `slurmbed.py down --dir "
                            "%s` first" % (directory, directory))
    owns = not os.path.exists(os.path.join(directory, tb.STATE))
    bed = tb.up(directory, hosts or 3, prefix, tag) if owns else tb.load(directory)
    if not owns and (hosts not in (None, len(bed.hosts)) or tag not in (None, bed.tag)):
        raise SlurmBedError("slurmbed: the bed in %s has %d hosts and tag %d, not what --hosts/"
                            "--tag ask for: start Slurm on it without them, or make the bed "
                            "again" % (directory, len(bed.hosts), bed.tag))
    cluster = Cluster(bed, cpus, None, owns)
    made = False  # cluster.dir, which down() removes
    try:
        if os.path.lexists(cluster.dir):
            raise SlurmBedError("slurmbed: %s exists: remove it first" % cluster.dir)
        cluster.port = _free_port(bed.tag)
        made = True
        cluster._write_files()
        tb._write(cluster.path(STATE), json.dumps(cluster.to_json(), indent=1) + "\n")
        cluster._start_munged()
        cluster._start_slurmctld()
        cluster._start_slurmds(cluster.nodes)
        cluster.wait_idle(timeout=timeout)
    except BaseException:
        if made:
            cluster.down()
        elif owns:
            bed.down()
        raise
    return cluster


def load(directory):
    """The Cluster whose state is in `directory`; SlurmBedError if there is none."""
    path = os.path.join(os.path.abspath(directory), SUBDIR, STATE)
    try:
        with open(path) as f:
            s = json.load(f)
    except (OSError, ValueError) as e:
        raise SlurmBedError("slurmbed: no Slurm cluster in %s (%s)" % (directory, e))
    b = s["bed"]
    bed = tb.Bed(b["dir"], b["tag"], [h["name"] for h in b["hosts"]], b.get("machine_name", ""))
    return Cluster(bed, s["cpus"], s["port"], s["owns_bed"])


def down_all():
    """Kills the daemons and jobs of every bed's Slurm (marked ETRUN_SLURMBED=etbdN or
    SLURM_CLUSTER_NAME=etbdN, and their descendants). Beds and state directories stay. Returns
    how many processes it killed."""
    return _kill(lambda environ: any(CLUSTER_RE.match(e) for e in environ))


def main(argv=None):
    p = argparse.ArgumentParser(prog="slurmbed.py", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="verb", required=True)
    u = sub.add_parser("up", help="start Slurm on the bed in --dir (made first if none)")
    u.add_argument("--dir", required=True)
    u.add_argument("--hosts", type=int, help="hosts of the bed made (default 3)")
    u.add_argument("--cpus", type=int, default=4, help="CPUs (slots) per node")
    u.add_argument("--prefix", default="h")
    u.add_argument("--tag", type=int)
    for verb, what in (("show", "print the cluster as JSON"),
                       ("env", "print `export SLURM_CONF=...`")):
        sub.add_parser(verb, help=what).add_argument("--dir", required=True)
    e = sub.add_parser("exec", help="run a command on the launcher's side")
    e.add_argument("--dir", required=True)
    e.add_argument("cmd", nargs=argparse.REMAINDER)
    h = sub.add_parser("host", help="run a command on a host")
    h.add_argument("--dir", required=True)
    h.add_argument("name")
    h.add_argument("cmd", nargs=argparse.REMAINDER)
    d = sub.add_parser("down", help="stop the cluster (and its bed if up made it)")
    g = d.add_mutually_exclusive_group(required=True)
    g.add_argument("--dir")
    g.add_argument("--all", action="store_true")
    a = p.parse_args(argv)
    try:
        if a.verb == "up":
            start = time.monotonic()
            c = up(a.dir, a.hosts, a.cpus, a.tag, a.prefix)
            print("slurmbed: cluster %s up in %.2f s: %d nodes idle (%s), %d CPUs each; "
                  "slurmctld %s:%d" % (c.name, time.monotonic() - start, len(c.nodes),
                                       ",".join(c.nodes), c.cpus, c.bed.launcher_address, c.port))
            print("export SLURM_CONF=" + c.conf)
            return 0
        if a.verb == "down":
            if a.all:
                print("slurmbed: killed %d processes" % down_all())
            elif os.path.exists(os.path.join(a.dir, SUBDIR, STATE)):
                load(a.dir).down()
            return 0
        c = load(a.dir)
        if a.verb == "show":
            print(json.dumps(c.to_json(), indent=1))
            return 0
        if a.verb == "env":
            print("export SLURM_CONF=" + c.conf)
            return 0
        cmd = a.cmd[1:] if a.cmd[:1] == ["--"] else a.cmd
        if not cmd:
            raise SlurmBedError("slurmbed: %s: no command" % a.verb)
        if a.verb == "exec":
            argv, env = c.exec_argv(cmd), c.env()
        else:
            argv, env = c.host_argv(a.name, cmd), c.host_env()
        os.execvpe(argv[0], argv, env)
    except Unsupported as e:
        print(e, file=sys.stderr)
        return SKIP_EXIT
    except tb.BedError as e:
        msg = str(e)
        print(msg if msg.startswith(("slurmbed:", "testbed:")) else "slurmbed: " + msg,
              file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
