# -*- coding: utf-8 -*-
"""The weight-shape rules (module_utils/_policy/weight_shapes.py): what vLLM 0.33.0's weight loader refuses when it
splits the weights over the ranks, with the shipped models' published numbers
(tests/fixtures/vllm/model-configs-published.json, weight_shapes), and the layout the vllm_service role picks."""

from __future__ import annotations

import json
import os

import pytest

from ansible_collections.moeops.inference.plugins.module_utils._common.plan import plan_role
from ansible_collections.moeops.inference.plugins.module_utils._common.specs import spec_roles
from ansible_collections.moeops.inference.plugins.module_utils._facts import gpu_topology as topo
from ansible_collections.moeops.inference.plugins.module_utils._policy import model_profile
from ansible_collections.moeops.inference.plugins.module_utils._policy import nccl_policy
from ansible_collections.moeops.inference.plugins.module_utils._policy import weight_shapes as ws
from conftest import REPO, load_json, role_defaults, role_spec, shipped_profile

with open(os.path.join(REPO, "tests", "fixtures", "vllm", "model-configs-published.json")) as _f:
    PUBLISHED = json.load(_f)["weight_shapes"]
PROFILES = sorted(PUBLISHED)


def status(findings, rule):
    return [f["status"] for f in findings if f["rule"] == rule]


def shapes(name):
    profile = shipped_profile(name)
    return ws.model_shapes(profile, model_profile.model_dimensions(profile))


# --------------------------------------------------------------------------- the numbers

@pytest.mark.parametrize("name", PROFILES)
def test_each_profile_carries_the_published_numbers_with_their_sources(name):
    published, profile = PUBLISHED[name], shipped_profile(name)
    assert published["sources"] and published["config_json"].startswith("https://huggingface.co/")
    assert profile["hidden_size"] == published["hidden_size"]
    assert profile["moe_intermediate_size"] == published["moe_intermediate_size"]
    assert profile["num_routed_experts"] == published["n_routed_experts"]
    assert profile.get("weight_block_size") == published.get("weight_block_size")
    assert profile.get("quantization_group_size") == published.get("quantization_group_size")


def test_the_schema_refuses_a_block_size_that_is_not_two_positive_numbers():
    profile = dict(shipped_profile("minimax_m25"), weight_block_size=[128])
    assert any("weight_block_size: must be two positive integers" in p for p in model_profile.validate_profile(profile))
    profile = dict(shipped_profile("kimi_k25"), quantization_group_size=0)
    assert any("quantization_group_size: must be above 0" in p for p in model_profile.validate_profile(profile))


# --------------------------------------------------------------------------- each rule

def test_heads_split_or_replicate_evenly():
    assert ws.head_phrases(8, 48, 8) == []
    assert ws.head_phrases(6, 48, 8) == ["cannot split or replicate its 8 key/value heads evenly"]
    assert ws.head_phrases(3, 64, 64) == ["does not divide the model's 64 attention heads",
                                          "cannot split or replicate its 64 key/value heads evenly"]
    assert status(ws.kv_heads(16, 8), "kv_heads") == ["ok"]  # replicated: 16 ranks over 8 heads


def test_the_moe_intermediate_size_must_divide_over_the_moe_ranks():
    assert status(ws.moe_intermediate_split(8, 1536), "moe_intermediate_split") == ["ok"]
    assert status(ws.moe_intermediate_split(5, 1536), "moe_intermediate_split") == ["refused"]
    assert status(ws.moe_intermediate_split(8, None), "moe_intermediate_split") == ["uncertain"]


def test_minimax_fp8_experts_at_tensor_parallel_8_need_refined_blocks():
    # 1536 / 8 = 192, not whole 128-wide blocks; gcd(128, 128, 192, 3072) = 64 >= 32: vLLM refines to 64x64 blocks,
    # which only its Triton MoE kernels take.
    found = ws.fp8_block_moe(8, 1536, 3072, [128, 128])
    assert status(found, "fp8_block_moe") == ["uncertain"]
    assert "192" in found[0]["message"] and "64x64" in found[0]["message"]
    assert status(ws.fp8_block_moe(4, 1536, 3072, [128, 128]), "fp8_block_moe") == ["ok"]   # 384 = 3 x 128
    assert status(ws.fp8_block_moe(1, 1536, 3072, [128, 128]), "fp8_block_moe") == ["ok"]   # expert parallel


def test_fp8_experts_without_a_refined_block_of_32_are_refused():
    # 1536 / 32 = 48: gcd(128, 48, 3072) = 16 < 32, so validate_fp8_block_shape_moe raises.
    assert status(ws.fp8_block_moe(32, 1536, 3072, [128, 128]), "fp8_block_moe") == ["refused"]
    assert status(ws.fp8_block_moe(8, 1536, 3072, None), "fp8_block_moe") == ["uncertain"]


def test_block_fp8_attention_shares_are_whole_blocks():
    assert status(ws.fp8_block_linear(8, [128, 128], 48, 8, 128), "fp8_block_linear") == ["ok"]
    # A head of 64 on 8 ranks with 8 heads: 64 a rank, half a block.
    assert status(ws.fp8_block_linear(8, [128, 128], 8, 8, 64), "fp8_block_linear") == ["refused"]


def test_kimi_int4_groups_and_marlin():
    assert status(ws.wna16_moe_group(8, 2048, 7168, 32), "wna16_moe_group") == ["ok"]
    assert status(ws.wna16_moe_group(128, 2048, 7168, 32), "wna16_moe_group") == ["refused"]  # share 16 < group 32
    assert status(ws.marlin_moe_shape(8, 2048, 7168, 32), "marlin_moe_shape") == ["ok"]
    assert status(ws.marlin_moe_shape(8, 2048, 7168, 16), "marlin_moe_shape") == ["uncertain"]  # no such group
    assert status(ws.wna16_moe_group(8, 2048, 7168, None), "wna16_moe_group") == ["uncertain"]


def test_glm5_nvfp4_groups():
    assert status(ws.nvfp4_moe_group(8, 2048, 16), "nvfp4_moe_group") == ["ok"]
    assert status(ws.nvfp4_moe_group(256, 2048, 16), "nvfp4_moe_group") == ["uncertain"]  # share 8 < 16


def test_experts_over_expert_parallel_ranks():
    assert status(ws.experts_over_ranks(8, 256), "experts_over_ranks") == ["ok"]
    assert status(ws.experts_over_ranks(6, 256), "experts_over_ranks") == ["ok"]  # uneven, as vLLM places them
    assert status(ws.experts_over_ranks(6, 256, eplb=True), "experts_over_ranks") == ["refused"]
    assert status(ws.experts_over_ranks(512, 256), "experts_over_ranks") == ["uncertain"]


def test_data_parallel_without_expert_parallel_shards_the_experts_over_every_rank():
    # vLLM flattens tensor and data parallel for the MoE layers: TP4 x DP2 is TP8 for the experts.
    s = shapes("minimax_m25")
    assert ws.verdict(ws.layout_findings(s, 4, False, dp=2)) == "uncertain"
    assert ws.verdict(ws.layout_findings(s, 4, True, dp=2)) == "ok"


def test_expert_parallel_as_the_arguments_set_it():
    """Read as vLLM 0.33.0 reads them (serve_args.switch, the one reader of the arguments): every spelling and
    prefix, the last one winning."""
    from ansible_collections.moeops.inference.plugins.module_utils._roles.vllm_service import serve_args
    assert serve_args.switch([], "enable_expert_parallel") is None
    assert serve_args.switch(["--enable-expert-parallel"], "enable_expert_parallel") is True
    assert serve_args.switch(["-ep", "--no-enable-expert-parallel"], "enable_expert_parallel") is False
    assert serve_args.switch(["--no-enable-expert-parallel", "--enable-expert-parallel"], "enable_expert_parallel")
    assert serve_args.switch(["--enable_expert_parallel", "--max-num-seqs", "8"], "enable_expert_parallel") is True
    assert serve_args.switch(["--disable-expert-parallel"], "enable_expert_parallel") is False
    assert serve_args.switch(["--enable-expert-p"], "enable_expert_parallel") is True  # a unique prefix


# --------------------------------------------------------------------------- the layout

def host(count, cc="12.0", mib=97887):
    """count GPUs of one compute capability (RTX PRO 6000 Blackwell: 12.0, 96 GB), as gpu_facts reports them."""
    facts = topo.from_snapshot(load_json("constructed", "rtxpro6000-x8-2numa.json"), "rtxpro6000-x8-2numa")
    facts["gpus"] = [dict(g, compute_capability=cc, memory_total_mib=mib) for g in facts["gpus"][:count]]
    facts["count"] = count
    return facts


def plan_on(name, facts, **values):
    v = role_defaults("vllm_service")
    v.update({"vllm_service_env_file": "/etc/vllm/vllm.env", "vllm_service_api_key_file": "/etc/vllm/vllm.api-key",
              "vllm_service_profile": name})
    v.update(values)
    return plan_role("vllm_service", role_spec("vllm_service"), v, [], spec_roles(),
                     {"gpus": facts, "profile": shipped_profile(name)})


def test_minimax_on_8_gpus_runs_tensor_parallel_8_with_expert_parallel():
    result = plan_on("minimax_m25", host(8))
    args = result["plan"]["args"]
    assert args[args.index("--tensor-parallel-size") + 1] == "8" and "--enable-expert-parallel" in args
    source = result["plan"]["arg_sources"]["--enable-expert-parallel"]
    assert source["rule"] == "weight_shapes" and "192" in source["reason"]
    assert "with expert parallel" in result["outcome"]
    assert not [p for p in result["problems"] if "weight loader" in p]
    assert not [w for w in result["warnings"] if "fp8_block_moe" in w]


def test_minimax_on_4_gpus_needs_no_expert_parallel():
    args = plan_on("minimax_m25", host(4))["plan"]["args"]
    assert args[args.index("--tensor-parallel-size") + 1] == "4" and "--enable-expert-parallel" not in args


def test_an_explicit_tensor_parallel_8_gets_expert_parallel_from_the_policy():
    args = plan_on("minimax_m25", host(8), vllm_service_tensor_parallel_size=8)["plan"]["args"]
    assert "--enable-expert-parallel" in args


def test_an_explicit_tensor_parallel_8_without_expert_parallel_is_named_with_the_layouts_that_load():
    result = plan_on("minimax_m25", host(8), vllm_service_tensor_parallel_size=8,
                     vllm_service_extra_args=["--no-enable-expert-parallel"])
    assert "--enable-expert-parallel" not in result["plan"]["args"]
    lines = [w for w in result["warnings"] if "rule fp8_block_moe" in w]
    assert len(lines) == 1
    assert "tensor parallel 8 (vllm_service_tensor_parallel_size 8, expert parallel off in the arguments)" in lines[0]
    assert "expert share 192 (intermediate 1536 / 8)" in lines[0]
    assert "validate_fp8_block_shape_moe" in lines[0]
    assert "Layouts that load: tensor parallel 8 with expert parallel, tensor parallel 4" in lines[0]


def test_a_layout_the_loader_refuses_is_a_problem_naming_the_rule():
    # A hidden size of 3000 leaves no refined block of 32 for the 192-wide expert share at tensor parallel 8:
    # gcd(128, 192, 3000) = 24, so validate_fp8_block_shape_moe raises. Expert parallel keeps whole 1536-wide experts.
    profile = dict(shipped_profile("minimax_m25"), hidden_size=3000)
    v = role_defaults("vllm_service")
    v.update({"vllm_service_env_file": "/etc/vllm/vllm.env", "vllm_service_api_key_file": "/etc/vllm/vllm.api-key",
              "vllm_service_tensor_parallel_size": 8, "vllm_service_extra_args": ["--no-enable-expert-parallel"],
              "vllm_service_profile": "minimax_m25"})
    result = plan_role("vllm_service", role_spec("vllm_service"), v, [], spec_roles(), {"gpus": host(8),
                                                                                        "profile": profile})
    lines = [p for p in result["problems"] if "rule fp8_block_moe" in p]
    assert len(lines) == 1 and "vLLM's weight loader refuses it" in lines[0]
    assert "expert share 192 (intermediate 1536 / 8)" in lines[0] and "no refined block of at least 32" in lines[0]
    assert "Layouts that load: tensor parallel 8 with expert parallel, tensor parallel 4" in lines[0]
    # The same profile without a layout given: the policy takes expert parallel, and nothing is refused.
    v.update({"vllm_service_tensor_parallel_size": None, "vllm_service_extra_args": []})
    result = plan_role("vllm_service", role_spec("vllm_service"), v, [], spec_roles(), {"gpus": host(8),
                                                                                        "profile": profile})
    assert "--enable-expert-parallel" in result["plan"]["args"]
    assert not [p for p in result["problems"] if "weight loader" in p]


@pytest.mark.parametrize("name", PROFILES)
@pytest.mark.parametrize("count", [1, 2, 4, 8])
def test_no_default_layout_on_rtx_pro_6000_is_one_the_loader_refuses(name, count):
    """Every shipped profile's default layout on 1, 2, 4 and 8 GPUs of compute capability 12.0 (96 GB) passes the
    weight-shape rules; where it does not fit, preflight refuses it for memory, never with a layout the rules
    refuse or cannot judge."""
    result = plan_on(name, host(count))
    plan = result["plan"]
    chosen = ws.layout_findings(plan["weight_layout"]["shapes"], plan["tensor_parallel_size"],
                                plan["weight_layout"]["expert_parallel"])
    assert ws.verdict(chosen) == "ok"
    assert not [p for p in result["problems"] if "weight loader" in p]
    assert not [w for w in result["warnings"] if "only the GPU can tell" in w]
    memory = [p for p in result["problems"] if "GPU memory" in p]
    profile = shipped_profile(name)
    fits = count * 97887 * 2 ** 20 * profile["gpu_memory_utilization"] >= profile["min_gpu_memory_gb"] * 10 ** 9
    assert bool(memory) == (not fits)


def test_the_policy_falls_back_to_a_smaller_layout_only_where_nothing_at_the_topology_size_loads():
    # Experts that split over 4 ranks but not 8, with or without expert parallel (6 experts over 8 ranks leaves
    # ranks without one): tensor parallel 4.
    s = dict(shapes("kimi_k25"), num_routed_experts=6, moe_intermediate_size=4 * 32 * 3)
    chosen = ws.choose_layout(s, 8)
    assert (chosen["tensor_parallel_size"], chosen["expert_parallel"]) == (4, False)
    assert "tensor parallel 8:" in chosen["reason"]


def test_the_docs_table_is_the_script_output():
    """docs/model-profiles.md holds the table tests/fixtures/vllm/weight_shapes_table.py prints from the rules."""
    import subprocess
    import sys
    out = subprocess.run([sys.executable, os.path.join(REPO, "tests", "fixtures", "vllm", "weight_shapes_table.py")],
                         check=True, capture_output=True, text=True, cwd=REPO).stdout
    with open(os.path.join(REPO, "docs", "model-profiles.md")) as f:
        assert out.strip() in f.read()


def test_the_base_tensor_parallel_is_the_topology_policys():
    assert ws.candidates(nccl_policy.parallel_layout({"count": 6})["tensor_parallel_size"])[0] == (4, False)


def test_a_size_the_head_rules_refuse_is_refused_once():
    # Kimi-K2.5 at tensor parallel 3: the heads do not divide (fit's check says so, with the sizes that do), and the
    # 2048-wide experts do not either; the weight-shape report adds no second refusal for it.
    result = plan_on("kimi_k25", host(8), vllm_service_tensor_parallel_size=3)
    assert [p for p in result["problems"] if "does not divide the model's 64 attention heads" in p]
    assert not [p for p in result["problems"] if "weight loader" in p]
    assert ws.verdict(ws.layout_findings(shapes("kimi_k25"), 3, False)) == "refused"


def test_the_bad_inputs_case_warns_on_the_integration_node_with_every_substring_it_expects():
    """tests/integration/bad-inputs/cases.yml, warn-minimax-tp8-without-expert-parallel, on the node's GPU facts (the
    constructed 8x RTX PRO 6000): no problem, and one warning holding every substring the case expects."""
    import yaml
    with open(os.path.join(REPO, "tests", "integration", "bad-inputs", "cases.yml")) as f:
        hosts = yaml.safe_load(f)["preflight"]
    case = next(h for h in hosts if h["host"] == "warn-minimax-tp8-without-expert-parallel")["inputs"][0]
    facts = topo.from_snapshot(load_json("constructed", "rtxpro6000-x8-2numa.json"), "rtxpro6000-x8-2numa")
    extra = {k: v for k, v in case["vars"].items() if k != "vllm_service_profile"}
    result = plan_on(case["vars"]["vllm_service_profile"], facts, **extra)
    assert result["problems"] == []
    assert [w for w in result["warnings"] if all(s in w for s in case["warn"])]


def test_a_tensor_parallel_size_the_heads_refuse_is_refused_with_no_gpu_read():
    """Issue 39: with gpu_facts_required false and no GPU read, TP 3 for Kimi-K2.5 was accepted, though vLLM refuses it
    on any box. The head rule needs no hardware; memory and the GPU count do, and stay skipped."""
    v = role_defaults("vllm_service")
    v.update({"vllm_service_env_file": "/etc/vllm/vllm.env", "vllm_service_api_key_file": "/etc/vllm/vllm.api-key",
              "vllm_service_profile": "kimi_k25", "gpu_facts_required": False})
    none = {"count": 0, "gpus": [], "from_hardware": False}
    for tp, refused in ((3, True), (4, False), (None, False)):
        v["vllm_service_tensor_parallel_size"] = tp
        result = plan_role("vllm_service", role_spec("vllm_service"), v, [], spec_roles(),
                           {"gpus": none, "profile": shipped_profile("kimi_k25")})
        heads = [p for p in result["problems"] if "64 attention heads" in p]
        assert bool(heads) == refused, (tp, result["problems"])
        assert not [p for p in result["problems"] if "attention heads" not in p], result["problems"]
        if refused:
            assert "Use one of 1, 2, 4, 8." in heads[0]
