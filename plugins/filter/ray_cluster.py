# -*- coding: utf-8 -*-
# Copyright: (c) 2026, moeops.inference contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters for multi-node serving on Ray; documentation in the adjacent YAML files."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible_collections.moeops.inference.plugins.module_utils._policy import nccl_policy
from ansible_collections.moeops.inference.plugins.module_utils._policy import ray_version


def nccl_network_env(facts, socket_ifname="", ib_hca="", address_interface="", explain=False):
    """NCCL/gloo interface and RDMA variables for crossing nodes."""
    if not isinstance(facts, dict):
        raise AnsibleFilterError("nccl_network_env: expects the nvidia_gpu facts (with network), got %r" % type(facts).__name__)
    if "network" not in facts:
        raise AnsibleFilterError("nccl_network_env: the facts have no network part; run moeops.inference.gpu_facts with network=true")
    result = nccl_policy.network_policy(facts["network"], socket_ifname or "", ib_hca or "", address_interface or "")
    return result if explain else result["env"]


def vllm_multinode_layout(nodes):
    """Tensor parallel inside a node, pipeline parallel across nodes; `nodes` is a list of nvidia_gpu facts, head first."""
    if not isinstance(nodes, list) or not all(isinstance(n, dict) for n in nodes):
        raise AnsibleFilterError("vllm_multinode_layout: expects a list of nvidia_gpu facts, head first")
    return nccl_policy.multinode_layout(nodes)


def ray_version_plan(requires, pinned, vllm_version=""):
    """The Ray version to install beside vLLM, from vLLM's Requires-Dist and the role's pin."""
    if requires is not None and not isinstance(requires, list):
        raise AnsibleFilterError("ray_version_plan: expects vLLM's Requires-Dist as a list of strings")
    try:
        return ray_version.ray_version_plan(requires, str(pinned or ""), str(vllm_version or ""))
    except ValueError as exc:
        raise AnsibleFilterError("ray_version_plan: %s" % exc)


class FilterModule(object):
    def filters(self):
        return {
            "nccl_network_env": nccl_network_env,
            "vllm_multinode_layout": vllm_multinode_layout,
            "ray_version_plan": ray_version_plan,
        }
