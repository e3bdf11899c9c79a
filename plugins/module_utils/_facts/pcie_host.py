# -*- coding: utf-8 -*-
# Copyright: (c) 2026, moeops.inference contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The box as it really is: PCIe peer-to-peer readiness, read from the kernel, and the policy over it.

On PCIe-only multi-GPU boxes NCCL can hang at the first all-reduce while NVML reports P2P OK: the
IOMMU translates peer traffic, or ACS redirect bits on the bridges above the GPUs send it up to the
root complex and through the IOMMU (vLLM #33041, NCCL #2079, NCCL #1999).  This file holds both
halves of that topic, so each rule lives in one place:

READERS (section 1) take a ``root`` path ("/" on a host, a constructed or replayed tree in tests)
and read /proc/cmdline, /sys/kernel/iommu_groups, /sys/bus/pci/devices (config space, link, BARs),
/sys/module/{nvidia_uvm,pcie_aspm}/parameters and /etc/modprobe.d/*.conf under it.  They never
raise on a missing or unreadable file: the field is None and the reader's ``unavailable`` list
says which file and why.  Reasons name paths as seen from ``root`` (/sys/...), never the tree's
real location, so a replayed capture gives the same output.

POLICY (section 2), ``host_findings``, is pure: the ``host`` section that ``read_host`` returns,
the GPU count and the architecture family in, a list of findings out.  The reference is
docs/pcie-host-facts.md.

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
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

# ================================================================== 1. READERS

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


def list_pci_devices(root: str = "/") -> List[str]:
    """The bus ids under /sys/bus/pci/devices, sorted ([] when there is no such directory)."""
    try:
        return sorted(n for n in os.listdir(_path(root, "sys", "bus", "pci", "devices")) if _PCI_ADDRESS.match(n))
    except OSError:
        return []


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


def read_gpu(root: str, gpu: Mapping[str, Any], position: int = 0) -> Dict[str, Any]:
    """One GPU's part of the host section: bus id, link, IOMMU group, BAR1 vs framebuffer, bridges."""
    unavailable: List[Dict[str, str]] = []
    given = str(gpu.get("pci_bus_id") or "")
    bus = sysfs_bus_id(given)
    entry: Dict[str, Any] = {"index": gpu.get("index", position), "pci_bus_id": bus,
                             "framebuffer_mib": gpu.get("memory_total_mib")}
    if bus is None:
        unavailable.append({"field": "gpus[%s].pci_bus_id" % entry["index"], "reason": "not a PCI address: %r" % given})
        entry.update({"link": None, "iommu_group": None, "bar1_mib": gpu.get("bar1_total_mib"),
                      "bar1_source": "nvml" if gpu.get("bar1_total_mib") is not None else None,
                      "path": None, "bridges": None, "unavailable": unavailable})
        return entry
    entry["link"] = _merge(read_link(root, bus), unavailable)
    entry["iommu_group"] = _merge(read_iommu_group(root, bus), unavailable)
    if gpu.get("bar1_total_mib") is not None:
        entry["bar1_mib"], entry["bar1_source"] = gpu["bar1_total_mib"], "nvml"
    else:
        bar1 = _merge(read_bar1_mib(root, bus), unavailable)["bar1_mib"]
        entry["bar1_mib"], entry["bar1_source"] = bar1, "sysfs resource" if bar1 is not None else None
    if entry["framebuffer_mib"] is None:
        unavailable.append({"field": "framebuffer_mib (%s)" % bus, "reason": "the GPU facts give no memory_total_mib"})
    path = _merge(read_pci_path(root, bus), unavailable)
    entry["path"], entry["bridges"] = path["path"], path["bridges"]
    entry["unavailable"] = unavailable
    return entry


def read_host(root: str = "/", gpus: Iterable[Mapping[str, Any]] = ()) -> Dict[str, Any]:
    """The whole ``host`` section, JSON-serialisable, for GPU dicts as the GPU facts give them.

    Each GPU needs ``pci_bus_id`` (NVML's "00000000:17:00.0" or sysfs' form); ``bar1_total_mib``
    (NVML) and ``memory_total_mib`` are used when present (BAR1 falls back to sysfs ``resource``).
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
        "gpus": [_merge(read_gpu(root, gpu, i), unavailable) for i, gpu in enumerate(gpus)],
    }
    host["unavailable"] = unavailable
    return host


# ================================================================== 2. POLICY
#
# host_findings(host, gpu_count, architecture) -> [{"check", "result", "reason", "remedy"}]
#
# Results: "ok", "warning", "blocking".  No rule here blocks: each names a known cause of a P2P
# hang or slowdown; whether P2P really works is for a P2P test to say, not for these readings.
#
# Unknowns: a check never says "ok" because its input could not be read.  When the check applies
# (more than one GPU; for HMM also a Blackwell box) and an input it needs is unknown, it is a
# "warning" whose reason starts "could not be read: " and says what and why, with a remedy that
# says how to look by hand.  When the check does not apply (one GPU: no peer-to-peer traffic; HMM
# on another architecture) it is "ok" for that reason, whatever could or could not be read, since
# no reading would change the result.  The link-width check applies to every GPU, whatever the count.
#
# One "ok" finding per check when all is well; otherwise one finding per GPU or bridge at fault,
# plus one "could not be read" finding for everything the check needed and did not get.

CHECKS: Dict[str, Dict[str, str]] = {
    "iommu": {
        "source": "vLLM #33041 (root cause: IOMMU/ACS enabled in BIOS); NCCL #2079; community RTX PRO 6000 guides",
        "remedy": "boot with iommu=pt (AMD: amd_iommu=on iommu=pt; Intel: intel_iommu=on iommu=pt), or turn the IOMMU "
                  "off in the BIOS (not possible above 255 logical CPUs, where x2APIC needs the IOMMU's interrupt "
                  "remapping)",
        "look": "ls /sys/kernel/iommu_groups; cat /sys/kernel/iommu_groups/*/type",
    },
    "acs": {
        "source": "NCCL #2079 (ACSCtl SrcValid+ ReqRedir+ CmpltRedir+ forced P2P traffic through the IOMMU); vLLM #33041",
        "remedy": "disable ACS in the BIOS, or clear it at boot: setpci -s <bridge> ECAP_ACS+6.w=0000 (a planned fix "
                  "role will do that behind an opt-in variable)",
        "look": "sudo lspci -vvv | grep -e '^[0-9a-f]' -e ACSCtl",
    },
    "bar1": {
        "source": "community RTX PRO 6000 guides (BAR1 must cover the VRAM; a 256 MB default cripples P2P)",
        "remedy": "in the BIOS enable Resizable BAR: \"Above 4G decoding\" and \"Re-Size BAR Support\"",
        "look": "nvidia-smi -q -d MEMORY (BAR1 Memory Usage: Total)",
    },
    "hmm": {
        "source": "community RTX PRO 6000 guides (without uvm_disable_hmm=1, NCCL P2P operations lock up); NCCL #1999",
        "remedy": "options nvidia_uvm uvm_disable_hmm=1 in /etc/modprobe.d/, then reload nvidia_uvm (or reboot)",
        "look": "cat /sys/module/nvidia_uvm/parameters/uvm_disable_hmm (after loading nvidia_uvm)",
    },
    "link_width": {
        "source": "PCIe link training: sysfs current_link_width below max_link_width",
        "remedy": "reseat the GPU or move it to a full-width slot; check riser cables and the slot's bifurcation "
                  "setting in the BIOS",
        "look": "nvidia-smi -q -d PCI (Link Width), or sysfs current_link_width/max_link_width",
    },
    "pcie_port_pm": {
        "source": "community RTX PRO 6000 guides (PCIe port power management: surprise link-down lockups)",
        "remedy": "add pcie_port_pm=off to the kernel command line",
        "look": "cat /proc/cmdline",
    },
}
# The checks that only matter between GPUs; link_width applies to a single GPU too.
P2P_CHECKS = ("iommu", "acs", "bar1", "hmm", "pcie_port_pm")
PER_GPU_CHECKS = ("acs", "bar1", "link_width")
UNREAD = "could not be read: "
Finding = Dict[str, str]


def _finding(check: str, result: str, reason: str, remedy: str = "") -> Finding:
    return {"check": check, "result": result, "reason": reason, "remedy": remedy}


def _ok(check: str, reason: str) -> Finding:
    return _finding(check, "ok", reason)


def _warn(check: str, reason: str) -> Finding:
    return _finding(check, "warning", "%s. Source: %s" % (reason, CHECKS[check]["source"]), CHECKS[check]["remedy"])


def _unread(check: str, what: str, remedy: Optional[str] = None) -> Finding:
    return _finding(check, "warning", UNREAD + what, remedy or "read it where it can be read (as root, with the NVIDIA "
                    "driver loaded), or look by hand: " + CHECKS[check]["look"])


def _gpu_name(gpu: Mapping[str, Any]) -> str:
    return "GPU %s (%s)" % (gpu.get("index"), gpu.get("pci_bus_id"))


def _why(host: Mapping[str, Any], topic: Any, bus: Optional[str] = None) -> str:
    """The unavailable reasons of fields starting with ``topic`` (a string or a tuple), about device ``bus`` if given."""
    found = [u["reason"] for u in host.get("unavailable") or []
             if u["field"].startswith(topic) and (bus is None or u["field"].endswith("(%s)" % bus))]
    return "; ".join(found) if found else "no reading"


def _types(counts: Mapping[str, int]) -> str:
    return ", ".join("%d %s" % (n, t) for t, n in sorted(counts.items()))


def check_iommu(host: Mapping[str, Any]) -> List[Finding]:
    """A translated (DMA/DMA-FQ) IOMMU domain on the GPUs' groups, or on the host when those are not known."""
    iommu = host.get("iommu") or {}
    gpus = host.get("gpus") or []
    params = (host.get("cmdline") or {}).get("params") or {}
    pending = ""
    if params.get("iommu") == "pt" or parse_kernel_bool(params.get("iommu.passthrough")):
        pending = "; the kernel command line asks for passthrough, so that has not taken effect (reboot pending?)"
    hang = "peer-to-peer traffic goes through the IOMMU and NCCL can hang at the first all-reduce while NVML still reports P2P OK"
    groups = [(g, (g.get("iommu_group") or {}).get("type")) for g in gpus]
    translated = [(g, t) for g, t in groups if t in IOMMU_TRANSLATED_TYPES]
    if translated:
        return [_warn("iommu", "the IOMMU translates DMA for %s: %s%s"
                      % (", ".join("%s (group type %s)" % (_gpu_name(g), t) for g, t in translated), hang, pending))]
    if groups and all(t in IOMMU_PASSTHROUGH_TYPES for g, t in groups):
        return [_ok("iommu", "the GPUs' IOMMU groups are identity (passthrough)")]
    mode = iommu.get("mode")
    if mode == "off":
        return [_ok("iommu", "no IOMMU groups: the IOMMU is off")]
    if mode == "passthrough":
        return [_ok("iommu", "every IOMMU group is identity (passthrough): %s" % _types(iommu.get("types") or {}))]
    if mode == "translated":
        return [_warn("iommu", "the IOMMU is in translated mode (%s): %s%s" % (_types(iommu.get("types") or {}), hang, pending))]
    if mode == "mixed":
        return [_unread("iommu", "which IOMMU groups the GPUs are in, and the groups are mixed (%s)"
                        % _types(iommu.get("types") or {}))]
    return [_unread("iommu", "the IOMMU mode (%s)" % _why(host, "iommu"))]


def p2p_ports(gpus: Sequence[Mapping[str, Any]]) -> Dict[str, Tuple[Mapping[str, Any], List[Tuple[Any, Any]]]]:
    """For every GPU pair, the bridge on each side just below where the two paths meet: {bus_id: (bridge, pairs)}.

    Where two GPUs share a switch those are the switch's downstream ports; where they meet only in
    the root complex, their root ports.  Those are the ports where ACS P2P Request/Completion
    Redirect acts on the pair's traffic (a port redirects a peer request it receives up to the
    root complex).  GPUs whose path is unknown (bridges None) are left out.
    """
    known = [g for g in gpus if g.get("bridges") is not None]
    ports: Dict[str, Tuple[Mapping[str, Any], List[Tuple[Any, Any]]]] = {}
    for i, a in enumerate(known):
        for b in known[i + 1:]:
            ca, cb = a["bridges"], b["bridges"]
            k = 0
            while k < min(len(ca), len(cb)) and ca[k]["bus_id"] == cb[k]["bus_id"]:
                k += 1
            for chain in (ca, cb):
                if len(chain) > k:
                    pairs = ports.setdefault(chain[k]["bus_id"], (chain[k], []))[1]
                    if (a.get("index"), b.get("index")) not in pairs:
                        pairs.append((a.get("index"), b.get("index")))
    return ports


def check_acs(host: Mapping[str, Any]) -> List[Finding]:
    """ACS ReqRedir/CmpltRedir on a bridge where a GPU pair's peer-to-peer traffic turns (p2p_ports).

    This covers both layouts the sources show: GPUs behind one PCIe switch (its downstream ports)
    and GPUs on separate root ports (NCCL #2079: GPUs 41:00.0 and 61:00.0, each behind an AMD GPP
    root port with ACSCtl 0x001d).  Bridges above the meeting point (a switch's upstream port, the
    root port above a switch) do not see the pair's traffic turn and are not judged; their bits
    are in the facts.
    """
    gpus = host.get("gpus") or []
    findings = []
    unread = ["the PCI path of %s (%s)" % (_gpu_name(g), _why(host, "pci_path", g.get("pci_bus_id")))
              for g in gpus if g.get("bridges") is None]
    ports = p2p_ports(gpus)
    for bus_id in sorted(ports):
        bridge, pairs = ports[bus_id]
        names = ", ".join("%s-%s" % pair for pair in pairs)
        if bridge.get("acs_state") == "unreadable":
            unread.append("ACS of bridge %s on the path of GPU pairs %s (%s)" % (bus_id, names, _why(host, "acs", bus_id)))
            continue
        acs = bridge.get("acs")
        bits = [bit + "+" for bit in ACS_REDIRECT_BITS if acs and acs["control"][bit]]
        if not bits:
            continue
        below = [g for g in gpus if any(b["bus_id"] == bus_id for b in g.get("bridges") or [])]
        found = _warn("acs", "bridge %s (%s:%s) above %s has ACS %s (ACSCtl 0x%04x: %s) on the peer-to-peer path of GPU "
                      "pairs %s: peer traffic is redirected up to the root complex and through the IOMMU instead of "
                      "going GPU to GPU, and NCCL can hang at the first all-reduce"
                      % (bus_id, bridge.get("vendor"), bridge.get("device"), ", ".join(_gpu_name(g) for g in below),
                         " ".join(bits), acs["control_raw"], acs["control_text"], names))
        found["remedy"] = found["remedy"].replace("<bridge>", bus_id)
        findings.append(found)
    if unread:
        findings.append(_unread("acs", "; ".join(unread)))
    if findings:
        return findings
    if not ports:
        return [_ok("acs", "no PCIe bridge on the GPUs' peer-to-peer paths (they sit on a root bus, as in most VMs): "
                    "no ACS redirect to read here")]
    return [_ok("acs", "no ACS P2P redirect on the bridges where the GPUs' paths meet: %s" % ", ".join(sorted(ports)))]


def check_bar1(host: Mapping[str, Any]) -> List[Finding]:
    """BAR1 smaller than the framebuffer: the BIOS left Resizable BAR off."""
    findings = []
    unread = []
    for gpu in host.get("gpus") or []:
        bar1, fb = gpu.get("bar1_mib"), gpu.get("framebuffer_mib")
        if bar1 is None:
            unread.append("BAR1 of %s (%s)" % (_gpu_name(gpu), _why(host, "bar1", gpu.get("pci_bus_id"))))
        if fb is None:
            unread.append("the framebuffer size of %s (no memory_total_mib in the GPU facts)" % _gpu_name(gpu))
        if bar1 is not None and fb is not None and bar1 < fb:
            findings.append(_warn("bar1", "%s has BAR1 %d MiB, smaller than its %d MiB framebuffer: a peer cannot map its "
                                  "memory whole" % (_gpu_name(gpu), bar1, fb)))
    if unread:
        findings.append(_unread("bar1", "; ".join(unread)))
    return findings or [_ok("bar1", "BAR1 covers the framebuffer on every GPU")]


def check_hmm(host: Mapping[str, Any], architecture: Optional[str]) -> List[Finding]:
    """HMM left on (uvm_disable_hmm not Y) on a multi-GPU Blackwell box."""
    if architecture is None:
        return [_unread("hmm", "the GPU architecture (the HMM rule is for Blackwell)",
                        "pass the GPUs' architecture family from the GPU facts (gpu_topology.architecture_family)")]
    if architecture != "blackwell":
        return [_ok("hmm", "%s, not Blackwell: the HMM lock-up is reported on Blackwell" % architecture)]
    uvm = host.get("uvm") or {}
    files = ", ".join(o["file"] for o in uvm.get("modprobe_options") or [] if "uvm_disable_hmm" in o["params"])
    configured = uvm.get("configured_hmm_disabled")
    if uvm.get("hmm_disabled") is True:
        note = "" if configured else " (not set in /etc/modprobe.d: set elsewhere, or lost when nvidia_uvm is next loaded)"
        return [_ok("hmm", "nvidia_uvm runs with uvm_disable_hmm=%s%s" % (uvm.get("uvm_disable_hmm"), note))]
    if uvm.get("hmm_disabled") is False:
        note = "; %s sets it, not yet in effect" % files if configured else ""
        return [_warn("hmm", "nvidia_uvm runs with HMM on (uvm_disable_hmm=%s) on a multi-GPU Blackwell box%s"
                      % (uvm.get("uvm_disable_hmm"), note))]
    if configured:
        return [_ok("hmm", "nvidia_uvm is not loaded; %s sets uvm_disable_hmm=1 for its next load" % files)]
    return [_unread("hmm", "uvm_disable_hmm (%s), and /etc/modprobe.d does not set it" % _why(host, "uvm.uvm_disable_hmm"))]


def check_link_width(host: Mapping[str, Any]) -> List[Finding]:
    """A GPU link narrower than its maximum; a lower speed alone is only noted (idle power saving)."""
    findings = []
    unread = []
    slower = []
    for gpu in host.get("gpus") or []:
        link = gpu.get("link") or {}
        if link.get("degraded") is None:
            unread.append("the link width of %s (%s)" % (
                _gpu_name(gpu), _why(host, ("link.current_link_width", "link.max_link_width"), gpu.get("pci_bus_id"))))
        elif link["degraded"]:
            findings.append(_warn("link_width", "%s in slot %s runs at x%d of x%d" % (
                _gpu_name(gpu), gpu.get("pci_bus_id"), link["current_width"], link["max_width"])))
        if link.get("speed_below_max"):
            slower.append("%s at %s of %s" % (_gpu_name(gpu), link.get("current_speed"), link.get("max_speed")))
    if unread:
        findings.append(_unread("link_width", "; ".join(unread)))
    if findings:
        return findings
    reason = "every GPU link runs at its full width"
    if slower:
        reason += "; informational, a lower link speed (GPUs drop the link generation at idle): " + ", ".join(slower)
    return [_ok("link_width", reason)]


def check_pcie_port_pm(host: Mapping[str, Any]) -> List[Finding]:
    """pcie_port_pm=off on the kernel command line of a multi-GPU box."""
    port_pm = host.get("pcie_port_pm") or {}
    if port_pm.get("off") is None:
        return [_unread("pcie_port_pm", "the kernel command line (%s)" % _why(host, "cmdline"))]
    if port_pm["off"]:
        return [_ok("pcie_port_pm", "pcie_port_pm=off is on the kernel command line")]
    value = port_pm.get("value")
    shown = "pcie_port_pm=%s" % value if value is not None else "no pcie_port_pm (the kernel default: port power management on)"
    return [_warn("pcie_port_pm", "%s on a multi-GPU box: PCIe ports may power down under the GPUs" % shown)]


def host_findings(host: Mapping[str, Any], gpu_count: int, architecture: Optional[str]) -> List[Finding]:
    """Every check over the host section, in CHECKS order: [{"check", "result", "reason", "remedy"}].

    ``gpu_count``: how many GPUs the box has (below two, the P2P checks are "ok": no peer-to-peer
    traffic).  ``architecture``: their family as gpu_topology.architecture_family names it
    ("blackwell", "hopper", ...), None when not known.  When the host section holds fewer GPUs
    than ``gpu_count``, the per-GPU checks cannot be "ok" and say so.
    """
    listed = len(host.get("gpus") or [])
    alone = "one GPU: no peer-to-peer traffic" if gpu_count == 1 else "no GPU: no peer-to-peer traffic"
    run = {
        "iommu": lambda: check_iommu(host),
        "acs": lambda: check_acs(host),
        "bar1": lambda: check_bar1(host),
        "hmm": lambda: check_hmm(host, architecture),
        "link_width": lambda: check_link_width(host),
        "pcie_port_pm": lambda: check_pcie_port_pm(host),
    }
    findings: List[Finding] = []
    for check in CHECKS:
        if gpu_count < 2 and check in P2P_CHECKS:
            findings.append(_ok(check, alone))
            continue
        if check == "link_width" and gpu_count == 0 and not listed:
            findings.append(_ok(check, "no GPU: no link to check"))
            continue
        found = run[check]()
        if check in PER_GPU_CHECKS and listed < gpu_count:
            found = [f for f in found if f["result"] != "ok"]
            found.append(_unread(check, "%d of the %d GPUs are not in the host section" % (gpu_count - listed, gpu_count)))
        findings.extend(found)
    return findings


def facts_findings(facts: Mapping[str, Any]) -> List[Finding]:
    """host_findings over the GPU facts' own ``host`` section (gpu_facts' ``host`` option), with the facts' GPU
    count and architecture family (one family for all the GPUs, else None); [] when the facts have no host
    section. Preflight and the settings report both show these."""
    host = facts.get("host")
    if not isinstance(host, Mapping):
        return []
    families = sorted({str(g.get("architecture") or "") for g in facts.get("gpus") or []})
    family = families[0] if len(families) == 1 and families[0] else None
    return host_findings(host, int(facts.get("count") or 0), family)
