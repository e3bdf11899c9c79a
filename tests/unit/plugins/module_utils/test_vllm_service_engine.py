# -*- coding: utf-8 -*-
"""What the pinned vLLM refuses, before anything changes: the vllm_service role's engine rules
(module_utils/_roles/vllm_service/engine.py, applied by its plan, so preflight and the role alone) and the pure parts of
module vllm_engine_check (module_utils/_engine/node.py).  The static table is derived here again from the engine check
recorded on vLLM 0.33.0 (tests/fixtures/vllm/engine-check-0.33.0.json, REAL); GPU facts are the CONSTRUCTED
8x RTX PRO 6000 (compute capability 12.0), H100 (9.0) and L40S (8.9) doubles."""
from __future__ import annotations

import copy
import json
import os
import stat

import pytest
import yaml

from ansible_collections.moeops.inference.plugins.module_utils._engine import node
from ansible_collections.moeops.inference.plugins.module_utils._engine import verdict as ev
from ansible_collections.moeops.inference.plugins.module_utils._facts import gpu_topology as topo
from ansible_collections.moeops.inference.plugins.module_utils._policy import model_profile
from ansible_collections.moeops.inference.plugins.module_utils._roles.vllm_service import engine
from conftest import REPO, load_json, role_result, shipped_profile

RECORDING = os.path.join(REPO, engine.RECORDED_IN)
BF16_KEY = "compute_capability_constraints[0].kv_cache_dtype"
ENGINE_REASON = ("no vLLM attention backend takes it (FLASHINFER_MLA_SPARSE_SM120: kv_cache_dtype not supported; "
                 "TRITON_MLA: sparse not supported); with kv_cache_dtype auto vLLM picks FLASHINFER_MLA_SPARSE_SM120, "
                 "which takes auto, fp8, fp8_e4m3, fp8_ds_mla")


def recorded():
    with open(RECORDING) as f:
        return json.load(f)


def facts(name):
    return topo.from_snapshot(load_json("constructed", name + ".json"), name)


def glm5_bf16():
    """GLM-5 as it was before the fix: a BF16 KV cache forced on compute capability 12.0."""
    profile = copy.deepcopy(shipped_profile("glm5"))
    profile["compute_capability_constraints"][0]["kv_cache_dtype"] = "bfloat16"
    return profile


def planned(profile, gpus="rtxpro6000-x8-2numa", name="glm5", **values):
    return role_result("vllm_service", {"gpus": facts(gpus), "profile": profile}, vllm_service_profile=name, **values)


# --- the static table is the recording ----------------------------------------------------------------------------

def test_the_table_is_what_the_recorded_engine_check_says():
    """Each entry from the recorded rows with kv_cache_dtype auto: the backends vLLM picked, the dtypes all of them
    take, and whether they are all vLLM accepts there whatever the dtype (every other candidate refused for the
    attention type alone)."""
    output = recorded()
    assert output["vllm"] == engine.RECORDED_VLLM
    derived = {}
    for row in output["results"]:
        if row["kv_cache_dtype"] != "auto":
            continue
        attention = row["attention"]
        key = (row["attention_type"], int(row["compute_capability"].split(".")[0]))
        takes = set.intersection(*(set(a["backend_kv_cache_dtypes"]) for a in attention))
        others = {}
        for a in attention:
            for backend, reasons in a["refused"].items():
                others.setdefault(backend, set()).update(reasons)
        complete = (all(a["accepted"] == [a["backend"]] for a in attention)
                    and all(r in ("sparse not supported", "non-sparse not supported") for rs in others.values() for r in rs))
        entry = {"cc": row["compute_capability"], "picked": tuple(dict.fromkeys(a["backend"] for a in attention)),
                 "takes": tuple(d for d in attention[0]["backend_kv_cache_dtypes"] if d in takes), "complete": complete,
                 "others": {b: ", ".join(sorted(r)) for b, r in others.items()} if complete else {}}
        assert derived.setdefault(key, entry) == entry, key  # two profiles of one attention type agree
    assert derived == engine.RECORDED


def test_the_recording_refused_glm5_bf16_on_12_0_for_the_reason_the_rule_gives():
    rows = [r for r in recorded()["results"] if r["profile"] == "glm5_bf16" and r["compute_capability"] == "12.0"]
    assert rows and all(a["backend"] is None and a["backend_with_auto"] == "FLASHINFER_MLA_SPARSE_SM120"
                        for a in rows[0]["attention"])
    assert ENGINE_REASON in ev.interpret(recorded())["problems"][0]


# --- the rule, through the role's plan (what preflight and the role run) --------------------------------------------

def test_glm5_with_a_bf16_kv_cache_on_rtx_pro_6000_is_refused_naming_the_key_and_the_engines_reason():
    result = planned(glm5_bf16())
    mine = [p for p in result["problems"] if "no vLLM attention backend" in p]
    assert mine == [
        "vllm_service: vllm_service_profile glm5 %s bfloat16 on compute capability 12.0: %s. vLLM 0.33.0 stops at "
        "startup (sparse MLA attention; its engine check, recorded in tests/fixtures/vllm/engine-check-0.33.0.json). "
        "Use one of those, auto for vLLM's own choice." % (BF16_KEY, ENGINE_REASON)]


def test_glm5_as_shipped_passes_on_rtx_pro_6000_and_b200_class_gpus():
    result = planned(shipped_profile("glm5"), vllm_service_engine_check=True)
    assert result["problems"] == [] and not [w for w in result["warnings"] if "engine" in w]
    assert result["plan"]["engine_check"]["run"] is True
    # Off by default (the role's own call refused GLM-5 on 12.0 without the weights' config.json; see the spec).
    assert planned(shipped_profile("glm5"))["plan"]["engine_check"]["run"] is False


def test_the_bad_inputs_profile_is_refused_by_the_engine_rule_alone():
    """tests/integration/bad-inputs/glm5_bf16_kv.yml (its case expects exactly one problem): the integration run
    takes minutes, so that nothing but the engine rule refuses it is checked here as well."""
    with open(os.path.join(REPO, "tests", "integration", "bad-inputs", "glm5_bf16_kv.yml")) as f:
        profile = yaml.safe_load(f)
    problems = planned(profile, name="glm5_bf16_kv.yml")["problems"]
    assert problems == [
        "vllm_service: vllm_service_profile glm5_bf16_kv.yml %s bfloat16 on compute capability 12.0: %s. vLLM 0.33.0 "
        "stops at startup (sparse MLA attention; its engine check, recorded in tests/fixtures/vllm/engine-check-0.33.0.json). "
        "Use one of those, auto for vLLM's own choice." % (BF16_KEY, ENGINE_REASON)]


@pytest.mark.parametrize("dtype", ["bfloat16", "fp8_e5m2", "fp8_inc"])
def test_any_dtype_the_sm120_sparse_backend_does_not_take_is_refused(dtype):
    profile = copy.deepcopy(shipped_profile("glm5"))
    profile["compute_capability_constraints"][0]["kv_cache_dtype"] = dtype
    problems = planned(profile)["problems"]
    assert any("%s %s on compute capability 12.0: no vLLM attention backend takes it" % (BF16_KEY, dtype) in p
               for p in problems), problems


@pytest.mark.parametrize("dtype", ["auto", "fp8", "fp8_e4m3", "fp8_ds_mla"])
def test_what_the_sm120_sparse_backend_takes_passes(dtype):
    profile = copy.deepcopy(shipped_profile("glm5"))
    profile["compute_capability_constraints"][0]["kv_cache_dtype"] = dtype
    assert planned(profile)["problems"] == []


def test_extra_args_that_ask_for_bf16_are_refused_under_their_own_name_too():
    problems = planned(shipped_profile("glm5"), vllm_service_extra_args=["--kv-cache-dtype", "bfloat16"])["problems"]
    assert any("vllm_service_extra_args: --kv-cache-dtype bfloat16 contradicts profile glm-5-nvfp4" in p for p in problems)
    assert any(p.startswith("vllm_service: vllm_service_extra_args --kv-cache-dtype (profile glm5) bfloat16 on compute "
                            "capability 12.0: no vLLM attention backend takes it") for p in problems), problems


def test_mla_on_12_x_has_one_backend_too():
    profile = dict(shipped_profile("kimi_k25"), kv_cache_dtype="fp8_ds_mla")
    problems = planned(profile, name="kimi_k25")["problems"]
    assert any("vllm_service_profile kimi_k25 kv_cache_dtype fp8_ds_mla on compute capability 12.0: no vLLM attention "
               "backend takes it (FLASHINFER_MLA_SPARSE_SM120: non-sparse not supported; TRITON_MLA: kv_cache_dtype "
               "not supported)" in p for p in problems), problems


def test_where_the_recording_is_not_every_backend_a_new_dtype_is_not_checked_never_passed():
    # On Hopper FLASH_ATTN_MLA was picked with auto, but FLASHMLA and TRITON_MLA were valid too: fp8 may have a backend.
    result = planned(dict(shipped_profile("kimi_k25"), kv_cache_dtype="fp8"), gpus="h100sxm-x8-nvswitch", name="kimi_k25")
    assert not [p for p in result["problems"] if "attention backend" in p]
    assert any("kv_cache_dtype fp8 on compute capability 9.0: not checked by the engine before the unit (vLLM 0.33.0's "
               "recorded check saw FLASH_ATTN_MLA picked with auto, taking auto, float16, bfloat16)" in w
               for w in result["warnings"]), result["warnings"]


def test_an_unknown_attention_type_or_capability_is_not_checked_never_passed():
    bare = {k: v for k, v in shipped_profile("minimax_m25").items() if k != "attention_type"}
    result = planned(bare, name="minimax_m25")
    assert result["problems"] == []
    assert any("vllm_service_profile minimax_m25: attention_type is not set: not checked by the engine" in w
               for w in result["warnings"]), result["warnings"]
    linear = planned(dict(bare, attention_type="linear"), name="minimax_m25")["warnings"]
    assert any("attention_type 'linear' is unknown: not checked by the engine" in w for w in linear), linear
    # Ada (8.9): the recording covers 9.0, 10.0 and 12.0.
    ada = planned(shipped_profile("minimax_m25"), gpus="l40s-x8-2switch-2numa", name="minimax_m25")
    assert ada["problems"] == []
    assert any("kv_cache_dtype auto on compute capability 8.9: not checked by the engine before the unit" in w
               for w in ada["warnings"]), ada["warnings"]


def test_the_cpu_build_has_no_cuda_backend_to_check():
    result = planned(glm5_bf16(), vllm_engine="cpu")
    assert not [p for p in result["problems"] if "attention backend" in p]
    check = result["plan"]["engine_check"]
    assert check["run"] is False and check["why"].startswith("vllm_engine cpu")
    assert "no engine check (vllm_engine cpu: vLLM's CPU build has no CUDA attention backends to ask)" in result["outcome"]


def test_the_node_check_plan_carries_the_unit_as_deployed():
    result = planned(shipped_profile("glm5"), vllm_service_extra_args=["--enable-prefix-caching"],
                     vllm_service_engine_check=True)
    check = result["plan"]["engine_check"]
    assert (check["python"], check["compute_capabilities"], check["tensor_parallel_sizes"]) == (
        "/opt/vllm/engine/bin/python", ["12.0"], [8])
    assert [(p["name"], p["file"]) for p in check["profiles"]] == [("glm5", "profiles/glm5.yml")]
    assert check["extra_args"] == ["--enable-prefix-caching"]
    assert "asks the installed vLLM first (engine check)" in result["outcome"]
    off = planned(shipped_profile("glm5"), vllm_service_engine_check=False)["plan"]["engine_check"]
    assert off["run"] is False and off["why"].startswith("vllm_service_engine_check is false")
    assert engine.profile_file("/srv/profiles/mine.yml") == "/srv/profiles/mine.yml"


def test_the_kv_cache_dtype_in_effect_is_the_last_one_on_the_command_line():
    profile = copy.deepcopy(shipped_profile("glm5"))
    assert model_profile.kv_cache_dtype_in_effect(profile, ["10.0"]) == ("auto", "kv_cache_dtype")
    assert model_profile.kv_cache_dtype_in_effect(profile, ["12.0"]) == ("auto", BF16_KEY)
    profile["extra_args"] = ["--kv-cache-dtype=fp8"]
    assert model_profile.kv_cache_dtype_in_effect(profile, ["12.0"]) == ("fp8", "extra_args")
    profile["compute_capability_constraints"][0]["extra_args"] = ["--kv-cache-dtype", "fp8_e4m3"]
    assert model_profile.kv_cache_dtype_in_effect(profile, ["12.0"]) == (
        "fp8_e4m3", "compute_capability_constraints[0].extra_args")
    assert model_profile.kv_cache_dtype_in_effect(profile, ["12.0"], ["--kv-cache-dtype", "fp8", "--kv-cache-dtype",
                                                                      "bfloat16"]) == ("bfloat16", "vllm_service_extra_args")


# --- module vllm_engine_check's pure parts (module_utils/_engine/node.py) --------------------------------------------

def venv(tmp_path, version="0.33.0"):
    """A venv's shape: bin/python (a script that must never run in these tests) and vLLM's dist-info."""
    python = tmp_path / "venv" / "bin" / "python"
    python.parent.mkdir(parents=True, exist_ok=True)
    python.write_text("#!/bin/sh\nexit 99\n")
    python.chmod(python.stat().st_mode | stat.S_IXUSR)
    site = tmp_path / "venv" / "lib" / "python3.12" / "site-packages"
    for old in site.glob("vllm-*.dist-info") if site.exists() else []:
        old.rmdir()
    (site / ("vllm-%s.dist-info" % version)).mkdir(parents=True)
    return str(python)


def split_env(argv):
    """`env -i K=V ... python script`: the environment and the rest."""
    assert argv[:2] == [node.ENV_COMMAND, "-i"], argv
    rest = argv[2:]
    env = {}
    while "=" in rest[0]:
        name, _eq, value = rest.pop(0).partition("=")
        env[name] = value
    python, script = rest
    return {"env": env, "python": python, "script": script}


def recorded_without_kernels():
    with open(os.path.join(REPO, engine.RECORDED_WITHOUT_KERNELS_IN)) as f:
        return json.load(f)


class Engine(object):
    """Stands in for AnsibleModule.run_command running _engine/check.py: answers from a recording (`recording`, the
    one with FlashInfer's kernels by default), keeping the rows the request asks for (as the script would), and counts
    its calls."""

    def __init__(self, recording=recorded):
        self.calls = []
        self.recording = recording

    def __call__(self, argv, data=None, environ_update=None, cwd=None):
        request = json.loads(data)
        env_argv = split_env(argv)
        self.calls.append({"argv": argv, "request": request, "env": env_argv["env"], "python": env_argv["python"],
                           "script": open(env_argv["script"]).read(), "environ_update": environ_update})
        wanted = {(s["profile"], c["compute_capability"]): s["file"] for s in request["profiles"] for c in s["checks"]}
        doc = self.recording()
        out = dict(doc, results=[dict(r, file=wanted[(r["profile"], r["compute_capability"])])
                                 for r in doc["results"] if (r["profile"], r["compute_capability"]) in wanted])
        return 0, "INFO vLLM says hello\n" + ev.LINE_PREFIX + json.dumps(out) + "\n", "WARNING no GPU\n"


def params(python, tmp_path, name="glm5_bf16", profile=None, **over):
    p = {"python": python, "profiles": [{"name": name, "file": "profiles/glm5.yml", "profile": profile or glm5_bf16(),
                                         "config": {}}],
         "compute_capabilities": ["12.0"], "tensor_parallel_sizes": None, "extra_args": [], "cache": True,
         "cache_dir": str(tmp_path / "records")}
    p.update(over)
    return p


def test_the_request_is_the_unit_as_deployed():
    profile = shipped_profile("glm5")
    request = node.request_for([{"name": "glm5", "profile": profile, "file": "profiles/glm5.yml"}], ["9.0", "12.0"], [8],
                               ["--kv-cache-dtype", "fp8"])
    spec = request["profiles"][0]
    assert (spec["attention_type"], spec["head_size"], spec["quantization_method"]) == ("sparse_mla", 576, "modelopt_fp4")
    # 9.0 is below min_compute_capability: not asked.
    assert spec["checks"] == [{"compute_capability": "12.0", "kv_cache_dtype": "fp8",
                               "kv_cache_dtype_key": "vllm_service_extra_args", "tensor_parallel_sizes": [8]}]
    # Without sizes, the profile's or the layout policy's.
    spec = node.request_for([{"name": "glm5", "profile": profile}], ["12.0"], None, [])["profiles"][0]
    assert spec["checks"][0]["tensor_parallel_sizes"] == [1, 2, 4, 8] and spec["file"] == "glm5"
    assert spec["checks"][0]["kv_cache_dtype_key"] == BF16_KEY


def test_a_refusal_fails_with_the_engines_reason_and_the_next_run_reads_the_record(tmp_path):
    python, run = venv(tmp_path), Engine()
    result = node.engine_check(params(python, tmp_path), run, check_mode=False)
    assert result["failed"] and result["checked"] and not result["cached"]
    assert result["msg"].startswith("vLLM 0.33.0 refuses what this deploy would run: vllm_service_profile glm5_bf16 "
                                    "(profiles/glm5.yml) %s bfloat16 on compute capability 12.0: %s" % (BF16_KEY, ENGINE_REASON))
    assert [r["status"] for r in result["rows"]] == ["problem"] and result["table"].startswith("vLLM 0.33.0 engine check")
    call = run.calls[0]
    assert call["python"] == python and call["script"].startswith("# -*- coding: utf-8 -*-")
    # The unit's environment and nothing of the module's (env -i): systemd's default PATH; no GPU, no download, the
    # bytecode beside the records and never in the venv (also when the caller's environment says to write none: empty
    # is unset for Python).
    assert call["env"] == {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin", "CUDA_VISIBLE_DEVICES": "",
                           "HF_HUB_OFFLINE": "1", "PYTHONDONTWRITEBYTECODE": "",
                           "PYTHONPYCACHEPREFIX": str(tmp_path / "records" / "bytecode")}
    assert call["environ_update"] is None
    assert call["request"] == result["request"]
    assert os.path.isfile(result["record"])
    again = node.engine_check(params(python, tmp_path), run, check_mode=False)
    assert again["cached"] and len(run.calls) == 1 and again["msg"] == result["msg"]
    # Another vLLM in the venv is another question.
    venv(tmp_path, "0.34.0")
    node.engine_check(params(python, tmp_path), run, check_mode=False)
    assert len(run.calls) == 2


def test_a_pass_says_what_vllm_selects_and_check_mode_writes_no_record(tmp_path):
    python, run = venv(tmp_path), Engine()
    result = node.engine_check(params(python, tmp_path, name="glm5", profile=shipped_profile("glm5")), run, check_mode=True)
    assert not result["failed"] and result["problems"] == []
    assert result["msg"] == "vLLM 0.33.0 takes it: glm5 on 12.0: FLASHINFER_MLA_SPARSE_SM120, KV auto ok (-> fp8_ds_mla)"
    assert not os.path.exists(str(tmp_path / "records"))
    assert run.calls[0]["env"]["PYTHONDONTWRITEBYTECODE"] == "1" and "PYTHONPYCACHEPREFIX" not in run.calls[0]["env"]
    off = node.engine_check(params(python, tmp_path, name="glm5", profile=shipped_profile("glm5"), cache=False), run, False)
    assert off["record"] == "" and not os.path.exists(str(tmp_path / "records"))


def test_notes_are_never_a_pass(tmp_path):
    python, run = venv(tmp_path), Engine()
    result = node.engine_check(params(python, tmp_path, name="glm5", profile=shipped_profile("glm5"),
                                      compute_capabilities=["10.0"]), run, check_mode=False)
    assert not result["failed"] and [r["status"] for r in result["rows"]] == ["uncertain"]
    assert any("CUTLASS_MLA could not be imported without a GPU" in n for n in result["notes"])


def test_no_venv_yet_is_a_note_in_check_mode_and_a_failure_otherwise(tmp_path):
    missing = str(tmp_path / "nothing" / "bin" / "python")
    result = node.engine_check(params(missing, tmp_path), Engine(), check_mode=True)
    assert not result["failed"] and not result["checked"] and result["notes"][0].startswith("not checked by the engine: ")
    result = node.engine_check(params(missing, tmp_path), Engine(), check_mode=False)
    assert result["failed"] and "the vllm role installs the vLLM venv first" in result["msg"]


def test_a_vllm_without_the_checks_names_fails_loudly_and_is_not_recorded(tmp_path):
    python = venv(tmp_path)

    def upgraded(argv, data=None, environ_update=None, cwd=None):
        return 3, ev.LINE_PREFIX + json.dumps({"vllm": "9.9.9", "error": "vLLM 9.9.9 lacks what the engine check uses",
                                               "missing": ["vllm.platforms.cuda:_get_attn_backend_class (...)"]}), ""

    result = node.engine_check(params(python, tmp_path), upgraded, check_mode=False)
    assert result["failed"] and not result["checked"] and result["missing"]
    assert "the engine check did not run: vLLM 9.9.9 lacks" in result["msg"]
    assert not list((tmp_path / "records").glob("engine-check-*.json"))

    def crashed(argv, data=None, environ_update=None, cwd=None):
        return 1, "", "Traceback: ImportError: libnuma.so.1"

    result = node.engine_check(params(python, tmp_path), crashed, check_mode=False)
    assert result["failed"] and "printed no result" in result["msg"] and "libnuma.so.1" in result["msg"]


def test_a_capability_no_profile_admits_is_not_checked(tmp_path):
    result = node.engine_check(params(venv(tmp_path), tmp_path, compute_capabilities=["8.9"]), Engine(), False)
    assert not result["failed"] and not result["checked"] and "no profile admits compute capability 8.9" in result["msg"]


def test_the_record_name_follows_everything_the_answer_depends_on():
    request = {"profiles": [{"profile": "glm5"}]}
    base = node.record_name("/opt/vllm/venv/bin/python", request, ["vllm-0.33.0.dist-info"])
    assert base == node.record_name("/opt/vllm/venv/bin/python", request, ["vllm-0.33.0.dist-info"])
    assert base != node.record_name("/opt/vllm/venv/bin/python", request, ["vllm-0.34.0.dist-info"])
    assert base != node.record_name("/opt/vllm/venv/bin/python", {"profiles": []}, ["vllm-0.33.0.dist-info"])
    assert base != node.record_name("/srv/venv/bin/python", request, ["vllm-0.33.0.dist-info"])
    assert base != node.record_name("/opt/vllm/venv/bin/python", request, ["vllm-0.33.0.dist-info"],
                                    {"PATH": node.SYSTEMD_PATH, "CUDA_HOME": "/usr/local/cuda"})


# --- FlashInfer's kernels: the condition vLLM is asked under ---------------------------------------------------------

NO_KERNELS_REASON = ("FLASHINFER_MLA_SPARSE_SM120: FLASHINFER_MLA_SPARSE_SM120 requires FlashInfer's sparse MLA decode "
                     "API; TRITON_MLA: sparse not supported")


def test_the_recordings_carry_their_condition():
    """engine-check-0.33.0.json was asked with FlashInfer's kernels (VLLM_HAS_FLASHINFER_CUBIN=1 standing in for the
    wheel), the -no-kernels one without them and without ninja on PATH; vLLM's own answers say which it was."""
    kernels, without = recorded(), recorded_without_kernels()
    assert kernels["vllm"] == without["vllm"] == engine.RECORDED_VLLM
    assert kernels["condition"]["name"] == "kernels"
    assert kernels["condition"]["environment"]["VLLM_HAS_FLASHINFER_CUBIN"] == "1"
    assert (kernels["flashinfer"]["has_flashinfer"], kernels["flashinfer"]["has_flashinfer_cubin"]) == (True, True)
    assert without["condition"]["name"] == "no-kernels"
    assert "VLLM_HAS_FLASHINFER_CUBIN" not in without["condition"]["environment"]
    state = without["flashinfer"]
    assert (state["installed"], state["has_flashinfer"], state["has_flashinfer_cubin"], state["ninja"]) == (
        True, False, False, None)


def test_the_table_without_kernels_is_what_the_recording_without_them_says():
    """Each entry from the rows with kv_cache_dtype auto where the condition matters: other picks than with the kernels,
    or a FlashInfer backend picked anyway; with no backend at all, vLLM's reasons."""
    derived = {}
    for row in recorded_without_kernels()["results"]:
        if row["kv_cache_dtype"] != "auto":
            continue
        key = (row["attention_type"], int(row["compute_capability"].split(".")[0]))
        picked = tuple(dict.fromkeys(a["backend"] for a in row["attention"] if a["backend"]))
        if picked == engine.RECORDED[key]["picked"] and not any(b.startswith("FLASHINFER") for b in picked):
            continue
        others = {}
        if not picked:
            for a in row["attention"]:
                for backend, reasons in a["refused"].items():
                    others.setdefault(backend, set()).update(reasons)
        entry = {"cc": row["compute_capability"], "picked": picked,
                 "others": {b: ", ".join(sorted(r)) for b, r in others.items()}}
        assert derived.setdefault(key, entry) == entry, key
    assert derived == engine.RECORDED_WITHOUT_KERNELS


def test_glm5_on_rtx_pro_6000_without_flashinfers_kernels_is_refused_naming_the_option_and_the_engines_reason():
    result = planned(shipped_profile("glm5"), vllm_flashinfer_kernels=False)
    assert len(result["problems"]) == 1
    problem = result["problems"][0]
    assert problem.startswith("vllm_service: vllm_service_profile glm5 %s auto on compute capability 12.0: "
                              "vllm_flashinfer_kernels is false, and without FlashInfer's kernels vLLM 0.33.0 has no "
                              "sparse MLA attention backend there (%s)" % (BF16_KEY, NO_KERNELS_REASON))
    assert "recorded in tests/fixtures/vllm/engine-check-0.33.0-no-kernels.json" in problem
    assert "Set vllm_flashinfer_kernels to true" in problem
    # The kernels installed by the vllm role (the default), or kernels the unit says it has (vLLM's own switch): passes.
    assert planned(shipped_profile("glm5"))["problems"] == []
    assert planned(shipped_profile("glm5"), vllm_flashinfer_kernels=False,
                   vllm_service_environment={"VLLM_HAS_FLASHINFER_CUBIN": "1"})["problems"] == []
    # A toolkit the unit names: only the node can tell (nvcc and ninja), a warning, never a pass.
    toolkit = planned(shipped_profile("glm5"), vllm_flashinfer_kernels=False,
                      vllm_service_environment={"CUDA_HOME": "/usr/local/cuda"})
    assert toolkit["problems"] == []
    assert any("not checked by the engine before the unit: vllm_flashinfer_kernels is false" in w
               for w in toolkit["warnings"])
    # What has a backend without FlashInfer is not refused: Kimi-K2.5 (MLA) on 12.0 gets TRITON_MLA either way.
    assert planned(shipped_profile("kimi_k25"), name="kimi_k25", vllm_flashinfer_kernels=False)["problems"] == []


def test_without_kernels_a_flashinfer_backend_picked_anyway_is_a_warning():
    out = engine.recorded_problems(shipped_profile("kimi_k25"), ["10.0"], [], "cuda", "kimi_k25", "absent")
    assert out["problems"] == []
    assert out["warnings"] == [
        "vllm_service_profile kimi_k25 kv_cache_dtype auto on compute capability 10.0: vllm_flashinfer_kernels is false; "
        "without FlashInfer's kernels vLLM 0.33.0 picks FLASHINFER_MLA (recorded in "
        "tests/fixtures/vllm/engine-check-0.33.0-no-kernels.json), a FlashInfer backend, which needs the kernels when "
        "it runs"]
    assert engine.recorded_problems(shipped_profile("kimi_k25"), ["10.0"], [], "cuda", "kimi_k25", "installed") == {
        "problems": [], "warnings": []}


def test_the_flashinfer_condition_follows_vllms_own_switch():
    assert engine.flashinfer_condition(True, {}) == "installed"
    assert engine.flashinfer_condition(False, {"VLLM_HAS_FLASHINFER_CUBIN": "1"}) == "installed"
    assert engine.flashinfer_condition(False, {"VLLM_HAS_FLASHINFER_CUBIN": "0"}) == "absent"
    assert engine.flashinfer_condition(False, {"VLLM_HAS_FLASHINFER_CUBIN": "yes"}) == "absent"
    assert engine.flashinfer_condition(False, {"CUDA_PATH": "/opt/cuda"}) == "toolkit"
    assert engine.flashinfer_condition(False, {"HF_HOME": "/var/cache/vllm/huggingface"}) == "absent"


def test_the_node_check_gets_the_units_environment():
    result = planned(shipped_profile("glm5"), vllm_service_engine_check=True,
                     vllm_service_environment={"CUDA_HOME": "/usr/local/cuda-13.0"})
    check = result["plan"]["engine_check"]
    assert check["environment"] == result["plan"]["environment"]
    assert check["environment"]["CUDA_HOME"] == "/usr/local/cuda-13.0"
    assert check["environment"]["HF_HOME"] == "/var/cache/vllm/huggingface"


def test_the_engine_is_asked_in_the_units_environment_never_the_modules(tmp_path, monkeypatch):
    """What the module's own environment holds (a login shell's CUDA_HOME, a VLLM_ switch, another PATH) never
    reaches vLLM: it is started through env -i with systemd's default PATH and the unit's values."""
    monkeypatch.setenv("VLLM_HAS_FLASHINFER_CUBIN", "1")
    monkeypatch.setenv("CUDA_HOME", "/usr/local/cuda")
    monkeypatch.setenv("PATH", "/root/bin:/usr/bin")
    python, run = venv(tmp_path), Engine()
    unit_env = {"HF_HOME": "/var/cache/vllm/huggingface", "NCCL_P2P_LEVEL": "SYS"}
    node.engine_check(params(python, tmp_path, environment=unit_env), run, check_mode=False)
    env = run.calls[0]["env"]
    assert env["PATH"] == node.SYSTEMD_PATH == "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin"
    assert (env["HF_HOME"], env["NCCL_P2P_LEVEL"]) == ("/var/cache/vllm/huggingface", "SYS")
    assert "CUDA_HOME" not in env and "VLLM_HAS_FLASHINFER_CUBIN" not in env
    assert (env["CUDA_VISIBLE_DEVICES"], env["HF_HUB_OFFLINE"]) == ("", "1")
    # The unit's own PATH wins, as in systemd; another environment is another question (no record reused).
    node.engine_check(params(python, tmp_path, environment={"PATH": "/opt/cuda/bin:/usr/bin"}), run, check_mode=False)
    assert len(run.calls) == 2 and run.calls[1]["env"]["PATH"] == "/opt/cuda/bin:/usr/bin"


def test_without_kernels_the_node_says_flashinfer_is_off_and_how_to_fix_it(tmp_path):
    python, run = venv(tmp_path), Engine(recorded_without_kernels)
    result = node.engine_check(params(python, tmp_path, name="glm5", profile=shipped_profile("glm5")), run, False)
    assert result["failed"] and len(result["problems"]) == 1
    assert "FLASHINFER_MLA_SPARSE_SM120 requires FlashInfer's sparse MLA decode API" in result["problems"][0]
    assert result["problems"][0].endswith(ev.FLASHINFER_OFF)
    assert "vllm_flashinfer_kernels: true" in ev.FLASHINFER_OFF and "vllm download-kernels" in ev.FLASHINFER_OFF
    assert result["table"].splitlines()[1] == "FlashInfer off (flashinfer-cubin no; nvcc /usr/local/bin/nvcc; ninja none)"
    with_kernels = node.engine_check(params(python, tmp_path, name="glm5", profile=shipped_profile("glm5"), cache=False),
                                     Engine(), False)
    assert not with_kernels["failed"] and with_kernels["table"].splitlines()[1].startswith("FlashInfer on")
