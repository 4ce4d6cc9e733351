"""The ready-made discovery scripts in scripts/discovery/: each runs against stand-ins for the
tools it asks (scontrol, kubectl, nvidia-smi) that print canned output and record how they were
called, on a PATH that holds only those stand-ins and the standard tools, so a real Slurm, kubectl
or GPU on the machine cannot change the result. Then real elastic etrun jobs driven by
hostfile.sh."""
import http.server
import json
import os
import re
import shutil
import subprocess
import threading

import pytest

from conftest import ETRUN, PYTHON, ROOT, processes_with_marker, run_etrun, wait_until

SCRIPTS = os.path.join(ROOT, "scripts", "discovery")
STANDIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "elastic_standin.py")
# What the scripts may use besides the tools they ask; nothing else is on their PATH.
STANDARD_TOOLS = ["awk", "env", "grep", "mktemp", "nproc", "rm", "sed", "tr"]

FAKE_TOOL = """#!/usr/bin/python3
# Stand-in written by test_discovery_scripts.py: records argv, prints canned output.
import json, os, sys
here = os.path.dirname(os.path.abspath(__file__))
name = os.path.basename(sys.argv[0])
with open(os.path.join(here, name + ".calls"), "a") as f:
    f.write(json.dumps(sys.argv[1:]) + "\\n")
with open(os.path.join(here, name + ".json")) as f:
    canned = json.load(f)
sys.stdout.write(canned["stdout"])
sys.stderr.write(canned["stderr"])
sys.exit(canned["rc"])
"""


class Tools:
    """A bin directory for one test: links to the standard tools plus canned stand-ins."""

    def __init__(self, tmp_path):
        self.bin = tmp_path / "bin"
        self.bin.mkdir()
        for tool in STANDARD_TOOLS:
            os.symlink(shutil.which(tool), self.bin / tool)
        self.tmp = tmp_path / "scratch"
        self.tmp.mkdir()

    def fake(self, name, stdout="", stderr="", rc=0):
        (self.bin / (name + ".json")).write_text(
            json.dumps({"stdout": stdout, "stderr": stderr, "rc": rc}))
        path = self.bin / name
        path.write_text(FAKE_TOOL)
        path.chmod(0o755)

    def calls(self, name):
        path = self.bin / (name + ".calls")
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines()]

    def run(self, script, args=(), env=None, cwd=None):
        """Runs scripts/discovery/<script> with only `env` (plus PATH, TMPDIR) set."""
        full_env = {"PATH": str(self.bin), "TMPDIR": str(self.tmp)}
        full_env.update(env or {})
        r = subprocess.run([os.path.join(SCRIPTS, script), *args], capture_output=True,
                           env=full_env, cwd=cwd, timeout=30, stdin=subprocess.DEVNULL)
        # Temporary files are cleaned up on every path.
        assert os.listdir(self.tmp) == []
        return r.returncode, r.stdout.decode(), r.stderr.decode()


@pytest.fixture
def tools(tmp_path):
    return Tools(tmp_path)


# ---------------------------------------------------------------------------------------------
# hostfile.sh

def test_hostfile_prints_every_form_in_file_order(tools, tmp_path):
    hosts = tmp_path / "hosts.txt"
    hosts.write_bytes(b"# workers\r\n"
                      b"  node-b slots=4 max_slots=8  \r\n"
                      b"\r\n"
                      b"node-a:007\n"
                      b"node_c   # spare: slots from --slots-per-host\n"
                      b"\t10.0.0.5\tslots=0\n"
                      b"last slots=2")  # no newline at the end
    rc, out, err = tools.run("hostfile.sh", [str(hosts)])
    assert (rc, err) == (0, "")
    assert out == "node-b:4\nnode-a:7\nnode_c\n10.0.0.5:0\nlast:2\n"


def test_hostfile_path_comes_from_etrun_hostfile_relative_to_the_working_directory(tools, tmp_path):
    (tmp_path / "hosts.txt").write_text("localhost slots=2\n")
    rc, out, err = tools.run("hostfile.sh", env={"ETRUN_HOSTFILE": "hosts.txt"}, cwd=tmp_path)
    assert (rc, out, err) == (0, "localhost:2\n", "")


def test_hostfile_argument_wins_over_the_environment(tools, tmp_path):
    (tmp_path / "a").write_text("a:1\n")
    (tmp_path / "b").write_text("b:1\n")
    rc, out, _ = tools.run("hostfile.sh", [str(tmp_path / "b")],
                           env={"ETRUN_HOSTFILE": str(tmp_path / "a")})
    assert (rc, out) == (0, "b:1\n")


def test_hostfile_with_only_comments_prints_nothing(tools, tmp_path):
    (tmp_path / "hosts").write_text("# all hosts drained\n\n   \n")
    assert tools.run("hostfile.sh", [str(tmp_path / "hosts")]) == (0, "", "")


@pytest.mark.parametrize("line, message", [
    ("node-a slots=two", 'expected "host slots=N", got "node-a slots=two"'),
    ("node-a other", 'expected "host slots=N", got "node-a other"'),
    ("node-a slots=1 slots=2", 'slots given twice in "node-a slots=1 slots=2": keep one'),
    ("node-a:1 slots=2", 'expected "host:slots" alone, got "node-a:1 slots=2"'),
    ("node-a:", 'slots must be a whole number, got "node-a:"'),
    ("node-a:1:2", 'slots must be a whole number, got "node-a:1:2"'),
    ("node-a:-1", 'slots must be a whole number, got "node-a:-1"'),
    ("user@node-a:2", 'bad host name "user@node-a": use letters, digits, ".", "_", "-"'),
])
def test_hostfile_bad_line_is_one_error_naming_file_and_line_and_prints_no_hosts(
        tools, tmp_path, line, message):
    hosts = tmp_path / "hosts"
    hosts.write_text(f"good-a:1\n# comment\n{line}\ngood-b:1\n")
    rc, out, err = tools.run("hostfile.sh", [str(hosts)])
    assert (rc, out) == (1, "")
    assert err == f"hostfile.sh: {hosts} line 3: {message}\n"


def test_hostfile_without_a_path_says_how_to_give_one(tools):
    assert tools.run("hostfile.sh") == (
        1, "", "hostfile.sh: no hosts file: pass its path as the first argument or set "
               "ETRUN_HOSTFILE\n")


@pytest.mark.parametrize("what", ["missing", "directory"])
def test_hostfile_unreadable_path_is_an_error(tools, tmp_path, what):
    path = tmp_path / "hosts"
    if what == "directory":
        path.mkdir()
    assert tools.run("hostfile.sh", [str(path)]) == (
        1, "", f"hostfile.sh: cannot read hosts file {path}: check the path (relative paths "
               "start from etrun's working directory)\n")


# ---------------------------------------------------------------------------------------------
# slurm.sh

NODES = "node01\r\nnode02 \nnode03\n"  # CRLF and a trailing blank: both must go


@pytest.mark.parametrize("env, expected", [
    ({}, ["node01:1", "node02:1", "node03:1"]),
    ({"SLURM_GPUS_ON_NODE": "4", "SLURM_GPUS_PER_NODE": "2", "SLURM_NTASKS_PER_NODE": "1"},
     ["node01:4", "node02:4", "node03:4"]),
    ({"SLURM_GPUS_PER_NODE": "a100:8", "SLURM_NTASKS_PER_NODE": "1"},
     ["node01:8", "node02:8", "node03:8"]),
    ({"SLURM_GPUS_PER_NODE": "a100:2,v100:1(IDX:0)"}, ["node01:3", "node02:3", "node03:3"]),
    ({"SLURM_GPUS_PER_NODE": "gpu:a100:2"}, ["node01:2", "node02:2", "node03:2"]),
    ({"SLURM_NTASKS_PER_NODE": "6", "SLURM_TASKS_PER_NODE": "1(x3)"},
     ["node01:6", "node02:6", "node03:6"]),
    ({"SLURM_TASKS_PER_NODE": "4(x2),2"}, ["node01:4", "node02:4", "node03:2"]),
    ({"SLURM_TASKS_PER_NODE": "5"}, ["node01:5", "node02:1", "node03:1"]),
    ({"ETRUN_SLURM_SLOTS": "3", "SLURM_GPUS_ON_NODE": "4"}, ["node01:3", "node02:3", "node03:3"]),
])
def test_slurm_prints_every_node_with_its_slots(tools, env, expected):
    tools.fake("scontrol", stdout=NODES)
    rc, out, err = tools.run("slurm.sh", env={"SLURM_JOB_NODELIST": "node[01-03]", **env})
    assert (rc, err) == (0, "")
    assert out.splitlines() == expected
    assert tools.calls("scontrol") == [["show", "hostnames", "node[01-03]"]]


def test_slurm_reads_the_older_slurm_nodelist_too(tools):
    tools.fake("scontrol", stdout="gpu7\n")
    assert tools.run("slurm.sh", env={"SLURM_NODELIST": "gpu7"}) == (0, "gpu7:1\n", "")
    assert tools.calls("scontrol") == [["show", "hostnames", "gpu7"]]


def test_slurm_outside_an_allocation_fails_without_asking_scontrol(tools):
    tools.fake("scontrol", stdout=NODES)
    assert tools.run("slurm.sh") == (
        1, "", "slurm.sh: not inside a Slurm allocation (SLURM_JOB_NODELIST is not set): run "
               "etrun from an sbatch script or an salloc shell\n")
    assert tools.calls("scontrol") == []


def test_slurm_without_scontrol_says_so(tools):
    assert tools.run("slurm.sh", env={"SLURM_JOB_NODELIST": "n1"}) == (
        1, "", "slurm.sh: scontrol not found on PATH: run on a Slurm node, or add Slurm's bin "
               "directory to PATH\n")


def test_slurm_failing_scontrol_becomes_one_line_with_its_message(tools):
    tools.fake("scontrol", stdout="partial\n", rc=1,
               stderr="scontrol: error: Invalid hostlist\nsecond line\n")
    assert tools.run("slurm.sh", env={"SLURM_JOB_NODELIST": "node[01-"}) == (
        1, "", "slurm.sh: scontrol show hostnames node[01- failed: scontrol: error: Invalid "
               "hostlist second line\n")


@pytest.mark.parametrize("env, message", [
    ({"SLURM_GPUS_ON_NODE": "four"}, 'SLURM_GPUS_ON_NODE="four" is not a whole number of slots'),
    ({"SLURM_GPUS_PER_NODE": "a100:"}, 'SLURM_GPUS_PER_NODE="a100:" is not like 4, a100:4 or '
                                       'a100:2,v100:2'),
    ({"SLURM_NTASKS_PER_NODE": "-1"}, 'SLURM_NTASKS_PER_NODE="-1" is not a whole number of slots'),
    ({"SLURM_TASKS_PER_NODE": "4(x2"}, 'SLURM_TASKS_PER_NODE="4(x2" is not like 4(x2),2'),
    ({"ETRUN_SLURM_SLOTS": "2.5"}, 'ETRUN_SLURM_SLOTS="2.5" is not a whole number of slots'),
])
def test_slurm_bad_counts_are_errors_naming_the_variable(tools, env, message):
    tools.fake("scontrol", stdout=NODES)
    rc, out, err = tools.run("slurm.sh", env={"SLURM_JOB_NODELIST": "node[01-03]", **env})
    assert (rc, out, err) == (1, "", f"slurm.sh: {message}\n")


# ---------------------------------------------------------------------------------------------
# kubernetes.sh

# The jsonpath kubernetes.sh asks for; kubectl prints one tab-separated line per pod from it.
def pods_template(address_field):
    return ('jsonpath={range .items[*]}{.status.phase}{"\\t"}{.metadata.deletionTimestamp}'
            '{"\\t"}{.status.conditions[?(@.type=="Ready")].status}{"\\t"}' + address_field +
            '{"\\n"}{end}')


IP_TEMPLATE = pods_template("{.status.podIP}")
NAME_TEMPLATE = pods_template("{.metadata.name}")

POD_LINES = ("Running\t\tTrue\t10.0.0.11\n"
             "Running\t2026-11-22T07:00:00Z\tTrue\t10.0.0.12\n"  # being deleted
             "Pending\t\tFalse\t\n"                                # no IP yet
             "Running\t\tFalse\t10.0.0.14\n"                       # not ready
             "Succeeded\t\tFalse\t10.0.0.15\n"
             "Running\t\tTrue\t10.0.0.16\r\n")                     # CRLF


def test_kubernetes_prints_running_ready_pods_with_the_selector_and_namespace(tools):
    tools.fake("kubectl", stdout=POD_LINES)
    rc, out, err = tools.run("kubernetes.sh", ["app=train,role=worker", "team-a"],
                             env={"ETRUN_K8S_SLOTS": "4"})
    assert (rc, out, err) == (0, "10.0.0.11:4\n10.0.0.16:4\n", "")
    assert tools.calls("kubectl") == [
        ["get", "pods", "-l", "app=train,role=worker", "-n", "team-a", "-o", IP_TEMPLATE]]


def test_kubernetes_reads_selector_and_namespace_from_the_environment(tools):
    tools.fake("kubectl", stdout="Running\t\tTrue\tworker-0\n")
    rc, out, _ = tools.run("kubernetes.sh", env={
        "ETRUN_K8S_SELECTOR": "job=a", "ETRUN_K8S_NAMESPACE": "ns", "ETRUN_K8S_ADDRESS": "name"})
    assert (rc, out) == (0, "worker-0:1\n")
    assert tools.calls("kubectl") == [["get", "pods", "-l", "job=a", "-n", "ns", "-o", NAME_TEMPLATE]]


def test_kubernetes_without_namespace_uses_kubectls_own_and_drops_its_warnings(tools):
    tools.fake("kubectl", stdout="Running\t\tTrue\t10.1.0.1\n",
               stderr="Warning: v1 ComponentStatus is deprecated\n")
    assert tools.run("kubernetes.sh", ["app=x"]) == (0, "10.1.0.1:1\n", "")
    assert tools.calls("kubectl") == [["get", "pods", "-l", "app=x", "-o", IP_TEMPLATE]]


def test_kubernetes_with_no_matching_pod_prints_nothing(tools):
    tools.fake("kubectl", stdout="")
    assert tools.run("kubernetes.sh", ["app=x"]) == (0, "", "")


def test_kubernetes_failing_kubectl_becomes_one_line_with_its_message(tools):
    tools.fake("kubectl", rc=1, stderr="error: You must be logged in to the server (Unauthorized)\n")
    assert tools.run("kubernetes.sh", ["app=x", "ns"]) == (
        1, "", "kubernetes.sh: kubectl get pods -l app=x failed: error: You must be logged in to "
               "the server (Unauthorized)\n")


@pytest.mark.parametrize("args, env, message", [
    ([], {}, "no label selector: pass it as the first argument or set ETRUN_K8S_SELECTOR "
             "(e.g. app=train)"),
    (["app=x"], {"ETRUN_K8S_SLOTS": "many"}, 'ETRUN_K8S_SLOTS="many" is not a whole number of slots'),
    (["app=x"], {"ETRUN_K8S_ADDRESS": "dns"}, 'ETRUN_K8S_ADDRESS="dns" must be ip or name'),
])
def test_kubernetes_bad_input_fails_before_asking_kubectl(tools, args, env, message):
    tools.fake("kubectl", stdout=POD_LINES)
    assert tools.run("kubernetes.sh", args, env=env) == (1, "", f"kubernetes.sh: {message}\n")
    assert tools.calls("kubectl") == []


def test_kubernetes_without_kubectl_says_so(tools):
    assert tools.run("kubernetes.sh", ["app=x"]) == (
        1, "", "kubernetes.sh: kubectl not found on PATH: install it in the launcher image or add "
               "it to PATH\n")


class ApiServer:
    """A loopback stand-in for the Kubernetes API server: the discovery documents kubectl reads,
    and one PodList for every pods request. Records the pods requests' paths."""

    def __init__(self, pods):
        documents = {
            "/version": {"major": "1", "minor": "28", "gitVersion": "v1.28.0"},
            "/api": {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [
                {"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]},
            "/apis": {"kind": "APIGroupList", "apiVersion": "v1", "groups": []},
            "/api/v1": {"kind": "APIResourceList", "groupVersion": "v1", "resources": [
                {"name": "pods", "singularName": "pod", "namespaced": True, "kind": "Pod",
                 "verbs": ["get", "list"]}]},
        }
        pod_list = {"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": pods}
        self.pod_requests = []
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                path = self.path.split("?")[0]
                body = documents.get(path)
                if path.endswith("/pods"):
                    server.pod_requests.append(self.path)
                    body = pod_list
                if body is None:
                    self.send_error(404)
                    return
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = "http://127.0.0.1:%d" % self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def pod(name, phase, ip=None, ready=None, deleting=False):
    meta = {"name": name, "namespace": "team-a", "labels": {"app": "train"}}
    if deleting:
        meta["deletionTimestamp"] = "2026-11-22T07:00:00Z"
    status = {"phase": phase}
    if ip:
        status["podIP"] = ip
    if ready is not None:
        status["conditions"] = [{"type": "Initialized", "status": "True"},
                                {"type": "Ready", "status": "True" if ready else "False"},
                                {"type": "PodScheduled", "status": "True"}]
    return {"metadata": meta, "status": status}


@pytest.mark.skipif(shutil.which("kubectl") is None,
                    reason="needs a real kubectl (not a Debian 12 package; the stand-in tests "
                           "above cover the script's logic)")
def test_kubernetes_template_works_with_a_real_kubectl(tools, tmp_path):
    # A real kubectl against a loopback API server: the jsonpath template selects what we think.
    os.symlink(shutil.which("kubectl"), tools.bin / "kubectl")
    api = ApiServer([pod("w-0", "Running", "10.0.0.1", ready=True),
                     pod("w-1", "Running", "10.0.0.2", ready=True, deleting=True),
                     pod("w-2", "Pending"),
                     pod("w-3", "Running", "10.0.0.4", ready=False),
                     pod("w-4", "Running", "10.0.0.5", ready=True),
                     pod("w-5", "Failed", "10.0.0.6", ready=False)])
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "test",
        "clusters": [{"name": "test", "cluster": {"server": api.url}}],
        "contexts": [{"name": "test", "context": {"cluster": "test", "user": "test"}}],
        "users": [{"name": "test", "user": {}}]}))
    env = {"KUBECONFIG": str(kubeconfig), "HOME": str(tmp_path)}
    try:
        rc, out, err = tools.run("kubernetes.sh", ["app=train", "team-a"],
                                 env=dict(env, ETRUN_K8S_SLOTS="2"))
        assert (rc, out, err) == (0, "10.0.0.1:2\n10.0.0.5:2\n", "")
        rc, out, err = tools.run("kubernetes.sh", ["app=train", "team-a"],
                                 env=dict(env, ETRUN_K8S_ADDRESS="name"))
        assert (rc, out, err) == (0, "w-0:1\nw-4:1\n", "")
        assert all(p.startswith("/api/v1/namespaces/team-a/pods?labelSelector=app%3Dtrain")
                   for p in api.pod_requests) and len(api.pod_requests) == 2
    finally:
        api.close()


# ---------------------------------------------------------------------------------------------
# local_gpus.sh

GPUS = ("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-0a)\r\n"
        "GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-1b)\n"
        "  MIG 3g.40gb     Device  0: (UUID: MIG-GPU-0a/7/0)\n"
        "GPU 2: NVIDIA H100 80GB HBM3 (UUID: GPU-3d)\n")


def test_local_gpus_gives_one_slot_per_listed_gpu(tools):
    tools.fake("nvidia-smi", stdout=GPUS)
    assert tools.run("local_gpus.sh") == (0, "localhost:3\n", "")
    assert tools.calls("nvidia-smi") == [["-L"]]


@pytest.mark.parametrize("visible, slots", [
    ("0,1", 2), (" 2 ", 1), ("GPU-0a,MIG-2c", 2), ("0,-1,2", 1), ("0,1,2,3,4,5", 3),
])
def test_local_gpus_caps_at_the_devices_cuda_visible_devices_shows(tools, visible, slots):
    tools.fake("nvidia-smi", stdout=GPUS)
    assert tools.run("local_gpus.sh", env={"CUDA_VISIBLE_DEVICES": visible}) == (
        0, f"localhost:{slots}\n", "")


@pytest.mark.parametrize("visible", ["", "-1", "NoDevFiles"])
def test_local_gpus_cuda_visible_devices_hiding_every_gpu_is_an_error(tools, visible):
    tools.fake("nvidia-smi", stdout=GPUS)
    assert tools.run("local_gpus.sh", env={"CUDA_VISIBLE_DEVICES": visible}) == (
        1, "", f'local_gpus.sh: CUDA_VISIBLE_DEVICES="{visible}" hides every GPU: unset it or '
               "name the GPUs to use\n")


def test_local_gpus_no_devices_found_is_an_error_with_nvidia_smis_words(tools):
    tools.fake("nvidia-smi", stdout="No devices were found\n", rc=6)
    assert tools.run("local_gpus.sh") == (
        1, "", "local_gpus.sh: nvidia-smi -L failed: No devices were found\n")


def test_local_gpus_broken_driver_is_an_error_in_one_line(tools):
    tools.fake("nvidia-smi", rc=9, stdout=(
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n"
        "Make sure that the latest NVIDIA driver is installed and running.\n\n"))
    assert tools.run("local_gpus.sh") == (
        1, "", "local_gpus.sh: nvidia-smi -L failed: NVIDIA-SMI has failed because it couldn't "
               "communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is "
               "installed and running.\n")


def test_local_gpus_listing_without_gpu_lines_is_an_error(tools):
    tools.fake("nvidia-smi", stdout="\n")
    assert tools.run("local_gpus.sh") == (
        1, "", "local_gpus.sh: nvidia-smi -L lists no GPU: check the driver and the GPUs with "
               "nvidia-smi\n")


def test_local_gpus_without_nvidia_smi_falls_back_to_one_slot(tools):
    assert tools.run("local_gpus.sh") == (0, "localhost:1\n", "")
    assert tools.run("local_gpus.sh", env={"ETRUN_NO_GPU_SLOTS": "4"}) == (0, "localhost:4\n", "")
    cpus = subprocess.run(["nproc"], capture_output=True, text=True, check=True).stdout.strip()
    assert tools.run("local_gpus.sh", env={"ETRUN_NO_GPU_SLOTS": "cpus"}) == (
        0, f"localhost:{cpus}\n", "")
    assert tools.run("local_gpus.sh", env={"ETRUN_NO_GPU_SLOTS": "some"}) == (
        1, "", 'local_gpus.sh: ETRUN_NO_GPU_SLOTS="some" must be a whole number or cpus\n')


# ---------------------------------------------------------------------------------------------
# All scripts

@pytest.mark.parametrize("script", ["hostfile.sh", "slurm.sh", "kubernetes.sh", "local_gpus.sh"])
def test_scripts_are_executable_posix_sh_that_dash_and_shellcheck_accept(script):
    path = os.path.join(SCRIPTS, script)
    assert os.access(path, os.X_OK)
    with open(path) as f:
        text = f.read()
    assert text.startswith("#!/bin/sh\n") and "\nset -eu\n" in text
    assert "Example" in text  # the header says how to use it
    subprocess.run(["dash", "-n", path], check=True)
    assert shutil.which("shellcheck"), "shellcheck is missing: scripts/deps.sh lists it"
    r = subprocess.run(["shellcheck", "--shell=sh", path], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout


# ---------------------------------------------------------------------------------------------
# End to end: etrun polling hostfile.sh

def sizes_in_order(text):
    sizes = []
    for m in re.finditer(r"<stdout>:step \d+ rank \d+ size (\d+)$", text, re.M):
        if not sizes or sizes[-1] != int(m.group(1)):
            sizes.append(int(m.group(1)))
    return sizes


def replace(path, data):
    tmp = path.with_suffix(".new")
    tmp.write_bytes(data)
    tmp.rename(path)  # as the script's header says: never a half-written file


def test_an_elastic_job_follows_the_hosts_file_and_keeps_its_hosts_through_a_typo(
        tmp_path, marker_env):
    hosts = tmp_path / "hosts.txt"
    replace(hosts, b"# the job's hosts\r\nlocalhost slots=1\r\n")
    out_path, err_path = tmp_path / "out.txt", tmp_path / "err.txt"
    script = os.path.join(SCRIPTS, "hostfile.sh") + " " + str(hosts)
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        proc = subprocess.Popen(
            [ETRUN, "-np", "1", "--min-np", "1", "--max-np", "2", "--discovery-interval", "0.1",
             "--host-discovery-script", script, PYTHON, STANDIN, "--steps", "200",
             "--step-seconds", "0.05", "--timeout", "120"],
            stdout=out, stderr=err, env=dict(os.environ, **marker_env), stdin=subprocess.DEVNULL)
    try:
        def seen(pattern, path=out_path):
            return re.search(pattern, path.read_text(errors="replace"), re.M) is not None

        assert wait_until(lambda: seen(r"<stdout>:step \d+ rank 0 size 1$"), 60)
        # A typo: the script fails, etrun warns and keeps running on the last good list.
        replace(hosts, b"localhost slots=1\n127.0.0.1 slot=1\n")
        assert wait_until(lambda: seen(
            r"hostfile.sh: .*hosts.txt line 2: expected \"host slots=N\", got \"127.0.0.1 slot=1\""
            r".*keeping the last host list", err_path), 30)
        # Fixed: a second host joins and the world grows to --max-np.
        replace(hosts, b"localhost:1\n127.0.0.1 slots=1\n")
        assert wait_until(lambda: seen(r"<stdout>:step \d+ rank 1 size 2$"), 60)
        rc = proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    out, err = out_path.read_text(errors="replace"), err_path.read_text(errors="replace")
    assert rc == 0, err
    assert sizes_in_order(out) == [1, 2]
    assert len(re.findall(r"<stdout>:done 200 steps rank \d size 2$", out, re.M)) == 2
    assert processes_with_marker(next(iter(marker_env.values()))) == []


def test_a_missing_hosts_file_fails_the_job_with_the_scripts_message(tmp_path):
    missing = tmp_path / "hosts.txt"
    r = run_etrun(["-np", "1", "--host-discovery-script",
                   os.path.join(SCRIPTS, "hostfile.sh") + " " + str(missing), "/bin/true"],
                  timeout=60)
    assert r.returncode == 1
    assert r.stderr.decode().endswith(
        f"etrun: error: the host discovery script failed (exit code 1): hostfile.sh: cannot read "
        f"hosts file {missing}: check the path (relative paths start from etrun's working "
        f"directory): fix the script; it must print host:slots lines\n")
    assert r.stdout == b""
