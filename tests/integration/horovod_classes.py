"""Horovod's notification-protocol classes under their real module paths, so `pickle` writes and
resolves them by reference exactly as Horovod does (spec 5.6). Shared by the stand-in workers."""
import enum
import sys
import types


def _module(name):
    parts = name.split(".")
    for i in range(1, len(parts) + 1):
        sys.modules.setdefault(".".join(parts[:i]), types.ModuleType(".".join(parts[:i])))
    return sys.modules[name]


_network = _module("horovod.runner.common.util.network")
_worker = _module("horovod.runner.elastic.worker")


class PingRequest:
    pass


class PingResponse:
    def __init__(self, service_name, source_address):
        self.service_name = service_name
        self.source_address = source_address


class AckResponse:
    pass


class HostUpdateResult(enum.IntFlag):
    no_update = 0
    removed = 1
    added = 2
    mixed = removed | added


class HostsUpdatedRequest:
    def __init__(self, timestamp, res):
        self.timestamp = timestamp
        self.res = res


for cls, mod in ((PingRequest, _network), (PingResponse, _network), (AckResponse, _network),
                 (HostUpdateResult, _worker), (HostsUpdatedRequest, _worker)):
    cls.__module__ = mod.__name__
    setattr(mod, cls.__name__, cls)
