#!/usr/bin/python3
"""The cluster test bed: K "hosts" on this machine, each with its own network, host name and sshd.

    testbed.py up --dir D [--hosts K] [--prefix h] [--tag N]   make a bed; D holds its state
    testbed.py show --dir D                                    the bed as JSON
    testbed.py exec --dir D -- CMD...                          run CMD on the launcher's side
    testbed.py host --dir D NAME -- CMD...                     run CMD on host NAME
    testbed.py down --dir D | --all                            tear one bed (or every bed) down

A bed with tag N (1..511, the first free one unless given) is:
  * a bridge `etbdN` in the root network namespace carrying the launcher's address 198.18.N.1/24
    (N > 255: 198.19.N-256.1); addresses come only from 198.18.0.0/15, reserved for benchmarks
    (RFC 2544), so a bed never shadows a real network;
  * per host hI (I = 1..K): a network namespace `etbdN-hI` (/run/netns/etbdN-hI, for nsenter), a
    veth whose inner end is `eth0` (address .I+1/24, no default route: a host reaches the bridge's
    subnet only) and whose outer end `etbdNvI` sits on the bridge; a UTS namespace (hostname hI)
    and a mount namespace in which the bed's hosts file is bound on /etc/hosts (propagation
    slave: nothing mounted there reaches the machine), both held by a `sleep` (the holder,
    marked ETRUN_TESTBED=etbdN-hI in its environment) that stays in the root network
    namespace, so a host whose every process dies (`ip netns pids`: a reboot) keeps its name
    and view, and start_sshd() boots it again; an sshd on hI's address, port 22 (root by key
    only, no PAM, ClientAliveInterval 1 x 3);
  * D/home: HOME for launcher-side commands, with .ssh/id_ed25519 (authorized on every host) and
    .ssh/config (no host key checks, LogLevel ERROR). OpenSSH's ssh reads ~/.ssh from the passwd
    entry, not from $HOME, so D/bin/ssh (first on the PATH of the launcher's environment) runs
    /usr/bin/ssh -F D/home/.ssh/config: etrun (libssh2, which follows $HOME), ssh and mpirun all
    log in with the bed's key.
Every name starts with `etbd` and carries N: two beds never clash and `down --all` finds the
leftovers of any bed. The machine keeps no mount of a bed but /run/netns/etbdN-* (`ip netns`).
Host names resolve everywhere through the bed's hosts files: on the hosts (each host name, and
this machine's own host name as the launcher's 198.18 address) and on the launcher's side inside
`exec`, a mount namespace of its own with D/launcher.hosts (this machine's /etc/hosts plus the
bed's names) bound on /etc/hosts, in the root network namespace. The machine's /etc/hosts is
never written.

Where the machine does not allow it (not root, no iproute2/util-linux/sshd, `ip netns add` or a
bridge refused), `up` prints one line saying why and exits 77 (SKIP_EXIT); the Python API raises
Unsupported with that line. Any other failure undoes what was made and exits 1.

Python (Debian's /usr/bin/python3, stdlib only):
    bed = testbed.up(D, hosts=3)            # -> Bed; raises Unsupported / BedError
    bed.hosts[0].name, .address, .netns_path, .veth
    bed.launcher_address, bed.env()         # env: HOME and PATH for launcher-side commands
    bed.exec_argv(cmd), bed.host_argv("h1", cmd)
    bed.run_launcher(cmd), bed.run_host("h1", cmd)   # subprocess.run with those, text output
    bed.cut("h2"), bed.heal("h2")           # outer veth down/up: the host's link, from outside
    bed.start_sshd("h2")                    # after its processes were killed
    bed.down(); testbed.load(D); testbed.down_all()
"""
import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

SKIP_EXIT = 77  # automake's "skipped"
PREFIX = "etbd"
MAX_TAG = 511
STATE = "bed.json"
SSHD = "/usr/sbin/sshd"
TOOLS = ("ip", "unshare", "nsenter", "mount", "sleep", "ssh-keygen", "ssh", SSHD)
BRIDGE_RE = re.compile(r"^%s(\d+)$" % PREFIX)
VETH_RE = re.compile(r"^%s(\d+)v(\d+)$" % PREFIX)
NETNS_RE = re.compile(r"^%s(\d+)-\S+$" % PREFIX)
MARK = "ETRUN_TESTBED"  # in a holder's environment: ETRUN_TESTBED=<its netns name>
NAME_RE = re.compile(r"^[a-z][a-z0-9-]{0,30}$")


class Unsupported(Exception):
    """This machine cannot have a bed (the message is one line saying why)."""


class BedError(Exception):
    """Making or using a bed failed for another reason."""


def subnet(tag):
    """The bed's /24 as 'a.b.c' for tag 1..511: 198.18.tag, then 198.19.tag-256."""
    return "198.%d.%d" % (18 + tag // 256, tag % 256)


def _run(argv, check=True, input=None):
    r = subprocess.run(argv, capture_output=True, text=True, input=input)
    if check and r.returncode != 0:
        raise BedError("%s failed: %s" % (" ".join(argv), (r.stderr or r.stdout).strip()))
    return r


def _ip(*args, check=True, input=None):
    return _run(["ip", *args], check=check, input=input)


class Host:
    """One host of a bed."""

    def __init__(self, name, address, netns, veth, run_dir):
        self.name = name
        self.address = address
        self.netns = netns          # network namespace name (`ip netns`)
        self.veth = veth            # outer end of its link, on the bridge (root namespace)
        self.holder_file = os.path.join(run_dir, name + ".holder")

    @property
    def netns_path(self):
        return "/run/netns/" + self.netns

    def holder(self):
        """PID of the process holding the host's UTS and mount namespaces, or None if it is
        gone (checked by its mark, so a reused PID does not count)."""
        try:
            with open(self.holder_file) as f:
                pid = int(f.read())
            with open("/proc/%d/environ" % pid, "rb") as f:
                if ("%s=%s" % (MARK, self.netns)).encode() in f.read().split(b"\0"):
                    return pid
        except (OSError, ValueError):
            pass
        return None

    def __repr__(self):
        return "Host(%s, %s, %s)" % (self.name, self.address, self.netns)


class Bed:
    """A bed made by up() or read back by load(). Not thread-safe; down() is idempotent."""

    def __init__(self, directory, tag, names, machine_name):
        self.dir = os.path.abspath(directory)
        self.tag = tag
        self.bridge = "%s%d" % (PREFIX, tag)
        self.launcher_address = subnet(tag) + ".1"
        self.run_dir = os.path.join(self.dir, "run")
        self.home = os.path.join(self.dir, "home")
        self.machine_name = machine_name
        self.hosts = [Host(n, "%s.%d" % (subnet(tag), i + 2), "%s%d-%s" % (PREFIX, tag, n),
                           "%s%dv%d" % (PREFIX, tag, i + 1), self.run_dir)
                      for i, n in enumerate(names)]
        self.launcher_hosts = os.path.join(self.dir, "launcher.hosts")
        self.hosts_file = os.path.join(self.dir, "hosts")

    # -- what callers use -------------------------------------------------------------------

    def host(self, name):
        for h in self.hosts:
            if h.name == name:
                return h
        raise BedError("no host %r in the bed at %s (hosts: %s)"
                       % (name, self.dir, ", ".join(h.name for h in self.hosts)))

    def env(self, base=None):
        """The environment for launcher-side commands: base (default os.environ) with HOME set
        to the bed's home and the bed's ssh wrapper first on PATH."""
        env = dict(os.environ if base is None else base)
        env["HOME"] = self.home
        env["PATH"] = os.path.join(self.dir, "bin") + ":" + env.get("PATH", "/usr/bin:/bin")
        return env

    def exec_argv(self, cmd):
        """argv running cmd on the launcher's side: a new mount namespace (root network
        namespace) where /etc/hosts is the bed's launcher.hosts. Pass env=bed.env() for ssh."""
        return ["unshare", "--mount", "--propagation", "slave", "--", "/bin/sh", "-c",
                'mount --bind "$0" /etc/hosts && exec "$@"', self.launcher_hosts, *cmd]

    def host_argv(self, name, cmd, cwd=None):
        """argv running cmd on host `name` (its network, UTS and mount namespaces), in cwd
        (default: the caller's working directory, the same path on every host)."""
        h = self.host(name)
        pid = h.holder()
        if pid is None:
            raise BedError("host %s of the bed at %s is gone (its namespace holder died): "
                           "make the bed again" % (name, self.dir))
        return ["nsenter", "--net=" + h.netns_path, "--target", str(pid), "--uts", "--mount",
                "--wd=" + (cwd or os.getcwd()), "--", *cmd]

    def run_launcher(self, cmd, env=None, **kwargs):
        """subprocess.run of cmd through exec_argv with the bed's env (text, captured)."""
        kwargs.setdefault("capture_output", True)
        kwargs.setdefault("text", True)
        return subprocess.run(self.exec_argv(cmd), env=self.env(env), **kwargs)

    def run_host(self, name, cmd, **kwargs):
        """subprocess.run of cmd on host `name` (text, captured)."""
        kwargs.setdefault("capture_output", True)
        kwargs.setdefault("text", True)
        return subprocess.run(self.host_argv(name, cmd), **kwargs)

    def cut(self, name):
        """Cuts host `name`'s link from outside (its veth's outer end down): no RST, no FIN."""
        _ip("link", "set", self.host(name).veth, "down")

    def heal(self, name):
        _ip("link", "set", self.host(name).veth, "up")

    def start_sshd(self, name):
        """Starts host `name`'s sshd (again, e.g. after its processes were killed) and waits
        until it accepts connections."""
        self._start_sshds([self.host(name)])

    def down(self):
        """Kills every process of the bed's hosts, removes its namespaces, links and mounts
        and its files in the state directory. Idempotent."""
        marks = {("%s=%s" % (MARK, h.netns)).encode() for h in self.hosts}
        _remove([h.netns_path for h in self.hosts], lambda environ: not marks.isdisjoint(environ),
                [h.veth for h in self.hosts] + [self.bridge])
        for name in (STATE, "hosts", "launcher.hosts", "home", "bin", "etc", "log", "run"):
            p = os.path.join(self.dir, name)
            if os.path.isdir(p) and not os.path.islink(p):
                shutil.rmtree(p, ignore_errors=True)
            elif os.path.lexists(p):
                os.unlink(p)
        try:
            os.rmdir(self.dir)  # only if empty: a directory the caller filled stays
        except OSError:
            pass

    def to_json(self):
        return {"dir": self.dir, "tag": self.tag, "bridge": self.bridge,
                "launcher_address": self.launcher_address, "home": self.home,
                "machine_name": self.machine_name,
                "hosts": [{"name": h.name, "address": h.address, "netns": h.netns,
                           "netns_path": h.netns_path, "veth": h.veth}
                          for h in self.hosts]}

    # -- making one -------------------------------------------------------------------------

    def _write_files(self):
        names = [(h.address, h.name) for h in self.hosts]
        bed_lines = "".join("%s\t%s\n" % a for a in names)
        # On the hosts, this machine's name is the launcher's address on the bed (a Slurm
        # controller named by it is reachable); "localhost" stays loopback.
        launcher = ""
        if self.machine_name and self.machine_name not in {h.name for h in self.hosts}:
            launcher = "%s\t%s\n" % (self.launcher_address, self.machine_name)
        _write(self.hosts_file, "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"
               + launcher + bed_lines)
        try:
            with open("/etc/hosts") as f:
                machine = f.read()
        except OSError:
            machine = "127.0.0.1\tlocalhost\n"
        if machine and not machine.endswith("\n"):
            machine += "\n"
        _write(self.launcher_hosts, machine + "# etrun test bed %s\n" % self.bridge + bed_lines)
        ssh_dir = os.path.join(self.home, ".ssh")
        os.makedirs(ssh_dir, mode=0o700, exist_ok=True)
        key = os.path.join(ssh_dir, "id_ed25519")
        _write(os.path.join(ssh_dir, "config"),
               "Host *\n  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n"
               "  LogLevel ERROR\n  BatchMode yes\n  IdentityFile %s\n" % key)
        os.makedirs(os.path.join(self.dir, "bin"), exist_ok=True)
        wrapper = os.path.join(self.dir, "bin", "ssh")
        _write(wrapper, "#!/bin/sh\n# OpenSSH reads ~/.ssh from the passwd entry: name the bed's"
               ' config.\nexec /usr/bin/ssh -F %s "$@"\n' % os.path.join(ssh_dir, "config"))
        os.chmod(wrapper, 0o755)
        os.makedirs(os.path.join(self.dir, "log"), exist_ok=True)

    def _sshd_config(self, h):
        etc = os.path.join(self.dir, "etc")
        path = os.path.join(etc, h.name + ".sshd_config")
        # ClientAlive: once a lost host's link is back, its sshd learns that the client is gone
        # and closes the channels, which stops the remote ranks.
        _write(path, "ListenAddress %s:22\nHostKey %s\nAuthorizedKeysFile %s\n"
               "PermitRootLogin prohibit-password\nPasswordAuthentication no\n"
               "KbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\nPidFile %s\n"
               "LogLevel ERROR\nMaxStartups 100\nClientAliveInterval 1\nClientAliveCountMax 3\n"
               % (h.address, os.path.join(etc, "host_key"), os.path.join(etc, "authorized_keys"),
                  os.path.join(etc, h.name + ".sshd.pid")))
        return path

    def _start_sshds(self, hosts):
        os.makedirs("/run/sshd", exist_ok=True)  # sshd's privilege-separation directory
        procs = []
        for h in hosts:
            log = os.path.join(self.dir, "log", h.name + ".sshd.log")
            argv = self.host_argv(h.name, [SSHD, "-f", self._sshd_config(h), "-E", log], cwd="/")
            procs.append((h, subprocess.Popen(argv, stdout=subprocess.DEVNULL,
                                              stderr=subprocess.PIPE, text=True)))
        for h, p in procs:
            _, err = p.communicate()
            if p.returncode != 0:
                raise BedError("sshd on %s failed (exit %d): %s"
                               % (h.name, p.returncode, err.strip()))
        deadline = time.monotonic() + 10
        waiting = list(hosts)
        while waiting:
            still = []
            for h in waiting:
                try:
                    socket.create_connection((h.address, 22), timeout=0.5).close()
                except OSError:
                    still.append(h)
            waiting = still
            if waiting:
                if time.monotonic() > deadline:
                    h = waiting[0]
                    raise BedError("sshd on %s does not accept connections on %s:22 after 10 s "
                                   "(log: %s)" % (h.name, h.address, os.path.join(
                                       self.dir, "log", h.name + ".sshd.log")))
                time.sleep(0.005)


def _write(path, text):
    with open(path, "w") as f:
        f.write(text)


def _ns_inode(path):
    try:
        return os.stat(path).st_ino
    except OSError:
        return None


def _scan():
    """[(pid, net inode, mnt inode, environ entries)] of the live processes but this one."""
    out = []
    me = str(os.getpid())
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or pid == me:
            continue
        try:
            links = [os.readlink("/proc/%s/ns/%s" % (pid, k)) for k in ("net", "mnt")]
            with open("/proc/%s/environ" % pid, "rb") as f:
                environ = f.read().split(b"\0")
        except OSError:
            continue  # gone, or a zombie
        net, mnt = (int(link[link.index("[") + 1:-1]) for link in links)  # "net:[4026531840]"
        out.append((int(pid), net, mnt, environ))
    return out


def _kill_all(net_paths, is_holder):
    """SIGKILLs, until none is left, every process in these network namespaces, every holder
    (is_holder(environ entries)) and every process in a holder's mount namespace."""
    nets = {i for i in map(_ns_inode, net_paths) if i}
    # Never the namespaces this process runs in (a bed made on another bed's host).
    nets.discard(_ns_inode("/proc/self/ns/net"))
    own_mnt = _ns_inode("/proc/self/ns/mnt")
    mnts = set()
    deadline = time.monotonic() + 10
    while True:
        procs = _scan()
        mnts |= {mnt for _, _, mnt, env in procs if is_holder(env) and mnt != own_mnt}
        pids = [pid for pid, net, mnt, env in procs if net in nets or mnt in mnts or is_holder(env)]
        if not pids:
            return
        if time.monotonic() > deadline:
            raise BedError("processes %s of the bed survive SIGKILL" % pids)
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.01)


def _remove(net_paths, is_holder, links):
    """Kills the bed's processes (see _kill_all), then removes the network namespaces and
    links that exist (any stage of a partial creation)."""
    _kill_all(net_paths, is_holder)
    existing = set(_ip("-o", "link", "show", check=False).stdout.split())
    for path in net_paths:
        if os.path.exists(path):
            _ip("netns", "del", os.path.basename(path), check=False)
    for link in links:
        if link + ":" in existing or any(w.startswith(link + "@") for w in existing):
            _ip("link", "del", link, check=False)


def _check_supported():
    if os.geteuid() != 0:
        raise Unsupported("testbed: needs root (network namespaces, a bridge, sshd on port 22)")
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if missing:
        raise Unsupported("testbed: missing %s (iproute2, util-linux, openssh-server/-client)"
                          % ", ".join(missing))


def _used_subnets():
    used = set()
    for line in _ip("-o", "-4", "addr", "show", check=False).stdout.splitlines():
        m = re.search(r"inet (\d+\.\d+\.\d+)\.\d+/", line)
        if m:
            used.add(m.group(1))
    return used


def _claim(tag):
    """Creates the bridge of the first free tag (or of `tag`): the bridge's name is the claim,
    atomic between concurrent beds. Returns the tag."""
    used = _used_subnets()
    tags = [tag] if tag else range(1, MAX_TAG + 1)
    for t in tags:
        if subnet(t) in used:
            continue
        bridge = "%s%d" % (PREFIX, t)
        r = _ip("link", "add", bridge, "type", "bridge", "forward_delay", "0", check=False)
        if r.returncode == 0:
            try:
                _ip("addr", "add", subnet(t) + ".1/24", "dev", bridge)
                _ip("link", "set", bridge, "up")
            except BedError:
                _ip("link", "del", bridge, check=False)
                raise
            return t
        if "File exists" not in r.stderr:
            raise Unsupported("testbed: cannot create a bridge here: ip link add %s type bridge: %s"
                              % (bridge, r.stderr.strip()))
    raise BedError("testbed: no free tag%s (every 198.18.0.0/15 subnet of a bed is in use)"
                   % (" %d" % tag if tag else ""))


def _parallel(fn, items):
    """fn(item) for every item on its own thread; raises the first error."""
    errors = []

    def call(item):
        try:
            fn(item)
        except BaseException as e:  # noqa: B902 - re-raised below
            errors.append(e)

    threads = [threading.Thread(target=call, args=(i,)) for i in items]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


def up(directory, hosts=3, prefix="h", tag=None):
    """Makes a bed of `hosts` hosts named <prefix>1..<prefix>K with its state in `directory`
    (created if missing; must not hold a bed). Returns the Bed. Raises Unsupported where this
    machine cannot have one, BedError on any other failure (then nothing of it is left)."""
    _check_supported()
    if not 1 <= hosts <= 250:
        raise BedError("testbed: --hosts must be 1..250, not %d" % hosts)
    if not NAME_RE.match(prefix):
        raise BedError("testbed: --prefix must be a lowercase host-name prefix, not %r" % prefix)
    if tag is not None and not 1 <= tag <= MAX_TAG:
        raise BedError("testbed: --tag must be 1..%d, not %d" % (MAX_TAG, tag))
    directory = os.path.abspath(directory)
    if os.path.exists(os.path.join(directory, STATE)):
        raise BedError("testbed: %s holds a bed already: `testbed.py down --dir %s` first"
                       % (directory, directory))
    os.makedirs(directory, exist_ok=True)
    etc = os.path.join(directory, "etc")
    os.makedirs(etc, exist_ok=True)
    keygen = [subprocess.Popen(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C",
                                "etrun-testbed", "-f", os.path.join(etc, k)],
                               stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE)
              for k in ("host_key", "client_key")]
    bed = None
    try:
        t = _claim(tag)
        bed = Bed(directory, t, ["%s%d" % (prefix, i + 1) for i in range(hosts)],
                  socket.gethostname())
        _write(os.path.join(directory, STATE), json.dumps(bed.to_json(), indent=1) + "\n")
        first = bed.hosts[0]
        r = _ip("netns", "add", first.netns, check=False)
        if r.returncode != 0:
            raise Unsupported("testbed: cannot create network namespaces here: ip netns add: "
                              + r.stderr.strip())
        batch = "".join("netns add %s\n" % h.netns for h in bed.hosts[1:])
        for h in bed.hosts:
            batch += ("link add %s type veth peer name eth0 netns %s\n"
                      "link set %s master %s up\n" % (h.veth, h.netns, h.veth, bed.bridge))
        _ip("-batch", "-", input=batch)
        bed._write_files()

        def make_host(h):
            _ip("-n", h.netns, "-batch", "-", input="addr add %s/24 dev eth0\nlink set eth0 up\n"
                "link set lo up\n" % h.address)
            _start_holder(h, bed.hosts_file)

        _parallel(make_host, bed.hosts)
        for p in keygen:
            if p.wait() != 0:
                raise BedError("ssh-keygen failed: " + p.stderr.read().decode().strip())
        shutil.copy(os.path.join(etc, "client_key.pub"), os.path.join(etc, "authorized_keys"))
        key = os.path.join(bed.home, ".ssh", "id_ed25519")
        shutil.copy(os.path.join(etc, "client_key"), key)
        os.chmod(key, 0o600)
        shutil.copy(os.path.join(etc, "client_key.pub"), key + ".pub")
        with open(os.path.join(etc, "host_key.pub")) as f:
            host_key = " ".join(f.read().split()[:2])
        # Every host is known by name and address, as on a cluster: no "accepting its key".
        _write(os.path.join(bed.home, ".ssh", "known_hosts"), "".join(
            "%s,%s %s\n" % (h.name, h.address, host_key) for h in bed.hosts))
        bed._start_sshds(bed.hosts)
    except BaseException:
        for p in keygen:
            if p.poll() is None:
                p.kill()
                p.wait()
        if bed:
            bed.down()
        else:
            shutil.rmtree(etc, ignore_errors=True)
            try:
                os.rmdir(directory)
            except OSError:
                pass
        raise
    return bed


def _start_holder(h, hosts_file):
    """Starts the process holding host h's UTS and mount namespaces (see the module doc)."""
    # slave, not private: the machine's unmounts (another bed's `ip netns del`) still reach
    # the copy of its mounts, so a host pins no other network namespace; nothing goes back.
    holder = subprocess.Popen(
        ["unshare", "--uts", "--mount", "--propagation", "slave", "/bin/sh", "-c",
         'mount --bind "$0" /etc/hosts && hostname "$1" && echo ready && '
         'exec sleep infinity >/dev/null 2>&1', hosts_file, h.name],
        env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", MARK: h.netns}, stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    ready = holder.stdout.readline()
    if ready != b"ready\n":
        _, err = holder.communicate()
        raise BedError("host %s: unshare --uts --mount failed: %s" % (h.name, err.decode().strip()))
    holder.stdout.close()
    holder.stderr.close()
    os.makedirs(os.path.dirname(h.holder_file), exist_ok=True)
    _write(h.holder_file, "%d\n" % holder.pid)
    # Ready once `sleep` runs: while the shell execs it, /proc/PID/environ is not readable.
    deadline = time.monotonic() + 10
    while True:
        try:
            with open("/proc/%d/cmdline" % holder.pid, "rb") as f:
                if f.read().startswith(b"sleep\0") and h.holder() == holder.pid:
                    return
        except OSError:
            pass
        if holder.poll() is not None or time.monotonic() > deadline:
            raise BedError("host %s: its namespace holder did not start" % h.name)
        time.sleep(0.001)


def load(directory):
    """The bed whose state is in `directory`; BedError if there is none."""
    path = os.path.join(os.path.abspath(directory), STATE)
    try:
        with open(path) as f:
            s = json.load(f)
    except (OSError, ValueError) as e:
        raise BedError("testbed: no bed in %s (%s)" % (directory, e))
    return Bed(s["dir"], s["tag"], [h["name"] for h in s["hosts"]], s.get("machine_name", ""))


def down_all():
    """Tears down every bed's leftovers on this machine, recognised by their names (netns
    etbdN-*, links etbdN and etbdNvI, holders marked ETRUN_TESTBED=etbdN-*); state directories
    stay. Returns what it found: netns paths, holders ("holder of NETNS"), links."""
    listed = _ip("netns", "list", check=False).stdout.splitlines()
    netns = [line.split()[0] for line in listed if line.strip()]
    nets = sorted("/run/netns/" + n for n in netns if NETNS_RE.match(n))
    mark = re.compile(rb"^%s=(%s\d+-\S+)$" % (MARK.encode(), PREFIX.encode()))

    def holder_of(environ):
        return next((m.group(1).decode() for m in map(mark.match, environ) if m), None)

    holders = sorted("holder of " + n for n in filter(None, (holder_of(e) for *_, e in _scan())))
    links = []
    for line in _ip("-o", "link", "show", check=False).stdout.splitlines():
        name = line.split(":")[1].strip().split("@")[0]
        if BRIDGE_RE.match(name) or VETH_RE.match(name):
            links.append(name)
    links.sort(key=lambda n: (BRIDGE_RE.match(n) is not None, n))  # veths, then bridges
    _remove(nets, holder_of, links)
    return nets + holders + links


def main(argv=None):
    p = argparse.ArgumentParser(prog="testbed.py", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="verb", required=True)
    u = sub.add_parser("up", help="make a bed")
    u.add_argument("--dir", required=True)
    u.add_argument("--hosts", type=int, default=3)
    u.add_argument("--prefix", default="h")
    u.add_argument("--tag", type=int)
    s = sub.add_parser("show", help="print the bed as JSON")
    s.add_argument("--dir", required=True)
    e = sub.add_parser("exec", help="run a command on the launcher's side")
    e.add_argument("--dir", required=True)
    e.add_argument("cmd", nargs=argparse.REMAINDER)
    h = sub.add_parser("host", help="run a command on a host")
    h.add_argument("--dir", required=True)
    h.add_argument("name")
    h.add_argument("cmd", nargs=argparse.REMAINDER)
    d = sub.add_parser("down", help="tear a bed down")
    g = d.add_mutually_exclusive_group(required=True)
    g.add_argument("--dir")
    g.add_argument("--all", action="store_true")
    a = p.parse_args(argv)
    try:
        if a.verb == "up":
            start = time.monotonic()
            bed = up(a.dir, a.hosts, a.prefix, a.tag)
            print("testbed: %d hosts up in %.2f s; launcher %s on %s; HOME=%s"
                  % (len(bed.hosts), time.monotonic() - start, bed.launcher_address, bed.bridge,
                     bed.home))
            for x in bed.hosts:
                print("%s\t%s\t%s" % (x.name, x.address, x.netns))
            return 0
        if a.verb == "down":
            if a.all:
                for thing in down_all():
                    print("testbed: removed " + thing)
            elif os.path.exists(os.path.join(a.dir, STATE)):
                load(a.dir).down()
            return 0
        bed = load(a.dir)
        if a.verb == "show":
            print(json.dumps(bed.to_json(), indent=1))
            return 0
        cmd = a.cmd[1:] if a.cmd[:1] == ["--"] else a.cmd
        if not cmd:
            raise BedError("testbed: %s: no command" % a.verb)
        if a.verb == "exec":
            argv, env = bed.exec_argv(cmd), bed.env()
        else:
            argv, env = bed.host_argv(a.name, cmd), dict(os.environ)
        os.execvpe(argv[0], argv, env)
    except Unsupported as e:
        print(e, file=sys.stderr)
        return SKIP_EXIT
    except BedError as e:
        msg = str(e)
        print(msg if msg.startswith("testbed:") else "testbed: " + msg, file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
