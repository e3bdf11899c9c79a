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

from ansible_collections.moeops.inference.plugins.module_utils._facts.gpu_topology import excluded_ifname, path_class, path_rank
from ansible_collections.moeops.inference.plugins.module_utils._nccl import topology as nccl_topology_file
from ansible_collections.moeops.inference.plugins.module_utils._nccl.tune import (
    LL128_REASON,
    document_problems,
    lists_ll128,
    topology_fingerprint,
    tuning_summary,
)
from ansible_collections.moeops.inference.plugins.module_utils._policy.workload import check as check_workload

# NCCL's own P2P cutoff when NCCL_P2P_LEVEL is unset.
NCCL_DEFAULT_P2P_CUTOFF = "PXB"

PCIE_LATENCY_REASON = (
    "PCIe-only with more than 2 GPUs, serving is latency bound: on 8x RTX PRO 6000 "
    "(PCIe, no NVLink) all-reduce was 51.5% of decode time (11.17 ms a step) and the "
    "small-message all-reduce was fastest with NCCL_PROTO=LL and NCCL_ALGO=Ring. NCCL "
    "documents these as tuning/debug variables: override or remove them from inventory "
    "(nccl_env overrides) if a measurement on your box says otherwise."
)
# The latency workload keeps the same rule, for the same measurement (single-stream decode).
LATENCY_REASON = "workload latency (single-stream decode, what this was measured on): " + PCIE_LATENCY_REASON
# The throughput workload leaves protocol and algorithm to NCCL unless a sweep for it measured otherwise.
THROUGHPUT_REASON = (
    "workload throughput: NCCL_PROTO and NCCL_ALGO left to NCCL, which picks per message size. The LL/Ring rule was "
    "measured on single-stream decode; at 32 concurrent requests (Kimi with MTP, 8x RTX PRO 6000, NCCL with PR #2127) "
    "LL alone gave 998 tok/s, Simple 1,109 and NCCL's own choice 1,003 (local-inference-lab/rtx6kpro "
    "models/glm5.1/vllm-communicators-kimi-glm-2026-05-07.md, \"Kimi C32 MTP communication sweep\"): LL is about "
    "10% slower than Simple there. A sweep for the throughput workload (playbooks/nccl_tune.yml) sets them where it "
    "measures better; nothing sets them unmeasured.")
# Why the topology file written from the facts is shown but not set.
TOPOLOGY_NOT_APPLIED = (
    "not applied: nothing measured it on this box. By NCCL's code it cannot raise the 16 GB/s NCCL gives every AMD "
    "socket link (AMD_BW, src/graph/topo.h, v2.30.7), which the community's graph file and NCCL PR #2127 work around "
    "(docs/nccl-tuning.md); the sweep (playbooks/nccl_tune.yml) measures the box with and without it, and a stored "
    "result that picks it sets NCCL_TOPO_FILE")
# The P2P gate failed and vllm_service_p2p_fallback lets vLLM start anyway: slower, but it serves.
P2P_FALLBACK_REASON = (
    "the P2P gate failed and vllm_service_p2p_fallback is true: NCCL copies between GPUs through host memory "
    "(published: Kimi-K2.5 INT4 on 8x RTX PRO 6000 serves about 44 tok/s without P2P, against 65 with it)")


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
                 notes: List[str], warnings: List[str], workload: Optional[str] = None) -> bool:
    """Replace the static settings with a stored sweep's best environment (moeops.inference.nccl_tune); whether it
    did. A result ranked for another workload than `workload` (when given) is not used.

    The best environment is a whole measured environment: a variable the
    policy sets but the winner leaves unset is dropped, because leaving it
    unset is what was measured faster.
    """
    problems = document_problems(tuning, workload)
    if not problems and tuning["fingerprint_components"]["topology"] != topology_fingerprint(facts):
        problems = ["it was measured on another topology (%s, this one %s)"
                    % (tuning["fingerprint_components"]["topology"], topology_fingerprint(facts))]
    if problems:
        warnings.append("NCCL tuning result %s not used, static policy kept: %s"
                        % (tuning.get("fingerprint") if isinstance(tuning, Mapping) else "?", "; ".join(problems)))
        return False
    rule = "nccl_tune:%s" % tuning["fingerprint"]
    reason = tuning_summary(tuning)
    best = tuning["best"]["env"]
    for name in sorted(set(settings) - set(best)):
        notes.append("%s removed by NCCL tuning result %s (policy would set %s; the measured best leaves it unset)."
                     % (name, tuning["fingerprint"], settings[name]["value"]))
        del settings[name]
    for name, value in sorted(best.items()):
        settings[name] = _setting(value, rule, reason, source="tuning")
    return True


def topology_file(facts: Mapping[str, Any], settings: Mapping[str, Mapping[str, str]]) -> Dict[str, Any]:
    """The NCCL topology file written from the facts (_nccl/topology.py), shown, and whether NCCL_TOPO_FILE is set
    (only by a measurement or the inventory): {generated, applied, why, xml, gpus_written, gpus_left_out, notes}."""
    made = nccl_topology_file.nccl_topology(facts)
    out = {"generated": bool(made["gpus_written"]), "applied": "NCCL_TOPO_FILE" in settings, "xml": made["xml"],
           "gpus_written": len(made["gpus_written"]), "gpus_left_out": len(made["gpus_left_out"]),
           "cpu_nodes": len({g.get("numa_node") for g in facts.get("gpus") or [] if g.get("numa_node") is not None}),
           "notes": list(made["notes"])}
    if out["applied"]:
        s = settings["NCCL_TOPO_FILE"]
        out["why"] = "NCCL_TOPO_FILE=%s set by %s (%s)" % (s["value"], s["source"], s["rule"])
    elif not out["generated"]:
        left = [n for n in made["notes"] if ": left out, " in n]
        out["why"] = "not generated: the facts place no GPU%s" % ((" (%s)" % left[0]) if left else "")
    else:
        out["why"] = TOPOLOGY_NOT_APPLIED
    return out


# On one box every rank is local: torch's gloo groups (vLLM's CPU process groups, on GPUs too) and NCCL's bootstrap need
# no other address. By default gloo listens on the address the host name resolves to and NCCL on the first interface
# that is not loopback: on the simulated node, vLLM's worker had 15 gloo ports on the node's address, and another host
# reached every one (issue 41). Seen moved to 127.0.0.1 by GLOO_SOCKET_IFNAME=lo there; NCCL's on GPUs not seen here.
SINGLE_BOX_REASON = ("one box, every rank local: torch's gloo groups and NCCL's bootstrap listen on loopback only, not "
                     "on the node's addresses where other hosts reach them (a Ray deploy uses the cluster's interface)")


def single_box_sockets(count: int) -> Dict[str, Dict[str, str]]:
    """The socket interfaces of a deploy on one box: gloo's always (vLLM makes gloo groups with one GPU or none),
    NCCL's where there are GPUs to join."""
    settings = {"GLOO_SOCKET_IFNAME": _setting("lo", "single_box_loopback", SINGLE_BOX_REASON)}
    if count >= 2:
        settings["NCCL_SOCKET_IFNAME"] = _setting("lo", "single_box_loopback", SINGLE_BOX_REASON)
    return settings


def nccl_policy(facts: Mapping[str, Any], overrides: Optional[Mapping[str, Any]] = None,
                tuning: Optional[Mapping[str, Any]] = None, p2p_fallback: Optional[str] = None,
                workload: str = "balanced", stale: Optional[List[str]] = None,
                single_box: bool = False) -> Dict[str, Any]:
    """Full result: {'env': {VAR: value}, 'settings': {VAR: {value, source, rule, reason}}, 'workload',
    'topology_file' (see topology_file; PCIe boxes of 2 GPUs and more), 'warnings': [..], 'notes': [..],
    'report': [one readable line per setting, note and warning]}.

    Precedence, lowest first: the static rules for `workload` (source
    "policy"), a stored tuning result (`tuning`, a document from
    moeops.inference.nccl_tune for the same workload; source "tuning"), the
    P2P gate's fallback (`p2p_fallback`, the gate's failure message when
    vllm_service_p2p_fallback lets vLLM start anyway: NCCL_P2P_DISABLE=1,
    source "p2p_gate"), inventory `overrides` (source "inventory").
    `stale` are lines naming stored results of this box that an upgrade made
    stale (nccl_tune_info): reported as warnings, never used. `single_box`
    (a deploy that spans no other host) adds single_box_sockets() after a tuning
    result and below the inventory's overrides.

    Static rules by workload on PCIe-only boxes of more than 2 GPUs: latency and
    balanced set NCCL_PROTO=LL and NCCL_ALGO=Ring (measured on single-stream
    decode); throughput leaves both to NCCL (LL measured slower at 32
    requests). NCCL_P2P_LEVEL follows the topology alone.

    `overrides` comes from inventory: a string value sets or replaces a
    variable, None removes it.  Values must be strings, so that YAML's
    `1`/`true` never reach a unit file in a shape the user did not write.
    """
    workload = check_workload(workload)
    settings: Dict[str, Dict[str, str]] = {}
    warnings: List[str] = []
    notes: List[str] = []
    count = int(facts.get("count") or 0)
    interconnect = facts.get("interconnect") or {}
    pcie_box = count >= 2 and not interconnect.get("nvlink_all")
    if count < 2:
        notes.append("%d GPU(s): no inter-GPU collectives, so no NCCL settings." % count)
    elif interconnect.get("nvlink_all"):
        notes.append("Every GPU pair is on NVLink (%s): NCCL's own choices are right, no overrides." % interconnect.get("class"))
    else:
        level = p2p_level(facts)
        warnings.extend(level["warnings"])
        if level["setting"]:
            settings["NCCL_P2P_LEVEL"] = level["setting"]
        if _pcie_only(facts) and count > 2 and workload == "throughput":
            notes.append("NCCL_PROTO, NCCL_ALGO unset: " + THROUGHPUT_REASON)
        elif _pcie_only(facts) and count > 2:
            reason = LATENCY_REASON if workload == "latency" else PCIE_LATENCY_REASON
            settings["NCCL_PROTO"] = _setting("LL", "pcie_latency", reason)
            settings["NCCL_ALGO"] = _setting("Ring", "pcie_latency", reason)
        elif _pcie_only(facts):
            notes.append("2 PCIe GPUs: vLLM's custom all-reduce handles decode; NCCL protocol and algorithm left to NCCL.")
        else:
            notes.append("Some pairs on NVLink, some not: NCCL protocol and algorithm left to NCCL.")
    for line in stale or []:
        warnings.append(line)
    if tuning:
        apply_tuning(settings, facts, tuning, notes, warnings, workload)
    if p2p_fallback:
        settings["NCCL_P2P_DISABLE"] = _setting("1", "p2p_gate_fallback", P2P_FALLBACK_REASON, source="p2p_gate")
        warnings.append("P2P disabled (NCCL_P2P_DISABLE=1) because the P2P gate failed: %s" % p2p_fallback)
    if single_box:
        # After a tuning result, which drops what its measured environment leaves unset: where NCCL listens is no
        # tuning choice. Before the inventory's overrides, which may still replace or remove NCCL's.
        settings.update(single_box_sockets(count))
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
    proto = settings.get("NCCL_PROTO")
    if proto and lists_ll128(proto["value"]) and not interconnect.get("nvlink_all"):
        warnings.append("NCCL_PROTO=%s (%s) turns LL128 on: %s" % (proto["value"], proto["source"], LL128_REASON))
    topo = topology_file(facts, settings) if pcie_box else None
    if topo:
        notes.append("NCCL_TOPO_FILE %s: %s" % (
            "set" if topo["applied"] else "unset; a topology file (%d GPU(s), %d CPU node(s)) is generated from the "
            "facts and shown in the settings report" % (topo["gpus_written"], topo["cpu_nodes"]), topo["why"]))
    return {
        "env": {k: v["value"] for k, v in sorted(settings.items())},
        "settings": dict(sorted(settings.items())),
        "workload": workload,
        "topology_file": topo,
        "warnings": warnings,
        "notes": notes,
        "report": ["%s=%s [%s: %s] %s" % (k, v["value"], v["source"], v["rule"], v["reason"])
                   for k, v in sorted(settings.items())] + notes + ["WARNING: " + w for w in warnings],
    }


def nccl_env(facts: Mapping[str, Any], overrides: Optional[Mapping[str, Any]] = None,
             tuning: Optional[Mapping[str, Any]] = None, workload: str = "balanced") -> Dict[str, str]:
    """Just the environment to put into the unit."""
    return nccl_policy(facts, overrides, tuning, workload=workload)["env"]


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


# ------------------------------------------------------------ across nodes
#
# Multi-node serving (Ray): NCCL and gloo must use the link between the nodes.
# NCCL's own interface choice skips only "docker*" and "lo*", so on a host with
# podman, libvirt or CNI bridges it can pick a bridge that does not reach the
# other node.  The choice here comes from the facts' `network` part and the
# inventory, and never falls back to a bridge, a veth or loopback.

def socket_interface_candidates(network: Mapping[str, Any]) -> List[Dict[str, Any]]:
    """Interfaces that can carry traffic between nodes: up, Ethernet or IPoIB, and either
    backed by a device or a bond, never loopback, container/VM bridges, veths or tunnels."""
    found = []
    for iface in network.get("interfaces") or []:
        name = iface.get("name") or ""
        if excluded_ifname(name) or iface.get("type") not in ("ether", "infiniband"):
            continue
        if iface.get("operstate") != "up":
            continue
        if iface.get("virtual") and not iface.get("bond"):
            continue
        found.append(dict(iface))
    return found


def _by_name(network: Mapping[str, Any]) -> Dict[str, Mapping[str, Any]]:
    return {i.get("name"): i for i in network.get("interfaces") or [] if i.get("name")}


def active_rdma_devices(network: Mapping[str, Any]) -> List[str]:
    """RDMA devices with at least one ACTIVE port."""
    return [d["name"] for d in network.get("rdma_devices") or []
            if any((p.get("state") or "").upper() == "ACTIVE" for p in d.get("ports") or [])]


def network_policy(
    network: Optional[Mapping[str, Any]],
    socket_ifname: str = "",
    ib_hca: str = "",
    address_interface: str = "",
) -> Dict[str, Any]:
    """NCCL_SOCKET_IFNAME, GLOO_SOCKET_IFNAME and NCCL_IB_HCA for crossing nodes.

    `socket_ifname` and `ib_hca` come from inventory (empty: derive them).
    `address_interface` is the interface that holds the address the node
    joins the cluster with (Ansible's facts for that address).  Returns
    {'env', 'settings', 'warnings', 'errors', 'notes', 'report'}; any error
    means the variable could not be chosen safely and the caller must stop.
    """
    network = network or {}
    settings: Dict[str, Dict[str, str]] = {}
    warnings: List[str] = []
    errors: List[str] = []
    notes: List[str] = []
    by_name = _by_name(network)
    candidates = socket_interface_candidates(network)
    names = [c["name"] for c in candidates]
    if socket_ifname:
        # "=name" is NCCL's exact match; a bare name is a prefix.
        for part in socket_ifname.lstrip("=^").split(","):
            if part and part not in by_name and not any(n.startswith(part) for n in by_name):
                warnings.append("NCCL_SOCKET_IFNAME from inventory names %s, which this host does not have (%s)"
                                % (part, ", ".join(sorted(by_name)) or "no interfaces read"))
            elif part and excluded_ifname(part):
                warnings.append("NCCL_SOCKET_IFNAME from inventory names %s, a loopback/bridge/veth/tunnel name" % part)
        chosen, rule, reason, source = socket_ifname, "inventory", "set in inventory", "inventory"
    elif address_interface and address_interface in by_name and not excluded_ifname(address_interface) \
            and (by_name[address_interface].get("operstate") in ("up", "unknown")):
        chosen, source, rule = "=" + address_interface, "policy", "cluster_address_interface"
        reason = ("%s carries the address this node joins the Ray cluster with, so the other nodes reach it "
                  "there; exact match (=) so that no other interface with that prefix is used" % address_interface)
    elif len(names) == 1:
        chosen, source, rule = "=" + names[0], "policy", "only_physical_interface"
        reason = "%s is the only interface that is up and not loopback, a bridge, a veth or a tunnel" % names[0]
    else:
        chosen = ""
        errors.append(
            "cannot choose NCCL_SOCKET_IFNAME: %s; set it in inventory (ray_cluster_nccl_socket_ifname) to the interface "
            "that links the nodes" % ("candidates %s" % ", ".join(names) if names else
                                      "no interface that is up and not loopback/bridge/veth/tunnel"))
    if chosen:
        settings["NCCL_SOCKET_IFNAME"] = _setting(chosen, rule, reason, source)
        # gloo (vLLM's CPU process groups) takes a plain interface name, no "=".
        gloo = chosen.lstrip("=^").split(",")[0]
        settings["GLOO_SOCKET_IFNAME"] = _setting(
            gloo, rule, "same interface as NCCL_SOCKET_IFNAME for torch's gloo groups", source)
    active = active_rdma_devices(network)
    if ib_hca:
        missing = [h for h in ib_hca.lstrip("=^").split(",") if h.split(":")[0] not in
                   [d.get("name") for d in network.get("rdma_devices") or []]]
        if missing:
            warnings.append("NCCL_IB_HCA from inventory names %s, not an RDMA device of this host" % ", ".join(missing))
        settings["NCCL_IB_HCA"] = _setting(ib_hca, "inventory", "set in inventory", "inventory")
    elif active:
        settings["NCCL_IB_HCA"] = _setting(
            "=" + ",".join(active), "active_rdma_devices",
            "RDMA device(s) with an ACTIVE port: NCCL's IB/RoCE transport goes across nodes over them, not TCP")
    elif network.get("rdma_devices"):
        notes.append("RDMA devices %s have no ACTIVE port: NCCL crosses nodes over TCP sockets"
                     % ", ".join(d["name"] for d in network["rdma_devices"]))
    else:
        notes.append("no RDMA device: NCCL crosses nodes over TCP sockets on NCCL_SOCKET_IFNAME")
    return {
        "env": {k: v["value"] for k, v in sorted(settings.items())},
        "settings": dict(sorted(settings.items())),
        "warnings": warnings,
        "errors": errors,
        "notes": notes,
        "report": ["%s=%s [%s: %s] %s" % (k, v["value"], v["source"], v["rule"], v["reason"])
                   for k, v in sorted(settings.items())] + notes + ["WARNING: " + w for w in warnings]
        + ["ERROR: " + e for e in errors],
    }


def multinode_layout(nodes: List[Mapping[str, Any]]) -> Dict[str, Any]:
    """vLLM layout over Ray nodes, the head first: tensor parallel inside a node
    (its GPUs, from parallel_layout), pipeline parallel across nodes (their count).

    `nodes` is one nvidia_gpu facts mapping per node.  Every node must have the
    same GPU model and count, or the pipeline stages would not be equal; that
    is an error, not a warning.
    """
    errors: List[str] = []
    if not nodes:
        return {"tensor_parallel_size": 0, "pipeline_parallel_size": 0, "world_size": 0, "args": [],
                "errors": ["no nodes"], "reasons": {}}
    head = nodes[0]
    shapes = []
    for facts in nodes:
        models = sorted(set(g.get("name") or "?" for g in facts.get("gpus") or []))
        shapes.append((int(facts.get("count") or 0), tuple(models)))
    if len(set(shapes)) > 1:
        errors.append("nodes differ in GPUs: %s; every pipeline stage needs the same GPUs"
                      % "; ".join("node %d: %dx %s" % (i, c, "/".join(m) or "none") for i, (c, m) in enumerate(shapes)))
    if shapes[0][0] < 1:
        errors.append("the head has no GPU")
    single = parallel_layout(head)
    tp = single["tensor_parallel_size"] if shapes[0][0] >= 1 else 0
    pp = len(nodes)
    reasons = {
        "tensor_parallel_size": "GPUs per node (%s): tensor parallel stays inside a node, where the GPUs share "
                                "PCIe/NVLink" % single["reasons"]["tensor_parallel_size"],
        "pipeline_parallel_size": "%d node(s): pipeline parallel across nodes sends only activations between "
                                  "stages, once per layer group, instead of an all-reduce per layer" % pp,
    }
    args = ["--distributed-executor-backend", "ray", "--pipeline-parallel-size", str(pp)] if pp > 1 else []
    return {
        "tensor_parallel_size": tp,
        "pipeline_parallel_size": pp,
        "world_size": tp * pp,
        "args": args,
        "errors": errors,
        "reasons": reasons,
    }
