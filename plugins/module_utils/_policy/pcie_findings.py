# -*- coding: utf-8 -*-
# Copyright: (c) 2026, moeops.inference contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rules over the PCIe host's readings (_facts/pcie_host.py's ``read_host``): what may make NCCL hang or slow down
on a PCIe-only box, with its source and remedy. Pure; private to the collection. The reference is
docs/pcie-host-facts.md.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.moeops.inference.plugins.module_utils._facts.pcie_host import (
    ACS_REDIRECT_BITS, IOMMU_PASSTHROUGH_TYPES, IOMMU_TRANSLATED_TYPES, parse_kernel_bool)

# # host_findings(host, gpu_count, architecture) -> [{"check", "result", "reason", "remedy"}]
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
# What a person reads (preflight, the pcie_host role, the settings report, the P2P gate) is grouped():
# one finding per kind that names every place, not eight near-identical ACS warnings on eight bridges.

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
        "remedy": "disable ACS in the BIOS, or clear it at boot: setpci -s <bridge> ECAP_ACS+6.w=0000 (the "
                  "moeops.inference.pcie_host role does that at every boot with pcie_host_clear_acs: true)",
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


def acs_redirect_effect(iommu_mode: Any) -> str:
    """What an ACS redirect does to peer traffic, by the host's IOMMU mode (read_iommu): through the IOMMU only where
    there is one that may translate."""
    if iommu_mode == "off":
        return ("peer traffic is redirected up to the root complex instead of going GPU to GPU (the IOMMU is off here, "
                "so it is not translated, but every transfer takes the long way, and peer-to-peer between root ports "
                "depends on the root complex forwarding it)")
    if iommu_mode == "passthrough":
        return ("peer traffic is redirected up to the root complex instead of going GPU to GPU (the IOMMU is in "
                "passthrough here, so it is not translated, but every transfer takes the long way)")
    return ("peer traffic is redirected up to the root complex and through the IOMMU instead of going GPU to GPU, and "
            "NCCL can hang at the first all-reduce")


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
    redirect = acs_redirect_effect((host.get("iommu") or {}).get("mode"))
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
                      "pairs %s: %s"
                      % (bus_id, bridge.get("vendor"), bridge.get("device"), ", ".join(_gpu_name(g) for g in below),
                         " ".join(bits), acs["control_raw"], acs["control_text"], names, redirect))
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
    setting = [o for o in uvm.get("modprobe_options") or [] if "uvm_disable_hmm" in o["params"]]
    # The last one wins (modprobe reads /etc/modprobe.d in name order): True, False (=0 turns HMM back on), None (unset).
    configured = uvm.get("configured_hmm_disabled")
    where = "%s sets uvm_disable_hmm=%s" % (setting[-1]["file"], setting[-1]["params"]["uvm_disable_hmm"]) if setting else ""
    if uvm.get("hmm_disabled") is True:
        if configured is False:
            return [_warn("hmm", "nvidia_uvm runs with uvm_disable_hmm=%s now, but %s: HMM comes back on when nvidia_uvm "
                          "is next loaded (a reboot)" % (uvm.get("uvm_disable_hmm"), where))]
        note = "" if configured else " (not set in /etc/modprobe.d: set elsewhere, or lost when nvidia_uvm is next loaded)"
        return [_ok("hmm", "nvidia_uvm runs with uvm_disable_hmm=%s%s" % (uvm.get("uvm_disable_hmm"), note))]
    if uvm.get("hmm_disabled") is False:
        note = {True: "; %s, not yet in effect" % where, False: "; %s, which keeps it on" % where}.get(configured, "")
        return [_warn("hmm", "nvidia_uvm runs with HMM on (uvm_disable_hmm=%s) on a multi-GPU Blackwell box%s"
                      % (uvm.get("uvm_disable_hmm"), note))]
    if configured is True:
        return [_ok("hmm", "nvidia_uvm is not loaded; %s for its next load" % where)]
    if configured is False:
        return [_warn("hmm", "nvidia_uvm is not loaded, and %s: HMM will be on when it loads, on a multi-GPU Blackwell box"
                      % where)]
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


def _place(reason: str) -> str:
    """Where a finding is (bridge 0000:20:01.1, GPU 3 (0000:41:00.0)): the head of its reason."""
    m = re.match(r"(bridge \S+|GPU \S+ \(\S+\))", reason)
    return m.group(1) if m else reason.split(". Source:")[0]


def grouped(findings: Sequence[Finding]) -> List[Finding]:
    """The findings as a person reads them, in their order: a check's findings that are not "ok" merged into one (the
    first in full, then "The same on N more: <places>.", with the first's remedy; "blocking" if any of them is), a
    check's "ok" finding as it is. Preflight, the pcie_host role, the settings report and the P2P gate show these."""
    by_check: Dict[str, List[Finding]] = {}
    for f in findings:
        by_check.setdefault(f["check"], []).append(f)
    out: List[Finding] = []
    for check, found in by_check.items():
        bad = [f for f in found if f["result"] != "ok"]
        if not bad:
            out.extend(found)
            continue
        more = [_place(f["reason"]) for f in bad[1:]]
        out.append(_finding(check, "blocking" if any(f["result"] == "blocking" for f in bad) else "warning",
                            bad[0]["reason"] + (" The same on %d more: %s." % (len(more), "; ".join(more)) if more else ""),
                            bad[0].get("remedy") or ""))
    return out
