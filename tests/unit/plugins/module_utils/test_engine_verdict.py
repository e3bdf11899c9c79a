# -*- coding: utf-8 -*-
"""The engine check's request and verdict (module_utils/_engine/verdict.py), on the output that
_engine/check.py printed in real vLLM 0.33.0 and 0.34.0 venvs (tests/fixtures/vllm/engine-check-*.json)."""
from __future__ import annotations

import copy
import importlib.util
import json
import os

import pytest

from ansible_collections.moeops.inference.plugins.module_utils._engine import check as script
from ansible_collections.moeops.inference.plugins.module_utils._engine import verdict as ev
from conftest import PROFILES, REPO
from conftest import shipped_profile as profile

VLLM_FIXTURES = os.path.join(REPO, "tests", "fixtures", "vllm")
SHIPPED = ("glm5", "kimi_k25", "minimax_m25")


def recorded(version):
    with open(os.path.join(VLLM_FIXTURES, "engine-check-%s.json" % version)) as f:
        return json.load(f)


def published_configs():
    with open(os.path.join(VLLM_FIXTURES, "model-configs-published.json")) as f:
        return json.load(f)["configs"]


def shipped_request():
    return ev.build_request({n: ("profiles/%s.yml" % n, profile(n)) for n in SHIPPED}, published_configs())


def row(verdict, name, cc):
    return next(r for r in verdict["rows"] if r["profile"] == name and r["compute_capability"] == cc)


@pytest.mark.parametrize("version", ["0.33.0", "0.34.0"])
def test_old_glm5_bf16_kv_on_12_0_is_refused_with_the_engines_reason(version):
    verdict = ev.interpret(recorded(version))
    assert verdict["vllm"] == version
    problems = [p for p in verdict["problems"] if "glm5_bf16" in p]
    assert len(problems) == 1, verdict["problems"]
    assert problems[0].startswith("vllm_service_profile glm5_bf16 (")
    assert ("compute_capability_constraints[0].kv_cache_dtype bfloat16 on compute capability 12.0: no vLLM attention "
            "backend takes it (FLASHINFER_MLA_SPARSE_SM120: kv_cache_dtype not supported; TRITON_MLA: sparse not "
            "supported); with kv_cache_dtype auto vLLM picks FLASHINFER_MLA_SPARSE_SM120, which takes auto, fp8, "
            "fp8_e4m3, fp8_ds_mla (tensor parallel 1, 2, 4, 8)") in problems[0]
    old = row(verdict, "glm5_bf16", "12.0")
    assert (old["status"], old["backend"], old["kv"]) == ("problem", "none", "bfloat16 refused")


@pytest.mark.parametrize("version", ["0.33.0", "0.34.0"])
def test_the_fixed_glm5_and_the_other_shipped_profiles_pass(version):
    verdict = ev.interpret(recorded(version))
    assert not [p for p in verdict["problems"] if "glm5_bf16" not in p]
    fixed = row(verdict, "glm5", "12.0")
    assert (fixed["status"], fixed["backend"], fixed["kv"]) == ("ok", "FLASHINFER_MLA_SPARSE_SM120", "auto ok (-> fp8_ds_mla)")
    assert row(verdict, "kimi_k25", "12.0")["backend"] == "TRITON_MLA"
    assert row(verdict, "minimax_m25", "12.0")["quantization"] == "fp8 ok (min 75)"
    assert "CompressedTensorsWNA16" in row(verdict, "kimi_k25", "9.0")["quantization"]
    for name in SHIPPED:
        for r in (r for r in verdict["rows"] if r["profile"] == name):
            assert r["status"] in ("ok", "uncertain"), r
    # The one uncertainty: a backend vLLM ranks higher could not be imported without a GPU; it is a note, never a pass.
    assert row(verdict, "glm5", "10.0")["status"] == "uncertain"
    assert any("CUTLASS_MLA could not be imported without a GPU" in n for n in verdict["notes"])


def test_the_recorded_runs_checked_what_the_shipped_profiles_ask_for_now():
    # A profile changed since the fixtures were recorded makes this fail: run engine_check.py again (its docstring).
    request = shipped_request()
    asked = {(p["profile"], c["compute_capability"], c["kv_cache_dtype"], tuple(c["tensor_parallel_sizes"]))
             for p in request["profiles"] for c in p["checks"]}
    for version in ("0.33.0", "0.34.0"):
        got = {(r["profile"], r["compute_capability"], r["kv_cache_dtype"],
                tuple(a["tensor_parallel_size"] for a in r["attention"]))
               for r in recorded(version)["results"] if r["profile"] in SHIPPED}
        assert got == asked, version


def test_the_recorded_runs_used_the_symbols_the_script_names():
    for version in ("0.33.0", "0.34.0", "0.33.0-no-kernels", "0.34.0-no-kernels"):
        assert recorded(version)["symbols"] == ["%s:%s" % s for s in script.SYMBOLS]
    # vLLM's own answers on FlashInfer are among them: an upgrade that drops them fails loudly.
    assert ("vllm.utils.flashinfer", "has_flashinfer") in script.SYMBOLS
    assert ("vllm.utils.flashinfer", "has_flashinfer_cubin") in script.SYMBOLS


@pytest.mark.parametrize("version", ["0.33.0", "0.34.0"])
def test_without_flashinfers_kernels_glm5_has_no_backend_on_12_0_and_the_problem_names_the_cause(version):
    """Recorded without flashinfer-cubin and without ninja on PATH: vLLM turns FlashInfer off.  GLM-5 on 12.0 is then
    refused, and the problem says why in the operator's words; FlashInfer backends picked anyway (10.0) are notes;
    every other row is what the recording with the kernels says."""
    without, kernels = ev.interpret(recorded(version + "-no-kernels")), ev.interpret(recorded(version))
    assert ev.flashinfer_off(recorded(version + "-no-kernels")) and not ev.flashinfer_off(recorded(version))
    glm5 = [p for p in without["problems"] if p.startswith("vllm_service_profile glm5 (")]
    assert len(glm5) == 1 and "FLASHINFER_MLA_SPARSE_SM120 requires FlashInfer's sparse MLA decode API" in glm5[0]
    assert glm5[0].endswith("(tensor parallel 1, 2, 4, 8). " + ev.FLASHINFER_OFF)
    assert (row(without, "glm5", "12.0")["status"], row(without, "glm5", "12.0")["backend"]) == ("problem", "none")
    picked_anyway = {(r["profile"], r["compute_capability"]) for r in without["rows"]
                     if any("a FlashInfer backend, although FlashInfer is off" in n and "(%s)" % r["file"] in n
                            and "compute capability %s:" % r["compute_capability"] in n for n in without["notes"])}
    assert picked_anyway == {("glm5", "10.0"), ("glm5_bf16", "10.0"), ("kimi_k25", "10.0"), ("minimax_m25", "10.0")}
    assert row(without, "kimi_k25", "10.0")["backend"] == "FLASHINFER_MLA"
    assert row(without, "kimi_k25", "10.0")["status"] == "uncertain"
    same = [(r["profile"], r["compute_capability"]) for r in without["rows"]
            if r == row(kernels, r["profile"], r["compute_capability"])]
    assert sorted(same) == [("glm5_bf16", "12.0"), ("kimi_k25", "12.0"), ("kimi_k25", "9.0"), ("minimax_m25", "12.0"),
                            ("minimax_m25", "9.0")]
    assert ev.table(without).splitlines()[1].startswith("FlashInfer off (flashinfer-cubin no;")


def test_build_request_applies_constraints_per_capability_and_reads_config_json():
    specs = {p["profile"]: p for p in shipped_request()["profiles"]}
    glm = specs["glm5"]
    assert [c["compute_capability"] for c in glm["checks"]] == ["10.0", "12.0"]  # min_compute_capability 10.0
    on_12 = glm["checks"][1]
    assert (on_12["kv_cache_dtype"], on_12["kv_cache_dtype_key"]) == ("auto", "compute_capability_constraints[0].kv_cache_dtype")
    assert glm["checks"][0]["kv_cache_dtype_key"] == "kv_cache_dtype"
    assert (glm["attention_type"], glm["head_size"], glm["quantization_method"]) == ("sparse_mla", 576, "modelopt_fp4")
    kimi, minimax = specs["kimi_k25"], specs["minimax_m25"]
    assert [c["compute_capability"] for c in kimi["checks"]] == ["9.0", "10.0", "12.0"]
    assert (kimi["head_size"], kimi["num_routed_experts"]) == (576, 384)  # text_config, as vLLM reads it
    assert kimi["quantization_config"]["quant_method"] == "compressed-tensors"
    assert (minimax["head_size"], minimax["num_key_value_heads"], minimax["num_routed_experts"]) == (128, 8, 256)
    assert minimax["checks"][0]["tensor_parallel_sizes"] == list(ev.DEFAULT_TENSOR_PARALLEL_SIZES)


def test_without_config_json_the_head_size_is_the_profiles_and_never_guessed():
    spec = ev.build_request({"glm5": ("profiles/glm5.yml", profile("glm5"))})["profiles"][0]
    assert spec["head_size"] == 576 and spec["num_routed_experts"] == 256  # the profile's attention_head_size and count
    bare = {k: v for k, v in profile("glm5").items() if k != "attention_head_size"}
    assert ev.build_request({"glm5": ("x.yml", bare)})["profiles"][0]["head_size"] is None
    # config.json wins over the profile.
    spec = ev.build_request({"glm5": ("x.yml", profile("glm5"))}, {"glm5": {"kv_lora_rank": 256, "qk_rope_head_dim": 64}})
    assert spec["profiles"][0]["head_size"] == 320
    assert ev.head_size("mla", {"kv_lora_rank": 512}) is None
    assert ev.head_size("gqa", {"hidden_size": 4096, "num_attention_heads": 32}) == 128
    assert ev.head_size("gqa", {"head_dim": 128, "hidden_size": 3072, "num_attention_heads": 48}) == 128


def test_a_float32_model_runs_in_bfloat16_as_vllms_auto_dtype_makes_it():
    assert ev.model_dtype({"torch_dtype": "float32"}) == "bfloat16"
    assert ev.model_dtype({"text_config": {"torch_dtype": "float16"}}) == "float16"
    assert ev.model_dtype(None) == "bfloat16"


def test_the_shipped_profiles_head_sizes_are_the_published_config_jsons():
    # attention_head_size is the fallback before the weights are staged: the same number config.json gives.
    configs = published_configs()
    for name in SHIPPED:
        assert profile(name)["attention_head_size"] == ev.head_size(profile(name)["attention_type"], configs[name]), name


def test_profile_tensor_parallel_sizes_replace_the_defaults():
    glm = dict(profile("glm5"), tensor_parallel_sizes=[8])
    spec = ev.build_request({"glm5": ("x.yml", glm)}, published_configs())["profiles"][0]
    assert {tuple(c["tensor_parallel_sizes"]) for c in spec["checks"]} == {(8,)}


def test_a_row_the_engine_did_not_check_is_never_a_pass():
    output = copy.deepcopy(recorded("0.33.0"))
    real = next(r for r in output["results"] if r["profile"] == "minimax_m25" and r["compute_capability"] == "12.0")
    unknown = {k: real[k] for k in ("profile", "file", "compute_capability", "kv_cache_dtype")}
    unknown.update(profile="new_model", attention_type="linear", checked=False,
                   not_checked="attention type 'linear' is not one the engine check knows (gqa, mla, sparse_mla)")
    output["results"].append(unknown)
    verdict = ev.interpret(output)
    r = row(verdict, "new_model", "12.0")
    assert r["status"] == "not checked" and r["kv"] == "not checked"
    assert any(n.startswith("vllm_service_profile new_model (") and "not checked by the engine: attention type 'linear'"
               in n for n in verdict["notes"])


def test_the_engine_refusing_the_quantization_and_tensor_parallel_names_the_keys():
    output = copy.deepcopy(recorded("0.33.0"))
    real = next(r for r in output["results"] if r["profile"] == "minimax_m25" and r["compute_capability"] == "9.0")
    real["quantization"].update(ok=False, reason="The quantization method fp8 is not supported for the current GPU.")
    real["tensor_parallel"][-1].update(ok=False, problems=[{"key": "num_attention_heads", "message": "not divisible"}])
    verdict = ev.interpret(output)
    mine = [p for p in verdict["problems"] if p.startswith("vllm_service_profile minimax_m25 (profiles/minimax_m25.yml)")]
    assert "vllm_service_profile minimax_m25 (profiles/minimax_m25.yml) quantization_method fp8 on compute capability 9.0: " \
           "The quantization method fp8 is not supported for the current GPU." in mine
    assert "vllm_service_profile minimax_m25 (profiles/minimax_m25.yml) num_attention_heads at tensor parallel 8: " \
           "not divisible" in mine
    assert row(verdict, "minimax_m25", "9.0")["status"] == "problem"


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="needs a Python without vLLM")
def test_a_vllm_without_the_names_the_check_uses_fails_loudly(capsys):
    # This Python has no vLLM: exactly what an upgrade that drops a name looks like to run().
    assert script.run({"profiles": []}) == 3
    output = ev.parse_output(capsys.readouterr().out)
    assert output["missing"] and output["missing"][0].startswith("vllm:__version__ (")
    verdict = ev.interpret(output)
    assert verdict["rows"] == [] and verdict["problems"][0].startswith("the engine check did not run: vLLM None lacks")


def test_parse_output_takes_the_prefixed_line_among_vllms_log():
    text = "INFO vllm says hello\n" + ev.LINE_PREFIX + json.dumps({"vllm": "x", "results": []}) + "\nWARNING bye\n"
    assert ev.parse_output(text) == {"vllm": "x", "results": []}
    assert ev.parse_output("Traceback: boom")["error"] == "the engine check printed no result: Traceback: boom"
    assert ev.LINE_PREFIX == script.LINE_PREFIX


def test_table_has_a_line_per_profile_and_capability():
    text = ev.table(ev.interpret(recorded("0.33.0")))
    lines = text.splitlines()
    assert lines[0] == "vLLM 0.33.0 engine check"
    assert "| glm5_bf16 | 12.0 | problem | none | bfloat16 refused | modelopt_fp4 ok (min 75) | 1 ok, 2 ok, 4 ok, 8 ok |" in lines
    assert "| glm5 | 12.0 | ok | FLASHINFER_MLA_SPARSE_SM120 | auto ok (-> fp8_ds_mla) | modelopt_fp4 ok (min 75) | " \
           "1 ok, 2 ok, 4 ok, 8 ok |" in lines
    assert len([line for line in lines if line.startswith("| ") and "---" not in line]) == 1 + 10


def test_shipped_profiles_name_what_the_check_needs():
    for name in SHIPPED:
        p = profile(name)
        assert p["attention_type"] in script.ATTENTION_TYPES and p["num_routed_experts"] > 0 and p["quantization_method"]
    assert os.path.isdir(PROFILES)
