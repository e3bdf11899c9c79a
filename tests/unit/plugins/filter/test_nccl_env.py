# -*- coding: utf-8 -*-
from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.moeops.inference.plugins.filter.nccl_env import FilterModule
from ansible_collections.moeops.inference.plugins.module_utils import gpu_topology as topo
from conftest import load_json

FILTERS = FilterModule().filters()


def seed():
    return topo.from_snapshot(load_json("constructed", "rtxpro6000-x8-2numa.json"), "seed")


def test_filter_env_and_explain():
    assert FILTERS["nccl_env"](seed()) == {"NCCL_ALGO": "Ring", "NCCL_P2P_LEVEL": "SYS", "NCCL_PROTO": "LL"}
    explained = FILTERS["nccl_env"](seed(), {}, True)
    assert set(explained) == {"env", "settings", "warnings", "notes", "report"}
    assert explained["report"][1].startswith("NCCL_P2P_LEVEL=SYS [policy: p2p_level]")


def test_filter_rejects_non_string_override():
    with pytest.raises(AnsibleFilterError, match="NCCL_P2P_LEVEL must be a string"):
        FILTERS["nccl_env"](seed(), {"NCCL_P2P_LEVEL": 5})


def test_filter_rejects_wrong_input():
    with pytest.raises(AnsibleFilterError, match="nvidia_gpu facts"):
        FILTERS["nccl_env"]("SYS")
    with pytest.raises(AnsibleFilterError, match="overrides must be a dict"):
        FILTERS["nccl_env"](seed(), ["NCCL_PROTO"])


def test_layout_filter():
    assert FILTERS["vllm_parallel_layout"](seed())["tensor_parallel_size"] == 8
