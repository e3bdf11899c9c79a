# -*- coding: utf-8 -*-
from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.moeops.inference.plugins.filter.nccl_env import FilterModule
from ansible_collections.moeops.inference.plugins.module_utils._facts import gpu_topology as topo
from conftest import load_json

FILTERS = FilterModule().filters()


def seed():
    return topo.from_snapshot(load_json("constructed", "rtxpro6000-x8-2numa.json"), "seed")


def test_filter_env_and_explain():
    assert FILTERS["nccl_env"](seed()) == {"NCCL_ALGO": "Ring", "NCCL_P2P_LEVEL": "SYS", "NCCL_PROTO": "LL"}
    explained = FILTERS["nccl_env"](seed(), {}, True)
    assert set(explained) == {"env", "settings", "workload", "topology_file", "warnings", "notes", "report"}
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


def test_filter_takes_a_tuning_result():
    from ansible_collections.moeops.inference.plugins.module_utils._nccl import tune

    f = seed()
    doc = {"schema_version": 2, "workload": "balanced", "fingerprint": "0123456789abcdef", "host": "lab",
           "measured_at": "now",
           "fingerprint_components": {"topology": tune.topology_fingerprint(f), "world_size": 8,
                                      "nccl_version": "2.27.3", "driver_version": "580.95.05"},
           "best": {"name": "Simple/Ring", "env": {"NCCL_PROTO": "Simple"}, "score": 0.9, "ratios": {}},
           "candidates": [{}, {}]}
    explained = FILTERS["nccl_env"](f, {"NCCL_ALGO": "Tree"}, True, doc)
    assert explained["env"] == {"NCCL_ALGO": "Tree", "NCCL_PROTO": "Simple"}
    assert explained["settings"]["NCCL_PROTO"]["source"] == "tuning"
    assert FILTERS["nccl_env"](f, {}, False, None) == FILTERS["nccl_env"](f)
    with pytest.raises(AnsibleFilterError, match="tuning must be"):
        FILTERS["nccl_env"](f, {}, False, "best")
    # A result of the balanced workload is not used for another workload, nor a legacy one without its objective.
    other = FILTERS["nccl_env"](f, {}, True, doc, "throughput")
    assert other["env"] == {"NCCL_P2P_LEVEL": "SYS"}
    assert "ranked for the balanced workload, this deployment's is throughput" in other["warnings"][-1]
    legacy = dict(doc, schema_version=1)
    del legacy["workload"]
    assert FILTERS["nccl_env"](f, {}, False, dict(legacy, objective={"decode": 0.8, "prefill": 0.2})) == {
        "NCCL_PROTO": "Simple"}
    assert FILTERS["nccl_env"](f, {}, False, dict(legacy, objective={"decode-1": 1})) == FILTERS["nccl_env"](f)


def test_filter_workload_chooses_the_static_rules():
    f = seed()
    assert FILTERS["nccl_env"](f, workload="latency") == FILTERS["nccl_env"](f) == {
        "NCCL_ALGO": "Ring", "NCCL_P2P_LEVEL": "SYS", "NCCL_PROTO": "LL"}
    assert FILTERS["nccl_env"](f, workload="throughput") == {"NCCL_P2P_LEVEL": "SYS"}
    with pytest.raises(AnsibleFilterError, match="workload: one of latency, balanced, throughput"):
        FILTERS["nccl_env"](f, workload="fast")
