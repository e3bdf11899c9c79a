# -*- coding: utf-8 -*-
"""The unit the vllm_service role renders for each workload (vllm_service_workload), from the role's plan and its
own template, for Kimi-K2.5 on the seed box (8x RTX PRO 6000, two sockets).

balanced is today's behaviour: its unit is byte for byte the one rendered before workloads existed
(tests/fixtures/units/kimi_k25-rtxpro6000-x8-2numa-balanced.service, rendered at cc3872e, issue 26, with the same
template path as the role's lookup; since issue 36 with vLLM 0.33.0's NUMA default made explicit, --no-numa-bind;
since issue 37 with the engine's own compile and JIT cache directories; since issue 40 ordered after nvidia-persistenced
without pulling it in; since issue 41 restarted whatever its exit status, Restart=always).
latency and throughput differ from it only where the workload says."""
from __future__ import annotations

import difflib
import os

import pytest
import role_templating

from ansible_collections.moeops.inference.plugins.module_utils._facts import gpu_topology as topo
from conftest import REPO, load_json, role_result

TEMPLATE = os.path.join(role_templating.ROLES, "vllm_service", "templates", "vllm.service.j2")
GOLDEN = os.path.join(REPO, "tests", "fixtures", "units", "kimi_k25-rtxpro6000-x8-2numa-balanced.service")


def seed():
    return topo.from_snapshot(load_json("constructed", "rtxpro6000-x8-2numa.json"), "rtxpro6000-x8-2numa")


def unit(**values):
    gpus = seed()
    result = role_result("vllm_service", {"gpus": gpus}, vllm_service_profile="kimi_k25", **values)
    assert not result["problems"], result["problems"]
    variables = role_templating.role_vars("vllm_service")
    variables.update(ansible_managed="Ansible managed", _vllm_service=result, ansible_facts={"nvidia_gpu": gpus})
    variables.update(values)
    return role_templating.render_file(TEMPLATE, variables), result


def changed_lines(text):
    with open(GOLDEN) as f:
        golden = f.read()
    return [line for line in difflib.unified_diff(golden.splitlines(), text.splitlines(), lineterm="", n=0)
            if line[:1] in "+-" and not line.startswith(("+++", "---"))]


def test_balanced_is_the_unit_from_before_workloads_byte_for_byte():
    for values in ({}, {"vllm_service_workload": "balanced"}):
        text, result = unit(**values)
        assert changed_lines(text) == []
        with open(GOLDEN) as f:
            assert text == f.read()
        assert result["plan"]["workload"]["args"] == []


def test_latency_adds_interactivity_and_keeps_the_nccl_rules_with_the_workload_in_their_reason():
    text, result = unit(vllm_service_workload="latency")
    diff = changed_lines(text)
    added = [line for line in diff if line.startswith("+")]
    assert "+    --performance-mode interactivity \\" in added
    # The NCCL values are the same; their comment names the workload.
    assert "Environment=NCCL_PROTO=LL" in text.splitlines() and "Environment=NCCL_ALGO=Ring" in text.splitlines()
    assert any(line.startswith("+# NCCL_ALGO [policy: pcie_latency] workload latency (single-stream decode") for line in added)
    assert not [line for line in diff if "ExecStart" in line or "Environment=" in line]
    assert result["plan"]["arg_sources"]["--performance-mode"]["rule"] == "vllm_service_workload"


def test_throughput_adds_its_mode_and_queue_cap_and_leaves_protocol_and_algorithm_to_nccl():
    text, result = unit(vllm_service_workload="throughput")
    lines = text.splitlines()
    assert "    --performance-mode throughput \\" in lines
    # 8x 96 GB GPUs: vLLM 0.33.0's max_num_seqs is 1024, doubled by throughput; one batch may wait beside it.
    assert "    --max-num-queued-reqs 4096 \\" in lines
    assert "Environment=NCCL_P2P_LEVEL=SYS" in lines
    assert not [line for line in lines if line.startswith(("Environment=NCCL_PROTO", "Environment=NCCL_ALGO"))]
    removed = [line for line in changed_lines(text) if line.startswith("-")]
    assert [line for line in removed if not line.startswith("-#")] == ["-Environment=NCCL_ALGO=Ring",
                                                                       "-Environment=NCCL_PROTO=LL"]
    src = result["plan"]["arg_sources"]["--max-num-queued-reqs"]
    assert src["rule"] == "vllm_service_workload" and "503" in src["reason"]
    notes = result["plan"]["nccl"]["notes"]
    assert any(n.startswith("NCCL_PROTO, NCCL_ALGO unset: workload throughput") and "1,109" in n for n in notes)


@pytest.mark.parametrize("cap,expected", [(0, None), (64, "64")])
def test_the_queue_cap_from_inventory(cap, expected):
    text, result = unit(vllm_service_workload="throughput", vllm_service_max_queued_requests=cap)
    got = [line.split()[1] for line in text.splitlines() if line.strip().startswith("--max-num-queued-reqs")]
    assert got == ([expected] if expected else [])
    assert result["plan"]["workload"]["queue_cap"]["rule"] == "vllm_service_max_queued_requests"
    latency = unit(vllm_service_workload="latency", vllm_service_max_queued_requests=8)[0]
    assert "    --max-num-queued-reqs 8 \\" in latency.splitlines()
