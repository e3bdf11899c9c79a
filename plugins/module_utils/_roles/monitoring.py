# -*- coding: utf-8 -*-
# Copyright: (c) 2026, moeops.inference contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The monitoring role's rules and plan. Private to the collection: the role_plan action (module_utils/_common/plan.py)
applies them to the role's converted values.

The role plans twice. Its check (tasks/check.yml) plans with no context: who may connect to the exporters, their listen
addresses, the scrape targets. Its read step (tasks/read.yml) plans again with what it read on the node in the
context - the vLLM unit as moeops.inference.vllm_service_info read it (`deployed`), the settings report (`report`,
None when not made, `drift_why` says why) and the canary (`canary`) - and the plan then also holds `facts`: what the
textfile writer (roles/monitoring/files/moeops_textfile.py) turns into moeops.prom. Preflight plans the role with
its own context (GPUs, facts), which holds no `deployed`: no facts then.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Any, Dict, List, Mapping, Optional

from ansible_collections.moeops.inference.plugins.module_utils._common import inputs
from ansible_collections.moeops.inference.plugins.module_utils._policy import settings as vllm_settings

# Set by the role itself (tasks/summary.yml).
KNOWN_OTHER = ("monitoring_summary",)
# A Prometheus duration (model.ParseDuration): units from ms to y, largest first, at least one.
DURATION = re.compile(r"^(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?$")
# A Debian version with an optional epoch (deb-version(7)).
DEBIAN_VERSION = re.compile(r"^([0-9]+:)?[0-9][A-Za-z0-9.+~-]*$")
DURATION_OPTIONS = ("monitoring_scrape_interval", "monitoring_prometheus_retention",
                    "monitoring_alert_engine_stall_window", "monitoring_alert_target_down_for")
# The shared types (_common/inputs.py), applied by the plan before input_problems: who may connect, where the exporters
# listen, the scrape target of vLLM elsewhere; the listeners' ports.
ADDRESS_OPTIONS = {"monitoring_listen": inputs.IP, "monitoring_allow": inputs.NETWORKS,
                   "monitoring_vllm_target": inputs.ENDPOINT_TYPE}
PORT_OPTIONS = ("monitoring_node_exporter_port", "monitoring_dcgm_exporter_port", "monitoring_prometheus_port")
THRESHOLDS = ("monitoring_alert_ttft_p99_seconds", "monitoring_alert_itl_p99_seconds",
              "monitoring_alert_e2e_p99_seconds", "monitoring_alert_waiting_requests",
              "monitoring_alert_preemptions_per_second", "monitoring_alert_xid_errors", "monitoring_alert_pcie_replays")


def host_port(address: str, port: int) -> str:
    """ADDRESS:PORT as Go's listeners and Prometheus targets write it (an IPv6 address in brackets)."""
    try:
        if ipaddress.ip_address(address).version == 6:
            return "[%s]:%d" % (address, port)
    except ValueError:
        pass
    return "%s:%d" % (address, port)


def _duration(name: str, value: Any) -> List[str]:
    if isinstance(value, str) and (not value or not DURATION.match(value) or value in ("0s", "0m", "0")):
        return ["%s must be a Prometheus duration such as 2m, 15s or 15d, got %r" % (name, value)]
    return []


def _listen_problems(v: Mapping[str, Any]) -> List[str]:
    """A listen address that is not loopback needs an allowlist (the address and the networks are the types')."""
    listen, allow = v.get("monitoring_listen"), v.get("monitoring_allow")
    if (isinstance(listen, str) and not inputs.ip("monitoring_listen", listen) and not inputs.is_loopback(listen)
            and isinstance(allow, list) and not allow):
        return ["monitoring_listen %s is not loopback: set monitoring_allow to the networks of the Prometheus servers "
                "that scrape this node (nothing else may connect)" % listen]
    return []


def input_problems(v: Mapping[str, Any]) -> List[str]:
    """What the argument spec cannot say about the role's inputs; every message names the variable."""
    problems = _listen_problems(v)
    seen: Dict[int, str] = {}
    for name in PORT_OPTIONS:
        port = v.get(name)
        if not isinstance(port, int) or isinstance(port, bool):
            continue
        if port in seen:
            problems.append("%s and %s are both %d: each listener needs its own port" % (seen[port], name, port))
        seen.setdefault(port, name)
    for name in DURATION_OPTIONS:
        problems += _duration(name, v.get(name))
    for name in ("monitoring_dcgm_version", "monitoring_dcgm_exporter_version"):
        value = v.get(name)
        if isinstance(value, str) and not DEBIAN_VERSION.match(value):
            problems.append("%s must be an exact Debian version as NVIDIA's repository carries it (such as 1:4.5.3-1 "
                            "or 4.8.2-1), got %r" % (name, value))
    problems += inputs.number_in("monitoring_max_exposure", v.get("monitoring_max_exposure"), 0, 10, low_open=False,
                                 what="between 0 and 10, as systemd-analyze security counts (10: report only)")
    problems += inputs.number_in("monitoring_alert_kv_cache_usage", v.get("monitoring_alert_kv_cache_usage"), 0, 1,
                                 low_open=False, what="between 0 and 1 (a share of the KV cache)")
    for name in THRESHOLDS:
        problems += inputs.number_in(name, v.get(name), 0, float("inf"), low_open=False, what="0 or more")
    return problems


def exporters(v: Mapping[str, Any]) -> Dict[str, Any]:
    """Who may connect to the exporters, where they listen, and the scrape targets.

    - loopback: whether the exporters listen on loopback only;
    - ip_allow: the units' IPAddressAllow= (localhost, the listen address, the allowed networks), with
      IPAddressDeny=any;
    - firewall: whether the nftables table is installed (non-loopback and monitoring_firewall), with allow4/allow6;
    - listen: {exporter: ADDRESS:PORT};
    - external: the scrape targets a Prometheus elsewhere uses ({job key: [target]}; none for an exporter on
      loopback, vLLM only through monitoring_vllm_target);
    - exposure_threshold: monitoring_max_exposure in systemd-analyze's tenths (--threshold; 100 only reports).
    """
    listen, dcgm = v["monitoring_listen"], v["monitoring_dcgm"]
    loopback = inputs.is_loopback(listen)
    networks = [ipaddress.ip_network(str(a), strict=False) for a in v["monitoring_allow"]]
    ip_allow = ["localhost"] + ([] if loopback else [listen]) + [str(n) for n in networks]
    listen_on = {"node": host_port(listen, int(v["monitoring_node_exporter_port"])),
                 "dcgm": host_port(listen, int(v["monitoring_dcgm_exporter_port"]))}
    target = v.get("monitoring_vllm_target") or ""
    return {
        "loopback": loopback,
        "ip_allow": list(dict.fromkeys(ip_allow)),
        "firewall": bool(v["monitoring_firewall"]) and not loopback,
        "allow4": [str(n) for n in networks if n.version == 4],
        "allow6": [str(n) for n in networks if n.version == 6],
        "listen": listen_on,
        "external": {"node": [] if loopback else [listen_on["node"]],
                     "dcgm": [] if loopback or not dcgm else [listen_on["dcgm"]],
                     "vllm": [target] if target else []},
        "vllm_scheme": v.get("monitoring_vllm_scheme") or "http",
        "exposure_threshold": str(int(round(float(v["monitoring_max_exposure"]) * 10))),
    }


def vllm_local_target(deployed: Mapping[str, Any]) -> Optional[str]:
    """Where vLLM's own /metrics answers on this node (the deployed unit's --host and --port, the backend behind a
    front; a wildcard host is read on loopback); None without a unit."""
    unit = deployed.get("unit") or {}
    argv = (deployed.get("effective") or {}).get("exec_start") or []
    if not unit.get("deployed") or not argv:
        return None
    address = vllm_settings.serve_address(argv)
    return host_port(*address) if address else None


def textfile_facts(deployed: Mapping[str, Any], report: Optional[Mapping[str, Any]] = None,
                   canary: Optional[Mapping[str, Any]] = None, drift_why: str = "") -> Dict[str, Any]:
    """What the textfile writer (roles/monitoring/files/moeops_textfile.py) turns into moeops.prom.

    `deployed`: the result of moeops.inference.vllm_service_info. `report`: the settings_report filter's result, or
    None when it was not made (drift_why says why). `canary`: the vllm_service role's vllm_service_canary_result
    when the play has it. Secrets never reach it: the info module masks them, and only NCCL_* variables are taken.
    """
    unit = deployed.get("unit") or {}
    effective = deployed.get("effective") or {}
    env = effective.get("environment") or {}
    origin = effective.get("environment_origin") or {}
    rows = {r.get("name"): r for r in (report or {}).get("rows") or [] if r.get("category") == "nccl"}
    nccl = []
    for name in sorted(n for n in env if str(n).startswith("NCCL_")):
        row = rows.get(name) or {}
        nccl.append({"variable": name, "value": str(env[name]), "file": origin.get(name, ""),
                     "source": row.get("source", ""), "rule": row.get("rule", "")})
    vllm = deployed.get("vllm") or {}
    facts: Dict[str, Any] = {
        "schema": 1,
        "unit": unit.get("name") or "",
        "deployed": bool(unit.get("deployed")),
        "vllm": {k: vllm.get(k) for k in ("engine", "version", "package", "package_version")},
        "nccl": nccl,
        "p2p_gate": None,
        "drift": {"checked": False, "why": drift_why or "not checked"},
        "canary": {"recorded": False, "why": "the play did not run the vllm_service role's canary"},
    }
    gate = deployed.get("p2p_gate")
    if isinstance(gate, Mapping):
        facts["p2p_gate"] = {k: gate.get(k) for k in ("at", "passed", "seconds", "backend", "world_size")}
    if report is not None:
        drifted = [r for r in report.get("rows") or [] if r.get("drift")]
        facts["drift"] = {"checked": True, "drift": bool(report.get("drift")),
                          "rows": [{"category": r.get("category", ""), "name": r.get("name", "")} for r in drifted]}
    if isinstance(canary, Mapping) and not canary.get("skipped") and "passed" in canary:
        facts["canary"] = {"recorded": True, "passed": bool(canary.get("passed")), "elapsed_s": canary.get("elapsed_s")}
    elif isinstance(canary, Mapping) and canary.get("skipped"):
        facts["canary"] = {"recorded": False, "why": "the vllm_service role's canary was skipped in this play"}
    return facts


def plan(v: Mapping[str, Any], ctx: Mapping[str, Any]) -> Dict[str, Any]:
    """The exporters' plan; with the vLLM unit read on the node in the context (`deployed`), also the textfile facts."""
    planned = exporters(v)
    outcome = "monitoring: node_exporter on %s%s; %s" % (
        planned["listen"]["node"], (", dcgm-exporter on " + planned["listen"]["dcgm"]) if v["monitoring_dcgm"] else "",
        "loopback only" if planned["loopback"] else "open to %s (%s)" % (
            ", ".join(planned["ip_allow"]), "nftables table inet moeops_monitoring and the units" if planned["firewall"]
            else "the units' IPAddressAllow= only"))
    deployed = ctx.get("deployed")
    if isinstance(deployed, Mapping) and "unit" in deployed:
        report, canary = ctx.get("report"), ctx.get("canary")
        facts = textfile_facts(deployed, report if isinstance(report, Mapping) else None,
                               canary if isinstance(canary, Mapping) else None, str(ctx.get("drift_why") or ""))
        facts["vllm_target"] = vllm_local_target(deployed)
        planned["facts"] = facts
    return {"plan": planned, "outcome": outcome}
