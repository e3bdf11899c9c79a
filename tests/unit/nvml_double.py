# -*- coding: utf-8 -*-
"""TEST DOUBLE for pynvml: answers NVML calls from recorded data, not from a driver.

There is no GPU on the test machines, so the NVML reader is exercised against
this stand-in.  It is fed either by a real capture (tests/fixtures/gpu/real,
one field per NVML call, errors as recorded) or by a snapshot, reversed into
the answers NVML would give for it.  Call signatures follow nvidia-ml-py.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

NVML_TOPOLOGY = {"PIX": 10, "PXB": 20, "PHB": 30, "NODE": 40, "SYS": 50}
P2P_STATUS = {"OK": 0, "CNS": 1, "GNS": 2, "TNS": 3, "DRK": 4, "NS": 5, "U": 6}
NOT_SUPPORTED = "NVMLError_NotSupported: Not Supported"


class NVMLError(Exception):
    pass


class NVMLDouble(object):
    """Per-GPU answers are dicts keyed by NVML function name; a value that is an
    NVMLError instance is raised instead of returned."""

    NVMLError = NVMLError

    def __init__(self, driver, cuda, devices, topology, p2p):
        self.driver, self.cuda, self.devices = driver, cuda, devices
        self.topology, self.p2p = topology, p2p
        self.p2p_calls = []

    # -- library -----------------------------------------------------------
    def nvmlSystemGetDriverVersion(self):
        return self.driver

    def nvmlSystemGetCudaDriverVersion(self):
        if isinstance(self.cuda, Exception):
            raise self.cuda
        return self.cuda

    def nvmlDeviceGetCount(self):
        return len(self.devices)

    def nvmlDeviceGetHandleByIndex(self, index):
        return index

    def _answer(self, handle, name, *key):
        value = self.devices[handle].get(name, NVMLError("not in the recorded data: %s" % name))
        if key and not isinstance(value, Exception):
            value = value.get(key[0], NVMLError(NOT_SUPPORTED))
        if isinstance(value, Exception):
            raise value
        return value

    def __getattr__(self, name):
        if not name.startswith("nvmlDeviceGet"):
            raise AttributeError(name)

        def call(handle, *args):
            if name in ("nvmlDeviceGetNvLinkState", "nvmlDeviceGetNvLinkRemotePciInfo"):
                return self._answer(handle, name, args[0])
            return self._answer(handle, name)
        return call

    def nvmlDeviceGetTopologyCommonAncestor(self, a, b):
        return self.topology[(min(a, b), max(a, b))]

    def nvmlDeviceGetP2PStatus(self, a, b, index):
        # The real library passes index straight to C; pynvml's READ constant is (0,).
        if isinstance(index, bool) or not isinstance(index, int):
            raise TypeError("p2pIndex must be a plain int, got %r" % (index,))
        self.p2p_calls.append(index)
        value = self.p2p[(min(a, b), max(a, b))][index]
        if isinstance(value, Exception):
            raise value
        return value


def _err(value):
    return NVMLError(value["error"]) if isinstance(value, dict) and "error" in value else None


def from_capture(path):
    """A double that answers as the real machine of a capture did."""
    with open(path) as f:
        cap = json.load(f)
    devices = []
    for d in cap["devices"]:
        def v(key):
            return _err(d[key]) or d[key]
        links = {n["link"]: (_err(n["state"]) or n["state"]) for n in d["nvlinks"]}
        devices.append({
            "nvmlDeviceGetName": d["name"],
            "nvmlDeviceGetUUID": d["uuid"],
            "nvmlDeviceGetPciInfo": SimpleNamespace(busId=d["pci"]["busId"]),
            "nvmlDeviceGetCudaComputeCapability": tuple(d["cuda_compute_capability"]),
            "nvmlDeviceGetMemoryInfo": SimpleNamespace(total=d["memory_total_bytes"]),
            "nvmlDeviceGetMaxPcieLinkGeneration": v("pcie_max_link_gen"),
            "nvmlDeviceGetMaxPcieLinkWidth": v("pcie_max_link_width"),
            "nvmlDeviceGetCurrPcieLinkGeneration": v("pcie_curr_link_gen"),
            "nvmlDeviceGetCurrPcieLinkWidth": v("pcie_curr_link_width"),
            "nvmlDeviceGetPersistenceMode": v("persistence_mode"),
            "nvmlDeviceGetMigMode": v("mig_mode"),
            "nvmlDeviceGetNumaNodeId": v("numa_node"),
            "nvmlDeviceGetCpuAffinity": v("cpu_affinity"),
            "nvmlDeviceGetNvLinkState": links,
        })
    topology = {tuple(int(x) for x in k.split("-")): v for k, v in cap["topology_common_ancestor"].items()}
    p2p = {tuple(int(x) for x in k.split("-")): v for k, v in cap["p2p_status"].items()}
    return NVMLDouble(cap["driver_version"], cap["cuda_driver_version"], devices, topology, p2p)


def from_bar1_capture(path):
    """A double that answers only what tests/fixtures/gpu/real/h200-x1-device/nvml-bar1.json recorded on the real H200:
    name, UUID, bus id, memory and nvmlDeviceGetBAR1MemoryInfo. Every other call raises, as a call the capture did not
    make ("not in the recorded data"): nothing is made up."""
    with open(path) as f:
        cap = json.load(f)
    devices = [{
        "nvmlDeviceGetName": d["name"],
        "nvmlDeviceGetUUID": d["uuid"],
        "nvmlDeviceGetPciInfo": SimpleNamespace(busId=d["pci_bus_id"]),
        "nvmlDeviceGetMemoryInfo": SimpleNamespace(total=d["memory_total_bytes"]),
        "nvmlDeviceGetBAR1MemoryInfo": SimpleNamespace(**d["bar1"]),
    } for d in cap["devices"]]
    return NVMLDouble(cap["driver_version"], NVMLError("not in the recorded data"), devices, {}, {})


def from_snapshot(snap):
    """A double that answers what NVML would for a snapshot's topology."""
    major, minor = (int(x) for x in snap["cuda_driver_version"].split("."))
    gpus = snap["gpus"]
    devices = []
    for g in gpus:
        nv = g["nvlink"] or {}
        links = {}
        if nv.get("active_links") is not None:
            n = 0
            for peer in nv["peers"]:
                for _link in range(peer["links"]):
                    links[n] = SimpleNamespace(busId=gpus[peer["gpu"]]["pci_bus_id"])
                    n += 1
            for _link in range(nv["nvswitch_links"]):
                links[n] = SimpleNamespace(busId="00000000:C0:00.0")  # an NVSwitch, not a GPU
                n += 1
        cc = tuple(int(x) for x in g["compute_capability"].split("."))
        devices.append({
            "nvmlDeviceGetName": g["name"],
            "nvmlDeviceGetUUID": g["uuid"],
            "nvmlDeviceGetPciInfo": SimpleNamespace(busId=g["pci_bus_id"]),
            "nvmlDeviceGetCudaComputeCapability": cc,
            "nvmlDeviceGetMemoryInfo": SimpleNamespace(total=g["memory_total_mib"] * 1024 * 1024),
            # Snapshots from before BAR1 was read lack it: NVML then says what a GPU without it says.
            "nvmlDeviceGetBAR1MemoryInfo": SimpleNamespace(bar1Total=g["bar1_total_mib"] * 1024 * 1024)
            if g.get("bar1_total_mib") is not None else NVMLError(NOT_SUPPORTED),
            "nvmlDeviceGetMaxPcieLinkGeneration": g["pcie"]["max_gen"],
            "nvmlDeviceGetMaxPcieLinkWidth": g["pcie"]["max_width"],
            "nvmlDeviceGetCurrPcieLinkGeneration": g["pcie"]["current_gen"],
            "nvmlDeviceGetCurrPcieLinkWidth": g["pcie"]["current_width"],
            "nvmlDeviceGetPersistenceMode": int(g["persistence_mode"]),
            "nvmlDeviceGetMigMode": [int(g["mig_mode"]), int(g["mig_mode"])],
            "nvmlDeviceGetNumaNodeId": NVMLError(NOT_SUPPORTED),
            "nvmlDeviceGetMemoryAffinity": [1 << g["numa_node"]],
            "nvmlDeviceGetCpuAffinity": _masks(g["cpu_affinity"]),
            "nvmlDeviceGetNvLinkState": {k: 1 for k in links} if links or nv.get("active_links") is not None
            else NVMLError(NOT_SUPPORTED),
            "nvmlDeviceGetNvLinkRemotePciInfo": links,
        })
    topology, p2p = {}, {}
    for pair in snap["pairs"]:
        key = tuple(pair["gpus"])
        # NVML's common ancestor is the PCIe path; NVLink shows through the links.
        topology[key] = NVML_TOPOLOGY.get(pair["path"], 50)
        p2p[key] = [P2P_STATUS[pair["p2p"][c]] for c in ("read", "write", "nvlink", "atomics")]
    return NVMLDouble(snap["driver_version"], major * 1000 + minor * 10, devices, topology, p2p)


def _masks(cpu_list):
    words = [0] * 4
    for part in cpu_list.split(","):
        lo, _sep, hi = part.partition("-")
        for cpu in range(int(lo), int(hi or lo) + 1):
            words[cpu // 64] |= 1 << (cpu % 64)
    return words
