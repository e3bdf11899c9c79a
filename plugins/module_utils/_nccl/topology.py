# -*- coding: utf-8 -*-
# Copyright: (c) 2026, moeops.inference contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""An NCCL topology file (the XML that NCCL_TOPO_FILE names) written from the GPU facts. Private to the collection.

What NCCL reads, from NVIDIA/nccl v2.30.7 (src/graph/xml.cc, src/graph/topo.cc, src/graph/topo.h; v2.28.9, which
PyTorch 2.11 ships, reads the same elements and attributes):
  <system version="1">                       version must be NCCL_TOPO_XML_VERSION (1); name is only logged
    <cpu numaid= affinity= arch= vendor= familyid= modelid=>   one "CPU" node per NUMA node; host_hash is
                                             always replaced at load
      <pci busid= class= vendor= device= subsystem_vendor= subsystem_device= link_speed= link_width=>
        <gpu dev= sm= rank= gdr=/>           nvlink/c2c children; nic/net under a NIC's pci
A GPU without a rank is skipped (ncclTopoAddPci). NCCL loads the file, then fills every attribute the file leaves
out from the live host for each process's own GPU and everything above it (ncclTopoGetXmlFromSys, ...FromCpu,
...FromGpu: sysfs, NVML, cpuid), sets that GPU's rank, and trims branches no process uses (ncclTopoTrimXml). So
this module writes what the facts hold and leaves the rest to NCCL; nothing here is invented. Where a file gives a
parent, NCCL does not walk sysfs above that node: the file's tree wins.

The tree mirrors NCCL's own sysfs walk (xml.cc ncclTopoGetXmlFromSys): from a device it goes up two PCI levels at a
time, so a GPU on a root port hangs off the CPU directly and a GPU behind a switch hangs off the switch's upstream
port (the downstream port is skipped) - nccl_parents().

NCCL's parser is hand-written (xml.cc xmlGetNode): no <?xml?> declaration, attributes on one line separated by
single spaces, "/>" with no space before it, spaces and newlines only (no tabs), values never entity-decoded.
render() writes exactly that, as ncclTopoDumpXmlRec does; values are escaped all the same, and a note says so
should escaping ever change one.

What the file cannot do: the bandwidth between two CPU nodes has no attribute. NCCL computes it from the cpu
element's arch/vendor/familyid/modelid (topo.cc ncclTopoGetInterCpuBw): every AMD CPU gets AMD_BW = 16.0 GB/s in
v2.30.7 (topo.h). The facts hold no CPU vendor or model, so those attributes are left for NCCL to read by cpuid;
declaring another vendor to raise the figure would also switch NCCL's other vendor rules (paths.cc P2P level,
search.cc, tuning.cc), so it is not done. Pure: no I/O; facts in, text out.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from typing import Any, Dict, List, Mapping, Optional, Sequence, Set, Tuple
from xml.sax.saxutils import escape

from ansible_collections.moeops.inference.plugins.module_utils._facts import pcie_host

NCCL_TOPO_XML_VERSION = "1"  # xml.h NCCL_TOPO_XML_VERSION: the loader refuses any other
NCCL_MAX_STR_LEN = 255  # xml.h MAX_STR_LEN: a longer value is an error at load
SYSTEM_NAME = "moeops.inference"  # logged by NCCL as "Loading topology moeops.inference"
HEADER = ("<!-- moeops.inference: NCCL topology written from the gpu_facts facts (docs/nccl-tuning.md); "
          "NCCL reads it only where NCCL_TOPO_FILE names it -->")
# What ncclTopoFillGpu sets on a GPU's pci node before reading sysfs (xml.cc); sysfs replaces it at load.
GPU_CLASS = "0x03"
# NVML link generation -> the link_speed text NCCL writes (xml.cc speeds[]) and looks up (topo.cc kvDictPciGen).
PCIE_GEN_SPEED = {1: "2.5 GT/s PCIe", 2: "5.0 GT/s PCIe", 3: "8.0 GT/s PCIe", 4: "16.0 GT/s PCIe",
                  5: "32.0 GT/s PCIe", 6: "64.0 GT/s PCIe"}
# kvDictPciGen: per-lane rate in units of 100 Mb/s; ncclTopoAddPci: bw (GB/s) = width * rate / 80.
NCCL_LANE_RATE = {"2.5 GT/s PCIe": 15, "5.0 GT/s PCIe": 30, "8.0 GT/s PCIe": 60, "16.0 GT/s PCIe": 120,
                  "32.0 GT/s PCIe": 240, "64.0 GT/s PCIe": 480}
# A root port's PCI vendor names the CPU's maker: on these CPUs the root complex is on the CPU die.
ROOT_PORT_VENDORS = {"0x1022": "AMD", "0x8086": "Intel"}
NCCL_AMD_BW = 16.0  # topo.h AMD_BW, v2.30.7
NCCL_SOURCE = "NVIDIA/nccl v2.30.7"

Choice = Dict[str, Any]
_CPU_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")

# The reason of each kind of value, said once.
WHY = {
    "numaid": "the GPU's CPU-side NUMA node; NCCL makes one CPU node per NUMA node, as it does from sysfs numa_node",
    "affinity": "the CPUs near the GPUs of this NUMA node, in the sysfs cpumap form NCCL parses "
                "(cpuset.h ncclStrToCpuset: 32-bit hex words, highest first)",
    "busid": "the PCI address in the lower-case form NCCL looks GPUs up by (utils.cc int64ToBusId)",
    "bridge": "a PCIe switch port NCCL keeps on its own sysfs walk (two levels at a time: the root port and each "
              "switch's downstream port are skipped)",
    "class": "the bridge's PCI class from sysfs",
    "gpu_class": "NCCL's own value for a GPU before it reads sysfs (ncclTopoFillGpu); sysfs replaces it at load",
    "vendor_device": "the bridge's PCI vendor and device ids from sysfs",
    "link_width": "lanes the link trained to (current width, sysfs current_link_width, else NVML): a narrower "
                  "link than the slot is real, not power saving",
    "link_speed": "the highest generation the GPU and its slot allow (NVML max generation), not the current one: "
                  "GPUs drop the link generation at idle, and a file written then would keep the idle speed",
    "dev": "the NVML index NCCL itself records (ncclNvmlDeviceGetIndex)",
    "sm": "compute capability as NCCL writes it (major x 10 + minor)",
}


# ------------------------------------------------------------------ small conversions

def nccl_bus_id(bus_id: Any) -> Optional[str]:
    """NVML's "00000000:01:00.0" -> "0000:01:00.0", as NCCL and sysfs name it; None if it is no PCI address."""
    return pcie_host.sysfs_bus_id(str(bus_id or ""))


def cpu_ids(cpu_list: Any) -> Optional[Set[int]]:
    """ "0-31,64-95" -> the CPU ids; None when the text is not such a list."""
    cpus: Set[int] = set()
    for part in str(cpu_list or "").split(","):
        match = _CPU_RANGE.match(part.strip())
        if not match:
            return None
        first = int(match.group(1))
        last = int(match.group(2)) if match.group(2) is not None else first
        if last < first:
            return None
        cpus.update(range(first, last + 1))
    return cpus or None


def cpumap(cpus: Set[int], highest: int = 0) -> str:
    """CPU ids -> the sysfs cpumap form: 32-bit hex words, highest first, comma-separated ("ffffffff,0000ffff").

    Wide enough for CPU ``highest`` too, so that every NUMA node's map has as many words, as sysfs writes them.
    """
    words = max([*cpus, highest]) // 32 + 1
    mask = sum(1 << cpu for cpu in cpus)
    return ",".join("%08x" % (mask >> (32 * w) & 0xFFFFFFFF) for w in reversed(range(words)))


def cpumap_cpus(text: str) -> Optional[Set[int]]:
    """The CPU ids of a cpumap as NCCL parses it (sysfs writes "ffff" on a 16-CPU host, this module "0000ffff")."""
    cpus: Set[int] = set()
    try:
        words = [int(w, 16) for w in text.split(",")]
    except ValueError:
        return None
    for position, word in enumerate(reversed(words)):
        cpus.update(position * 32 + bit for bit in range(32) if word >> bit & 1)
    return cpus


def pcie_speed(gen: Any) -> Optional[str]:
    """NVML's link generation -> NCCL's link_speed text ("32.0 GT/s PCIe"); None when unknown."""
    try:
        return PCIE_GEN_SPEED.get(int(gen))
    except (TypeError, ValueError):
        return None


def nccl_link_bw(width: Any, speed: Optional[str]) -> Optional[float]:
    """The bandwidth NCCL gives a PCI link, GB/s: width x per-lane rate / 80 (topo.cc ncclTopoAddPci)."""
    try:
        lanes = int(width)
    except (TypeError, ValueError):
        return None
    rate = NCCL_LANE_RATE.get(speed or "")
    if rate is None:
        return None
    return (lanes or 16) * rate / 80.0  # NCCL counts a width of 0 (sysfs did not say) as 16


def sm_value(compute_capability: Any) -> Optional[str]:
    """ "12.0" -> "120", as NCCL writes cudaMajor * 10 + cudaMinor."""
    major, _sep, minor = str(compute_capability or "").partition(".")
    if not major.isdigit() or not (minor or "0").isdigit():
        return None
    return str(int(major) * 10 + int(minor or 0))


def nccl_parents(bridges: Sequence[Mapping[str, Any]]) -> List[Mapping[str, Any]]:
    """The bridges NCCL keeps above a device, top first (xml.cc ncclTopoGetXmlFromSys).

    ``bridges`` is the chain pcie_host.read_pci_path gives, root port first. NCCL looks two levels up at a time:
    when either level is the root bus (not a PCI address) the parent is the CPU, else it is the device two levels
    up. So [root port] -> none, [root port, switch up, switch down] -> [switch up], and so on.
    """
    kept: List[Mapping[str, Any]] = []
    n = len(bridges)
    while n >= 2:
        kept.insert(0, bridges[n - 2])
        n -= 2
    return kept


# ------------------------------------------------------------------ the file

def _choice(element: str, attribute: str, value: Any, source: str, reason: str) -> Choice:
    return {"element": element, "attribute": attribute, "value": value, "source": source, "reason": reason}


def _set(node: ET.Element, attribute: str, value: str, notes: List[str], where: str) -> bool:
    """Set an attribute NCCL can read back as written; refuse one longer than NCCL's MAX_STR_LEN."""
    if len(value) > NCCL_MAX_STR_LEN:
        notes.append("%s: %s left out: %d characters, NCCL takes at most %d (xml.h MAX_STR_LEN); NCCL reads it "
                     "from the host" % (where, attribute, len(value), NCCL_MAX_STR_LEN))
        return False
    if _quote(value) != value:
        notes.append("%s: %s %r holds characters XML escapes; NCCL's parser does not decode them"
                     % (where, attribute, value))
    node.set(attribute, value)
    return True


def _cpu_affinity(numa: int, members: Sequence[Mapping[str, Any]], highest: int, node: ET.Element,
                  choices: List[Choice], notes: List[str]) -> None:
    where = "cpu numaid=%d" % numa
    lists = sorted({str(g.get("cpu_affinity")) for g in members if g.get("cpu_affinity") is not None})
    unread = [g.get("index") for g in members if g.get("cpu_affinity") is None]
    if len(lists) != 1 or unread:
        why = ("GPUs %s give no cpu_affinity" % unread) if unread else ("its GPUs disagree: %s" % "; ".join(lists))
        notes.append("%s: affinity left out (%s); NCCL reads /sys/devices/system/node/node%d/cpumap"
                     % (where, why, numa))
        return
    cpus = cpu_ids(lists[0])
    if cpus is None:
        notes.append("%s: affinity left out: cpu_affinity %r is not a CPU list" % (where, lists[0]))
        return
    value = cpumap(cpus, highest)
    if _set(node, "affinity", value, notes, where):
        choices.append(_choice(where, "affinity", value, "gpus[%s].cpu_affinity %r (NVML CPU affinity)"
                               % (",".join(str(g.get("index")) for g in members), lists[0]), WHY["affinity"]))


def _gpu_link(gpu: Mapping[str, Any], host_gpu: Mapping[str, Any], where: str, node: ET.Element,
              choices: List[Choice], notes: List[str]) -> None:
    index = gpu.get("index")
    pcie = gpu.get("pcie") or {}
    link = host_gpu.get("link") or {}
    speed = pcie_speed(pcie.get("max_gen"))
    speed_source = "gpus[%s].pcie.max_gen %s (NVML)" % (index, pcie.get("max_gen"))
    if speed is None and (link.get("max_speed") or "") in NCCL_LANE_RATE:
        speed, speed_source = link["max_speed"], "host.gpus[%s].link.max_speed (sysfs max_link_speed)" % index
    if speed is None:
        notes.append("%s: link_speed left out (no link generation in the facts); NCCL reads it at load" % where)
    else:
        _set(node, "link_speed", speed, notes, where)
    width, width_source = link.get("current_width"), "host.gpus[%s].link.current_width (sysfs)" % index
    if width is None:
        width, width_source = pcie.get("current_width"), "gpus[%s].pcie.current_width (NVML)" % index
    if width is None:
        notes.append("%s: link_width left out (no link width in the facts); NCCL reads it at load" % where)
    else:
        _set(node, "link_width", str(int(width)), notes, where)
    bw = nccl_link_bw(width, speed)
    if speed is not None:
        choices.append(_choice(where, "link_speed", speed, speed_source, WHY["link_speed"]))
    if width is not None:
        reason = WHY["link_width"]
        if bw is not None:
            reason += "; NCCL counts this link as %.1f GB/s (width x %s per lane / 80, topo.cc ncclTopoAddPci)" % (
                bw, speed)
        choices.append(_choice(where, "link_width", str(int(width)), width_source, reason))


def _bridge(parent: ET.Element, bridge: Mapping[str, Any], bus: str, choices: List[Choice],
            notes: List[str]) -> ET.Element:
    where = "pci busid=%s" % bus
    node = ET.SubElement(parent, "pci", {"busid": bus})
    choices.append(_choice(where, "busid", bus, "host.gpus[].bridges (sysfs PCI path)", WHY["bridge"]))
    for attribute in ("class", "vendor", "device"):
        value = bridge.get(attribute)
        if value is None:
            notes.append("%s: %s left out (unread in the host facts); NCCL reads it from sysfs" % (where, attribute))
            continue
        if _set(node, attribute, str(value), notes, where):
            choices.append(_choice(where, attribute, str(value), "host.gpus[].bridges[].%s (sysfs)" % attribute,
                                   WHY["class" if attribute == "class" else "vendor_device"]))
    notes.append("%s: link_speed, link_width and subsystem ids left out (the host facts hold no bridge link); "
                 "NCCL reads them from sysfs at load" % where)
    return node


def _root_vendor(host_gpus: Sequence[Mapping[str, Any]]) -> Tuple[Optional[str], List[str]]:
    """The CPU maker the GPUs' root ports name (AMD 0x1022, Intel 0x8086), and the root ports read."""
    vendors = set()
    ports = []
    for entry in host_gpus:
        bridges = entry.get("bridges") or []
        if bridges:
            vendors.add(ROOT_PORT_VENDORS.get(str(bridges[0].get("vendor") or "").lower()))
            ports.append("%s (%s)" % (bridges[0].get("bus_id"), bridges[0].get("vendor")))
    if len(vendors) == 1 and None not in vendors:
        return vendors.pop(), sorted(set(ports))
    return None, sorted(set(ports))


def _inter_cpu(cpus: Sequence[int], maker: Optional[str], ports: Sequence[str], choices: List[Choice],
               notes: List[str]) -> None:
    """What NCCL will count between CPU nodes: not an attribute, so said as a choice NCCL makes, with its source."""
    if len(cpus) < 2:
        return
    element = "SYS link between CPU nodes %s" % ", ".join(str(c) for c in cpus)
    if maker == "AMD":
        choices.append(_choice(
            element, "bw (no attribute: NCCL computes it)", "%.1f GB/s" % NCCL_AMD_BW,
            "%s src/graph/topo.h AMD_BW, topo.cc ncclTopoGetInterCpuBw; AMD root ports %s"
            % (NCCL_SOURCE, ", ".join(ports)),
            "NCCL gives every AMD CPU this figure whatever its generation, and a topology file cannot change it: "
            "only the cpu element's arch/vendor/familyid/modelid choose it, the facts hold none of them, and "
            "declaring another vendor would also switch NCCL's other vendor rules. NCCL's dev branch (commit "
            "2f1c174c, not in v2.30.7) derives it from familyid: 16, 24 or 32 GB/s for Zen 1/2, 3/4, 5"))
    elif maker == "Intel":
        choices.append(_choice(
            element, "bw (no attribute: NCCL computes it)", "6.0 to 40.0 GB/s by CPU model",
            "%s src/graph/topo.h *_QPI_BW, topo.cc ncclTopoAddCpu (familyid/modelid); Intel root ports %s"
            % (NCCL_SOURCE, ", ".join(ports)),
            "NCCL picks the figure from the CPU model it reads by cpuid; the facts hold no model"))
    else:
        notes.append("the bandwidth between the CPU nodes is NCCL's, from the CPU vendor and model it reads by "
                     "cpuid; the facts do not say who made the CPUs (no root port above the GPUs)")


def nccl_topology(facts: Mapping[str, Any]) -> Dict[str, Any]:
    """The NCCL topology file for ``facts`` (ansible_facts.nvidia_gpu from moeops.inference.gpu_facts).

    Returns {"xml": the file's text, "choices": [{"element", "attribute", "value", "source", "reason"}],
    "notes": [what is not in the file and why], "gpus_written": [bus ids], "gpus_left_out": [bus ids]}.
    A GPU is written only where the facts place it: its NUMA node and its PCIe path (the ``host`` section,
    gpu_facts' ``host`` option). Placing one without its path would hide a PCIe switch from NCCL (the file's
    tree wins over sysfs), so such a GPU is left out and NCCL detects it itself.
    """
    choices: List[Choice] = []
    notes: List[str] = []
    gpus = sorted(facts.get("gpus") or [], key=lambda g: (nccl_bus_id(g.get("pci_bus_id")) or "", g.get("index")))
    host = facts.get("host") if isinstance(facts.get("host"), Mapping) else None
    host_gpus = list((host or {}).get("gpus") or [])
    by_bus = {entry.get("pci_bus_id"): entry for entry in host_gpus}
    system = ET.Element("system", {"version": NCCL_TOPO_XML_VERSION, "name": SYSTEM_NAME})

    by_numa: Dict[int, List[Mapping[str, Any]]] = {}
    for gpu in gpus:
        if gpu.get("numa_node") is not None:
            by_numa.setdefault(int(gpu["numa_node"]), []).append(gpu)
    known = [cpu_ids(g.get("cpu_affinity")) for g in gpus]
    highest = max((max(c) for c in known if c), default=0)
    cpus: Dict[int, ET.Element] = {}
    for numa in sorted(by_numa):
        where = "cpu numaid=%d" % numa
        cpus[numa] = ET.SubElement(system, "cpu", {"numaid": str(numa)})
        choices.append(_choice(where, "numaid", str(numa), "gpus[%s].numa_node" % ",".join(
            str(g.get("index")) for g in by_numa[numa]), WHY["numaid"]))
        _cpu_affinity(numa, by_numa[numa], highest, cpus[numa], choices, notes)
    if cpus:
        notes.append("cpu arch, vendor, familyid and modelid left out: the facts hold no CPU vendor or model; NCCL "
                     "reads them by cpuid at load (xml.cc ncclTopoGetXmlFromCpu), and they decide the bandwidth it "
                     "gives the link between CPU nodes")

    written: List[str] = []
    left_out: List[str] = []
    placed: Dict[str, Tuple[ET.Element, Tuple[Any, ...]]] = {}  # busid -> (element, its parents' ids)
    for gpu in gpus:
        index, bus = gpu.get("index"), nccl_bus_id(gpu.get("pci_bus_id"))
        name = "GPU %s (%s)" % (index, gpu.get("pci_bus_id"))
        if bus is None:
            notes.append("%s: left out, its PCI bus id is not an address" % name)
            continue
        entry = by_bus.get(bus)
        bridges = entry.get("bridges") if entry else None
        why = None
        if gpu.get("numa_node") is None:
            why = "the facts give no NUMA node for it"
        elif entry is None:
            why = ("the facts hold no PCIe path for it (no host section: gpu_facts host option, or a snapshot "
                   "without one)")
        elif bridges is None:
            why = "its PCIe path could not be read (host.unavailable says why)"
        if why:
            notes.append("%s: left out, %s; NCCL detects it from sysfs, since placing it straight under its CPU "
                         "would hide any PCIe switch above it" % (name, why))
            left_out.append(bus)
            continue
        parent, chain = cpus[int(gpu["numa_node"])], ("cpu", int(gpu["numa_node"]))
        clash = None
        for bridge in nccl_parents(bridges):
            bridge_bus = nccl_bus_id(bridge.get("bus_id"))
            if bridge_bus is None:
                clash = "bridge %r is not a PCI address" % bridge.get("bus_id")
                break
            if bridge_bus in placed and placed[bridge_bus][1] != chain:
                clash = "bridge %s is already written under another parent" % bridge_bus
                break
            if bridge_bus not in placed:
                placed[bridge_bus] = (_bridge(parent, bridge, bridge_bus, choices, notes), chain)
            parent, chain = placed[bridge_bus][0], chain + (bridge_bus,)
        if clash:
            notes.append("%s: left out, the facts contradict themselves: %s" % (name, clash))
            left_out.append(bus)
            continue
        where = "pci busid=%s (GPU %s)" % (bus, index)
        node = ET.SubElement(parent, "pci", {"busid": bus, "class": GPU_CLASS})
        placed[bus] = (node, chain)
        choices.append(_choice(where, "busid", bus, "gpus[%s].pci_bus_id %s" % (index, gpu.get("pci_bus_id")),
                               WHY["busid"]))
        choices.append(_choice(where, "class", GPU_CLASS, "%s src/graph/xml.cc ncclTopoFillGpu" % NCCL_SOURCE,
                               WHY["gpu_class"]))
        _gpu_link(gpu, entry or {}, where, node, choices, notes)
        gpu_node = ET.SubElement(node, "gpu", {"dev": str(int(index))})
        choices.append(_choice(where, "gpu dev", str(int(index)), "gpus[%s].index" % index, WHY["dev"]))
        sm = sm_value(gpu.get("compute_capability"))
        if sm is None:
            notes.append("%s: gpu sm left out (no compute capability in the facts); NCCL reads it from NVML" % where)
        else:
            gpu_node.set("sm", sm)
            choices.append(_choice(where, "gpu sm", sm, "gpus[%s].compute_capability %s"
                                   % (index, gpu.get("compute_capability")), WHY["sm"]))
        if (gpu.get("nvlink") or {}).get("active_links"):
            notes.append("%s: NVLinks not written: the facts hold no NVSwitch addresses; NCCL reads the links "
                         "from NVML when a gpu has no nvlink element (xml.cc ncclTopoGetXmlFromGpu)" % where)
        written.append(bus)
    if written:
        notes.append("GPU vendor, device and subsystem ids, rank and gdr left out: NCCL reads the ids from NVML, "
                     "sets each process's own rank and sets gdr where the file has none (topo.cc "
                     "ncclTopoGetSystem)")

    maker, ports = _root_vendor([by_bus[b] for b in written if b in by_bus])
    _inter_cpu(sorted(cpus), maker, ports, choices, notes)
    network = facts.get("network") if isinstance(facts.get("network"), Mapping) else {}
    nics = ["%s (%s)" % (d.get("name"), d.get("pci_bus_id")) for d in network.get("rdma_devices") or []]
    nics += ["%s (%s)" % (i.get("name"), i.get("pci_bus_id")) for i in network.get("interfaces") or []
             if not i.get("virtual") and i.get("pci_bus_id")]
    if nics:
        notes.append("NICs not written (%s): the facts hold no NUMA node or PCIe path for them; NCCL adds the "
                     "NICs its network plugin reports (topo.cc ncclTopoProcessNet)" % ", ".join(sorted(nics)))
    if not gpus:
        notes.append("no GPU in the facts: the file holds no CPU and no GPU")
    return {"xml": render(system), "choices": choices, "notes": notes, "gpus_written": written,
            "gpus_left_out": left_out}


# ------------------------------------------------------------------ writing

def _quote(value: str) -> str:
    return escape(value, {'"': "&quot;"})


def _order(node: ET.Element) -> Tuple[Any, ...]:
    # NCCL keeps a parent's PCI devices in bus id order (xml.cc, NCCL issue #820); CPUs by NUMA node.
    numa = node.get("numaid")
    return (node.tag, int(numa) if numa is not None and numa.lstrip("-").isdigit() else 0, node.get("busid") or "")


def _lines(node: ET.Element, indent: int) -> List[str]:
    attributes = "".join(' %s="%s"' % (key, _quote(value)) for key, value in node.attrib.items())
    children = sorted(node, key=_order)
    pad = " " * indent
    if not children:
        return ["%s<%s%s/>" % (pad, node.tag, attributes)]
    lines = ["%s<%s%s>" % (pad, node.tag, attributes)]
    for child in children:
        lines.extend(_lines(child, indent + 2))
    lines.append("%s</%s>" % (pad, node.tag))
    return lines


def render(system: ET.Element) -> str:
    """The file's text in the layout NCCL's own dump uses (xml.cc ncclTopoDumpXmlRec), after one comment line."""
    return "\n".join([HEADER] + _lines(system, 0)) + "\n"


# ------------------------------------------------------------------ reading back: the file against NCCL's dump

def _index(text: str) -> Dict[str, Any]:
    root = ET.fromstring(text)
    cpus: Dict[str, Dict[str, str]] = {}
    pcis: Dict[str, Dict[str, Any]] = {}

    def walk(node: ET.Element, cpu: Optional[str], parents: Tuple[str, ...]) -> None:
        for child in node:
            if child.tag == "cpu":
                numa = child.get("numaid", "")
                cpus[numa] = dict(child.attrib)
                walk(child, numa, ())
            elif child.tag == "pci":
                bus = child.get("busid", "")
                gpu = child.find("gpu")
                pcis[bus] = {"attrs": dict(child.attrib), "cpu": cpu, "parents": parents,
                             "gpu": dict(gpu.attrib) if gpu is not None else None,
                             "nics": [n.get("name") for n in child.iter("net")]}
                walk(child, cpu, parents + (bus,))
    walk(root, None, ())
    return {"cpus": cpus, "pci": pcis}


def compare(generated: str, dumped: str) -> Dict[str, Any]:
    """The generated file against a topology NCCL dumped (NCCL_TOPO_DUMP_FILE): CPUs, their affinity, every GPU's
    place (CPU and PCI parents), link width and speed, dev and sm; and what only the dump has.

    Returns {"matched": [text], "differed": [{"what", "generated", "dumped"}], "only_in_dump": [text],
    "added_by_nccl": {element: {attribute: value}}} (attributes the file leaves out and the dump has).
    """
    mine, theirs = _index(generated), _index(dumped)
    matched: List[str] = []
    differed: List[Dict[str, Any]] = []
    added: Dict[str, Dict[str, str]] = {}

    def check(what: str, a: Any, b: Any) -> None:
        if a == b:
            matched.append("%s: %s" % (what, a))
        else:
            differed.append({"what": what, "generated": a, "dumped": b})

    for numa, attrs in sorted(mine["cpus"].items()):
        other = theirs["cpus"].get(numa)
        if other is None:
            differed.append({"what": "cpu numaid=%s" % numa, "generated": "present", "dumped": "absent"})
            continue
        matched.append("cpu numaid=%s: present" % numa)
        if "affinity" in attrs:
            a, b = cpumap_cpus(attrs["affinity"]), cpumap_cpus(other.get("affinity", ""))
            what = "cpu numaid=%s affinity (as CPU sets)" % numa
            if a == b:
                same_text = attrs["affinity"] == other.get("affinity")
                matched.append("%s: %d CPUs%s" % (what, len(a or ()), "" if same_text else ", text %r vs %r" % (
                    attrs["affinity"], other.get("affinity"))))
            else:
                differed.append({"what": what, "generated": attrs["affinity"], "dumped": other.get("affinity")})
        extra = {k: v for k, v in other.items() if k not in attrs}
        if extra:
            added["cpu numaid=%s" % numa] = extra
    for bus, node in sorted(mine["pci"].items()):
        other = theirs["pci"].get(bus)
        label = "gpu %s" % bus if node["gpu"] is not None else "pci %s" % bus
        if other is None:
            differed.append({"what": label, "generated": "present", "dumped": "absent"})
            continue
        check("%s cpu numaid" % label, node["cpu"], other["cpu"])
        check("%s pci parents" % label, list(node["parents"]), list(other["parents"]))
        for attribute in ("link_width", "link_speed", "class", "vendor", "device"):
            if attribute in node["attrs"]:
                check("%s %s" % (label, attribute), node["attrs"][attribute], other["attrs"].get(attribute))
        extra = {k: v for k, v in other["attrs"].items() if k not in node["attrs"]}
        if node["gpu"] is not None:
            for attribute in ("dev", "sm"):
                if attribute in node["gpu"]:
                    check("%s %s" % (label, attribute), node["gpu"][attribute], (other["gpu"] or {}).get(attribute))
            extra.update({"gpu " + k: v for k, v in (other["gpu"] or {}).items() if k not in node["gpu"]})
        if extra:
            added[label] = extra
    only = ["cpu numaid=%s" % n for n in sorted(set(theirs["cpus"]) - set(mine["cpus"]))]
    for bus in sorted(set(theirs["pci"]) - set(mine["pci"])):
        node = theirs["pci"][bus]
        kind = "gpu" if node["gpu"] is not None else ("nic %s" % ",".join(n for n in node["nics"] if n)
                                                      if node["nics"] else "pci")
        only.append("%s %s (cpu %s, class %s)" % (kind, bus, node["cpu"], node["attrs"].get("class")))
    return {"matched": matched, "differed": differed, "only_in_dump": only, "added_by_nccl": added}
