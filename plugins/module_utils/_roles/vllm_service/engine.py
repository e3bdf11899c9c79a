# -*- coding: utf-8 -*-
# Copyright: (c) 2026, moeops.inference contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the pinned vLLM refuses, known before anything changes: the vllm_service role's engine rules. Private to the
collection (module_utils/_roles/vllm_service/__init__.py applies them; the preflight role reports them with every other
role's).

Two parts:
- `recorded_problems`: a static rule from the engine check recorded on the pinned vLLM (RECORDED below), so that
  preflight and the role refuse a KV cache dtype that leaves vLLM no attention backend, without a GPU or a vLLM venv;
- `check_plan`: whether the role asks the installed vLLM itself on the node (module vllm_engine_check, which runs
  module_utils/_engine/check.py in the venv) before the unit changes, and with what.

An attention type or a compute capability the recording does not cover is "not checked by the engine" (a warning),
never a pass.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.moeops.inference.plugins.module_utils._engine import verdict
from ansible_collections.moeops.inference.plugins.module_utils._policy import model_profile

# The engine check (module_utils/_engine/check.py) run on the pinned vLLM, without a GPU, for the shipped profiles on
# compute capabilities 9.0, 10.0 and 12.0 at tensor parallel 1, 2, 4 and 8: tests/fixtures/vllm/engine-check-0.33.0.json
# (REAL; made by tests/fixtures/vllm/engine_check.py).  tests/unit/plugins/module_utils/test_vllm_service_engine.py
# derives this table from that file again, so the two cannot drift apart.
RECORDED_VLLM = "0.33.0"
RECORDED_IN = "tests/fixtures/vllm/engine-check-%s.json" % RECORDED_VLLM
# (attention type, compute capability major) ->
#   cc:       the capability the check pinned (vLLM's backends test the major: FLASHINFER_MLA_SPARSE_SM120's
#             supports_compute_capability is `capability.major == 12`);
#   picked:   the backend(s) vLLM selected with kv_cache_dtype auto (per tensor-parallel size where they differ);
#   takes:    the KV cache dtypes every one of those backends takes (supported_kv_cache_dtypes);
#   complete: whether `picked` is every backend vLLM would accept there whatever the dtype (each other candidate was
#             refused for the attention type alone, `others`): then a dtype outside `takes` leaves no backend at all;
#   others:   the other candidates and vLLM's reason for refusing them.
RECORDED: Dict[Tuple[str, int], Dict[str, Any]] = {
    ("sparse_mla", 10): {
        "cc": "10.0", "picked": ("FLASHMLA_SPARSE", "FLASH_ATTN_MLA_SPARSE_FA4"), "takes": ("auto", "bfloat16"),
        "complete": False, "others": {}},
    ("sparse_mla", 12): {
        "cc": "12.0", "picked": ("FLASHINFER_MLA_SPARSE_SM120",), "takes": ("auto", "fp8", "fp8_e4m3", "fp8_ds_mla"),
        "complete": True, "others": {"TRITON_MLA": "sparse not supported"}},
    ("mla", 9): {
        "cc": "9.0", "picked": ("FLASH_ATTN_MLA",), "takes": ("auto", "float16", "bfloat16"),
        "complete": False, "others": {}},
    ("mla", 10): {
        "cc": "10.0", "picked": ("FLASHINFER_MLA",), "takes": ("auto", "float16", "bfloat16", "fp8", "fp8_e4m3"),
        "complete": False, "others": {}},
    ("mla", 12): {
        "cc": "12.0", "picked": ("TRITON_MLA",), "takes": ("auto", "float16", "bfloat16", "fp8", "fp8_e4m3"),
        "complete": True, "others": {"FLASHINFER_MLA_SPARSE_SM120": "non-sparse not supported"}},
    ("gqa", 9): {
        "cc": "9.0", "picked": ("FLASH_ATTN",), "takes": ("auto", "float16", "bfloat16", "fp8", "fp8_e4m3"),
        "complete": False, "others": {}},
    ("gqa", 10): {
        "cc": "10.0", "picked": ("FLASHINFER",),
        "takes": ("auto", "float16", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2", "nvfp4", "nvfp4_4over6"),
        "complete": False, "others": {}},
    ("gqa", 12): {
        "cc": "12.0", "picked": ("FLASH_ATTN",), "takes": ("auto", "float16", "bfloat16", "fp8", "fp8_e4m3"),
        "complete": False, "others": {}},
}
# The same check without FlashInfer's kernels: no flashinfer-cubin and no ninja on the unit's PATH, so vLLM turns
# FlashInfer off (has_flashinfer() false), as on a box with only the NVIDIA driver:
# tests/fixtures/vllm/engine-check-0.33.0-no-kernels.json (REAL).  RECORDED above was recorded with FlashInfer's kernels
# (VLLM_HAS_FLASHINFER_CUBIN=1 standing in for the flashinfer-cubin wheel the vllm role installs).  Only the entries
# where the condition matters: where vLLM picks other backends than in RECORDED, or picks a FlashInfer backend anyway
# (it needs the kernels when it runs).  `picked` empty: no backend at all, whatever the dtype; `others`: vLLM's reasons.
RECORDED_WITHOUT_KERNELS_IN = "tests/fixtures/vllm/engine-check-%s-no-kernels.json" % RECORDED_VLLM
RECORDED_WITHOUT_KERNELS: Dict[Tuple[str, int], Dict[str, Any]] = {
    ("sparse_mla", 10): {"cc": "10.0", "picked": ("FLASHMLA_SPARSE", "FLASHINFER_MLA_SPARSE"), "others": {}},
    ("sparse_mla", 12): {
        "cc": "12.0", "picked": (),
        "others": {"FLASHINFER_MLA_SPARSE_SM120": "FLASHINFER_MLA_SPARSE_SM120 requires FlashInfer's sparse MLA decode API",
                   "TRITON_MLA": "sparse not supported"}},
    ("mla", 10): {"cc": "10.0", "picked": ("FLASHINFER_MLA",), "others": {}},
    ("gqa", 10): {"cc": "10.0", "picked": ("FLASHINFER",), "others": {}},
}
# The vllm role's option that installs the kernels (roles/vllm, plugins/module_utils/_roles/vllm.py).
KERNELS_VAR = "vllm_flashinfer_kernels"
ATTENTION_NAMES = {"sparse_mla": "sparse MLA", "mla": "MLA", "gqa": "GQA"}
VAR = model_profile.PROFILE_VAR
CHECK_VAR = "vllm_service_engine_check"


def _major(cc: Any) -> Optional[int]:
    try:
        return int(str(cc).partition(".")[0])
    except ValueError:
        return None


def _where(label: str, key: str) -> str:
    if key == "vllm_service_extra_args":
        return "vllm_service_extra_args --kv-cache-dtype (profile %s)" % label
    return "%s %s %s" % (VAR, label, key)


def flashinfer_condition(kernels: Any, unit_environment: Optional[Mapping[str, Any]]) -> str:
    """Whether vLLM will have FlashInfer where the unit runs it: 'installed' (the vllm role installs its kernels, or the
    unit sets VLLM_HAS_FLASHINFER_CUBIN, vLLM's own switch for kernels installed another way), 'toolkit' (the unit
    names a CUDA toolkit or its own PATH: nvcc and ninja may be there, which only the node can tell) or 'absent'."""
    env = dict(unit_environment or {})
    try:
        switch = int(str(env.get("VLLM_HAS_FLASHINFER_CUBIN", "0")).strip() or "0")
    except ValueError:
        switch = 0
    if kernels or switch:
        return "installed"
    if any(env.get(name) for name in ("CUDA_HOME", "CUDA_PATH", "PATH")):
        return "toolkit"
    return "absent"


def _without_kernels(where: str, kv: str, cc: str, attention: str, condition: str) -> Tuple[List[str], List[str]]:
    """What the recording without FlashInfer's kernels says for this attention type on `cc`: (problems, warnings)."""
    entry = RECORDED_WITHOUT_KERNELS.get((attention, _major(cc) or -1))
    if entry is None or condition == "installed":
        return [], []
    if condition == "toolkit":
        return [], ["%s %s on compute capability %s: not checked by the engine before the unit: %s is false and the unit's "
                    "environment names a CUDA toolkit or a PATH, so whether vLLM has FlashInfer (nvcc and ninja) shows "
                    "only on the node; the role's engine check asks the installed vLLM there" % (where, kv, cc, KERNELS_VAR)]
    if not entry["picked"]:
        return ["%s %s on compute capability %s: %s is false, and without FlashInfer's kernels vLLM %s has no %s "
                "attention backend there (%s): vLLM turns FlashInfer off when flashinfer-cubin is not installed and "
                "no CUDA toolkit (nvcc) with ninja is on the unit's PATH, and vLLM stops at startup (its engine check "
                "without the kernels, recorded in %s). Set %s to true (the vllm role installs flashinfer-cubin), or "
                "run `vllm download-kernels` in the vLLM venv and set VLLM_HAS_FLASHINFER_CUBIN=1 in "
                "vllm_service_environment."
                % (where, kv, cc, KERNELS_VAR, RECORDED_VLLM, ATTENTION_NAMES[attention],
                   "; ".join("%s: %s" % item for item in sorted(entry["others"].items())),
                   RECORDED_WITHOUT_KERNELS_IN, KERNELS_VAR)], []
    flashinfer = [b for b in entry["picked"] if b.startswith("FLASHINFER")]
    return [], ["%s %s on compute capability %s: %s is false; without FlashInfer's kernels vLLM %s picks %s (recorded in "
                "%s)%s" % (where, kv, cc, KERNELS_VAR, RECORDED_VLLM, ", ".join(entry["picked"]),
                           RECORDED_WITHOUT_KERNELS_IN,
                           ", a FlashInfer backend, which needs the kernels when it runs" if flashinfer else "")]


def recorded_problems(profile: Mapping[str, Any], ccs: Sequence[str], extra_args: Sequence[str], engine: str,
                      label: str, flashinfer: str = "installed") -> Dict[str, List[str]]:
    """What the recorded engine check says vLLM refuses for this profile on GPUs of `ccs`: {problems, warnings}.

    A KV cache dtype that no backend takes for the profile's attention type where the recording holds every backend
    vLLM accepts (sparse MLA and MLA on 12.x) is a problem, in the words of the engine check
    (module_utils/_engine/verdict.py); one outside what the recorded backends take elsewhere, an attention type the
    profile does not name, or a capability the recording does not cover is a warning: not checked by the engine.
    `flashinfer` is flashinfer_condition's answer: without FlashInfer's kernels ('absent') the recording without them
    applies first, and a capability where it leaves no backend at all is a problem naming vllm_flashinfer_kernels.
    vLLM's CPU build (vllm_engine cpu) has none of the CUDA backends: nothing to say."""
    out: Dict[str, List[str]] = {"problems": [], "warnings": []}
    if engine == "cpu" or not ccs:
        return out
    attention = profile.get("attention_type")
    kv, key = model_profile.kv_cache_dtype_in_effect(profile, ccs, extra_args)
    where = _where(label, key)
    if attention not in ATTENTION_NAMES:
        out["warnings"].append(
            "%s %s: %s: not checked by the engine before the unit (the engine check knows %s); set attention_type in "
            "the profile (docs/model-profiles.md)" % (
                VAR, label, "attention_type is not set" if attention is None else "attention_type %r is unknown"
                % attention, ", ".join(sorted(ATTENTION_NAMES))))
        return out
    # A capability below min_compute_capability is refused by the fit rules already (fit.check_compute_capability).
    for cc in sorted(set(verdict.admitted_capabilities(profile, ccs)), key=lambda c: (_major(c) or 0, c)):
        entry = RECORDED.get((attention, _major(cc) or -1))
        if entry is None:
            out["warnings"].append(
                "%s %s on compute capability %s: not checked by the engine before the unit (vLLM %s's recorded check "
                "covers %s on %s); the role's engine check asks the installed vLLM on the node"
                % (where, kv, cc, RECORDED_VLLM, ATTENTION_NAMES[attention],
                   ", ".join(e["cc"] for (a, _m), e in sorted(RECORDED.items(), key=lambda i: i[0][1]) if a == attention)))
            continue
        problems, warnings = _without_kernels(where, kv, cc, attention, flashinfer)
        out["problems"] += problems
        out["warnings"] += warnings
        if problems or kv in entry["takes"]:
            continue
        picked, takes = ", ".join(entry["picked"]), ", ".join(entry["takes"])
        if entry["complete"]:
            refused = sorted(["%s: kv_cache_dtype not supported" % b for b in entry["picked"]]
                             + ["%s: %s" % item for item in entry["others"].items()])
            out["problems"].append(
                "%s %s on compute capability %s: no vLLM attention backend takes it (%s); with kv_cache_dtype auto "
                "vLLM picks %s, which takes %s. vLLM %s stops at startup (%s attention; its engine check, recorded "
                "in %s). Use one of those, auto for vLLM's own choice."
                % (where, kv, cc, "; ".join(refused), picked, takes, RECORDED_VLLM, ATTENTION_NAMES[attention],
                   RECORDED_IN))
        else:
            out["warnings"].append(
                "%s %s on compute capability %s: not checked by the engine before the unit (vLLM %s's recorded check "
                "saw %s picked with auto, taking %s); the role's engine check asks the installed vLLM on the node"
                % (where, kv, cc, RECORDED_VLLM, picked, takes))
    return out


def profile_file(value: Any) -> str:
    """Where the profile came from, for messages: profiles/<name>.yml for a shipped one, else the path given."""
    text = str(value)
    return text if "/" in text else "profiles/%s.yml" % text


def check_plan(v: Mapping[str, Any], profile: Mapping[str, Any], ccs: Sequence[str], tensor_parallel_size: int,
               config: Optional[Mapping[str, Any]], unit_environment: Optional[Mapping[str, str]] = None) -> Dict[str, Any]:
    """Whether the role runs module vllm_engine_check before the unit, and its arguments: the deployed profile on this
    host's compute capabilities at the unit's tensor-parallel size, with the unit's extra arguments, the unit's
    Environment= values (the module asks vLLM with those over systemd's default PATH, as the unit runs it) and the
    staged weights' config.json where there is one."""
    label = str(v[VAR])
    plan: Dict[str, Any] = {
        "run": False, "why": "", "python": "%s/bin/python" % v["vllm_venv"],
        "profiles": [{"name": label, "file": profile_file(label), "profile": dict(profile),
                      "config": dict(config or {})}],
        "compute_capabilities": list(ccs), "tensor_parallel_sizes": [int(tensor_parallel_size)],
        "extra_args": list(v["vllm_service_extra_args"] or []),
        "environment": dict(unit_environment or {}),
    }
    if v["vllm_engine"] == "cpu":
        plan["why"] = "vllm_engine cpu: vLLM's CPU build has no CUDA attention backends to ask"
    elif not v.get(CHECK_VAR, True):
        plan["why"] = ("%s is false: the installed vLLM is not asked before the unit; what it refuses shows at start"
                       % CHECK_VAR)
    elif not ccs:
        plan["why"] = "no GPU read: no compute capability to check"
    else:
        plan["run"] = True
    return plan
