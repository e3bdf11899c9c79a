# -*- coding: utf-8 -*-
# Copyright: (c) 2026, moeops.inference contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The monitoring role's rules, in one place: its input rules (role_inputs), what it derives from its inputs
(`plan`: who may connect to the exporters, their listen addresses, the scrape targets) and the facts it hands to
its textfile writer (`textfile_facts`: the vLLM unit as moeops.inference.vllm_service_info read it, the settings
report, the canary). Pure functions over plain data: the filters monitoring_plan and monitoring_facts call them."""

from __future__ import annotations

import ipaddress
import re
from typing import Any, Dict, List, Mapping, Optional, Sequence

from ansible_collections.moeops.inference.plugins.module_utils import vllm_settings

# A Prometheus duration (model.ParseDuration): units from ms to y, largest first, at least one.
DURATION = re.compile(r"^(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?$")
# A Debian version with an optional epoch (deb-version(7)).
DEBIAN_VERSION = re.compile(r"^([0-9]+:)?[0-9][A-Za-z0-9.+~-]*$")
HOST_PORT = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+):([0-9]{1,5})$")
DURATION_OPTIONS = ("monitoring_scrape_interval", "monitoring_prometheus_retention",
                    "monitoring_alert_engine_stall_window", "monitoring_alert_target_down_for")
PORT_OPTIONS = ("monitoring_node_exporter_port", "monitoring_dcgm_exporter_port", "monitoring_prometheus_port")
# The spec's defaults of the options the rules compare with each other: preflight passes only what is set
# (tests/unit/plugins/module_utils/test_monitoring.py keeps them equal to meta/argument_specs.yml).
DEFAULTS = {"monitoring_allow": [], "monitoring_node_exporter_port": 9100, "monitoring_dcgm_exporter_port": 9400,
            "monitoring_prometheus_port": 9090}


def is_loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return address == "localhost"


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


def _non_negative(name: str, value: Any, high: Optional[float] = None, what: str = "0 or more") -> List[str]:
    if value is None or isinstance(value, bool):
        return []
    try:
        number = float(value)
    except (TypeError, ValueError):
        return []  # the spec's conversion names it
    if number < 0 or (high is not None and number > high):
        return ["%s must be %s, got %r" % (name, what, value)]
    return []


def input_problems(v: Mapping[str, Any]) -> List[str]:
    """What the argument spec cannot say about the monitoring role's inputs; every message names the variable."""
    problems: List[str] = []
    v = dict(DEFAULTS, **v)
    listen = v.get("monitoring_listen")
    if isinstance(listen, str):
        try:
            ipaddress.ip_address(listen)
        except ValueError:
            problems.append("monitoring_listen must be an IP address of this node (127.0.0.1 for loopback only), got %r"
                            % listen)
    allow = v.get("monitoring_allow")
    if isinstance(allow, list):
        for index, item in enumerate(allow):
            try:
                ipaddress.ip_network(str(item), strict=False)
            except ValueError:
                problems.append("monitoring_allow[%d] must be a network (CIDR such as 10.0.0.0/24) or an address, got %r"
                                % (index, item))
        if isinstance(listen, str) and not is_loopback(listen) and not problems and not allow:
            try:
                ipaddress.ip_address(listen)
                problems.append("monitoring_listen %s is not loopback: set monitoring_allow to the networks of the "
                                "Prometheus servers that scrape this node (nothing else may connect)" % listen)
            except ValueError:
                pass
    ports = [(name, v.get(name)) for name in PORT_OPTIONS if isinstance(v.get(name), int)
             and not isinstance(v.get(name), bool)]
    seen: Dict[int, str] = {}
    for name, port in ports:
        if port in seen:
            problems.append("%s and %s are both %d: each listener needs its own port" % (seen[port], name, port))
        seen.setdefault(port, name)
    for name in DURATION_OPTIONS:
        problems.extend(_duration(name, v.get(name)))
    for name in ("monitoring_dcgm_version", "monitoring_dcgm_exporter_version"):
        value = v.get(name)
        if isinstance(value, str) and not DEBIAN_VERSION.match(value):
            problems.append("%s must be an exact Debian version as NVIDIA's repository carries it (such as 1:4.5.3-1 "
                            "or 4.8.2-1), got %r" % (name, value))
    target = v.get("monitoring_vllm_target")
    if isinstance(target, str) and target:
        match = HOST_PORT.match(target)
        if not match or not 1 <= int(match.group(2)) <= 65535:
            problems.append("monitoring_vllm_target must be HOST:PORT (the API front's address and port) or empty, got %r"
                            % target)
    problems += _non_negative("monitoring_max_exposure", v.get("monitoring_max_exposure"), 10,
                              "between 0 and 10, as systemd-analyze security counts (10: report only)")
    problems += _non_negative("monitoring_alert_kv_cache_usage", v.get("monitoring_alert_kv_cache_usage"), 1,
                              "between 0 and 1 (a share of the KV cache)")
    for name in ("monitoring_alert_ttft_p99_seconds", "monitoring_alert_itl_p99_seconds",
                 "monitoring_alert_e2e_p99_seconds", "monitoring_alert_waiting_requests",
                 "monitoring_alert_preemptions_per_second", "monitoring_alert_xid_errors",
                 "monitoring_alert_pcie_replays"):
        problems += _non_negative(name, v.get(name))
    return problems


def plan(listen: str, allow: Sequence[str], firewall: bool, ports: Mapping[str, int],
         dcgm: bool, vllm_target: str = "", vllm_scheme: str = "http", max_exposure: Optional[float] = None) -> Dict[str, Any]:
    """What the role derives from its inputs.

    - loopback: whether the exporters listen on loopback only;
    - ip_allow: the units' IPAddressAllow= (localhost, the listen address, the allowed networks), with
      IPAddressDeny=any;
    - firewall: whether the nftables table is installed (non-loopback and monitoring_firewall), with allow4/allow6;
    - listen: {exporter: ADDRESS:PORT};
    - external: the scrape targets a Prometheus elsewhere uses ({job key: [target]}; none for an exporter on
      loopback, vLLM only through monitoring_vllm_target);
    - exposure_threshold: monitoring_max_exposure in systemd-analyze's tenths ("" for no limit).
    """
    loopback = is_loopback(listen)
    networks = [ipaddress.ip_network(str(a), strict=False) for a in allow]
    ip_allow = ["localhost"] + ([] if loopback else [listen]) + [str(n) for n in networks]
    listen_on = {"node": host_port(listen, int(ports["node"])), "dcgm": host_port(listen, int(ports["dcgm"]))}
    external: Dict[str, List[str]] = {"node": [] if loopback else [listen_on["node"]],
                                      "dcgm": [] if loopback or not dcgm else [listen_on["dcgm"]],
                                      "vllm": [vllm_target] if vllm_target else []}
    return {
        "loopback": loopback,
        "ip_allow": list(dict.fromkeys(ip_allow)),
        "firewall": bool(firewall) and not loopback,
        "allow4": [str(n) for n in networks if n.version == 4],
        "allow6": [str(n) for n in networks if n.version == 6],
        "listen": listen_on,
        "external": external,
        "vllm_scheme": vllm_scheme,
        "exposure_threshold": "" if max_exposure is None else str(int(round(float(max_exposure) * 10))),
    }


def vllm_local_target(deployed: Mapping[str, Any]) -> Optional[str]:
    """Where vLLM's own /metrics answers on this node: the --host and --port of the deployed unit (the backend
    behind a front), 127.0.0.1 for an unspecified or wildcard host; None without a unit."""
    unit = deployed.get("unit") or {}
    argv = (deployed.get("effective") or {}).get("exec_start") or []
    if not unit.get("deployed") or not argv:
        return None
    settings = vllm_settings.serve_settings(argv)
    host = settings.get("--host") or "127.0.0.1"
    if host in ("0.0.0.0", "::", ""):
        host = "127.0.0.1" if host != "::" else "::1"
    try:
        port = int(settings.get("--port") or 8000)
    except ValueError:
        return None
    return host_port(host, port)


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
