# -*- coding: utf-8 -*-
# Copyright: (c) 2026, moeops.inference contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The box as it really is: PCIe peer-to-peer readiness, read from the kernel. Private to the collection.

On PCIe-only multi-GPU boxes NCCL can hang at the first all-reduce while NVML reports P2P OK: the
IOMMU translates peer traffic, or ACS redirect bits on the bridges above the GPUs send it up to the
root complex and through the IOMMU (vLLM #33041, NCCL #2079, NCCL #1999).  This file reads; the
rules over what it reads are in _policy/pcie_findings.py.

The readers take a ``root`` path ("/" on a host, a constructed or replayed tree in tests)
and read /proc/cmdline, /sys/kernel/iommu_groups, /sys/bus/pci/devices (config space, link, BARs),
/sys/module/{nvidia_uvm,pcie_aspm}/parameters and /etc/modprobe.d/*.conf under it.  They never
raise on a missing or unreadable file: the field is None and the reader's ``unavailable`` list
says which file and why.  Reasons name paths as seen from ``root`` (/sys/...), never the tree's
real location, so a replayed capture gives the same output.

The reference is docs/pcie-host-facts.md.

Config space sizes: as root, sysfs ``config`` gives the device's whole config space, 4096 bytes
for PCI Express devices.  Without CAP_SYS_ADMIN the kernel returns only the first 64 bytes (128
for CardBus bridges; checked on Linux 6.18: an unprivileged read of a 4096-byte ``config`` gives
64).  Exactly 256 bytes means the kernel sees no extended config space (a conventional PCI
device, or no ECAM access, as in many VMs).  ACS lives in the extended space, so in both cases
ACS is "unreadable", never "absent".
"""

from __future__ import annotations

import glob
import os
import re
import shlex
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple

CMDLINE_KEYS = ("iommu", "intel_iommu", "amd_iommu", "iommu.passthrough", "pcie_port_pm", "pcie_aspm")

# /sys/kernel/iommu_groups/<n>/type (Linux 5.11+): the default domain of the group.
IOMMU_PASSTHROUGH_TYPES = ("identity",)
IOMMU_TRANSLATED_TYPES = ("DMA", "DMA-FQ")

PCI_EXT_CAP_START = 0x100
PCI_CFG_SPACE_SIZE = 256
PCI_EXT_CAP_ID_ACS = 0x000D
# The ACS Capability and ACS Control registers share this bit order (the PCIe base spec's ACS Extended Capability).
ACS_BITS = ("SrcValid", "TransBlk", "ReqRedir", "CmpltRedir", "UpstreamFwd", "EgressCtrl", "DirectTrans")
ACS_REDIRECT_BITS = ("ReqRedir", "CmpltRedir")

LINK_FILES = ("current_link_width", "max_link_width", "current_link_speed", "max_link_speed")
NVIDIA_VENDOR = "0x10de"
IORESOURCE_MEM_64 = 0x00100000  # include/linux/ioport.h: the flag of a 64-bit BAR in sysfs resource
MIB = 1 << 20

_PCI_ADDRESS = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
_BUS_ID = re.compile(r"^(?:([0-9a-fA-F]{1,8}):)?([0-9a-fA-F]{1,2}):([0-9a-fA-F]{1,2})\.([0-7])$")
_SPEED = re.compile(r"([0-9]+(?:\.[0-9]+)?)\s*GT/s")


class _Missing(object):
    """The fields one reader could not read, each with the reason."""

    def __init__(self) -> None:
        self.entries: List[Dict[str, str]] = []

    def add(self, field: str, reason: str) -> None:
        self.entries.append({"field": field, "reason": reason})


def _path(root: str, *parts: str) -> str:
    return os.path.join(root, *parts)


def _shown(root: str, path: str) -> str:
    """A path as the host would name it: /sys/... whatever tree ``root`` is."""
    for base in (root, os.path.realpath(root)):
        rel = os.path.relpath(path, base)
        if not rel.startswith(".."):
            return "/" + rel if rel != "." else "/"
    return path


def _error(root: str, path: str, exc: Exception) -> str:
    reason = getattr(exc, "strerror", None) or exc.__class__.__name__
    return "%s: %s" % (_shown(root, path), reason)


def _read_text(root: str, path: str, field: str, missing: _Missing) -> Optional[str]:
    try:
        with open(path, "rb") as f:
            return f.read().decode("utf-8", "replace").strip()
    except OSError as exc:
        missing.add(field, _error(root, path, exc))
        return None


def _read_bytes(root: str, path: str, field: str, missing: _Missing) -> Optional[bytes]:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        missing.add(field, _error(root, path, exc))
        return None


def _int(text: Optional[str]) -> Optional[int]:
    try:
        return int(text, 0) if text is not None else None
    except ValueError:
        return None


def sysfs_bus_id(bus_id: str) -> Optional[str]:
    """NVML's "00000000:17:00.0" (or "17:00.0") -> sysfs' "0000:17:00.0"; None if it is no PCI address."""
    match = _BUS_ID.match((bus_id or "").strip())
    if not match:
        return None
    domain, bus, dev, fn = match.groups()
    return "%04x:%02x:%02x.%s" % (int(domain or "0", 16), int(bus, 16), int(dev, 16), fn)


# ------------------------------------------------------------------ kernel command line

def parse_cmdline(text: str) -> Dict[str, Optional[str]]:
    """The CMDLINE_KEYS settings of a kernel command line; the last occurrence wins, a bare flag is "".

    Words after a lone "--" go to init, not the kernel, and are ignored.
    """
    try:
        words = shlex.split(text)
    except ValueError:  # an unbalanced quote: the kernel splits on blanks then, so do we
        words = text.split()
    if "--" in words:
        words = words[:words.index("--")]
    params: Dict[str, Optional[str]] = dict((key, None) for key in CMDLINE_KEYS)
    for word in words:
        key, sep, value = word.partition("=")
        key = key.replace("-", "_")  # the kernel takes pcie-port-pm for pcie_port_pm
        if key in params:
            params[key] = value if sep else ""
    return params


def read_cmdline(root: str = "/") -> Dict[str, Any]:
    """/proc/cmdline: {"raw", "params": {key: value or None}, "unavailable"}; raw None when unreadable."""
    missing = _Missing()
    raw = _read_text(root, _path(root, "proc", "cmdline"), "cmdline", missing)
    params = parse_cmdline(raw) if raw is not None else dict((key, None) for key in CMDLINE_KEYS)
    return {"raw": raw, "params": params, "unavailable": missing.entries}


# ------------------------------------------------------------------ IOMMU

def iommu_mode(types: Mapping[str, int], groups: int) -> str:
    """off (no groups) | passthrough (identity only) | translated (DMA/DMA-FQ only) | mixed | unknown.

    Other group types (blocked, unmanaged: owned by VFIO) do not count either way; groups whose
    type cannot be read (kernels before 5.11 have no type file) leave the mode "unknown" when no
    group's type could be read.
    """
    if groups == 0:
        return "off"
    passthrough = sum(types.get(t, 0) for t in IOMMU_PASSTHROUGH_TYPES)
    translated = sum(types.get(t, 0) for t in IOMMU_TRANSLATED_TYPES)
    if passthrough and translated:
        return "mixed"
    if translated:
        return "translated"
    if passthrough:
        return "passthrough"
    return "unknown"


def read_iommu(root: str = "/") -> Dict[str, Any]:
    """/sys/kernel/iommu_groups: {"mode", "groups", "types": {type: count}, "untyped", "unavailable"}.

    A missing or empty directory means no IOMMU is active: mode "off".
    """
    missing = _Missing()
    base = _path(root, "sys", "kernel", "iommu_groups")
    if not os.path.isdir(base):
        return {"mode": "off", "groups": 0, "types": {}, "untyped": 0, "unavailable": []}
    try:
        names = sorted(os.listdir(base), key=lambda n: (len(n), n))
    except OSError as exc:
        missing.add("iommu.groups", _error(root, base, exc))
        return {"mode": "unknown", "groups": None, "types": {}, "untyped": None, "unavailable": missing.entries}
    types: Dict[str, int] = {}
    untyped: List[str] = []
    for name in names:
        kind = _read_text(root, os.path.join(base, name, "type"), "iommu.groups.%s.type" % name, _Missing())
        if kind:
            types[kind] = types.get(kind, 0) + 1
        else:
            untyped.append(name)
    if untyped:
        missing.add("iommu.types", "%d of %d groups have no readable type file (%s/<group>/type; Linux 5.11+)"
                    % (len(untyped), len(names), _shown(root, base)))
    return {"mode": iommu_mode(types, len(names)), "groups": len(names), "types": types, "untyped": len(untyped),
            "unavailable": missing.entries}


def read_iommu_group(root: str, bus_id: str) -> Dict[str, Any]:
    """The device's IOMMU group and its type: {"group", "type", "unavailable"} (both None without an IOMMU)."""
    missing = _Missing()
    link = _path(root, "sys", "bus", "pci", "devices", bus_id, "iommu_group")
    if not os.path.islink(link):
        return {"group": None, "type": None, "unavailable": []}
    group = os.path.basename(os.readlink(link))
    kind = _read_text(root, os.path.join(os.path.realpath(link), "type"), "iommu_group.type (%s)" % bus_id, missing)
    return {"group": group, "type": kind or None, "unavailable": missing.entries}


# ------------------------------------------------------------------ ACS in config space

def _u16(data: bytes, offset: int) -> int:
    return int.from_bytes(data[offset:offset + 2], "little")


def _u32(data: bytes, offset: int) -> int:
    return int.from_bytes(data[offset:offset + 4], "little")


def acs_bits(value: int) -> Dict[str, bool]:
    return dict((name, bool(value >> bit & 1)) for bit, name in enumerate(ACS_BITS))


def acs_text(value: int) -> str:
    """As `lspci -vvv` prints ACSCtl: "SrcValid+ TransBlk- ReqRedir+ ..."."""
    return " ".join(name + ("+" if on else "-") for name, on in acs_bits(value).items())


def parse_acs(config: bytes) -> Optional[Dict[str, Any]]:
    """The ACS extended capability of one device's config space bytes, or None.

    None when the list has no ACS capability, and when ``config`` is too short to hold the extended
    list (unprivileged reads give 64 bytes, devices without extended space 256): ``config_space_problem``
    tells those apart.  The walk starts at 0x100; each header is a little-endian dword: id bits 0-15,
    version 16-19, next offset 20-31 (low two bits masked, as Linux does).  A next offset below 0x100
    ends the list; a header of 0 or 0xffffffff, an offset past the end, or one seen before stops it.
    """
    if len(config) < PCI_EXT_CAP_START + 4:
        return None
    offset = PCI_EXT_CAP_START
    seen = set()
    while PCI_EXT_CAP_START <= offset <= len(config) - 4 and offset not in seen:
        seen.add(offset)
        header = _u32(config, offset)
        if header in (0, 0xFFFFFFFF):
            return None
        if header & 0xFFFF == PCI_EXT_CAP_ID_ACS:
            if offset + 8 > len(config):
                return None
            capability, control = _u16(config, offset + 4), _u16(config, offset + 6)
            return {
                "offset": offset,
                "version": header >> 16 & 0xF,
                "capability_raw": capability,
                "control_raw": control,
                "capability": acs_bits(capability),
                "control": acs_bits(control),
                "control_text": acs_text(control),
            }
        offset = header >> 20 & 0xFFC
    return None


def config_space_problem(length: int) -> Optional[str]:
    """Why a config space of ``length`` bytes cannot say whether there is ACS; None when it can."""
    if length < PCI_CFG_SPACE_SIZE:
        return "unreadable (not root): config space read returned %d bytes, the kernel gives more only to root" % length
    if length <= PCI_CFG_SPACE_SIZE:
        return ("unreadable (no extended config space): config space has %d bytes (a conventional PCI device, "
                "or no ECAM access); ACS lives in the extended space" % length)
    return None


def read_acs(root: str, bus_id: str, device_dir: Optional[str] = None) -> Dict[str, Any]:
    """A device's ACS: {"config_bytes", "acs_state": present|absent|unreadable, "acs", "unavailable"}."""
    missing = _Missing()
    path = os.path.join(device_dir or _path(root, "sys", "bus", "pci", "devices", bus_id), "config")
    data = _read_bytes(root, path, "acs (%s)" % bus_id, missing)
    if data is None:
        return {"config_bytes": None, "acs_state": "unreadable", "acs": None, "unavailable": missing.entries}
    problem = config_space_problem(len(data))
    if problem:
        missing.add("acs (%s)" % bus_id, "%s: %s" % (_shown(root, path), problem))
        return {"config_bytes": len(data), "acs_state": "unreadable", "acs": None, "unavailable": missing.entries}
    acs = parse_acs(data)
    return {"config_bytes": len(data), "acs_state": "present" if acs else "absent", "acs": acs, "unavailable": []}


# ------------------------------------------------------------------ the path up to the root port

def read_pci_path(root: str, bus_id: str) -> Dict[str, Any]:
    """The PCI bridges above a device, root port first: {"path", "bridges", "unavailable"}.

    /sys/bus/pci/devices/<bus_id> links into /sys/devices/pci<domain>:<bus>/<root port>/.../<bus_id>;
    every path component that is a PCI address, except the device itself, is a bridge on its way up.
    Each bridge: bus_id, vendor, device, class, config_bytes, acs_state and acs (parse_acs).
    ``bridges`` is None when the device is not there; [] when it sits on a root bus (as in most VMs).
    """
    missing = _Missing()
    link = _path(root, "sys", "bus", "pci", "devices", bus_id)
    devices = os.path.realpath(_path(root, "sys", "devices"))
    if not os.path.exists(link):
        missing.add("pci_path (%s)" % bus_id, "%s: no such device" % _shown(root, link))
        return {"path": None, "bridges": None, "unavailable": missing.entries}
    rel = os.path.relpath(os.path.realpath(link), devices)
    if rel.startswith(".."):
        missing.add("pci_path (%s)" % bus_id, "%s does not lead into /sys/devices" % _shown(root, link))
        return {"path": None, "bridges": None, "unavailable": missing.entries}
    parts = rel.split(os.sep)
    bridges = []
    for i, part in enumerate(parts[:-1]):
        if not _PCI_ADDRESS.match(part):
            continue
        bridge_dir = os.path.join(devices, *parts[:i + 1])
        entry: Dict[str, Any] = {"bus_id": part}
        for name in ("vendor", "device", "class"):
            entry[name] = _read_text(root, os.path.join(bridge_dir, name), "pci_path.%s (%s)" % (name, part), missing)
        acs = read_acs(root, part, bridge_dir)
        missing.entries.extend(acs.pop("unavailable"))
        entry.update(acs)
        bridges.append(entry)
    return {"path": rel.replace(os.sep, "/"), "bridges": bridges, "unavailable": missing.entries}


# ------------------------------------------------------------------ link width and speed

def link_speed_gts(text: Optional[str]) -> Optional[float]:
    """ "16.0 GT/s PCIe" -> 16.0; "Unknown" or None -> None."""
    match = _SPEED.search(text or "")
    return float(match.group(1)) if match else None


def read_link(root: str, bus_id: str) -> Dict[str, Any]:
    """current/max link width and speed from sysfs.

    ``degraded``: the width is narrower than the maximum (None when either is unknown).  A lower
    speed alone is not degraded: GPUs drop their link generation at idle to save power, so
    ``speed_below_max`` is informational only.
    """
    missing = _Missing()
    base = _path(root, "sys", "bus", "pci", "devices", bus_id)
    raw = dict((name, _read_text(root, os.path.join(base, name), "link.%s (%s)" % (name, bus_id), missing))
               for name in LINK_FILES)
    cur_w, max_w = _int(raw["current_link_width"]), _int(raw["max_link_width"])
    cur_s, max_s = link_speed_gts(raw["current_link_speed"]), link_speed_gts(raw["max_link_speed"])
    return {
        "current_width": cur_w,
        "max_width": max_w,
        "current_speed": raw["current_link_speed"],
        "max_speed": raw["max_link_speed"],
        "degraded": cur_w < max_w if cur_w is not None and max_w is not None else None,
        "speed_below_max": cur_s < max_s if cur_s is not None and max_s is not None else None,
        "unavailable": missing.entries,
    }


# ------------------------------------------------------------------ BAR1 from sysfs

def bar1_region(resource: str) -> Optional[Tuple[int, str]]:
    """The region index and line of BAR1 in a sysfs ``resource`` text; None when there is no such line.

    BARs are counted, not regions: a 64-bit BAR takes two regions (its line carries
    IORESOURCE_MEM_64, the next line is its upper half, all zeros).  So BAR1 is region 1 when BAR0
    is 32-bit (RTX cards: 32-bit registers, 64-bit aperture) and region 2 when BAR0 is 64-bit (the
    H200 capture in tests/fixtures/host/real/h200-x1-device: regions 0, 2 and 4).
    """
    lines = resource.splitlines()
    if not lines:
        return None
    fields = lines[0].split()
    flags = _int(fields[2]) if len(fields) >= 3 else None
    index = 2 if flags is not None and flags & IORESOURCE_MEM_64 else 1
    return (index, lines[index]) if index < len(lines) else None


def read_bar1_mib(root: str, bus_id: str) -> Dict[str, Any]:
    """An NVIDIA GPU's BAR1 (the framebuffer aperture, its second BAR) in MiB, from sysfs ``resource``.

    Only read for vendor 0x10de: BAR0 is its register space, BAR1 the aperture (bar1_region).
    """
    missing = _Missing()
    field = "bar1 (%s)" % bus_id
    base = _path(root, "sys", "bus", "pci", "devices", bus_id)
    vendor = _read_text(root, os.path.join(base, "vendor"), field, missing)
    if vendor is not None and vendor.lower() != NVIDIA_VENDOR:
        missing.add(field, "vendor %s is not NVIDIA: no BAR1 aperture to read" % vendor)
    text = _read_text(root, os.path.join(base, "resource"), field, missing) if not missing.entries else None
    if text is None:
        return {"bar1_mib": None, "unavailable": missing.entries}
    region = bar1_region(text)
    if region is None:
        missing.add(field, "%s has no BAR1 line" % _shown(root, os.path.join(base, "resource")))
        return {"bar1_mib": None, "unavailable": missing.entries}
    fields = region[1].split()
    start, end = (_int(fields[0]), _int(fields[1])) if len(fields) >= 2 else (None, None)
    if not start or end is None or end <= start:
        missing.add(field, "BAR1 (region %d) is not assigned (%s)" % (region[0], region[1].strip()))
        return {"bar1_mib": None, "unavailable": missing.entries}
    return {"bar1_mib": (end - start + 1) // MIB, "unavailable": []}


# ------------------------------------------------------------------ kernel modules

def parse_kernel_bool(text: Optional[str]) -> Optional[bool]:
    """A bool module parameter as sysfs or modprobe.d spell it: Y/N/1/0 (y/n/on/off too)."""
    value = (text or "").strip().lower()
    if value in ("y", "1", "yes", "on", "true"):
        return True
    if value in ("n", "0", "no", "off", "false"):
        return False
    return None


def parse_modprobe_options(text: str, module: str) -> List[Dict[str, Any]]:
    """The `options <module> k=v ...` lines of one modprobe.d file ("-" and "_" are one in module names)."""
    found = []
    joined = re.sub(r"\\\n", " ", text)
    for line in joined.splitlines():
        words = line.split("#", 1)[0].split()
        if len(words) >= 2 and words[0] == "options" and words[1].replace("-", "_") == module:
            params = {}
            for word in words[2:]:
                key, _sep, value = word.partition("=")
                params[key] = value
            found.append({"line": " ".join(words), "params": params})
    return found


def read_uvm(root: str = "/") -> Dict[str, Any]:
    """nvidia_uvm's HMM switch, in effect and as configured.

    ``loaded``: /sys/module/nvidia_uvm exists.  ``uvm_disable_hmm``: its parameter as sysfs shows it
    (Y/N), ``hmm_disabled`` the same as a bool (None when the module is not loaded: unknown).
    ``modprobe_options``: every `options nvidia_uvm` line of /etc/modprobe.d/*.conf (files in name
    order, as modprobe reads them); ``configured_hmm_disabled``: the last uvm_disable_hmm among them.
    """
    missing = _Missing()
    module = _path(root, "sys", "module", "nvidia_uvm")
    loaded = os.path.isdir(module)
    value = None
    if loaded:
        value = _read_text(root, os.path.join(module, "parameters", "uvm_disable_hmm"), "uvm.uvm_disable_hmm", missing)
    else:
        missing.add("uvm.uvm_disable_hmm", "%s: nvidia_uvm is not loaded" % _shown(root, module))
    options = []
    configured = None
    for conf in sorted(glob.glob(_path(root, "etc", "modprobe.d", "*.conf"))):
        text = _read_text(root, conf, "uvm.modprobe_options", missing)
        for entry in parse_modprobe_options(text or "", "nvidia_uvm"):
            entry["file"] = _shown(root, conf)
            options.append(entry)
            if "uvm_disable_hmm" in entry["params"]:
                configured = parse_kernel_bool(entry["params"]["uvm_disable_hmm"])
    return {"loaded": loaded, "uvm_disable_hmm": value, "hmm_disabled": parse_kernel_bool(value),
            "modprobe_options": options, "configured_hmm_disabled": configured, "unavailable": missing.entries}


def read_aspm(root: str = "/") -> Dict[str, Any]:
    """/sys/module/pcie_aspm/parameters/policy: the selected policy is the one in [brackets]."""
    missing = _Missing()
    text = _read_text(root, _path(root, "sys", "module", "pcie_aspm", "parameters", "policy"), "aspm.policy", missing)
    words = (text or "").split()
    selected = [w[1:-1] for w in words if w.startswith("[") and w.endswith("]")]
    return {"policy": selected[0] if selected else None, "available": [w.strip("[]") for w in words],
            "unavailable": missing.entries}


# ------------------------------------------------------------------ the host section

def _merge(section: Dict[str, Any], into: List[Dict[str, str]]) -> Dict[str, Any]:
    into.extend(section.pop("unavailable"))
    return section


def read_gpu(root: str, gpu: Mapping[str, Any], position: int = 0, backend: str = "gpu facts") -> Dict[str, Any]:
    """One GPU's part of the host section: bus id, link, IOMMU group, BAR1 vs framebuffer, bridges. BAR1 is the GPU
    facts' bar1_total_mib (read by `backend`: NVML's BAR1 memory info, or nvidia-smi's bar1_memory_usage), else the
    sysfs resource file's second BAR."""
    unavailable: List[Dict[str, str]] = []
    given = str(gpu.get("pci_bus_id") or "")
    bus = sysfs_bus_id(given)
    entry: Dict[str, Any] = {"index": gpu.get("index", position), "pci_bus_id": bus,
                             "framebuffer_mib": gpu.get("memory_total_mib")}
    if bus is None:
        unavailable.append({"field": "gpus[%s].pci_bus_id" % entry["index"], "reason": "not a PCI address: %r" % given})
        entry.update({"link": None, "iommu_group": None, "bar1_mib": gpu.get("bar1_total_mib"),
                      "bar1_source": backend if gpu.get("bar1_total_mib") is not None else None,
                      "path": None, "bridges": None, "unavailable": unavailable})
        return entry
    entry["link"] = _merge(read_link(root, bus), unavailable)
    entry["iommu_group"] = _merge(read_iommu_group(root, bus), unavailable)
    if gpu.get("bar1_total_mib") is not None:
        entry["bar1_mib"], entry["bar1_source"] = gpu["bar1_total_mib"], backend
    else:
        bar1 = _merge(read_bar1_mib(root, bus), unavailable)["bar1_mib"]
        entry["bar1_mib"], entry["bar1_source"] = bar1, "sysfs resource" if bar1 is not None else None
    if entry["framebuffer_mib"] is None:
        unavailable.append({"field": "framebuffer_mib (%s)" % bus, "reason": "the GPU facts give no memory_total_mib"})
    path = _merge(read_pci_path(root, bus), unavailable)
    entry["path"], entry["bridges"] = path["path"], path["bridges"]
    entry["unavailable"] = unavailable
    return entry


def read_host(root: str = "/", gpus: Iterable[Mapping[str, Any]] = (), backend: str = "gpu facts") -> Dict[str, Any]:
    """The whole ``host`` section, JSON-serialisable, for GPU dicts as the GPU facts give them.

    Each GPU needs ``pci_bus_id`` (NVML's "00000000:17:00.0" or sysfs' form); ``bar1_total_mib``
    (read by the facts' `backend`, nvml or nvidia_smi) and ``memory_total_mib`` are used when present (BAR1 falls back
    to sysfs ``resource``).
    Every field that could not be read is None and has an entry in ``unavailable``.
    """
    unavailable: List[Dict[str, str]] = []
    cmdline = _merge(read_cmdline(root), unavailable)
    port_pm = cmdline["params"]["pcie_port_pm"]
    host: Dict[str, Any] = {
        "cmdline": cmdline,
        "iommu": _merge(read_iommu(root), unavailable),
        "uvm": _merge(read_uvm(root), unavailable),
        "aspm": _merge(read_aspm(root), unavailable),
        "pcie_port_pm": {"value": port_pm, "off": None if cmdline["raw"] is None else port_pm == "off"},
        "gpus": [_merge(read_gpu(root, gpu, i, backend), unavailable) for i, gpu in enumerate(gpus)],
    }
    host["unavailable"] = unavailable
    return host
