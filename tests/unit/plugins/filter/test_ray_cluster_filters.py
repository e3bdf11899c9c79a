# -*- coding: utf-8 -*-
from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.moeops.inference.plugins.filter import ray_cluster as f
from ansible_collections.moeops.inference.plugins.module_utils._facts import gpu_topology as topo
from conftest import net_tree

# Captured on the CI/dev VM (see tests/unit/plugins/module_utils/test_network_policy.py).
REAL_VM = net_tree("real/vm-podman-host")


def _facts(count):
    return {"count": count, "gpus": [{"index": i, "name": "NVIDIA RTX PRO 6000"} for i in range(count)], "pairs": [],
            "interconnect": {"nvlink_all": False, "p2p_all_ok": True}}


def test_filters_are_registered():
    assert sorted(f.FilterModule().filters()) == ["nccl_network_env", "ray_version_plan", "vllm_multinode_layout"]


def test_nccl_network_env_needs_the_network_part():
    with pytest.raises(AnsibleFilterError, match="network=true"):
        f.nccl_network_env({"count": 0})
    facts = {"count": 0, "network": topo.read_network(REAL_VM)}
    assert f.nccl_network_env(facts, "", "", "eth0") == {"GLOO_SOCKET_IFNAME": "eth0", "NCCL_SOCKET_IFNAME": "=eth0"}
    assert f.nccl_network_env(facts, explain=True)["errors"] == []


def test_layout_and_version_filters_validate_their_input():
    with pytest.raises(AnsibleFilterError):
        f.vllm_multinode_layout({"count": 8})
    assert f.vllm_multinode_layout([_facts(8), _facts(8)])["pipeline_parallel_size"] == 2
    with pytest.raises(AnsibleFilterError, match="cannot read"):
        f.ray_version_plan(["ray @ https://example.invalid/x.whl"], "2.60.0")
    assert f.ray_version_plan(None, "2.60.0")["version"] == "2.60.0"
