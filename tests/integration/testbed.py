"""The cluster test bed (scripts/testbed.py) for pytest: hosts h1..hK with their own network
namespace, host name, address (198.18.0.0/15), interface eth0 and sshd.

    from testbed import bed_fixture
    bed = bed_fixture(hosts=3)          # a module-scoped fixture named `bed`

    def test_x(bed):
        h1 = bed.host("h1")             # .name, .address, .netns_path, .veth (outer end)
        subprocess.run(bed.exec_argv([ETRUN, "-H", "h1:1,h2:1", ...]), env=bed.env())
        bed.run_host("h2", ["ip", "link", "set", "eth0", "down"])
        bed.cut("h3"); bed.heal("h3")   # the link, from the launcher's side

Where the machine cannot make a bed (not root, no namespaces) the fixture skips with the bed's
one line. Everything of the bed is gone after the module, whatever the tests did.
"""
import importlib.util
import os
import sys

import pytest

SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                      "scripts", "testbed.py")
_spec = importlib.util.spec_from_file_location("etrun_testbed", SCRIPT)
tb = importlib.util.module_from_spec(_spec)
sys.modules["etrun_testbed"] = tb
_spec.loader.exec_module(tb)

Bed, Host, Unsupported, BedError = tb.Bed, tb.Host, tb.Unsupported, tb.BedError
up, load, down_all, SKIP_EXIT = tb.up, tb.load, tb.down_all, tb.SKIP_EXIT


def bed_fixture(hosts=3, prefix="h"):
    """A module-scoped fixture (assign it to `bed` in the test module) giving a Bed of `hosts`
    hosts named <prefix>1..<prefix>K."""

    @pytest.fixture(scope="module")
    def bed(tmp_path_factory):
        directory = tmp_path_factory.mktemp("testbed") / "bed"
        try:
            made = up(str(directory), hosts=hosts, prefix=prefix)
        except Unsupported as e:
            pytest.skip(str(e))
        try:
            yield made
        finally:
            made.down()

    return bed
