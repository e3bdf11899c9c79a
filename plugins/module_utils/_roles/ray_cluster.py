# -*- coding: utf-8 -*-
# Copyright: (c) 2026, moeops.inference contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ray_cluster role's rules and plan. Private to the collection: the role_plan action (module_utils/_common/plan.py)
applies them to the role's converted values, with the inventory's part in the context: the group's members and this
host's name. What needs the node (the NCCL interface, the installed vLLM's Ray requirement) is the public filters'
(nccl_network_env, ray_version_plan), which the role's tasks call where they have it.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Mapping, Tuple

from ansible_collections.moeops.inference.plugins.module_utils._common import inputs
from ansible_collections.moeops.inference.plugins.module_utils._roles import vllm as vllm_rules

KNOWN_OTHER = ("ray_cluster_summary",)
# Why the cluster's addresses are IPv4: what the role does with them (refused in the check step, before Ray is installed).
IPV4_ONLY = ("the role reaches the cluster over IPv4 (each node resolves the others with getent ahostsv4, and NCCL's "
             "and gloo's interface is the one holding this IPv4 address)")


def input_problems(v: Mapping[str, Any]) -> List[str]:
    extras = v.get("ray_cluster_ray_extras")
    bad = [e for e in extras if not (isinstance(e, str) and re.match(r"^[a-z][a-z0-9_-]*$", e))] \
        if isinstance(extras, list) else []
    return (inputs.unit_name("ray_cluster_service_name", v.get("ray_cluster_service_name"))
            + (["ray_cluster_ray_extras must be Ray extras such as default, got %r" % bad] if bad else [])
            + inputs.number_in("ray_cluster_join_timeout", v.get("ray_cluster_join_timeout"), 0, inputs.SYSTEMD_MAX_SECONDS,
                               what="a positive number of seconds")
            + inputs.number_in("ray_cluster_clock_skew_max", v.get("ray_cluster_clock_skew_max"), 0, 3600,
                               what="a positive number of seconds")
            + inputs.nccl_overrides("ray_cluster_nccl_overrides", v.get("ray_cluster_nccl_overrides"))
            + inputs.env_mapping("ray_cluster_environment", v.get("ray_cluster_environment"), allow_null=False)
            + index_rules(v)[0])


def index_rules(v: Mapping[str, Any]) -> Tuple[List[str], List[str]]:
    """(problems, warnings) for the package index Ray is installed from (vllm_index_url): the vllm role's rule."""
    return inputs.secure_source("vllm_index_url", v.get("vllm_index_url"), v.get(inputs.INSECURE_SWITCH),
                                vllm_rules.INDEX_TRUST)


# The fixed Ray ports, in Ray's order.
PORTS = ("ray_cluster_gcs_port", "ray_cluster_dashboard_port", "ray_cluster_object_manager_port",
         "ray_cluster_node_manager_port", "ray_cluster_runtime_env_agent_port", "ray_cluster_dashboard_agent_grpc_port",
         "ray_cluster_dashboard_agent_listen_port", "ray_cluster_metrics_export_port")
# Ray Client's server: `ray start --head` opens it on this port, on the node's address, whenever grpc imports (and
# ray[default] brings grpcio), also when no --ray-client-server-port is given (ray/scripts/scripts.py in Ray 2.58).
# No option turns it off, so the firewall fences it like the other Ray ports.
RAY_CLIENT_DEFAULT_PORT = 10001
# The shared types (_common/inputs.py), applied by the plan before input_problems. ray_cluster_head_host is no address:
# it is an inventory host name, which the plan finds among ray_cluster_group's members.
ADDRESS_OPTIONS = {"ray_cluster_head_address": inputs.host_type(ipv4_why=IPV4_ONLY),
                   "ray_cluster_node_address": inputs.host_type(ipv4_why=IPV4_ONLY),
                   "ray_cluster_dashboard_host": inputs.HOST}
PORT_OPTIONS = PORTS + ("ray_cluster_client_server_port", "ray_cluster_min_worker_port", "ray_cluster_max_worker_port",
                        "vllm_service_port")
# The ports the collection itself serves beyond the cluster, which no Ray port or dropped range may hold: the API
# (the front's or vLLM's). The SSH port comes from the context (ansible_port, default 22).
SERVED_PORTS = ("vllm_service_port",)


def client_port(v: Mapping[str, Any]) -> int:
    given = v.get("ray_cluster_client_server_port")
    return int(given) if given is not None else RAY_CLIENT_DEFAULT_PORT


def ports(v: Mapping[str, Any]) -> List[int]:
    """The Ray ports the firewall drops for non-members: the fixed ones, and Ray Client's."""
    return [int(v[p]) for p in PORTS] + [client_port(v)]


def _port_names(v: Mapping[str, Any]) -> List[Any]:
    return [(p, int(v[p])) for p in PORTS] + [(
        "ray_cluster_client_server_port" if v.get("ray_cluster_client_server_port") is not None
        else "Ray Client's server (ray_cluster_client_server_port null: Ray's default)", client_port(v))]


def protected_port_problems(v: Mapping[str, Any], ssh_port: Any, ephemeral: Any) -> List[str]:
    """No Ray port, no worker port and (with ray_cluster_firewall) no port of the kernel's ephemeral range, which the
    firewall drops for non-members, may be the SSH port or a port the collection serves: Ray would take it, or the
    firewall would cut the controller's access or the API off."""
    protected = [("the SSH port (ansible_port)", ssh_port)] + [(n, v.get(n)) for n in SERVED_PORTS]
    protected = [(what, int(port)) for what, port in protected
                 if port is not None and not isinstance(port, bool) and str(port).strip().isdigit()]
    problems = []
    low, high = int(v["ray_cluster_min_worker_port"]), int(v["ray_cluster_max_worker_port"])
    for what, port in protected:
        for name, value in _port_names(v):
            if value == port:
                problems.append("%s is %d, %s: Ray would listen there and ray_cluster_firewall would drop it for "
                                "non-members" % (name, port, what))
        if low <= port <= high:
            problems.append("ray_cluster_min_worker_port..ray_cluster_max_worker_port (%d-%d) contains %s, %d: Ray's "
                            "workers would take it and ray_cluster_firewall would drop it for non-members; pick a range "
                            "without it" % (low, high, what, port))
        if v.get("ray_cluster_firewall") is True and ephemeral and ephemeral[0] <= port <= ephemeral[1]:
            problems.append("ray_cluster_firewall drops non-members on this host's ephemeral port range %d-%d "
                            "(net.ipv4.ip_local_port_range, where NCCL and gloo listen), which contains %s, %d: move that "
                            "port out of the range, or the range away from it" % (ephemeral[0], ephemeral[1], what, port))
    return problems


def ephemeral_range(text: Any) -> Any:
    """The kernel's ephemeral port range from /proc/sys/net/ipv4/ip_local_port_range ("32768\t60999"), or None."""
    try:
        low, high = (int(x) for x in str(text).split())
    except (TypeError, ValueError):
        return None
    return [low, high] if 0 < low <= high <= 65535 else None


def plan(v: Mapping[str, Any], ctx: Mapping[str, Any]) -> Dict[str, Any]:
    """`ctx`: members (the hosts of ray_cluster_group, in inventory order) and host (this host's inventory name); without
    them (preflight plans every role of a deploy, before a cluster's inventory is known) the membership rule waits for
    the role's own check. ssh_port (ansible_port, default 22) and ephemeral (the node's
    /proc/sys/net/ipv4/ip_local_port_range) are what the firewall must keep open or drops."""
    members, host = list(ctx.get("members") or []), ctx.get("host")
    head, retired = v["ray_cluster_head_host"], list(v.get("ray_cluster_retired") or [])
    problems = []
    if "members" in ctx and (not members or head not in members or not (host in members or host in retired) or set(members) & set(retired)):
        problems.append("ray_cluster_group (%s) must have hosts (got %s) and contain ray_cluster_head_host (%s); a host "
                        "the role runs on must be in the group or in ray_cluster_retired (%s), never both"
                        % (v["ray_cluster_group"], members, head, retired))
    fixed = ports(v)
    low, high = int(v["ray_cluster_min_worker_port"]), int(v["ray_cluster_max_worker_port"])
    if (any(not 1 <= p <= 65535 for p in fixed) or len(set(fixed)) != len(fixed) or not 1 <= low < high <= 65535
            or any(low <= p <= high for p in fixed)):
        problems.append("the Ray ports must be distinct, in 1-65535 and outside the worker port range %d-%d (got %s; "
                        "the last is Ray Client's, on the head)" % (low, high, ", ".join(str(p) for p in fixed)))
    ephemeral = ephemeral_range(ctx.get("ephemeral"))
    problems += protected_port_problems(v, ctx.get("ssh_port", 22), ephemeral)
    if v.get("ray_cluster_firewall") is True and "ephemeral" in ctx and not ephemeral:
        problems.append("ray_cluster_firewall: this host's ephemeral port range (/proc/sys/net/ipv4/ip_local_port_range) "
                        "could not be read (got %r)" % (ctx.get("ephemeral"),))
    member = host in members
    if member and not v.get("ray_cluster_node_address"):
        problems.append("ray_cluster_node_address is empty (no default IPv4 route?): set it in inventory")
    name = v["ray_cluster_service_name"]
    result = {
        "members": members,
        "is_member": member,
        "is_head": host == head,
        "workers": [m for m in members if m != head],
        "gcs": "%s:%s" % (v["ray_cluster_head_address"], v["ray_cluster_gcs_port"]),
        "ports": fixed,
        # The firewall's (ray_cluster_firewall): what it drops for non-members, every range checked above.
        "firewall": {"ports": sorted(set(fixed)), "workers": [low, high], "ephemeral": ephemeral,
                     "client_port": fixed[-1]},
        # Ray's install into the engine's venv: the vllm role's uv environment (the index never in argv).
        "uv_env": vllm_rules.uv_environment(v),
        "unit_path": "/etc/systemd/system/%s.service" % name,
        "stage_path": "%s/%s.service" % (v["ray_cluster_stage_dir"], name),
    }
    outcome = ("ray_cluster: %s of %d nodes, GCS %s" % ("head" if result["is_head"] else "worker", len(members),
                                                        result["gcs"])
               if member else "ray_cluster: retired here (Ray is stopped and removed)")
    return {"plan": result, "problems": problems, "outcome": outcome, "warnings": index_rules(v)[1]}
