"""Where a Horovod worker's Gloo contexts listen, for the stand-ins (stdlib only).

Gloo's TCP device (gloo/transport/tcp/device.cc, CreateDevice) binds to the address of the
interface named exactly `iface` *on the worker's own host* and throws if there is none
("Unable to find address for: <iface>"); with an empty `iface` it binds to the address the
machine's own host name resolves to. Horovod 0.28 creates the main context (the global, local
and cross rendezvous) with HOROVOD_GLOO_IFACE (unset: empty) and every process-set context with
an empty interface, i.e. on the host name's address. Peers connect to the addresses published
in the rendezvous store, each pair's as Gloo's tcp::Address::bytes() writes it (pack_address).
IPv4 only.
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


# Padding of the published sockaddr_storage: noise (HTTP-looking bytes first), so that a value
# changed in transit, or a body taken for a header, is caught.
NOISE = b"\r\n\r\n\x00\x00HTTP/1.1 200 OK\r\n" + bytes(range(256))
ADDRESS_BYTES = 136  # sizeof(sockaddr_storage) + the 8-byte sequence number


def pack_address(ip, port, rank, peer):
    """A Gloo pair address as Gloo's tcp::Address::bytes() writes it, 136 bytes: a
    sockaddr_storage holding the listener's sockaddr_in (family in host order, port and address
    in network order), its padding here noise tagged (rank, peer), then the 8-byte sequence
    number (-1). etrun reads these to cut a failed world's mesh (rendezvous/gloo_mesh.h), as it
    reads real Gloo's."""
    sin = struct.pack("=H", socket.AF_INET) + struct.pack("!H", port) + socket.inet_aton(ip) + bytes(8)
    pad = (struct.pack("<II", rank, peer) + NOISE)[:ADDRESS_BYTES - 8 - len(sin)]
    return sin + pad + struct.pack("<q", -1)


def unpack_address(value):
    """The (ip, port) of the first pair address in a published value."""
    return socket.inet_ntoa(value[4:8]), struct.unpack("!H", value[2:4])[0]
