# -*- coding: utf-8 -*-
# Copyright: (c) 2026, moeops.inference contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPU topology: the one place that turns NVML / nvidia-smi readings into facts.

Everything here is pure: readers take the library (pynvml) or the command
outputs as arguments, so the same code runs against a real driver, a replayed
capture, or a snapshot file.  The fact layout is documented in
docs/snapshot-format.md and versioned by SCHEMA_VERSION.
"""

from __future__ import annotations

import os
import re
import xml.etree.ElementTree as ET
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Tuple

from ansible.module_utils.parsing.convert_bool import boolean

SCHEMA_VERSION = 1

# Path classes as `nvidia-smi topo -m` prints them, nearest first.  NV# (any
# bonded NVLink count) ranks best.  NODE sits between PHB and SYS.
PATH_RANK = {"NV": 0, "PIX": 1, "PXB": 2, "PHB": 3, "NODE": 4, "SYS": 5}

# nvmlDeviceGetTopologyCommonAncestor levels -> topo -m classes.
# INTERNAL is two GPUs on one board, behind the board's own switch: PIX.
NVML_TOPOLOGY_TO_PATH = {0: "PIX", 10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}

# nvmlDeviceGetP2PStatus results -> the codes `nvidia-smi topo -p2p` prints.
# 4 (disabled by registry key) has no nvidia-smi code of its own; DRK names it.
NVML_P2P_STATUS_CODE = {0: "OK", 1: "CNS", 2: "GNS", 3: "TNS", 4: "DRK", 5: "NS", 6: "U"}
P2P_CAPS = ("read", "write", "nvlink", "atomics")
# Plain ints on purpose: pynvml's NVML_P2P_CAPS_INDEX_READ is the tuple (0,).
P2P_CAPS_INDEX = {"read": 0, "write": 1, "nvlink": 2, "atomics": 3}

NVML_NVLINK_MAX_LINKS = 36

_ANSI = re.compile(r"\x1b\[[0-9;]*m")


class Unavailable(object):
    """Collects the fields a backend could not read, with the reason."""

    def __init__(self) -> None:
        self.entries: List[Dict[str, str]] = []

    def add(self, field: str, reason: Any) -> None:
        self.entries.append({"field": field, "reason": str(reason)})


# ---------------------------------------------------------------- small helpers

def architecture_family(compute_capability: Optional[str]) -> Optional[str]:
    """Architecture family from a compute capability such as "12.0"."""
    if not compute_capability:
        return None
    major, _sep, minor = compute_capability.partition(".")
    try:
        key = (int(major), int(minor or 0))
    except ValueError:
        return None
    if key[0] in (10, 11, 12):  # 10.x data centre, 11.0 Thor, 12.x RTX / RTX PRO
        return "blackwell"
    return {
        (6, 0): "pascal", (6, 1): "pascal", (7, 0): "volta", (7, 2): "volta",
        (7, 5): "turing", (8, 0): "ampere", (8, 6): "ampere", (8, 7): "ampere",
        (8, 9): "ada", (9, 0): "hopper",
    }.get(key)


def normalize_bus_id(bus_id: str) -> str:
    """NVML gives 00000000:00:06.0, sysfs wants 0000:00:06.0; compare upper-case 8-digit form."""
    bus_id = bus_id.strip()
    domain, _sep, rest = bus_id.partition(":")
    if not rest:
        return bus_id.upper()
    return "%08X:%s" % (int(domain, 16), rest.upper())


def cpu_list_from_masks(masks: Iterable[int]) -> str:
    """NVML's CPU affinity (a list of 64-bit masks) -> "0-15,32-47"."""
    cpus = [word * 64 + bit for word, mask in enumerate(masks) for bit in range(64) if int(mask) >> bit & 1]
    return cpu_list_from_ids(cpus)


def cpu_list_from_ids(cpus: Iterable[int]) -> str:
    ranges: List[str] = []
    ids = sorted(set(cpus))
    start = prev = None
    for cpu in ids + [None]:  # type: ignore[operator]
        if start is not None and (cpu is None or cpu != prev + 1):
            ranges.append(str(start) if start == prev else "{0}-{1}".format(start, prev))
            start = None
        if cpu is not None and start is None:
            start = cpu
        prev = cpu
    return ",".join(ranges)


def path_class(path: Optional[str]) -> Optional[str]:
    """'NV12' -> 'NV'; others unchanged."""
    if path is None:
        return None
    return "NV" if re.match(r"^NV\d+$", path) else path


def path_rank(path: Optional[str]) -> Optional[int]:
    return PATH_RANK.get(path_class(path) or "")


# ------------------------------------------------------------- the summary

def summarize_interconnect(gpus: List[Dict[str, Any]], pairs: List[Dict[str, Any]]) -> Dict[str, Any]:
    """The `interconnect` block: derived, never stored, so it cannot go stale."""
    count = len(gpus)
    numa = sorted({g["numa_node"] for g in gpus if g.get("numa_node") is not None})
    summary: Dict[str, Any] = {
        "class": "none" if count == 0 else "single",
        "worst_path": None,
        "p2p_all_ok": None,
        "nvlink_all": None,
        "numa_nodes": numa,
    }
    if count < 2:
        return summary
    ranked = [(path_rank(p["path"]), p["path"]) for p in pairs if path_rank(p["path"]) is not None]
    worst = max(ranked)[1] if len(ranked) == len(pairs) and ranked else None
    summary["worst_path"] = worst
    rw = [p["p2p"].get(c) for p in pairs for c in ("read", "write")]
    summary["p2p_all_ok"] = None if any(s is None for s in rw) else all(s == "OK" for s in rw)
    summary["nvlink_all"] = bool(pairs) and all(path_class(p["path"]) == "NV" for p in pairs)
    if summary["nvlink_all"]:
        on_switch = any((g.get("nvlink") or {}).get("nvswitch_links") for g in gpus)
        summary["class"] = "nvswitch" if on_switch else "nvlink"
    elif worst is None:
        summary["class"] = None
    else:
        summary["class"] = {
            "NV": "nvlink", "PIX": "pcie_switch", "PXB": "pcie_switch",
            "PHB": "pcie_host_bridge", "NODE": "pcie_host_bridge", "SYS": "pcie_cross_numa",
        }[path_class(worst)]  # type: ignore[index]
        # Two NUMA nodes seen through the GPUs' affinity means the box spans sockets,
        # even where a hypervisor flattens the PCIe tree.
        if len(numa) > 1 and summary["class"] != "pcie_cross_numa":
            summary["class"] = "pcie_cross_numa"
    return summary


def build_facts(
    backend: str,
    driver_version: Optional[str],
    cuda_driver_version: Optional[str],
    gpus: List[Dict[str, Any]],
    pairs: List[Dict[str, Any]],
    unavailable: List[Dict[str, str]],
    extra: Optional[Dict[str, Any]] = None,
) -> Dict[str, Any]:
    facts: Dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "backend": backend,
        "count": len(gpus),
        "driver_version": driver_version,
        "cuda_driver_version": cuda_driver_version,
        "gpus": gpus,
        "pairs": pairs,
        "interconnect": summarize_interconnect(gpus, pairs),
        "unavailable": unavailable,
    }
    facts.update(extra or {})
    return facts


def from_hardware(facts: Dict[str, Any]) -> bool:
    """Whether these facts are GPUs read from this host's hardware (not replayed, not none): the one rule
    every role uses to decide, for example, whether vLLM may be started."""
    return facts.get("backend") in ("nvml", "nvidia_smi") and int(facts.get("count") or 0) > 0


def reported_from_hardware(facts: Mapping[str, Any]) -> bool:
    """What the roles ask: the facts' own `from_hardware` (Ansible's truth values), and for facts from before
    gpu_facts set it, the rule above."""
    if "from_hardware" in facts:
        return boolean(facts["from_hardware"], strict=False)
    return from_hardware(dict(facts))


def no_gpu_facts(reason: str) -> Dict[str, Any]:
    return build_facts("none", None, None, [], [], [{"field": "gpus", "reason": reason}])


def _pair_path(i: int, j: int, gpus: List[Dict[str, Any]], pcie_path: Optional[str]) -> Optional[str]:
    """NV<links> when the two GPUs share NVLinks (directly or through NVSwitch), else the PCIe path."""
    a, b = gpus[i].get("nvlink") or {}, gpus[j].get("nvlink") or {}
    direct = sum(p["links"] for p in a.get("peers") or [] if p["gpu"] == j)
    if direct:
        return "NV%d" % direct
    if a.get("nvswitch_links") and b.get("nvswitch_links"):
        return "NV%d" % min(a["nvswitch_links"], b["nvswitch_links"])
    return pcie_path


# ------------------------------------------------------------------ NVML reader

def read_nvml(nvml: Any, sysfs_numa: Optional[Callable[[str], Optional[int]]] = None) -> Dict[str, Any]:
    """Read the GPUs through a pynvml-compatible module.  nvmlInit must already have succeeded.

    `sysfs_numa(bus_id)` is the fallback for a GPU's NUMA node where NVML's
    memory affinity cannot be read.
    """
    missing = Unavailable()

    def call(field: str, fn: Callable[..., Any], *args: Any) -> Any:
        try:
            return fn(*args)
        except nvml.NVMLError as exc:
            missing.add(field, exc)
            return None

    driver = _text(call("driver_version", nvml.nvmlSystemGetDriverVersion))
    cuda = call("cuda_driver_version", nvml.nvmlSystemGetCudaDriverVersion)
    cuda_str = None if cuda is None else "%d.%d" % (cuda // 1000, cuda % 1000 // 10)
    count = nvml.nvmlDeviceGetCount()
    handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
    gpus: List[Dict[str, Any]] = []
    for i, h in enumerate(handles):
        f = "gpus[%d]." % i
        pci = call(f + "pci_bus_id", nvml.nvmlDeviceGetPciInfo, h)
        bus = normalize_bus_id(_text(pci.busId)) if pci is not None else None
        cc = call(f + "compute_capability", nvml.nvmlDeviceGetCudaComputeCapability, h)
        cc_str = "%d.%d" % tuple(cc) if cc is not None else None
        mem = call(f + "memory_total_mib", nvml.nvmlDeviceGetMemoryInfo, h)
        # The BAR1 aperture (how much of this GPU's memory a peer or the host can map at once), bytes in bar1Total.
        bar1 = call(f + "bar1_total_mib", nvml.nvmlDeviceGetBAR1MemoryInfo, h)
        persistence = call(f + "persistence_mode", nvml.nvmlDeviceGetPersistenceMode, h)
        mig = call(f + "mig_mode", nvml.nvmlDeviceGetMigMode, h)
        affinity = call(f + "cpu_affinity", nvml.nvmlDeviceGetCpuAffinity, h, 16)
        numa = _nvml_numa_node(nvml, h, bus, sysfs_numa, f, missing)
        gpu_numa = call(f + "gpu_numa_id", nvml.nvmlDeviceGetNumaNodeId, h)
        gpus.append({
            "index": i,
            "name": _text(call(f + "name", nvml.nvmlDeviceGetName, h)),
            "uuid": _text(call(f + "uuid", nvml.nvmlDeviceGetUUID, h)),
            "pci_bus_id": bus,
            "compute_capability": cc_str,
            "architecture": architecture_family(cc_str),
            "memory_total_mib": None if mem is None else int(mem.total) // (1024 * 1024),
            "bar1_total_mib": None if bar1 is None else int(bar1.bar1Total) // (1024 * 1024),
            "pcie": {
                "max_gen": call(f + "pcie.max_gen", nvml.nvmlDeviceGetMaxPcieLinkGeneration, h),
                "max_width": call(f + "pcie.max_width", nvml.nvmlDeviceGetMaxPcieLinkWidth, h),
                "current_gen": call(f + "pcie.current_gen", nvml.nvmlDeviceGetCurrPcieLinkGeneration, h),
                "current_width": call(f + "pcie.current_width", nvml.nvmlDeviceGetCurrPcieLinkWidth, h),
            },
            "numa_node": numa,
            "gpu_numa_id": gpu_numa,
            "cpu_affinity": None if affinity is None else cpu_list_from_masks(affinity),
            "persistence_mode": None if persistence is None else bool(persistence),
            "mig_mode": None if mig is None else bool(mig[0]),
            "nvlink": None,
        })
    by_bus = {g["pci_bus_id"]: g["index"] for g in gpus}
    for i, h in enumerate(handles):
        gpus[i]["nvlink"] = _nvml_nvlink(nvml, h, by_bus, "gpus[%d].nvlink" % i, missing)

    pairs: List[Dict[str, Any]] = []
    for i in range(count):
        for j in range(i + 1, count):
            f = "pairs[%d-%d]." % (i, j)
            level = call(f + "path", nvml.nvmlDeviceGetTopologyCommonAncestor, handles[i], handles[j])
            p2p = {}
            for cap in P2P_CAPS:
                status = call(f + "p2p." + cap, nvml.nvmlDeviceGetP2PStatus, handles[i], handles[j], P2P_CAPS_INDEX[cap])
                p2p[cap] = None if status is None else NVML_P2P_STATUS_CODE.get(int(status), "U")
            pcie_path = None if level is None else NVML_TOPOLOGY_TO_PATH.get(int(level))
            pairs.append({"gpus": [i, j], "path": _pair_path(i, j, gpus, pcie_path), "p2p": p2p})
    return build_facts("nvml", driver, cuda_str, gpus, pairs, missing.entries)


def _nvml_numa_node(nvml: Any, handle: Any, bus: Optional[str], sysfs_numa: Any, f: str, missing: Unavailable) -> Optional[int]:
    # The CPU-side NUMA node a PCIe GPU hangs off.  nvmlDeviceGetNumaNodeId is a
    # different thing (the GPU's own node on coherent systems), kept as gpu_numa_id.
    try:
        masks = nvml.nvmlDeviceGetMemoryAffinity(handle, 4, 0)  # scope 0: NVML_AFFINITY_SCOPE_NODE
        nodes = [w * 64 + b for w, m in enumerate(masks) for b in range(64) if int(m) >> b & 1]
        if len(nodes) == 1:
            return nodes[0]
        reason = "NVML memory affinity names %d NUMA nodes" % len(nodes)
    except nvml.NVMLError as exc:
        reason = "nvmlDeviceGetMemoryAffinity: %s" % exc
    if sysfs_numa is not None and bus is not None:
        node = sysfs_numa(bus)
        if node is not None:
            return node
        reason += "; sysfs numa_node unknown"
    missing.add(f + "numa_node", reason)
    return None


def _nvml_nvlink(nvml: Any, handle: Any, by_bus: Dict[str, int], f: str, missing: Unavailable) -> Dict[str, Any]:
    active = 0
    readable = 0
    peers: Dict[int, int] = {}
    switch_links = 0
    last_error = None
    for link in range(NVML_NVLINK_MAX_LINKS):
        try:
            state = nvml.nvmlDeviceGetNvLinkState(handle, link)
        except nvml.NVMLError as exc:
            last_error = exc
            continue
        readable += 1
        if not state:
            continue
        active += 1
        try:
            remote = normalize_bus_id(_text(nvml.nvmlDeviceGetNvLinkRemotePciInfo(handle, link).busId))
        except nvml.NVMLError as exc:
            missing.add("%s.links[%d].remote" % (f, link), exc)
            continue
        if remote in by_bus:
            peers[by_bus[remote]] = peers.get(by_bus[remote], 0) + 1
        else:
            # Not a GPU of this host: on HGX boards that is an NVSwitch.
            switch_links += 1
    if readable == 0:
        missing.add(f, "nvmlDeviceGetNvLinkState failed on every link: %s" % last_error)
        return {"active_links": None, "peers": None, "nvswitch_links": None}
    return {
        "active_links": active,
        "peers": [{"gpu": g, "links": n} for g, n in sorted(peers.items())],
        "nvswitch_links": switch_links,
    }


def _text(value: Any) -> Any:
    return value.decode() if isinstance(value, bytes) else value


# ------------------------------------------------------------ nvidia-smi reader

def _matrix_rows(text: str) -> Tuple[List[str], List[List[str]]]:
    """Split a `nvidia-smi topo` matrix into header names and rows of non-empty cells.

    nvidia-smi underlines the header with ANSI escapes and pads some columns
    with extra tabs, so cells are matched by position after dropping empties.
    """
    header: List[str] = []
    rows: List[List[str]] = []
    for line in text.splitlines():
        cells = [c.strip() for c in _ANSI.sub("", line).split("\t")]
        cells = [c for c in cells if c]
        if not cells:
            if header:
                break  # the legend follows the first blank line
            continue
        if not header:
            header = cells
        else:
            rows.append(cells)
    return header, rows


def parse_topo_matrix(text: str) -> Dict[str, Any]:
    """`nvidia-smi topo -m` -> paths per GPU pair and each GPU's CPU/NUMA affinity.

    NIC rows and columns are skipped; columns are matched by header name.
    """
    header, rows = _matrix_rows(text)
    result: Dict[str, Any] = {"paths": {}, "cpu_affinity": {}, "numa_affinity": {}, "gpu_numa_id": {}}
    for cells in rows:
        if not re.match(r"^GPU\d+$", cells[0]):
            continue
        i = int(cells[0][3:])
        for col, value in zip(header, cells[1:]):
            if re.match(r"^GPU\d+$", col):
                j = int(col[3:])
                if j != i and value != "X":
                    result["paths"][(min(i, j), max(i, j))] = value
            elif col == "CPU Affinity":
                result["cpu_affinity"][i] = None if value == "N/A" else value
            elif col == "NUMA Affinity":
                result["numa_affinity"][i] = _int_or_none(value)
            elif col == "GPU NUMA ID":
                result["gpu_numa_id"][i] = _int_or_none(value)
    return result


def parse_p2p_matrix(text: str) -> Dict[Tuple[int, int], str]:
    """`nvidia-smi topo -p2p r|w|n|a` -> {(i, j): 'OK'|'CNS'|...}."""
    header, rows = _matrix_rows(text)
    result: Dict[Tuple[int, int], str] = {}
    for cells in rows:
        if not re.match(r"^GPU\d+$", cells[0]):
            continue
        i = int(cells[0][3:])
        for col, value in zip(header, cells[1:]):
            j = int(col[3:])
            if j != i and value != "X":
                result[(min(i, j), max(i, j))] = value
    return result


def parse_query_csv(text: str) -> List[Dict[str, str]]:
    """`nvidia-smi --query-gpu=a,b --format=csv` -> one dict a row, keys without units."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return []
    keys = [re.sub(r"\s*\[.*\]$", "", k.strip()) for k in lines[0].split(",")]
    return [dict(zip(keys, (v.strip() for v in line.split(",")))) for line in lines[1:]]


def parse_nvlink_status(text: str) -> Dict[int, Optional[int]]:
    """`nvidia-smi nvlink -s` -> {gpu index: active link count}.  Empty output: no GPU lists a link."""
    result: Dict[int, Optional[int]] = {}
    current = None
    for line in text.splitlines():
        m = re.match(r"^GPU (\d+):", line)
        if m:
            current = int(m.group(1))
            result[current] = 0
            continue
        m = re.match(r"^\s+Link \d+: (.*)$", line)
        if m and current is not None and "inactive" not in m.group(1).lower():
            result[current] = (result[current] or 0) + 1
    return result


def _int_or_none(value: Optional[str]) -> Optional[int]:
    try:
        return int(str(value).strip())
    except (TypeError, ValueError):
        return None


def _xml_text(node: Optional[ET.Element], path: str) -> Optional[str]:
    if node is None:
        return None
    found = node.find(path)
    if found is None or found.text is None:
        return None
    value = found.text.strip()
    return None if value in ("N/A", "", "[N/A]") else value


def _mib(text: Optional[str]) -> Optional[int]:
    """nvidia-smi's "262144 MiB" as 262144; None for anything else (N/A, another unit)."""
    number, _sep, unit = (text or "").partition(" ")
    return _int_or_none(number) if unit.strip() == "MiB" else None


def parse_smi_xml(text: str) -> Dict[str, Any]:
    """`nvidia-smi -q -x` -> driver, CUDA and one dict a GPU (in bus order, as nvidia-smi indexes them)."""
    root = ET.fromstring(text)
    gpus = []
    for node in root.findall("gpu"):
        mem = _xml_text(node, "fb_memory_usage/total")
        bar1 = _xml_text(node, "bar1_memory_usage/total")  # "262144 MiB", as NVML's BAR1 memory info gives it
        width = _xml_text(node, "pci/pci_gpu_link_info/link_widths/max_link_width")
        cwidth = _xml_text(node, "pci/pci_gpu_link_info/link_widths/current_link_width")
        gpus.append({
            "name": _xml_text(node, "product_name"),
            "architecture_name": _xml_text(node, "product_architecture"),
            "uuid": _xml_text(node, "uuid"),
            "pci_bus_id": normalize_bus_id(_xml_text(node, "pci/pci_bus_id") or node.get("id", "")),
            "memory_total_mib": _int_or_none((mem or "").split(" ")[0]),
            "bar1_total_mib": _mib(bar1),
            "pcie": {
                # max_device_link_gen is the GPU's own maximum, as NVML's
                # nvmlDeviceGetMaxPcieLinkGeneration reports it.
                "max_gen": _int_or_none(_xml_text(node, "pci/pci_gpu_link_info/pcie_gen/max_device_link_gen")
                                        or _xml_text(node, "pci/pci_gpu_link_info/pcie_gen/max_link_gen")),
                "max_width": _int_or_none((width or "").rstrip("x")),
                "current_gen": _int_or_none(_xml_text(node, "pci/pci_gpu_link_info/pcie_gen/current_link_gen")),
                "current_width": _int_or_none((cwidth or "").rstrip("x")),
            },
            "persistence_mode": _enabled(_xml_text(node, "persistence_mode")),
            "mig_mode": _enabled(_xml_text(node, "mig_mode/current_mig")),
        })
    return {
        "driver_version": _xml_text(root, "driver_version"),
        "cuda_driver_version": _xml_text(root, "cuda_version"),
        "gpus": gpus,
    }


def _enabled(value: Optional[str]) -> Optional[bool]:
    if value is None:
        return None
    return value.lower() == "enabled"


# The fields the XML lacks (compute_cap) plus the bus id to join on; the same
# query the real H200 capture recorded, so its output replays in tests.
SMI_QUERY_FIELDS = "index,name,pci.bus_id,pcie.link.gen.max,pcie.link.width.max,memory.total,persistence_mode,compute_cap"


def read_nvidia_smi(outputs: Dict[str, Optional[str]]) -> Dict[str, Any]:
    """Build facts from nvidia-smi outputs keyed 'xml', 'topo', 'p2p_r', 'p2p_w', 'p2p_n', 'p2p_a', 'query', 'nvlink'.

    A missing output (None) makes the fields it would have given null, listed in `unavailable`.
    """
    missing = Unavailable()
    xml = parse_smi_xml(outputs["xml"] or "")
    query = {normalize_bus_id(r["pci.bus_id"]): r for r in parse_query_csv(outputs.get("query") or "")}
    topo = parse_topo_matrix(outputs["topo"]) if outputs.get("topo") else None
    if topo is None:
        missing.add("pairs[*].path", "nvidia-smi topo -m gave no output")
    nvlink = parse_nvlink_status(outputs["nvlink"]) if outputs.get("nvlink") is not None else {}
    gpus = []
    for i, g in enumerate(xml["gpus"]):
        f = "gpus[%d]." % i
        row = query.get(g["pci_bus_id"], {})
        cc = row.get("compute_cap") or None
        if cc is None:
            missing.add(f + "compute_capability", "nvidia-smi --query-gpu=compute_cap gave no value")
        numa = topo["numa_affinity"].get(i) if topo else None
        if numa is None:
            missing.add(f + "numa_node", "nvidia-smi topo -m gave no NUMA Affinity")
        gpu_numa = topo["gpu_numa_id"].get(i) if topo else None
        if gpu_numa is None:
            missing.add(f + "gpu_numa_id", "nvidia-smi topo -m: GPU NUMA ID N/A")
        for key in ("name", "uuid", "memory_total_mib", "bar1_total_mib", "persistence_mode", "mig_mode"):
            if g[key] is None:
                missing.add(f + key, "not in nvidia-smi -q -x")
        for key, value in g["pcie"].items():
            if value is None:
                missing.add(f + "pcie." + key, "not in nvidia-smi -q -x")
        gpus.append({
            "index": i,
            "name": g["name"],
            "uuid": g["uuid"],
            "pci_bus_id": g["pci_bus_id"],
            "compute_capability": cc,
            "architecture": architecture_family(cc) or (g["architecture_name"] or "").lower() or None,
            "memory_total_mib": g["memory_total_mib"],
            "bar1_total_mib": g["bar1_total_mib"],
            "pcie": g["pcie"],
            "numa_node": numa,
            "gpu_numa_id": gpu_numa,
            "cpu_affinity": topo["cpu_affinity"].get(i) if topo else None,
            "persistence_mode": g["persistence_mode"],
            "mig_mode": g["mig_mode"],
            "nvlink": None,
        })
    count = len(gpus)
    p2p = {cap: parse_p2p_matrix(outputs[key]) if outputs.get(key) else None
           for cap, key in (("read", "p2p_r"), ("write", "p2p_w"), ("nvlink", "p2p_n"), ("atomics", "p2p_a"))}
    for cap, matrix in p2p.items():
        if matrix is None and count > 1:
            missing.add("pairs[*].p2p." + cap, "nvidia-smi topo -p2p gave no output")
    paths = topo["paths"] if topo else {}
    # NVLink peers from the NV# cells of topo -m; nvidia-smi names no NVSwitch,
    # so a GPU whose NVLinks all go to a switch shows NV# to every peer.
    for i, gpu in enumerate(gpus):
        peers = []
        for (a, b), path in sorted(paths.items()):
            if i in (a, b) and path_class(path) == "NV":
                peers.append({"gpu": b if a == i else a, "links": int(path[2:])})
        active = nvlink.get(i)
        if active is None and not peers:
            missing.add("gpus[%d].nvlink" % i, "nvidia-smi nvlink -s listed no links for this GPU")
            gpu["nvlink"] = {"active_links": None, "peers": None, "nvswitch_links": None}
            continue
        if active is None:
            active = max(p["links"] for p in peers)
        direct = sum(p["links"] for p in peers)
        # More NV# links summed over peers than the GPU has: they are shared through NVSwitch.
        switched = len(peers) > 1 and direct > active
        gpu["nvlink"] = {
            "active_links": active,
            "peers": [] if switched else peers,
            "nvswitch_links": active if switched else 0,
        }
    pairs = []
    for i in range(count):
        for j in range(i + 1, count):
            pairs.append({
                "gpus": [i, j],
                "path": paths.get((i, j)),
                "p2p": {cap: (m.get((i, j)) if m is not None else None) for cap, m in p2p.items()},
            })
    return build_facts("nvidia_smi", xml["driver_version"], xml["cuda_driver_version"], gpus, pairs, missing.entries)


# ------------------------------------------------------------------- snapshots

SNAPSHOT_KEYS = ("driver_version", "cuda_driver_version", "gpus", "pairs", "unavailable")


def to_snapshot(facts: Dict[str, Any], captured_at: str, host: str, description: str = "", constructed: bool = False) -> Dict[str, Any]:
    """What `dump` writes: the read facts, without the derived summary."""
    snap: Dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "captured": {"at": captured_at, "host": host, "backend": facts["backend"]},
        "constructed": constructed,
        "description": description,
    }
    for key in SNAPSHOT_KEYS:
        snap[key] = facts[key]
    # Optional since 0.2.0, same schema_version: older snapshots simply lack it.
    if "network" in facts:
        snap["network"] = facts["network"]
    if "host" in facts:
        snap["host"] = facts["host"]
    return snap


class SnapshotError(ValueError):
    pass


def from_snapshot(snap: Dict[str, Any], path: str) -> Dict[str, Any]:
    """Replay a snapshot; the summary is derived again from what it holds."""
    version = snap.get("schema_version")
    if version != SCHEMA_VERSION:
        raise SnapshotError("%s: schema_version %r is not supported (this collection reads %d)" % (path, version, SCHEMA_VERSION))
    for key in SNAPSHOT_KEYS:
        if key not in snap:
            raise SnapshotError("%s: snapshot lacks %r" % (path, key))
    gpus = snap["gpus"]
    n = len(gpus)
    if [g.get("index") for g in gpus] != list(range(n)):
        raise SnapshotError("%s: gpus must be listed by index 0..%d" % (path, n - 1))
    want = [[i, j] for i in range(n) for j in range(i + 1, n)]
    if [p.get("gpus") for p in snap["pairs"]] != want:
        raise SnapshotError("%s: pairs must list every GPU pair once, in order (%d pairs for %d GPUs)" % (path, len(want), n))
    for p in snap["pairs"]:
        if p.get("path") is not None and path_rank(p["path"]) is None:
            raise SnapshotError("%s: pair %s has unknown path %r" % (path, p["gpus"], p["path"]))
    if "network" in snap:
        validate_network(snap["network"], path)
    extra: Dict[str, Any] = {"snapshot": {
        "path": path,
        "captured": snap.get("captured"),
        "constructed": bool(snap.get("constructed")),
        "description": snap.get("description", ""),
    }}
    if "network" in snap:
        extra["network"] = snap["network"]
    if isinstance(snap.get("host"), dict):  # a recorded PCIe host section (pcie_host.read_host), replayed as it is
        extra["host"] = snap["host"]
    return build_facts("snapshot", snap["driver_version"], snap["cuda_driver_version"], gpus, snap["pairs"], snap["unavailable"], extra)


# ------------------------------------------------------------ network (sysfs)
#
# What NCCL and Ray need to cross nodes: the host's network interfaces and its
# RDMA devices, read from sysfs (/sys/class/net, /sys/class/infiniband).  The
# readers take the sysfs root so that tests replay a captured tree.

# ARPHRD_* values from include/uapi/linux/if_arp.h that matter here.
ARPHRD_NAMES = {1: "ether", 32: "infiniband", 772: "loopback", 776: "sit", 65534: "none"}

# Interface names that are container, VM or tunnel plumbing, never the link
# between two serving nodes.  NCCL's own default only skips "docker" and "lo".
VIRTUAL_IFNAME_PREFIXES = (
    "lo", "docker", "podman", "cni", "veth", "virbr", "br-", "vnet", "flannel", "cali", "cilium",
    "weave", "kube", "lxcbr", "lxdbr", "tun", "tap", "ifb", "dummy", "vxlan", "genev", "zt", "tailscale",
    "wg", "sit", "ip6tnl", "gre", "erspan",
)


def _read_attr(path: str) -> Optional[str]:
    try:
        with open(path) as f:
            return f.read().strip()
    except (OSError, UnicodeDecodeError):
        return None


def _int_attr(path: str) -> Optional[int]:
    value = _read_attr(path)
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def excluded_ifname(name: str) -> bool:
    """True for loopback, container bridges, veths, VM bridges and tunnels."""
    return name.startswith(VIRTUAL_IFNAME_PREFIXES)


def read_net_interfaces(sysfs: str = "/sys") -> Tuple[List[Dict[str, Any]], List[Dict[str, str]]]:
    """Interfaces under <sysfs>/class/net, by name: (interfaces, unavailable)."""
    missing = Unavailable()
    base = os.path.join(sysfs, "class", "net")
    try:
        names = sorted(os.listdir(base))
    except OSError as exc:
        missing.add("network.interfaces", exc)
        return [], missing.entries
    interfaces = []
    for name in names:
        path = os.path.join(base, name)
        real = os.path.realpath(path)
        driver_link = os.path.join(path, "device", "driver")
        arphrd = _int_attr(os.path.join(path, "type"))
        speed = _int_attr(os.path.join(path, "speed"))
        interfaces.append({
            "name": name,
            "operstate": _read_attr(os.path.join(path, "operstate")),
            "type": ARPHRD_NAMES.get(arphrd, str(arphrd)) if arphrd is not None else None,
            "mtu": _int_attr(os.path.join(path, "mtu")),
            # -1 (virtio, link down) means the kernel does not know.
            "speed_mbps": speed if speed is not None and speed > 0 else None,
            "mac": _read_attr(os.path.join(path, "address")),
            # Devices without a bus parent live under /sys/devices/virtual.
            "virtual": "/devices/virtual/" in real,
            "bridge": os.path.isdir(os.path.join(path, "bridge")),
            "bond": os.path.isdir(os.path.join(path, "bonding")),
            "driver": os.path.basename(os.path.realpath(driver_link)) if os.path.exists(driver_link) else None,
            "pci_bus_id": _pci_parent(real),
        })
    return interfaces, missing.entries


def _pci_parent(real: str) -> Optional[str]:
    """The nearest PCI address in a sysfs device path, upper case like the GPUs' ids."""
    found = None
    for part in real.split("/"):
        if re.match(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$", part):
            found = part
    return normalize_bus_id(found) if found else None


def read_rdma_devices(sysfs: str = "/sys") -> Tuple[List[Dict[str, Any]], List[Dict[str, str]]]:
    """RDMA devices under <sysfs>/class/infiniband with their ports: (devices, unavailable).

    No class/infiniband directory means no RDMA driver is loaded: an empty list,
    not an unavailable field.
    """
    missing = Unavailable()
    base = os.path.join(sysfs, "class", "infiniband")
    if not os.path.isdir(base):
        return [], []
    devices = []
    for name in sorted(os.listdir(base)):
        path = os.path.join(base, name)
        ports = []
        try:
            port_names = sorted(os.listdir(os.path.join(path, "ports")), key=lambda p: int(p) if p.isdigit() else 0)
        except OSError as exc:
            missing.add("network.rdma_devices.%s.ports" % name, exc)
            port_names = []
        for port in port_names:
            ppath = os.path.join(path, "ports", port)
            state = _read_attr(os.path.join(ppath, "state"))  # e.g. "4: ACTIVE"
            ports.append({
                "port": int(port) if port.isdigit() else port,
                "state": state.split(":", 1)[-1].strip() if state else None,
                "link_layer": _read_attr(os.path.join(ppath, "link_layer")),
                "rate": _read_attr(os.path.join(ppath, "rate")),
            })
        net_dir = os.path.join(path, "device", "net")
        try:
            netdevs = sorted(os.listdir(net_dir))
        except OSError:
            netdevs = []
        devices.append({
            "name": name,
            "node_type": _read_attr(os.path.join(path, "node_type")),
            "firmware": _read_attr(os.path.join(path, "fw_ver")),
            "ports": ports,
            "netdevs": netdevs,
            "pci_bus_id": _pci_parent(os.path.realpath(path)),
        })
    return devices, missing.entries


def read_network(sysfs: str = "/sys") -> Dict[str, Any]:
    """The `network` part of the facts: interfaces, RDMA devices, what could not be read."""
    interfaces, missing_if = read_net_interfaces(sysfs)
    rdma, missing_rdma = read_rdma_devices(sysfs)
    return {"interfaces": interfaces, "rdma_devices": rdma, "unavailable": missing_if + missing_rdma}


def validate_network(network: Any, path: str) -> None:
    """Shape check of a snapshot's optional `network` part."""
    if not isinstance(network, dict):
        raise SnapshotError("%s: network must be a mapping" % path)
    for key in ("interfaces", "rdma_devices"):
        items = network.get(key, [])
        if not isinstance(items, list) or not all(isinstance(i, dict) and i.get("name") for i in items):
            raise SnapshotError("%s: network.%s must be a list of mappings with a name" % (path, key))
