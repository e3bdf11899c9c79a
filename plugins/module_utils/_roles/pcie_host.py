# -*- coding: utf-8 -*-
# Copyright: (c) 2026, moeops.inference contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The pcie_host role's plan: which fixes for PCIe peer-to-peer are on, and which of them wait for a reboot.
Private to the collection: the role_plan action (module_utils/_common/plan.py) runs it on the role's converted values
(`-e pcie_host_iommu_passthrough=false` is false here, never the truthy string).
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional

from ansible_collections.moeops.inference.plugins.module_utils._policy import pcie_findings
from ansible_collections.moeops.inference.plugins.module_utils._policy.nccl_policy import p2p_level

KNOWN_OTHER = ("pcie_host_summary",)


def findings(gpus: Mapping[str, Any]) -> Dict[str, List[str]]:
    """The PCIe host's findings for peer-to-peer (IOMMU, ACS, BAR1, HMM, port power management, links) and NVML's P2P
    status: a warning each kind, a problem for a blocking one, with the reason and the remedy. Several findings of one
    kind (ACS on eight root ports) are one warning that names every place."""
    out: Dict[str, List[str]] = {"problems": [], "warnings": []}
    if int(gpus.get("count") or 0) >= 2:
        out["warnings"] += ["P2P: " + w for w in p2p_level(gpus)["warnings"]]
    for f in pcie_findings.grouped(pcie_findings.facts_findings(gpus)):
        if f["result"] != "ok":
            text = "PCIe host %s: %s%s" % (f["check"], f["reason"], ("; remedy: " + f["remedy"]) if f["remedy"] else "")
            out["problems" if f["result"] == "blocking" else "warnings"].append(text)
    return out


def input_problems(v: Mapping[str, Any]) -> List[str]:
    return []


def kernel_args(v: Mapping[str, Any]) -> List[str]:
    """The kernel arguments the GRUB drop-in carries, in its order."""
    return (["iommu=pt"] if v["pcie_host_iommu_passthrough"] else []) + (
        ["pcie_port_pm=off"] if v["pcie_host_port_pm_off"] else [])


def hmm_disabled_now(raw: Optional[str]) -> Optional[bool]:
    """nvidia_uvm's uvm_disable_hmm while it is loaded (Y/N, 1/0); None when it is not loaded."""
    if raw is None:
        return None
    return raw.strip() in ("Y", "1")


def plan(v: Mapping[str, Any], ctx: Mapping[str, Any]) -> Dict[str, Any]:
    """`ctx`: cmdline (the running kernel's /proc/cmdline) and hmm_now (uvm_disable_hmm's value, absent when nvidia_uvm
    is not loaded). What waits for a reboot: arguments the drop-in carries that the running kernel lacks, and an
    HMM switch the loaded nvidia_uvm does not have (the option applies at its next load)."""
    args = kernel_args(v)
    running = str(ctx.get("cmdline") or "").split()
    missing = [a for a in args if a not in running]  # in the drop-in's order
    hmm_now = hmm_disabled_now(ctx.get("hmm_now"))
    reasons = ["kernel arguments not in effect yet: " + " ".join(missing)] if missing else []
    if hmm_now is not None and hmm_now != bool(v["pcie_host_disable_hmm"]):
        reasons.append("nvidia_uvm is loaded with uvm_disable_hmm=%s: reload it (every GPU process stopped) or reboot"
                       % ("Y" if hmm_now else "N"))
    on = [name for name, key in (("iommu=pt", "pcie_host_iommu_passthrough"), ("pcie_port_pm=off", "pcie_host_port_pm_off"),
                                 ("HMM off", "pcie_host_disable_hmm"), ("ACS cleared at boot", "pcie_host_clear_acs"))
          if v[key]]
    found = findings(ctx.get("gpus") or {})
    return {"plan": {"kernel_args": args, "reboot_reasons": reasons, "clear_acs": bool(v["pcie_host_clear_acs"]),
                     "disable_hmm": bool(v["pcie_host_disable_hmm"]), "reboot": bool(v["pcie_host_reboot"])},
            "problems": found["problems"], "warnings": found["warnings"],
            "outcome": "pcie_host: %s" % (", ".join(on) or "every fix off (nothing changes)")}
