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
from typing import Any, Dict, List, Mapping

from ansible_collections.moeops.inference.plugins.module_utils._common import inputs

KNOWN_OTHER = ("ray_cluster_summary",)
# Why the cluster's addresses are IPv4: what the role does with them (refused in the check step, before Ray is installed).
IPV4_ONLY = ("the role reaches the cluster over IPv4 (each node resolves the others with getent ahostsv4, and NCCL's "
             "and gloo's interface is the one holding this IPv4 address)")


def input_problems(v: Mapping[str, Any]) -> List[str]:
    extras = v.get("ray_cluster_ray_extras")
    bad = [e for e in extras if not (isinstance(e, str) and re.match(r"^[a-z][a-z0-9_-]*$", e))] \
        if isinstance(extras, list) else []
    return (inputs.unit_name("ray_cluster_service_name", v.get("ray_cluster_service_name"))
            + inputs.ipv4_host("ray_cluster_head_address", v.get("ray_cluster_head_address"), IPV4_ONLY)
            + inputs.ipv4_host("ray_cluster_node_address", v.get("ray_cluster_node_address"), IPV4_ONLY)
            + inputs.host("ray_cluster_dashboard_host", v.get("ray_cluster_dashboard_host"))
            + (["ray_cluster_ray_extras must be Ray extras such as default, got %r" % bad] if bad else [])
            + inputs.number_in("ray_cluster_join_timeout", v.get("ray_cluster_join_timeout"), 0, inputs.SYSTEMD_MAX_SECONDS,
                               what="a positive number of seconds")
            + inputs.number_in("ray_cluster_clock_skew_max", v.get("ray_cluster_clock_skew_max"), 0, 3600,
                               what="a positive number of seconds")
            + inputs.nccl_overrides("ray_cluster_nccl_overrides", v.get("ray_cluster_nccl_overrides"))
            + inputs.env_mapping("ray_cluster_environment", v.get("ray_cluster_environment"), allow_null=False))


# The fixed Ray ports, in Ray's order; the client server's only when it is set.
PORTS = ("ray_cluster_gcs_port", "ray_cluster_dashboard_port", "ray_cluster_object_manager_port",
         "ray_cluster_node_manager_port", "ray_cluster_runtime_env_agent_port", "ray_cluster_dashboard_agent_grpc_port",
         "ray_cluster_dashboard_agent_listen_port", "ray_cluster_metrics_export_port")


def ports(v: Mapping[str, Any]) -> List[int]:
    return [int(v[p]) for p in PORTS] + (
        [int(v["ray_cluster_client_server_port"])] if v.get("ray_cluster_client_server_port") is not None else [])


def plan(v: Mapping[str, Any], ctx: Mapping[str, Any]) -> Dict[str, Any]:
    """`ctx`: members (the hosts of ray_cluster_group, in inventory order) and host (this host's inventory name); without
    them (preflight plans every role of a deploy, before a cluster's inventory is known) the membership rule waits for
    the role's own check."""
    members, host = list(ctx.get("members") or []), ctx.get("host")
    head, retired = v["ray_cluster_head_host"], list(v.get("ray_cluster_retired") or [])
    problems = []
    if "members" in ctx and (not members or head not in members or not (host in members or host in retired) or set(members) & set(retired)):
        problems.append("ray_cluster_group (%s) must have hosts (got %s) and contain ray_cluster_head_host (%s); a host "
                        "the role runs on must be in the group or in ray_cluster_retired (%s), never both"
                        % (v["ray_cluster_group"], members, head, retired))
    fixed = ports(v)
    low, high = int(v["ray_cluster_min_worker_port"]), int(v["ray_cluster_max_worker_port"])
    if (any(not 1 <= p <= 65535 for p in fixed) or len(set(fixed)) != len(fixed) or not low < high <= 65535
            or any(low <= p <= high for p in fixed)):
        problems.append("the Ray ports must be distinct, in 1-65535 and outside the worker port range %d-%d (got %s)"
                        % (low, high, ", ".join(str(p) for p in fixed)))
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
        "unit_path": "/etc/systemd/system/%s.service" % name,
        "stage_path": "%s/%s.service" % (v["ray_cluster_stage_dir"], name),
    }
    outcome = ("ray_cluster: %s of %d nodes, GCS %s" % ("head" if result["is_head"] else "worker", len(members),
                                                        result["gcs"])
               if member else "ray_cluster: retired here (Ray is stopped and removed)")
    return {"plan": result, "problems": problems, "outcome": outcome}
