# -*- coding: utf-8 -*-
from __future__ import annotations

import pytest

from ansible_collections.moeops.inference.plugins.module_utils._facts import gpu_topology as topo
from ansible_collections.moeops.inference.plugins.module_utils._policy import nccl_policy as policy
from conftest import constructed_names, load_json


def facts(name):
    return topo.from_snapshot(load_json("constructed", name + ".json"), name)


# The documented result for every constructed topology: env, and whether a P2P warning is raised.
EXPECTED = {
    # The hand-tuned unit of the operator's box, exactly.
    "rtxpro6000-x8-2numa": ({"NCCL_P2P_LEVEL": "SYS", "NCCL_PROTO": "LL", "NCCL_ALGO": "Ring"}, False),
    "rtxpro6000-x4-1numa": ({"NCCL_P2P_LEVEL": "PHB", "NCCL_PROTO": "LL", "NCCL_ALGO": "Ring"}, False),
    # NODE counts as NCCL's PHB; 2 GPUs: no protocol/algorithm override.
    "rtxpro6000-x2-1numa": ({"NCCL_P2P_LEVEL": "PHB"}, False),
    # Behind one switch: NCCL's PXB default already uses P2P.
    "l40s-x4-pcie-switch": ({"NCCL_PROTO": "LL", "NCCL_ALGO": "Ring"}, False),
    "l40s-x8-2switch-2numa": ({"NCCL_P2P_LEVEL": "SYS", "NCCL_PROTO": "LL", "NCCL_ALGO": "Ring"}, False),
    # NVLink pairs: not PCIe-only, so no protocol override; SYS pairs with P2P OK still need the level.
    "h100pcie-x4-nvlink-pairs": ({"NCCL_P2P_LEVEL": "SYS"}, False),
    "h100sxm-x8-nvswitch": ({}, False),
    # P2P not supported anywhere: never forced, warned.
    "rtx4090-x4-p2p-unsupported": ({"NCCL_PROTO": "LL", "NCCL_ALGO": "Ring"}, True),
    # P2P blocked on one pair (ACS), fine on the PHB pairs: level PHB for those, warning for the other.
    "l40s-x4-acs-partial": ({"NCCL_P2P_LEVEL": "PHB", "NCCL_PROTO": "LL", "NCCL_ALGO": "Ring"}, True),
    "mixed-x2": ({"NCCL_P2P_LEVEL": "PHB"}, False),
    "h100sxm-x1-mig": ({}, False),
}


def test_every_constructed_fixture_has_a_policy_expectation():
    assert sorted(EXPECTED) == constructed_names()


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_policy_per_topology(name):
    env, warns = EXPECTED[name]
    result = policy.nccl_policy(facts(name))
    assert result["env"] == env
    assert bool(result["warnings"]) is warns
    for var, setting in result["settings"].items():
        assert setting["source"] == "policy" and setting["reason"] and setting["rule"]


def test_seed_reasons():
    result = policy.nccl_policy(facts("rtxpro6000-x8-2numa"))
    s = result["settings"]
    assert "SYS" in s["NCCL_P2P_LEVEL"]["reason"] and "PXB" in s["NCCL_P2P_LEVEL"]["reason"]
    assert "51.5%" in s["NCCL_PROTO"]["reason"] and "tuning/debug" in s["NCCL_ALGO"]["reason"]


def test_p2p_warning_names_causes_and_checks():
    warning = policy.nccl_policy(facts("l40s-x4-acs-partial"))["warnings"][0]
    assert "GPU0-GPU1" in warning and "GPU2-GPU3" not in warning
    assert "ACS" in warning and "IOMMU" in warning
    assert "nvidia-smi topo -p2p r" in warning and "lspci -vvv | grep ACSCtl" in warning


def test_real_h200_single_gpu_gets_nothing():
    from nvml_double import from_capture
    from conftest import FIXTURES
    import os
    f = topo.read_nvml(from_capture(os.path.join(FIXTURES, "real", "h200-x1-vm.json")))
    assert policy.nccl_env(f) == {}


def test_overrides_set_replace_and_remove():
    f = facts("rtxpro6000-x8-2numa")
    result = policy.nccl_policy(f, {"NCCL_PROTO": None, "NCCL_ALGO": "Tree", "NCCL_NVLS_ENABLE": "0"})
    assert result["env"] == {"NCCL_P2P_LEVEL": "SYS", "NCCL_ALGO": "Tree", "NCCL_NVLS_ENABLE": "0"}
    assert result["settings"]["NCCL_ALGO"]["source"] == "inventory"
    assert result["settings"]["NCCL_P2P_LEVEL"]["source"] == "policy"
    assert any("NCCL_PROTO removed" in n for n in result["notes"])


def test_p2p_gate_fallback_disables_p2p_and_says_why_and_inventory_still_wins():
    f = facts("rtxpro6000-x8-2numa")
    failure = "P2P gate failed at all-reduce across 8 ranks: rank(s) 3 did not answer within 120 s (killed)"
    result = policy.nccl_policy(f, None, None, failure)
    assert result["env"] == dict(policy.nccl_env(f), NCCL_P2P_DISABLE="1")
    assert result["settings"]["NCCL_P2P_DISABLE"]["source"] == "p2p_gate"
    assert result["settings"]["NCCL_P2P_DISABLE"]["rule"] == "p2p_gate_fallback"
    assert "44 tok/s" in result["settings"]["NCCL_P2P_DISABLE"]["reason"]
    assert any(w.endswith(failure) for w in result["warnings"])
    assert any(line.startswith("NCCL_P2P_DISABLE=1 [p2p_gate: p2p_gate_fallback]") for line in result["report"])
    assert "NCCL_P2P_DISABLE" not in policy.nccl_policy(f, {"NCCL_P2P_DISABLE": None}, None, failure)["env"]
    assert policy.nccl_policy(f, None, None, None) == policy.nccl_policy(f, None, None, "") == policy.nccl_policy(f)


@pytest.mark.parametrize("value", [1, True, 1.5, ["LL"]])
def test_override_values_must_be_strings(value):
    with pytest.raises(TypeError, match="NCCL_PROTO must be a string"):
        policy.nccl_policy(facts("rtxpro6000-x8-2numa"), {"NCCL_PROTO": value})


@pytest.mark.parametrize("name,tp,ep,car", [
    ("rtxpro6000-x8-2numa", 8, False, False),
    ("rtxpro6000-x4-1numa", 4, False, False),
    ("rtxpro6000-x2-1numa", 2, False, True),
    ("rtx4090-x4-p2p-unsupported", 4, False, False),
    ("h100sxm-x8-nvswitch", 8, True, True),
    ("h100pcie-x4-nvlink-pairs", 4, False, False),
    ("h100sxm-x1-mig", 1, False, False),
])
def test_parallel_layout(name, tp, ep, car):
    layout = policy.parallel_layout(facts(name))
    assert (layout["tensor_parallel_size"], layout["expert_parallel"], layout["custom_all_reduce"]) == (tp, ep, car)
    assert set(layout["reasons"]) == {"tensor_parallel_size", "expert_parallel", "custom_all_reduce"}


def test_parallel_layout_two_pcie_gpus_without_p2p():
    f = facts("rtxpro6000-x2-1numa")
    for p in f["pairs"]:
        p["p2p"]["read"] = "CNS"
    f = topo.build_facts("snapshot", None, None, f["gpus"], f["pairs"], [])
    assert policy.parallel_layout(f)["custom_all_reduce"] is False


def test_parallel_layout_for_fewer_gpus():
    assert policy.parallel_layout(facts("rtxpro6000-x8-2numa"), gpus=6)["tensor_parallel_size"] == 4
