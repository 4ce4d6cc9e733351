"""Where a Horovod worker's Gloo contexts listen, for the stand-ins (stdlib only).

Gloo's TCP device (gloo/transport/tcp/device.cc, CreateDevice) binds to the address of the
interface named exactly `iface` *on the worker's own host* and throws if there is none
("Unable to find address for: <iface>"); with an empty `iface` it binds to the address the
machine's own host name resolves to. Horovod 0.28 creates the main context (the global, local
and cross rendezvous) with HOROVOD_GLOO_IFACE (unset: empty) and every process-set context with
an empty interface, i.e. on the host name's address. Peers connect to the addresses published
in the rendezvous store. IPv4 only (the stand-ins publish 4-byte addresses).
"""
import fcntl
import os
import socket
import struct

SIOCGIFADDR = 0x8915


class EnforceNotMet(Exception):
    """gloo::EnforceNotMet: thrown in hvd.init()'s background thread, so the worker terminates."""


def interface_address(name):
    """The IPv4 address of the interface called exactly `name` in this network namespace, or
    None if there is no such interface or it has no IPv4 address."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        req = struct.pack("256s", name.encode()[:15])
        return socket.inet_ntoa(fcntl.ioctl(s.fileno(), SIOCGIFADDR, req)[20:24])
    except OSError:
        return None
    finally:
        s.close()


def device_address(iface):
    """Where a Gloo device created with `iface` binds; raises EnforceNotMet as Gloo does."""
    if iface:
        ip = interface_address(iface)
        if ip is None:
            raise EnforceNotMet("[enforce fail at gloo/transport/tcp/device.cc] ifa != nullptr. "
                                f"Unable to find address for: {iface}")
        return ip
    name = socket.gethostname()
    try:
        return socket.gethostbyname(name)
    except OSError:
        raise EnforceNotMet("[enforce fail at gloo/transport/tcp/device.cc] rp != nullptr. "
                            f"Unable to find address for: {name}")


def main_context_address():
    """The main context's address: HOROVOD_GLOO_IFACE's interface, else the host name's."""
    return device_address(os.environ.get("HOROVOD_GLOO_IFACE", ""))


def process_set_address():
    """A process-set context's address: always the host name's (Horovod passes no interface)."""
    return device_address("")
