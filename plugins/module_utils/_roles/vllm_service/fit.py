# -*- coding: utf-8 -*-
# Copyright: (c) 2026, moeops.inference contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Whether the model fits the host, the vllm_service role's rules: GPUs read, of one model, of a compute capability
the weights run on, enough GPU memory at the utilisation, and a tensor-parallel size that vLLM accepts for the model
and the host has GPUs for. Private to the collection (module_utils/_roles/vllm_service/__init__.py applies them;
the preflight role reports them with every other role's).

Each check returns (problems, warnings); messages name the variable or the profile key.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

from ansible_collections.moeops.inference.plugins.module_utils._policy import model_profile
from ansible_collections.moeops.inference.plugins.module_utils._policy import weight_shapes

GB = 10 ** 9
MIB = 2 ** 20
# vLLM accepts any size; beyond this the advice below stops looking for one.
MAX_TENSOR_PARALLEL = 512
Result = Dict[str, List[str]]


def _result(problems: Optional[List[str]] = None, warnings: Optional[List[str]] = None) -> Result:
    return {"problems": list(problems or []), "warnings": list(warnings or [])}


def _cc(cc: Any) -> Optional[Tuple[int, int]]:
    try:
        major, _dot, minor = str(cc).partition(".")
        return int(major), int(minor or 0)
    except ValueError:
        return None


def check_gpus(facts: Mapping[str, Any], allow_mixed: bool, required: Optional[bool], engine: str = "cuda") -> Result:
    """GPUs read, all of one model unless the profile allows mixing. No GPU read: refused unless the user said GPUs are
    not required (gpu_facts_required false: a loud warning, and the role writes no unit over 0 GPUs); the CPU build
    (vllm_engine cpu) needs none."""
    count = int(facts.get("count") or 0)
    if count == 0:
        if engine == "cpu":
            return _result()
        reasons = "; ".join(str(u.get("reason")) for u in facts.get("unavailable") or [] if isinstance(u, Mapping))
        msg = "no NVIDIA GPU could be read (gpu_facts_backend %s%s)" % (
            facts.get("backend", "none"), ": " + reasons if reasons else "")
        if required is False:
            return _result(warnings=[
                "WARNING: %s, and gpu_facts_required is false: no vLLM unit is written, since none can claim a "
                "tensor-parallel size over 0 GPUs; the checks that need the GPUs (memory, GPU count, compute "
                "capability, driver, P2P) are skipped, and a tensor-parallel size you gave is still checked against "
                "the model's heads. Run again once the driver is loaded." % msg])
        return _result([msg + ": the model profile needs GPUs. Check that the driver is loaded (nvidia-smi; after a "
                              "driver install, a reboot: nvidia_driver_reboot), set gpu_facts_backend and "
                              "gpu_facts_snapshot for a simulated node, or set gpu_facts_required false to install "
                              "without a unit."])
    names = sorted({str(g.get("name")) for g in facts.get("gpus") or []})
    if len(names) > 1 and not allow_mixed:
        per = ", ".join("%s: %d" % (n, sum(1 for g in facts["gpus"] if g.get("name") == n)) for n in names)
        return _result(["GPUs of different models on one host (%s): tensor parallel runs at the pace of the slowest "
                        "and smallest. Serve on GPUs of one model (CUDA_VISIBLE_DEVICES in vllm_service_environment), "
                        "or set allow_mixed_gpus: true in the model profile." % per])
    return _result()


def check_compute_capability(facts: Mapping[str, Any], min_cc: Optional[str], profile_name: str) -> Result:
    """Weights that need a newer architecture (NVFP4 needs Blackwell)."""
    want = _cc(min_cc) if min_cc else None
    if not want:
        return _result()
    low = sorted({str(g.get("compute_capability")) for g in facts.get("gpus") or []
                  if _cc(g.get("compute_capability")) is not None and _cc(g.get("compute_capability")) < want})
    if low:
        return _result(["profile %s needs compute capability %s or newer (min_compute_capability), this host has %s: "
                        "pick a profile whose weights run on these GPUs." % (profile_name, min_cc, ", ".join(low))])
    return _result()


def check_memory(facts: Mapping[str, Any], tensor_parallel_size: int, gpu_memory_utilization: float,
                 min_gpu_memory_gb: float, profile_name: str,
                 tensor_parallel_allowed: Optional[Callable[[int], List[str]]] = None) -> Result:
    """GPU memory of the GPUs vLLM uses (tensor-parallel size of them; the smallest counts, vLLM
    sizes every rank alike), at gpu_memory_utilization, against the profile's minimum.
    tensor_parallel_allowed(n) gives why the model cannot run at tensor parallel n ([] when it can),
    so that the advice names a GPU count the model can actually be split over."""
    gpus = facts.get("gpus") or []
    mems = [g.get("memory_total_mib") for g in gpus if isinstance(g.get("memory_total_mib"), int)]
    if not mems or tensor_parallel_size < 1 or tensor_parallel_size > len(mems):
        return _result()  # unknowable, or the tensor-parallel check reports it
    per_gpu = min(mems) * MIB
    usable = per_gpu * tensor_parallel_size * gpu_memory_utilization
    need = min_gpu_memory_gb * GB
    if usable < need:
        holds = int(-(-need // (per_gpu * gpu_memory_utilization)))
        whys = tensor_parallel_allowed or (lambda n: [])
        # The first size from `holds` up that the model can be split over (vLLM shards heads evenly).
        size = next((n for n in range(holds, max(holds, MAX_TENSOR_PARALLEL) + 1) if not whys(n)), None)
        if size is None:
            advice = ("%d such GPUs would hold it, but no tensor-parallel size from %d up suits the model (at %d it %s): "
                      "use a smaller model/quantization." % (holds, holds, holds, " and ".join(whys(holds))))
        elif size == holds:
            advice = "Use at least %d such GPUs (tensor parallel), or a smaller model/quantization." % holds
        else:
            advice = ("Use at least %d such GPUs (tensor parallel %d: %d would hold it, but tensor parallel %d %s), "
                      "or a smaller model/quantization." % (size, size, holds, holds, " and ".join(whys(holds))))
        return _result([
            "GPU memory: %d x %.1f GB at gpu_memory_utilization %.2f gives %.0f GB, but profile %s needs at least "
            "%.0f GB (min_gpu_memory_gb). %s"
            % (tensor_parallel_size, per_gpu / GB, gpu_memory_utilization, usable / GB, profile_name,
               min_gpu_memory_gb, advice)])
    return _result()


def _head_refusals(tp: int, dims: Mapping[str, Any], profile: Mapping[str, Any]) -> List[str]:
    """vLLM's head rules at tensor parallel `tp`, where the profile applies them."""
    if not profile.get("tensor_parallel_divides_attention_heads", True):
        return []
    return vllm_tensor_parallel_problems(tp, dims.get("num_attention_heads"), dims.get("num_key_value_heads"))


def _outside_profile_sizes(tp: int, profile: Mapping[str, Any]) -> bool:
    sizes = profile.get("tensor_parallel_sizes") or []
    return bool(sizes) and tp not in sizes


def tensor_parallel_refusals(tp: int, dims: Mapping[str, Any], profile: Mapping[str, Any]) -> List[str]:
    """Why the model cannot run at tensor parallel `tp` ([] when it can), regardless of the host:
    vLLM's head rules (where the profile applies them) and the profile's tensor_parallel_sizes."""
    whys = _head_refusals(tp, dims, profile)
    if _outside_profile_sizes(tp, profile):
        whys.append("is not one of the profile's tensor_parallel_sizes (%s)"
                    % ", ".join(map(str, profile["tensor_parallel_sizes"])))
    return whys


def vllm_tensor_parallel_problems(tp: int, heads: Optional[int], kv_heads: Optional[int]) -> List[str]:
    """What vLLM itself refuses about the heads at tensor parallel `tp` (the rule: _policy/weight_shapes.py)."""
    return weight_shapes.head_phrases(tp, heads, kv_heads)


def check_tensor_parallel(tp: Any, gpu_count: int, dims: Mapping[str, Any], profile: Mapping[str, Any],
                          var: str = "vllm_service_tensor_parallel_size") -> Result:
    """Divides the heads (where the profile says so), not above the GPU count, one vLLM supports."""
    if isinstance(tp, bool) or not isinstance(tp, int) or tp < 1:
        return _result(["%s: must be a positive integer, got %r" % (var, tp)])
    problems = []
    if gpu_count and tp > gpu_count:
        problems.append("%s %d is larger than the %d GPU(s) on this host: use at most %d." % (var, tp, gpu_count, gpu_count))
    whys = _head_refusals(tp, dims, profile)
    if whys:
        # With no GPU read, the sizes up to 8 (the target box) that the heads allow.
        fits = [str(d) for d in range(1, (gpu_count or 8) + 1) if not _head_refusals(d, dims, profile)]
        problems.append("%s %d %s (head counts from %s); vLLM shards heads evenly and refuses it. Use one of %s."
                        % (var, tp, " and ".join(whys), dims.get("sources", {}).get("num_attention_heads"),
                           ", ".join(fits) or "1"))
    if _outside_profile_sizes(tp, profile):
        problems.append("%s %d is not one of the sizes profile %s supports (tensor_parallel_sizes: %s)."
                        % (var, tp, profile.get("name"), ", ".join(map(str, profile["tensor_parallel_sizes"]))))
    return _result(problems)


def model_fit(profile: Mapping[str, Any], facts: Mapping[str, Any], tp: int, gpu_memory_utilization: float,
              extra_args: List[str], config: Optional[Mapping[str, Any]], required: Optional[bool],
              engine: str, tp_given: bool = False) -> Result:
    """Every fit rule for the profile on these GPUs at this tensor-parallel size (the role's converted values). With no
    GPU read, the rules that need none still judge a size the user gave (`tp_given`): the heads and the profile's
    sizes, which vLLM refuses on any box; memory, compute capability and the GPU count need the GPUs."""
    out = check_gpus(facts, bool(profile.get("allow_mixed_gpus")), required, engine)
    dims = model_profile.model_dimensions(profile, config or None)
    if not out["problems"] and not int(facts.get("count") or 0) and tp_given:
        part = check_tensor_parallel(tp, 0, dims, profile)
        out["problems"] += part["problems"]
        out["warnings"] += part["warnings"]
    if out["problems"] or not int(facts.get("count") or 0):
        return out
    for part in (check_tensor_parallel(tp, int(facts["count"]), dims, profile),
                 check_memory(facts, tp, float(gpu_memory_utilization), float(profile["min_gpu_memory_gb"]),
                              profile["name"], lambda n: tensor_parallel_refusals(n, dims, profile)),
                 check_compute_capability(facts, profile.get("min_compute_capability"), profile["name"])):
        out["problems"] += part["problems"]
        out["warnings"] += part["warnings"]
    out["problems"] += model_profile.constraint_conflicts(profile, model_profile.compute_capabilities(facts), extra_args)
    return out
