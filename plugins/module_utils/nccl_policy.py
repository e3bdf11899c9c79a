# -*- coding: utf-8 -*-
# Copyright: (c) 2026, moeops.inference contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""NCCL and vLLM policy: the one place that turns `nvidia_gpu` facts into settings.

Pure functions over the facts from gpu_topology.  Every variable comes with the
rule that set it and why, so reports can explain the unit they render.

NCCL semantics this relies on (NCCL environment-variable docs, src/graph/paths.cc):
- NCCL_P2P_LEVEL is the farthest path over which P2P is still used:
  LOC < NVL < PIX < PXB < PHB < SYS.  Without it NCCL's cutoff is PXB, so GPUs
  that meet only at a host bridge or across sockets fall back to copies
  through host memory.  nvidia-smi's NODE (between host bridges of one NUMA
  node) is NCCL's PHB.
- NCCL never uses P2P for a pair whose NVML P2P status is not OK, whatever the
  level says, so setting a level cannot force it.
- NCCL_PROTO and NCCL_ALGO are documented as debug/tuning variables; they are
  set only for the hardware class they were measured on.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional

from ansible_collections.moeops.inference.plugins.module_utils.gpu_topology import path_class, path_rank
from ansible_collections.moeops.inference.plugins.module_utils.nccl_tune import (
    document_problems,
    topology_fingerprint,
    tuning_summary,
)

# NCCL's own P2P cutoff when NCCL_P2P_LEVEL is unset.
NCCL_DEFAULT_P2P_CUTOFF = "PXB"

PCIE_LATENCY_REASON = (
    "PCIe-only with more than 2 GPUs, serving is latency bound: on 8x RTX PRO 6000 "
    "(PCIe, no NVLink) all-reduce was 51.5% of decode time (11.17 ms a step) and the "
    "small-message all-reduce was fastest with NCCL_PROTO=LL and NCCL_ALGO=Ring. NCCL "
    "documents these as tuning/debug variables: override or remove them from inventory "
    "(nccl_env overrides) if a measurement on your box says otherwise."
)


def _setting(value: str, rule: str, reason: str, source: str = "policy") -> Dict[str, str]:
    return {"value": value, "source": source, "rule": rule, "reason": reason}


def _pcie_only(facts: Mapping[str, Any]) -> bool:
    return not any(path_class(p.get("path")) == "NV" for p in facts.get("pairs", []))


def p2p_level(facts: Mapping[str, Any]) -> Dict[str, Any]:
    """The NCCL_P2P_LEVEL decision: {'setting': dict or None, 'warnings': [..]}."""
    warnings: List[str] = []
    ok_far: List[str] = []
    blocked: List[str] = []
    for pair in facts.get("pairs", []):
        p2p = pair.get("p2p") or {}
        rw_ok = p2p.get("read") == "OK" and p2p.get("write") == "OK"
        rank = path_rank(pair.get("path"))
        label = "GPU%d-GPU%d" % tuple(pair["gpus"])
        if not rw_ok:
            blocked.append("%s (%s, read %s, write %s)" % (label, pair.get("path"), p2p.get("read"), p2p.get("write")))
        elif rank is not None and rank > path_rank(NCCL_DEFAULT_P2P_CUTOFF):  # type: ignore[operator]
            ok_far.append(pair["path"])
    if blocked:
        warnings.append(
            "NVML reports P2P read/write not OK for %s; NCCL will not use P2P there and this policy "
            "does not try to force it. Likely causes: ACS enabled on PCIe switches or an IOMMU in "
            "translation mode. Check with `nvidia-smi topo -p2p r` and `lspci -vvv | grep ACSCtl`."
            % ", ".join(blocked)
        )
    if not ok_far:
        return {"setting": None, "warnings": warnings}
    level = "SYS" if "SYS" in ok_far else "PHB"  # NODE is NCCL's PHB
    worst = "SYS" if level == "SYS" else ("NODE" if "NODE" in ok_far else "PHB")
    reason = (
        "%d GPU pair(s) with NVML P2P read+write OK are farther apart than NCCL's default P2P cutoff "
        "(PXB); the farthest is %s, so P2P_LEVEL=%s keeps them on direct P2P instead of copies "
        "through host memory." % (len(ok_far), worst, level)
    )
    return {"setting": _setting(level, "p2p_level", reason), "warnings": warnings}


def apply_tuning(settings: Dict[str, Dict[str, str]], facts: Mapping[str, Any], tuning: Mapping[str, Any],
                 notes: List[str], warnings: List[str]) -> None:
    """Replace the static settings with a stored sweep's best environment (moeops.inference.nccl_tune).

    The best environment is a whole measured environment: a variable the
    policy sets but the winner leaves unset is dropped, because leaving it
    unset is what was measured faster.
    """
    problems = document_problems(tuning)
    if not problems and tuning["fingerprint_components"]["topology"] != topology_fingerprint(facts):
        problems = ["it was measured on another topology (%s, this one %s)"
                    % (tuning["fingerprint_components"]["topology"], topology_fingerprint(facts))]
    if problems:
        warnings.append("NCCL tuning result %s not used, static policy kept: %s"
                        % (tuning.get("fingerprint") if isinstance(tuning, Mapping) else "?", "; ".join(problems)))
        return
    rule = "nccl_tune:%s" % tuning["fingerprint"]
    reason = tuning_summary(tuning)
    best = tuning["best"]["env"]
    for name in sorted(set(settings) - set(best)):
        notes.append("%s removed by NCCL tuning result %s (policy would set %s; the measured best leaves it unset)."
                     % (name, tuning["fingerprint"], settings[name]["value"]))
        del settings[name]
    for name, value in sorted(best.items()):
        settings[name] = _setting(value, rule, reason, source="tuning")


def nccl_policy(facts: Mapping[str, Any], overrides: Optional[Mapping[str, Any]] = None,
                tuning: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
    """Full result: {'env': {VAR: value}, 'settings': {VAR: {value, source, rule, reason}},
    'warnings': [..], 'notes': [..], 'report': [one readable line per setting, note and warning]}.

    Precedence, lowest first: the static rules (source "policy"), a stored
    tuning result (`tuning`, a document from moeops.inference.nccl_tune;
    source "tuning"), inventory `overrides` (source "inventory").

    `overrides` comes from inventory: a string value sets or replaces a
    variable, None removes it.  Values must be strings, so that YAML's
    `1`/`true` never reach a unit file in a shape the user did not write.
    """
    settings: Dict[str, Dict[str, str]] = {}
    warnings: List[str] = []
    notes: List[str] = []
    count = int(facts.get("count") or 0)
    interconnect = facts.get("interconnect") or {}
    if count < 2:
        notes.append("%d GPU(s): no inter-GPU collectives, so no NCCL settings." % count)
    elif interconnect.get("nvlink_all"):
        notes.append("Every GPU pair is on NVLink (%s): NCCL's own choices are right, no overrides." % interconnect.get("class"))
    else:
        level = p2p_level(facts)
        warnings.extend(level["warnings"])
        if level["setting"]:
            settings["NCCL_P2P_LEVEL"] = level["setting"]
        if _pcie_only(facts) and count > 2:
            settings["NCCL_PROTO"] = _setting("LL", "pcie_latency", PCIE_LATENCY_REASON)
            settings["NCCL_ALGO"] = _setting("Ring", "pcie_latency", PCIE_LATENCY_REASON)
        elif _pcie_only(facts):
            notes.append("2 PCIe GPUs: vLLM's custom all-reduce handles decode; NCCL protocol and algorithm left to NCCL.")
        else:
            notes.append("Some pairs on NVLink, some not: NCCL protocol and algorithm left to NCCL.")
    if tuning:
        apply_tuning(settings, facts, tuning, notes, warnings)
    for name, value in (overrides or {}).items():
        if not isinstance(name, str) or not name:
            raise TypeError("nccl_env overrides: variable names must be non-empty strings, got %r" % (name,))
        if value is None:
            if name in settings:
                notes.append("%s removed by inventory override (%s would set %s)."
                             % (name, settings[name]["source"], settings[name]["value"]))
                del settings[name]
            continue
        if not isinstance(value, str):
            raise TypeError(
                "nccl_env overrides: %s must be a string (quote it in YAML), got %s %r"
                % (name, type(value).__name__, value)
            )
        settings[name] = _setting(value, "inventory", "set in inventory", source="inventory")
    return {
        "env": {k: v["value"] for k, v in sorted(settings.items())},
        "settings": dict(sorted(settings.items())),
        "warnings": warnings,
        "notes": notes,
        "report": ["%s=%s [%s: %s] %s" % (k, v["value"], v["source"], v["rule"], v["reason"])
                   for k, v in sorted(settings.items())] + notes + ["WARNING: " + w for w in warnings],
    }


def nccl_env(facts: Mapping[str, Any], overrides: Optional[Mapping[str, Any]] = None,
             tuning: Optional[Mapping[str, Any]] = None) -> Dict[str, str]:
    """Just the environment to put into the unit."""
    return nccl_policy(facts, overrides, tuning)["env"]


# vLLM's custom all-reduce (vllm/distributed/device_communicators/custom_all_reduce.py)
# supports these world sizes, needs P2P, and turns itself off for more than
# 2 GPUs unless they are fully NVLink-connected.
VLLM_CUSTOM_AR_WORLD_SIZES = (2, 4, 6, 8)


def parallel_layout(facts: Mapping[str, Any], gpus: Optional[int] = None) -> Dict[str, Any]:
    """vLLM layout for the GPUs: tensor-parallel size, expert parallel, custom all-reduce."""
    count = int(facts.get("count") or 0) if gpus is None else int(gpus)
    interconnect = facts.get("interconnect") or {}
    nvlink_all = bool(interconnect.get("nvlink_all"))
    p2p_ok = bool(interconnect.get("p2p_all_ok"))
    tp = 1
    while tp * 2 <= count:
        tp *= 2
    reasons = {
        "tensor_parallel_size": "largest power of two not above the %d GPU(s): attention-head counts "
                                "of the supported models divide by it" % count,
    }
    if count < 2:
        ep, ep_reason = False, "one GPU: nothing to spread experts over"
    elif nvlink_all:
        ep, ep_reason = True, "all pairs on NVLink: expert parallel's all-to-all is cheap enough to try"
    else:
        ep, ep_reason = False, "PCIe between some GPUs: expert parallel's all-to-all would cross PCIe; keep tensor parallel"
    if tp < 2:
        car, car_reason = False, "one GPU: no all-reduce"
    elif tp not in VLLM_CUSTOM_AR_WORLD_SIZES:
        car, car_reason = False, "vLLM's custom all-reduce supports world sizes %s only" % (VLLM_CUSTOM_AR_WORLD_SIZES,)
    elif nvlink_all:
        car, car_reason = True, "fully NVLink-connected"
    elif tp == 2 and p2p_ok:
        car, car_reason = True, "2 PCIe GPUs with P2P: vLLM's custom all-reduce works"
    elif tp == 2:
        car, car_reason = False, "2 PCIe GPUs without P2P: vLLM's custom all-reduce needs P2P"
    else:
        car, car_reason = False, ("more than 2 GPUs not fully NVLink-connected: vLLM disables its custom "
                                  "all-reduce, so all-reduce runs on NCCL")
    reasons["expert_parallel"] = ep_reason
    reasons["custom_all_reduce"] = car_reason
    return {
        "tensor_parallel_size": tp,
        "expert_parallel": ep,
        "custom_all_reduce": car,
        "reasons": reasons,
    }
