# -*- coding: utf-8 -*-
"""Model profiles: the shipped ones validate, constraints apply per compute capability, the
vllm serve arguments carry each recipe's flags."""
from __future__ import annotations

import copy
import glob
import os

import pytest
import yaml

from ansible_collections.moeops.inference.plugins.module_utils import gpu_topology as topo
from ansible_collections.moeops.inference.plugins.module_utils import model_profile as mp
from conftest import MODELS, load_json
from conftest import shipped_profile as profile


def facts(name):
    return topo.from_snapshot(load_json("constructed", name + ".json"), name)


def test_every_shipped_profile_validates():
    files = sorted(glob.glob(os.path.join(MODELS, "*.yml")))
    assert [os.path.basename(f) for f in files] == ["glm5.yml", "kimi_k25.yml", "minimax_m25.yml"]
    for f in files:
        with open(f) as fh:
            data = yaml.safe_load(fh)
        assert list(data) == ["vllm_model_profile"], f
        assert mp.validate_profile(data["vllm_model_profile"]) == [], f


def test_validate_profile_names_every_bad_key():
    bad = copy.deepcopy(profile("kimi_k25"))
    bad["max_model_len"] = "long"
    bad["trust_remote_code"] = "yes"
    bad["tool_parser"] = "kimi_k2"
    del bad["served_name"]
    problems = mp.validate_profile(bad)
    assert any(p.startswith("vllm_service_model.max_model_len: must be a integer") for p in problems)
    assert any(p.startswith("vllm_service_model.trust_remote_code: must be a boolean") for p in problems)
    assert any(p.startswith("vllm_service_model.tool_parser: not a profile key") for p in problems)
    assert any(p.startswith("vllm_service_model.served_name: required") for p in problems)
    assert len(problems) == 4


@pytest.mark.parametrize("key,value,needle", [
    ("gpu_memory_utilization", 1.5, "at most 1"),
    ("source", "relative/dir/model", "neither a Hugging Face repo id"),
    ("kv_cache_dtype", "fp4", "not one of vLLM's"),
    ("min_gpu_memory_gb", True, "must be a integer or number"),
    ("extra_args", ["--max-num-seqs", 64], "every element must be a string"),
])
def test_validate_profile_values(key, value, needle):
    bad = dict(profile("minimax_m25"), **{key: value})
    problems = mp.validate_profile(bad, "vllm_model_profile")
    assert len(problems) == 1 and needle in problems[0] and problems[0].startswith("vllm_model_profile.%s" % key)


def test_not_a_profile():
    assert "expected a model profile" in mp.validate_profile("kimi_k25")[0]
    assert "an empty mapping" in mp.validate_profile({})[0]


def test_glm5_on_compute_capability_12_keeps_bf16_kv_and_no_custom_all_reduce():
    glm = profile("glm5")
    args = mp.serve_args(glm, 8, "127.0.0.1", 8000, ccs=mp.compute_capabilities(facts("rtxpro6000-x8-2numa")))
    assert args[args.index("--kv-cache-dtype") + 1] == "bfloat16"
    assert "--disable-custom-all-reduce" in args
    settings = mp.effective_settings(glm, ["12.0"])
    assert settings["applied"] and "FP8 KV cache garbles" in settings["applied"][0]


def test_glm5_elsewhere_has_no_constraint():
    glm = profile("glm5")
    args = mp.serve_args(glm, 8, "127.0.0.1", 8000, ccs=["10.0"])
    assert "--kv-cache-dtype" not in args and "--disable-custom-all-reduce" not in args
    assert mp.effective_settings(glm, ["10.0"])["applied"] == []


def test_recipe_flags_in_the_arguments():
    kimi = mp.serve_args(profile("kimi_k25"), 8, "127.0.0.1", 8000, ccs=["12.0"])
    assert kimi[:2] == ["serve", "moonshotai/Kimi-K2.5"]
    assert "--trust-remote-code" in kimi and kimi[kimi.index("--tool-call-parser") + 1] == "kimi_k2"
    assert kimi[kimi.index("--mm-encoder-tp-mode") + 1] == "data"
    glm = mp.serve_args(profile("glm5"), 8, "0.0.0.0", 8001)
    assert glm[glm.index("--tool-call-parser") + 1] == "glm47" and glm[glm.index("--reasoning-parser") + 1] == "glm45"
    assert glm[glm.index("--chat-template-content-format") + 1] == "string" and "--trust-remote-code" not in glm
    mm = mp.serve_args(profile("minimax_m25"), 4, "127.0.0.1", 8000, extra_args=["--max-num-seqs", "32"])
    assert mm[mm.index("--reasoning-parser") + 1] == "minimax_m2_append_think"
    assert mm[-4:] == ["--port", "8000", "--max-num-seqs", "32"]  # inventory extra args last
    assert mm[mm.index("--tensor-parallel-size") + 1] == "4"


def test_overrides_and_staged_model_path():
    args = mp.serve_args(profile("kimi_k25"), 8, "127.0.0.1", 8000, max_model_len=65536, gpu_memory_utilization=0.8,
                         model="/srv/models/kimi")
    assert args[1] == "/srv/models/kimi"
    assert args[args.index("--max-model-len") + 1] == "65536"
    assert args[args.index("--gpu-memory-utilization") + 1] == "0.8"


def test_chat_template_kwargs_are_json():
    p = dict(profile("glm5"), default_chat_template_kwargs={"enable_thinking": False})
    args = mp.serve_args(p, 8, "127.0.0.1", 8000)
    assert args[args.index("--default-chat-template-kwargs") + 1] == '{"enable_thinking":false}'


def test_dimensions_from_config_json_first_then_profile():
    kimi = profile("kimi_k25")
    assert mp.model_dimensions(kimi)["sources"] == {
        "hidden_size": "profile", "num_attention_heads": "profile", "num_key_value_heads": "profile"}
    # Kimi-K2.5's config.json keeps the language model's dimensions in text_config.
    config = {"architectures": ["KimiK25"], "text_config": {"hidden_size": 7000, "num_attention_heads": 56}}
    dims = mp.model_dimensions(kimi, config)
    assert (dims["hidden_size"], dims["num_attention_heads"], dims["num_key_value_heads"]) == (7000, 56, 56)
    # No key/value head count beside the attention heads: as many as those (vLLM's reading), not the profile's 64.
    assert dims["sources"] == {"hidden_size": "config.json", "num_attention_heads": "config.json",
                               "num_key_value_heads": "config.json"}
    assert mp.model_dimensions(kimi, {"hidden_size": True})["sources"]["hidden_size"] == "profile"
    # The other names vLLM reads (ChatGLM-style multi_query_group_num), at the top level or in text_config.
    assert mp.model_dimensions(kimi, {"num_attention_heads": 32, "multi_query_group_num": 2})["num_key_value_heads"] == 2
    assert mp.model_dimensions(kimi, {"text_config": {"num_kv_heads": 4}})["num_key_value_heads"] == 4
    # Neither count in config.json: both from the profile.
    only_hidden = mp.model_dimensions(kimi, {"hidden_size": 7168})
    assert (only_hidden["num_key_value_heads"], only_hidden["sources"]["num_key_value_heads"]) == (64, "profile")


def test_constraint_conflict_with_extra_args():
    glm = profile("glm5")
    problems = mp.constraint_conflicts(glm, ["12.0"], ["--kv-cache-dtype", "fp8"])
    assert len(problems) == 1 and problems[0].startswith("vllm_service_extra_args: --kv-cache-dtype fp8 contradicts")
    assert mp.constraint_conflicts(glm, ["12.0"], ["--kv-cache-dtype=bfloat16"]) == []
    assert mp.constraint_conflicts(glm, ["10.0"], ["--kv-cache-dtype", "fp8"]) == []


def test_bad_constraint_is_named():
    p = dict(profile("glm5"), compute_capability_constraints=[{"compute_capabilities": [12.0], "kv": "x"}])
    problems = mp.validate_profile(p)
    assert any("compute_capability_constraints[0].kv: not a constraint key" in x for x in problems)
    assert any("compute_capability_constraints[0].reason: required" in x for x in problems)
    assert any("compute_capability_constraints[0].compute_capabilities: a non-empty list of strings" in x for x in problems)
