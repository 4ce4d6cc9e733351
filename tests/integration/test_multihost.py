"""Elastic training across hosts with their own addresses, names and interfaces (the cluster test
bed, tests/integration/testbed.py: h1..h3, each its own network namespace, host name, eth0 and
sshd), with no network flags: etrun finds each host's launcher address and interface. Then the
host faults of issue 20: a link cut mid-training (fenced, resumed from the last commit), a host
frozen and thawed, every process of a host killed (a reboot), its sshd killed, and the
launcher's own link flapping. Each checks the training kept every step exactly once, that the
lines arrived whole, and that nothing is left running on any host. Skipped with the bed's one
line where namespaces are not allowed."""
import json
import os
import re
import shutil
import signal
import subprocess
import time

from conftest import ETRUN, PYTHON, processes_with_marker, rank_lines, wait_until
from test_elastic_protocol import STANDIN, committed_steps, sizes_in_order
from test_mpi import MPI_WORKER, mpi_lines
from testbed import bed_fixture

HOROVOD_STANDIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "horovod_standin.py")


def bed_script():
    return os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                        "scripts", "testbed.py")

bed = bed_fixture(hosts=3)

# Every stdout line a stand-in writes (elastic_standin.py's docstring), after etrun's prefix.
LINE = re.compile(r"^\[\d+\]<stdout>:(step \d+ rank \d+ size \d+|reset: rank -?\d+ -> \d+ size \d+|"
                  r"done \d+ steps rank \d+ size \d+)$")


class BedJob:
    """An elastic job on the bed's hosts, listed by a discovery script from a file."""

    def __init__(self, bed, tmp_path, marker_env, hosts, steps, extra=(), env=None):
        self.bed = bed
        self.hosts_file = tmp_path / "hosts"
        self.set_hosts(hosts)
        script = tmp_path / "discover.sh"
        script.write_text(f"#!/bin/sh\ncat {self.hosts_file}\n")
        script.chmod(0o755)
        self.events = tmp_path / "events.jsonl"
        self.out_path = tmp_path / "out.txt"
        self.err_path = tmp_path / "err.txt"
        cmd = [ETRUN, "-np", str(len(hosts)), "--min-np", "1", "--discovery-interval", "0.2",
               "--host-discovery-script", str(script), "--events-file", str(self.events), *extra,
               PYTHON, STANDIN, "--steps", str(steps), "--step-seconds", "0.05", "--timeout", "120"]
        self.proc = subprocess.Popen(bed.exec_argv(cmd), env=bed.env(dict(os.environ, **marker_env, **(env or {}))),
                                     stdout=open(self.out_path, "wb"), stderr=open(self.err_path, "wb"),
                                     stdin=subprocess.DEVNULL)

    def set_hosts(self, hosts):
        tmp = self.hosts_file.with_suffix(".tmp")
        tmp.write_text("".join(f"{h}:1\n" for h in hosts))
        tmp.rename(self.hosts_file)

    def lines(self):
        return self.out_path.read_text(errors="replace").splitlines()

    def err(self):
        return self.err_path.read_text(errors="replace")

    def wait_for_size(self, size, timeout=60):
        pattern = re.compile(rf"<stdout>:step \d+ rank \d+ size {size}$")
        start = len(self.lines())
        return wait_until(lambda: any(pattern.search(l) for l in self.lines()[start:]), timeout)

    def finish(self, timeout=120):
        return self.proc.wait(timeout=timeout)

    def event_list(self):
        return [json.loads(line) for line in self.events.read_text().splitlines()]

    def check_training(self, steps):
        """Every step committed once, in order, by whole lines only."""
        lines = self.lines()
        bad = [l for l in lines if not LINE.match(l)]
        assert bad == [], bad[:5]
        assert committed_steps(lines) == set(range(steps))
        order = [int(m.group(1)) for m in (re.search(r"<stdout>:step (\d+) rank 0 ", l) for l in lines) if m]
        assert order == sorted(order), "rank 0 committed a step twice or out of order"


def host_pids(bed, name):
    r = subprocess.run(["ip", "netns", "pids", bed.host(name).netns], capture_output=True, text=True)
    return [int(p) for p in r.stdout.split()]


def marked_on(bed, name, marker):
    """The job's processes (etrun's marker) inside host `name`'s network namespace."""
    inside = set(host_pids(bed, name))
    return [p for p in processes_with_marker(marker) if p in inside]


def test_elastic_two_three_two_across_hosts_with_no_network_flags(bed, tmp_path, marker_env):
    # Workers on h1..h3 are told the launcher address their host reaches and their own eth0 (the
    # launcher's interface toward them is a bridge): the world grows to 3 and shrinks back.
    marker = next(iter(marker_env.values()))
    job = BedJob(bed, tmp_path, marker_env, ["h1", "h2"], steps=120)
    assert job.wait_for_size(2), job.err()
    job.set_hosts(["h1", "h2", "h3"])
    assert job.wait_for_size(3), job.err()
    job.set_hosts(["h1", "h3"])
    assert job.wait_for_size(2), job.err()
    assert job.finish() == 0, job.err()
    job.check_training(120)
    assert sizes_in_order(job.lines())[:3] == [2, 3, 2]
    assert processes_with_marker(marker) == []


def test_a_cut_link_is_fenced_and_training_resumes_from_the_last_commit(bed, tmp_path, marker_env):
    # h3's link is cut mid-training and discovery still lists it. No RST arrives, so rank 0 would
    # wait in its collective for Gloo's timeout (120 s here). etrun hears no heartbeat from h3 for
    # --lost-host-timeout, blacklists it and cuts the survivors' sockets to it (ss -K): the
    # collective fails now, the world resets to 2 with its state, and the job finishes long
    # before that timeout. Once the link is back, h3's stranded rank is stopped there and h3
    # rejoins after its cooldown.
    marker = next(iter(marker_env.values()))
    job = BedJob(bed, tmp_path, marker_env, ["h1", "h2", "h3"], steps=300,
                 extra=["--blacklist-cooldown-range", "4", "5", "--log-level", "INFO"],
                 env={"HOROVOD_GLOO_TIMEOUT_SECONDS": "120"})
    assert job.wait_for_size(3), job.err()
    stranded = marked_on(bed, "h3", marker)
    assert stranded
    bed.cut("h3")
    try:
        assert job.wait_for_size(2, timeout=60), job.err()
    finally:
        bed.heal("h3")
    assert wait_until(lambda: not any(os.path.exists(f"/proc/{p}") for p in stranded), timeout=30)
    assert job.finish(timeout=100) == 0, job.err()
    job.check_training(300)
    assert sizes_in_order(job.lines())[:3] == [3, 2, 3]
    err = job.err()
    assert "ssh h3:22: connection lost: no answer for 3 s (--lost-host-timeout)" in err, err
    assert "host h3 is lost: its peers' connections to it are cut on " in err, err
    blacklisted = [e for e in job.event_list() if e["event"] == "host_blacklisted"]
    assert [(e["host"], e["reason"]) for e in blacklisted] == [("h3", "cannot be reached")]
    assert processes_with_marker(marker) == []


def test_a_host_stalled_for_4_s_is_late_not_lost(bed, tmp_path, marker_env):
    # Every process of h2 (its sshd, agent and ranks) stopped for 4 s (SIGSTOP, then SIGCONT), as
    # a node tearing down the last job or short of memory would stall them: its kernel still
    # acknowledges the pings, so the host is late (one line, an event), never lost, and the job
    # goes on with all three.
    job = BedJob(bed, tmp_path, marker_env, ["h1", "h2", "h3"], steps=150)
    assert job.wait_for_size(3), job.err()
    stalled = host_pids(bed, "h2")
    assert stalled
    for pid in stalled:
        os.kill(pid, signal.SIGSTOP)
    time.sleep(4)
    for pid in stalled:
        os.kill(pid, signal.SIGCONT)
    assert job.finish() == 0, job.err()
    job.check_training(150)
    events = job.event_list()
    assert not [e for e in events if e["event"] in ("host_blacklisted", "reset")], events
    late = [e for e in events if e["event"] == "host_late"]
    assert [e["host"] for e in late] == ["h2"], late
    assert "host h2 is late: its agent has said nothing for" in job.err(), job.err()
    assert "etrun: error" not in job.err(), job.err()


def test_a_frozen_host_is_lost_and_its_ranks_end_once_it_thaws(bed, tmp_path, marker_env):
    # Every process of h2 stopped (SIGSTOP): its kernel still answers TCP, its heartbeat does not.
    # Late, then lost at --unresponsive-host-timeout (5 s here); the job goes on without h2;
    # thawed, h2's old rank finds its connection gone and is stopped, so no second copy of a rank
    # ever trains.
    marker = next(iter(marker_env.values()))
    job = BedJob(bed, tmp_path, marker_env, ["h1", "h2", "h3"], steps=200,
                 extra=["--unresponsive-host-timeout", "5"], env={"HOROVOD_GLOO_TIMEOUT_SECONDS": "120"})
    assert job.wait_for_size(3), job.err()
    frozen = host_pids(bed, "h2")
    stranded = marked_on(bed, "h2", marker)
    assert stranded
    for pid in frozen:
        os.kill(pid, signal.SIGSTOP)
    try:
        assert job.wait_for_size(2, timeout=60), job.err()
    finally:
        for pid in frozen:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
    assert wait_until(lambda: not any(os.path.exists(f"/proc/{p}") for p in stranded), timeout=30)
    assert job.finish() == 0, job.err()
    job.check_training(200)
    assert "host h2 is late: its agent has said nothing for" in job.err(), job.err()
    assert re.search(r"etrun: error: no answer from h2's agent for \d+ s, though the host is still reachable "
                     r"\(--unresponsive-host-timeout 5\): the host's ranks are lost", job.err()), job.err()
    assert processes_with_marker(marker) == []


def test_a_rebooted_host_loses_its_rank_and_rejoins_after_its_cooldown(bed, tmp_path, marker_env):
    # Every process of h2 killed at once (sshd, the rank, its wrapper): the connection resets, the
    # job trains on at 2; h2 "boots" again (a new sshd) and rejoins once its cooldown is over.
    marker = next(iter(marker_env.values()))
    job = BedJob(bed, tmp_path, marker_env, ["h1", "h2", "h3"], steps=300,
                 extra=["--blacklist-cooldown-range", "2", "3"])
    assert job.wait_for_size(3), job.err()
    try:
        for pid in host_pids(bed, "h2"):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass  # gone already: a process that ended with one killed before it
        assert job.wait_for_size(2, timeout=60), job.err()
    finally:
        bed.start_sshd("h2")  # the next tests need h2, whatever happened here
    assert job.wait_for_size(3), job.err()
    assert job.finish() == 0, job.err()
    job.check_training(300)
    assert sizes_in_order(job.lines())[:3] == [3, 2, 3]
    assert processes_with_marker(marker) == []


def test_a_host_whose_sshd_is_killed_loses_its_rank_and_leaves_nothing(bed, tmp_path, marker_env):
    # Only h3's sshd processes die (the listener and the connection's): the rank there loses its
    # channel, its wrapper stops it; the job goes on at 2.
    marker = next(iter(marker_env.values()))
    job = BedJob(bed, tmp_path, marker_env, ["h1", "h2", "h3"], steps=150)
    assert job.wait_for_size(3), job.err()
    sshds = [p for p in host_pids(bed, "h3") if open(f"/proc/{p}/comm").read().strip() == "sshd"]
    assert sshds
    try:
        for pid in sshds:  # the machine's pids are shared: pick h3's by its network namespace
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass  # a connection's sshd that ended with the listener
        assert job.wait_for_size(2, timeout=60), job.err()
        assert wait_until(lambda: marked_on(bed, "h3", marker) == [], timeout=30)
        assert job.finish() == 0, job.err()
    finally:
        bed.start_sshd("h3")
    job.check_training(150)
    assert processes_with_marker(marker) == []


def test_the_launchers_link_flapping_for_a_second_loses_nothing(bed, tmp_path, marker_env):
    # The bridge (the launcher's side of every host's link) down for a second, under the
    # --lost-host-timeout: no host is lost, no rank restarted, every step kept.
    marker = next(iter(marker_env.values()))
    job = BedJob(bed, tmp_path, marker_env, ["h1", "h2", "h3"], steps=150)
    assert job.wait_for_size(3), job.err()
    subprocess.run(["ip", "link", "set", bed.bridge, "down"], check=True)
    time.sleep(1)  # the fault itself: a one-second outage
    subprocess.run(["ip", "link", "set", bed.bridge, "up"], check=True)
    assert job.finish() == 0, job.err()
    job.check_training(150)
    evs = job.event_list()
    assert [e for e in evs if e["event"] == "host_blacklisted"] == []
    assert len([e for e in evs if e["event"] == "rank_started"]) == 3
    assert processes_with_marker(marker) == []


def test_static_and_mpi_jobs_across_hosts_with_no_network_flags(bed):
    # Static: Horovod-protocol ranks on h1..h3 rendezvous with etrun and mesh with each other on
    # their own eth0. --mpi: Open MPI's mpirun reaches the hosts over ssh (the bed's config) and
    # picks its interfaces itself: etrun names none for hosts elsewhere.
    r = bed.run_launcher([ETRUN, "-np", "3", "-H", "h1:1,h2:1,h3:1", "sh", "-c",
                          f'echo "$(hostname) $HOROVOD_GLOO_IFACE"; exec {PYTHON} {HOROVOD_STANDIN}'],
                         timeout=120)
    assert r.returncode == 0, r.stderr
    assert rank_lines(r.stdout) == {rank: [f"h{rank + 1} eth0", f"rendezvous ok rank {rank}"]
                                    for rank in range(3)}
    if shutil.which("mpirun") is None:
        return
    for mode, expect in (("allreduce", {rank: [f"rank {rank} of 3: sum 6"] for rank in range(3)}),):
        r = bed.run_launcher([ETRUN, "--mpi", "-np", "3", "-H", "h1:1,h2:1,h3:1", PYTHON, MPI_WORKER,
                              mode], timeout=120)
        assert r.returncode == 0, r.stderr
        assert mpi_lines(r.stdout) == expect
    r = bed.run_launcher([ETRUN, "--mpi", "-np", "2", "-H", "h1:1,h3:1", PYTHON, MPI_WORKER, "send"],
                         timeout=120)
    assert r.returncode == 0, r.stderr
    assert mpi_lines(r.stdout) == {1: ["received 4194304 bytes intact"]}


def test_a_pool_job_trains_on_the_pools_hosts(bed, tmp_path, marker_env):
    # A pool over h1..h3 lends its slots to an elastic job, whose workers start there through SSH
    # and find their own network, as any elastic job's.
    marker = next(iter(marker_env.values()))
    name = "bedpool%d" % os.getpid()
    env = bed.env(dict(os.environ, **marker_env))
    pool = subprocess.Popen(bed.exec_argv([ETRUN, "pool", "start", name, "-H", "h1:1,h2:1,h3:1",
                                           "--gpus", "none"]),
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL)
    try:
        status = lambda: bed.run_launcher([ETRUN, "pool", "status", name, "--json"], env=env)
        assert wait_until(lambda: status().returncode == 0, timeout=20)
        r = bed.run_launcher([ETRUN, "--pool", name, "-np", "3", "--min-np", "3", "--max-np", "3",
                              PYTHON, STANDIN, "--steps", "40", "--step-seconds", "0.05",
                              "--timeout", "120"], env=env, timeout=120)
        assert r.returncode == 0, r.stderr
        lines = rank_lines(r.stdout)
        assert {rank: lines[rank][-1] for rank in lines} == {
            rank: f"done 40 steps rank {rank} size 3" for rank in range(3)}
    finally:
        pool.send_signal(signal.SIGTERM)
        pool.wait(timeout=20)
    assert processes_with_marker(marker) == []


def test_through_a_remote_shell_ranks_find_their_network_or_say_why_not(bed):
    # Ranks through a remote shell that needs no network (nsenter into the host, as kubectl exec
    # goes through an API server), no network flag: each is told the address of the launcher's
    # route toward its host and finds its own eth0, an elastic job trains. Then h2 has lost its
    # route to the launcher, so its rank says so in one line instead of timing out in Gloo's
    # rendezvous; h1's rank is stopped, the job exits 255.
    h2 = bed.host("h2")
    subnet = bed.launcher_address.rsplit(".", 1)[0] + ".0/24"
    shell = f"/usr/bin/python3 {bed_script()} host --dir {bed.dir} {{host}} --"
    r = bed.run_launcher([ETRUN, "-np", "2", "--min-np", "2", "-H", "h1:1,h2:1", "--remote-shell",
                          shell, PYTHON, STANDIN, "--steps", "5"], timeout=120)
    assert r.returncode == 0, r.stderr
    lines = rank_lines(r.stdout)
    assert {rank: lines[rank][-1] for rank in lines} == {
        rank: f"done 5 steps rank {rank} size 2" for rank in range(2)}
    assert bed.run_host("h2", ["ip", "route", "del", subnet, "dev", "eth0"]).returncode == 0
    try:
        r = bed.run_launcher([ETRUN, "-np", "2", "-H", "h1:1,h2:1", "--remote-shell", shell, PYTHON,
                              HOROVOD_STANDIN], timeout=120)
    finally:
        bed.run_host("h2", ["ip", "route", "add", subnet, "dev", "eth0", "src", h2.address])
    assert r.returncode == 255, r.stderr
    assert (f"[1]<stderr>:etrun: error: host h2 has no route to the launcher at "
            f"{bed.launcher_address}: name the launcher's interface the hosts reach with "
            f"--network-interface") in r.stderr.splitlines(), r.stderr
