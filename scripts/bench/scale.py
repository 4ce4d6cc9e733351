"""Scale: start-to-end time of a static job of trivial ranks (`sh -c 'echo up'`) on the cluster
test bed (scripts/testbed.py), per layout HOSTSxRANKS_PER_HOST (default 8x1, 8x4, 8x8, 8x16,
16x16), launched in the same run by:

  mpirun          Open MPI's ssh launcher (--allow-run-as-root --oversubscribe --mca routed
                  direct, as scripts/bench/cluster.py's launch), one ssh session per host;
  etrun ssh       etrun -H h1:R,h2:R,... (libssh2: one connection and one agent per host);
  etrun rs        etrun --remote-shell 'ssh {host}' (one OpenSSH client and agent per host);
  horovodrun      when it is on PATH (usually not: then a note says it was skipped).

Two logins, each a temporary unprivileged user made by this script (useradd --system, shell
/bin/bash, home under the script's work directory, the bed's client key) and removed at the end:

  empty  ~/.bashrc is empty;
  slow   ~/.bashrc runs `flock LOCK sleep 0.3`: a login that does work under a lock, as
         `pyenv init` does. Debian's bash reads ~/.bashrc for every command sshd runs, so every
         SSH session (one per host for mpirun and etrun) pays it, serialized per lock.
         --lock host (default): one lock file per host ($HOSTNAME), as /tmp on real machines;
         --lock shared: one for all, as a home shared by every host (the bed's hosts share /tmp).

The launcher runs as that user (etrun logs in as its own user), inside the bed's `exec` view
(/etc/hosts). The bed's sshds run with sshd's default limits, MaxSessions 10 and MaxStartups
10:30:100: testbed.py configures MaxStartups 100, so this script restarts each host's sshd with a
copy of the bed's config saying MaxStartups 10:30:100 and MaxSessions 10 (sshd's `-o` does not
override MaxStartups from the file); --sshd-limits bed keeps the bed's own.

Launcher-side cost: /proc is sampled every 50 ms while the launcher runs; "procs" is the largest
number of its descendants (the launcher process itself not counted), "RSS" the largest sum of the
resident set of the launcher and its descendants (a shared page counts in every process that
maps it).
Order: within a run the launchers go one after another with nothing between them, so "etrun
ssh" starts while mpirun's job of the same size (its orteds, ranks and SSH sessions, thousands of
processes at 128 x 32) is still tearing down on the same hosts: the busy neighbour a launcher
meets after another job. --settle S waits S seconds before every launch instead (a quiet machine).

"up" counts the output lines that are `up` (etrun's `[i]<stdout>:up`); a run is good when the
launcher exits 0 and every rank printed it. A failed run is reported with its first error line.

usage: scale.py ETRUN [--sizes 8x1,8x4,8x8,8x16,16x16] [--login empty,slow] [--runs 3]
                      [--timeout 120] [--lock host|shared] [--sshd-limits default|bed]
                      [--remote-shell TEMPLATE] [--settle SECONDS] [--json FILE] [--cleanup]
Needs root (network namespaces, sshd, useradd); Open MPI optional. Prints a Markdown table.
"""
import argparse
import glob
import json
import os
import pwd
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import testbed  # noqa: E402

USERS = {"empty": "etscale_e", "slow": "etscale_s"}
GECOS = "etrun scale benchmark (temporary)"
DEFAULT_SIZES = "8x1,8x4,8x8,8x16,16x16"
SSHD_DEFAULT_LIMITS = {"MaxStartups": "10:30:100", "MaxSessions": "10"}  # sshd's defaults
RANK_CMD = ["sh", "-c", "echo up"]
UP_RE = re.compile(r"^(\[\d+\]<stdout>:)?up$")
PAGE = os.sysconf("SC_PAGE_SIZE")
SAMPLE_S = 0.05


def log(msg):
    print(msg, file=sys.stderr, flush=True)


# -- the temporary users ---------------------------------------------------------------------

def ours(name):
    try:
        return pwd.getpwnam(name).pw_gecos == GECOS
    except KeyError:
        return False


def user_pids(uid):
    """The user's live processes (zombies, which only their parent can reap, not counted)."""
    pids = []
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                if os.stat("/proc/" + p).st_uid != uid:
                    continue
                with open("/proc/%s/stat" % p) as f:
                    stat = f.read()
                if stat[stat.rindex(")") + 2] != "Z":
                    pids.append(int(p))
            except (OSError, ValueError):
                pass
    return pids


def kill_user_processes(name):
    """SIGKILLs, by pid, every process of one of this script's own users (all started by it)."""
    try:
        uid = pwd.getpwnam(name).pw_uid
    except KeyError:
        return
    deadline = time.monotonic() + 10
    while True:
        pids = user_pids(uid)
        if not pids or time.monotonic() > deadline:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.05)


def leftovers(uid):
    """The user's processes left 1 s after a run (remote ranks, sessions), as "name xN, ..."."""
    deadline = time.monotonic() + 1
    while user_pids(uid) and time.monotonic() < deadline:
        time.sleep(0.05)
    names = {}
    for pid in user_pids(uid):
        try:
            with open("/proc/%d/comm" % pid) as f:
                comm = f.read().strip()
        except OSError:
            continue
        names[comm] = names.get(comm, 0) + 1
    return ", ".join(f"{n} x{c}" for n, c in sorted(names.items()))


def remove_user(name):
    if not ours(name):
        return False
    kill_user_processes(name)
    r = subprocess.run(["userdel", name], capture_output=True, text=True)
    if r.returncode != 0:
        log(f"scale: userdel {name}: {r.stderr.strip()}")
    return r.returncode == 0


def make_user(login, name, work, bed, lock):
    """Creates user `name` with a home under work/: the bed's client key, ssh config, known
    hosts and the login's ~/.bashrc. Returns (uid, gid, home)."""
    if ours(name):
        remove_user(name)  # a leftover of an interrupted run
    try:
        pwd.getpwnam(name)
        raise SystemExit(f"scale: a user {name} exists and is not this script's: not touching it")
    except KeyError:
        pass
    home = os.path.join(work, "home-" + login)
    subprocess.run(["useradd", "--system", "--no-create-home", "--home-dir", home, "--shell",
                    "/bin/bash", "--comment", GECOS, "--password", "*", "--user-group", name],
                   check=True, capture_output=True, text=True)
    ent = pwd.getpwnam(name)
    ssh = os.path.join(home, ".ssh")
    os.makedirs(ssh, mode=0o700)
    key = os.path.join(ssh, "id_ed25519")
    shutil.copy(os.path.join(bed.dir, "etc", "client_key"), key)
    os.chmod(key, 0o600)
    shutil.copy(os.path.join(bed.home, ".ssh", "known_hosts"), os.path.join(ssh, "known_hosts"))
    with open(os.path.join(ssh, "config"), "w") as f:
        f.write("Host *\n  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n"
                "  LogLevel ERROR\n  BatchMode yes\n  IdentityFile %s\n" % key)
    with open(os.path.join(home, ".bashrc"), "w") as f:
        if login == "slow":
            locks = os.path.join(work, "locks")
            path = os.path.join(locks, "bashrc-$HOSTNAME.lock" if lock == "host" else "bashrc.lock")
            f.write("# etrun scale benchmark: a login that does work under a lock (as pyenv init)\n"
                    'flock "%s" sleep 0.3\n' % path)
    for d, _, files in os.walk(home):
        os.chown(d, ent.pw_uid, ent.pw_gid)
        for x in files:
            os.chown(os.path.join(d, x), ent.pw_uid, ent.pw_gid)
    return ent.pw_uid, ent.pw_gid, home


# -- sshd limits ---------------------------------------------------------------------------------

def restart_sshds(bed, limits):
    """Restarts every host's sshd with the bed's config but for `limits` ({option: value}; a
    config of its own next to the bed's, under the bed's etc/, gone with the bed). sshd takes
    MaxStartups from the file even when -o gives it, so the file itself must say it. Returns
    what sshd -T says the limits are."""
    etc = os.path.join(bed.dir, "etc")
    pids = []
    for h in bed.hosts:
        with open(os.path.join(etc, h.name + ".sshd.pid")) as f:
            pid = int(f.read())
        os.kill(pid, signal.SIGTERM)
        pids.append(pid)
    deadline = time.monotonic() + 10
    while any(os.path.exists("/proc/%d" % p) for p in pids):
        if time.monotonic() > deadline:
            raise SystemExit("scale: the bed's sshds did not stop")
        time.sleep(0.01)
    procs = []
    configs = []
    for h in bed.hosts:
        with open(os.path.join(etc, h.name + ".sshd_config")) as f:
            lines = [x for x in f.read().splitlines()
                     if x.split(" ", 1)[0].lower() not in {k.lower() for k in limits}]
        cfg = os.path.join(etc, h.name + ".scale.sshd_config")
        with open(cfg, "w") as f:
            f.write("\n".join(lines + [f"{k} {v}" for k, v in limits.items()]) + "\n")
        configs.append(cfg)
        logf = os.path.join(bed.dir, "log", h.name + ".sshd.log")
        argv = bed.host_argv(h.name, [testbed.SSHD, "-f", cfg, "-E", logf], cwd="/")
        procs.append((h, subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                          text=True)))
    for h, p in procs:
        _, err = p.communicate()
        if p.returncode != 0:
            raise SystemExit(f"scale: sshd on {h.name} failed: {err.strip()}")
    deadline = time.monotonic() + 10
    for h in bed.hosts:
        while True:
            try:
                socket.create_connection((h.address, 22), timeout=0.5).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise SystemExit(f"scale: sshd on {h.name} does not accept connections")
                time.sleep(0.01)
    r = subprocess.run([testbed.SSHD, "-T", "-f", configs[0]], capture_output=True, text=True)
    got = {k: v for k, v in (line.split(" ", 1) for line in r.stdout.splitlines() if " " in line)}
    return f"MaxSessions {got.get('maxsessions', '?')}, MaxStartups {got.get('maxstartups', '?')}"


# -- one run ---------------------------------------------------------------------------------

def proc_table():
    """{pid: (ppid, rss bytes)} of every live process."""
    out = {}
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % p) as f:
                stat = f.read()
            fields = stat[stat.rindex(")") + 2:].split()
            out[int(p)] = (int(fields[1]), int(fields[21]) * PAGE)  # ppid, rss (pages)
        except (OSError, ValueError, IndexError):
            pass
    return out


class Sampler(threading.Thread):
    """Samples the process tree under `pid` every 50 ms: max descendants, max summed RSS."""

    def __init__(self, pid):
        super().__init__(daemon=True)
        self.pid = pid
        self.stop = threading.Event()
        self.procs = 0
        self.rss = 0

    def run(self):
        while not self.stop.is_set():
            table = proc_table()
            children = {}
            for p, (pp, _) in table.items():
                children.setdefault(pp, []).append(p)
            if self.pid in table:
                tree, todo = [], [self.pid]
                while todo:
                    p = todo.pop()
                    tree.append(p)
                    todo.extend(children.get(p, ()))
                self.procs = max(self.procs, len(tree) - 1)
                self.rss = max(self.rss, sum(table[p][1] for p in tree))
            self.stop.wait(SAMPLE_S)


def first_error(stderr, stdout, rc):
    lines = [x.strip() for x in (stderr + "\n" + stdout).splitlines() if x.strip()]
    for x in lines:
        if re.search(r"error|fail|refused|denied|closed|cannot|abort|not", x, re.I):
            return x[:200]
    return lines[0][:200] if lines else f"exit code {rc}"


def run_once(bed, user, argv, np, timeout):
    """Runs argv as `user` on the launcher's side; returns a dict: wall, ok, up, procs, rss, err."""
    uid, gid, home, name = user
    env = {"HOME": home, "USER": name, "LOGNAME": name, "LANG": "C.UTF-8",
           "PATH": "/usr/local/bin:/usr/bin:/bin",
           "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    cmd = ["setpriv", "--reuid=%d" % uid, "--regid=%d" % gid, "--init-groups", "--", *argv]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.monotonic()
        p = subprocess.Popen(bed.exec_argv(cmd), stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                             env=env, cwd=home, start_new_session=True)
        sampler = Sampler(p.pid)
        sampler.start()
        timed_out = False
        try:
            p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            os.killpg(p.pid, signal.SIGTERM)
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        wall = time.monotonic() - start
        sampler.stop.set()
        sampler.join()
        try:
            os.killpg(p.pid, signal.SIGKILL)  # anything the launcher left behind here
        except OSError:
            pass
        out.seek(0)
        err.seek(0)
        stdout = out.read().decode(errors="replace")
        stderr = err.read().decode(errors="replace")
    up = sum(1 for x in stdout.splitlines() if UP_RE.match(x.strip()))
    ok = not timed_out and p.returncode == 0 and up == np
    e = ""
    if timed_out:
        e = f"timed out after {timeout} s ({up}/{np} up)"
    elif not ok:
        e = f"exit {p.returncode}, {up}/{np} up: " + first_error(stderr, stdout, p.returncode)
    return {"wall": wall, "ok": ok, "rc": p.returncode, "up": up, "np": np,
            "procs": sampler.procs, "rss": sampler.rss, "err": e}


# -- the benchmark -------------------------------------------------------------------------------

def launchers(etrun, hosts, ranks, remote_shell="ssh {host}"):
    np = len(hosts) * ranks
    hl = ",".join(f"{h}:{ranks}" for h in hosts)
    out = []
    if shutil.which("mpirun"):
        out.append(("mpirun", ["mpirun", "--allow-run-as-root", "--oversubscribe", "--mca",
                               "routed", "direct", "-np", str(np), "-H", hl, *RANK_CMD]))
    out.append(("etrun ssh", [etrun, "-np", str(np), "-H", hl, *RANK_CMD]))
    out.append(("etrun rs", [etrun, "-np", str(np), "-H", hl, "--remote-shell", remote_shell,
                             *RANK_CMD]))
    if shutil.which("horovodrun"):
        out.append(("horovodrun", ["horovodrun", "-np", str(np), "-H", hl, *RANK_CMD]))
    return out


def cell_time(rs):
    good = [r["wall"] for r in rs if r["ok"]]
    bad = len(rs) - len(good)
    if not good:
        return "FAIL (%d/%d)" % (bad, len(rs))
    s = "%.2f" % statistics.median(good)
    return s + (" (%d/%d failed)" % (bad, len(rs)) if bad else "")


def table(results, names):
    cols = [n for n in ("mpirun", "etrun ssh", "etrun rs", "horovodrun") if n in names]
    short = {"mpirun": "mpirun", "etrun ssh": "ssh", "etrun rs": "rs", "horovodrun": "hvd"}
    order = " / ".join(short[c] for c in cols)
    head = ["layout", "login"] + [f"{c} s" if c != "etrun rs" else "etrun remote-shell s"
                                  for c in cols]
    head += [f"launcher procs max ({order})", f"launcher RSS MB max ({order})",
             f"all up ({order})"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for (layout, login), per in results.items():
        row = [layout, login] + [cell_time(per[c]) if c in per else "-" for c in cols]
        row.append(" / ".join(str(max(r["procs"] for r in per[c])) if c in per else "-"
                              for c in cols))
        row.append(" / ".join("%.0f" % (max(r["rss"] for r in per[c]) / 2**20) if c in per else "-"
                              for c in cols))
        ups = []
        for c in cols:
            if c not in per:
                ups.append("-")
                continue
            rs = per[c]
            good = sum(1 for r in rs if r["up"] == r["np"])
            ups.append("yes" if good == len(rs) else "no (%s/%d)" % (
                ",".join(str(r["up"]) for r in rs), rs[0]["np"]))
        row.append(" / ".join(ups))
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def parse_sizes(text):
    sizes = []
    for part in text.split(","):
        m = re.fullmatch(r"\s*(\d+)x(\d+)\s*", part)
        if not m or int(m.group(1)) < 1 or int(m.group(2)) < 1:
            raise SystemExit(f"scale: --sizes: {part!r} is not HOSTSxRANKS (e.g. 8x16)")
        sizes.append((int(m.group(1)), int(m.group(2))))
    return sizes


def main():
    ap = argparse.ArgumentParser(prog="scale.py", description=__doc__.split("\n")[0])
    ap.add_argument("etrun", nargs="?", default=os.path.join(ROOT, "build", "etrun"))
    ap.add_argument("--sizes", default=DEFAULT_SIZES, help="HOSTSxRANKS,... (default %(default)s)")
    ap.add_argument("--login", default="empty,slow", help="empty,slow (default: both)")
    ap.add_argument("--runs", type=int, default=3, help="runs per launcher and layout (median)")
    ap.add_argument("--timeout", type=float, default=120, help="seconds before a run is failed")
    ap.add_argument("--lock", choices=("host", "shared"), default="host",
                    help="the slow login's lock: one per host (default) or one for every host")
    ap.add_argument("--sshd-limits", choices=("default", "bed"), default="default",
                    help="sshd's defaults (MaxStartups 10:30:100) or the bed's own (100)")
    ap.add_argument("--remote-shell", default="ssh {host}",
                    help="etrun rs's --remote-shell template (default %(default)r)")
    ap.add_argument("--settle", type=float, default=0,
                    help="seconds to wait before every launch (default 0: right after the last)")
    ap.add_argument("--json", help="also write every run's result to this file")
    ap.add_argument("--cleanup", action="store_true",
                    help="only remove what an interrupted run left (its users, beds, work dirs)")
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("scale: needs root (network namespaces, sshd, useradd)")
        sys.exit(testbed.SKIP_EXIT)
    if a.cleanup:
        for name in USERS.values():
            if remove_user(name):
                log(f"scale: removed user {name}")
        # Only this script's beds (their state under its work directories): other beds on the
        # machine (tests running) are not ours to tear down.
        for work in glob.glob(os.path.join(tempfile.gettempdir(), "etrun-scale-*")):
            if os.path.exists(os.path.join(work, "bed", testbed.STATE)):
                testbed.load(os.path.join(work, "bed")).down()
                log(f"scale: removed the bed in {work}/bed")
            shutil.rmtree(work, ignore_errors=True)
            log(f"scale: removed {work}")
        return 0
    etrun = os.path.realpath(a.etrun)
    sizes = parse_sizes(a.sizes)
    logins = [x.strip() for x in a.login.split(",") if x.strip()]
    for x in logins:
        if x not in USERS:
            raise SystemExit(f"scale: --login: {x!r} is neither empty nor slow")
    if a.runs < 1:
        raise SystemExit("scale: --runs must be at least 1")
    if a.settle < 0:
        raise SystemExit("scale: --settle must be 0 or more seconds")

    def on_signal(signum, _):
        raise SystemExit(128 + signum)  # so the finally below tears everything down

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    work = tempfile.mkdtemp(prefix="etrun-scale-")
    os.chmod(work, 0o755)  # the users' homes and the lock directory live under it
    bed = None
    made = []
    results = {}
    runs = []
    try:
        try:
            bed = testbed.up(os.path.join(work, "bed"), hosts=max(h for h, _ in sizes))
        except testbed.Unsupported as e:
            print(e)
            sys.exit(testbed.SKIP_EXIT)
        limits = "the bed's (MaxStartups 100, MaxSessions 10)"
        if a.sshd_limits == "default":
            limits = restart_sshds(bed, SSHD_DEFAULT_LIMITS)
        locks = os.path.join(work, "locks")
        os.makedirs(locks)
        os.chmod(locks, 0o1777)
        users = {}
        logins_note = []
        for login in logins:
            name = USERS[login]
            uid, gid, home = make_user(login, name, work, bed, a.lock)
            made.append(name)
            users[login] = (uid, gid, home, name)
            # The login works: one ssh to h1 as the user, timed.
            t = time.monotonic()
            r = subprocess.run(bed.exec_argv(["setpriv", "--reuid=%d" % uid, "--regid=%d" % gid,
                                              "--init-groups", "--", "ssh", "h1", "true"]),
                               env={"HOME": home, "PATH": "/usr/bin:/bin"}, cwd=home,
                               capture_output=True, text=True, timeout=60)
            if r.returncode != 0:
                raise SystemExit(f"scale: ssh h1 as {name} fails: {r.stderr.strip()}")
            took = time.monotonic() - t
            what = "empty ~/.bashrc" if login == "empty" else (
                "~/.bashrc `flock LOCK sleep 0.3`, one lock "
                + ("per host" if a.lock == "host" else "for every host"))
            logins_note.append(f"{login}: user {name}, {what} (one `ssh h1 true`: {took:.2f} s)")
            log(f"scale: login {logins_note[-1]}")
        notes = [f"sshd limits on every host: {limits}", "logins: " + "; ".join(logins_note),
                 f"etrun {etrun}", f"{a.runs} run(s) per cell, median of the good ones; "
                 f"timeout {a.timeout:g} s",
                 f"{a.settle:g} s of quiet before every launch" if a.settle else
                 "every launch right after the last (etrun ssh right after mpirun's job of the "
                 "same size)"]
        if not shutil.which("horovodrun"):
            notes.append("horovodrun: not on PATH, skipped")
        if not shutil.which("mpirun"):
            notes.append("mpirun: not on PATH, skipped")
        names = set()
        for nh, nr in sizes:
            hosts = [h.name for h in bed.hosts[:nh]]
            cmds = launchers(etrun, hosts, nr, a.remote_shell)
            for login in logins:
                layout = f"{nh}x{nr} ({nh * nr})"
                per = results.setdefault((layout, login), {})
                for i in range(a.runs):
                    for lname, argv in cmds:  # interleaved: drift hits every launcher alike
                        names.add(lname)
                        time.sleep(a.settle)
                        r = run_once(bed, users[login], argv, nh * nr, a.timeout)
                        per.setdefault(lname, []).append(r)
                        runs.append(dict(r, layout=layout, login=login, launcher=lname, run=i + 1))
                        log(f"scale: {layout} {login} {lname} run {i + 1}: {r['wall']:.2f} s, "
                            f"{r['up']}/{r['np']} up, procs {r['procs']}, "
                            f"RSS {r['rss'] / 2**20:.0f} MB" + (f"  FAILED: {r['err']}"
                                                               if not r["ok"] else ""))
                        r["left"] = leftovers(users[login][0])
                        if r["left"]:
                            log(f"scale:   processes of {users[login][3]} still there 1 s "
                                f"after the launcher ended (killed): {r['left']}")
                        kill_user_processes(users[login][3])  # no run leaves work for the next
        print(table(results, names))
        print()
        for n in notes:
            print("- " + n)
        left = [r for r in runs if r.get("left")]
        if left:
            print("- processes of the login still there 1 s after the launcher ended (killed): "
                  + "; ".join(f"{r['layout']} {r['login']} {r['launcher']} run {r['run']}: "
                              f"{r['left']}" for r in left))
        failed = [r for r in runs if not r["ok"]]
        if failed:
            print("\nFailed runs (first error line):\n")
            for r in failed:
                print(f"- {r['layout']} {r['login']} {r['launcher']} run {r['run']}: {r['err']}")
        if a.json:
            with open(a.json, "w") as f:
                json.dump({"notes": notes, "runs": runs}, f, indent=1)
    finally:
        for name in made:
            remove_user(name)
        if bed is not None:
            bed.down()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
