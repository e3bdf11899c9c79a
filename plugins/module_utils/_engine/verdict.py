# -*- coding: utf-8 -*-
# Copyright: (c) 2026, moeops.inference contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The engine check's two pure halves: the request for _engine/check.py, and what its answer means.

_engine/check.py runs in the vLLM venv and asks the pinned vLLM itself which attention backend a
profile gets on a compute capability, whether that backend takes the profile's KV cache dtype, whether
the quantization method runs there, and how tensor parallel splits heads and experts.  This module,
on the controller or in a module, builds its request from the profiles (their compute-capability
constraints applied per capability, dimensions from config.json where given) and turns its one output
line into problems that name the profile file and key, notes, and a table for reports.

Pure: no I/O and no vLLM.  An attention type the check does not know, a head size nobody gave, or a
vLLM the script cannot read is "not checked by the engine", never a pass.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.moeops.inference.plugins.module_utils._policy import model_profile

LINE_PREFIX = "ENGINE_CHECK "
SCHEMA_VERSION = 1
# The compute capabilities the check covers: Hopper, datacenter Blackwell, workstation Blackwell.
COMPUTE_CAPABILITIES = ("9.0", "10.0", "12.0")
# Without a profile's tensor_parallel_sizes: the sizes the collection's layout policy picks on one node
# of up to 8 GPUs (nccl_policy.parallel_layout: the largest power of two not above the GPU count).
DEFAULT_TENSOR_PARALLEL_SIZES = (1, 2, 4, 8)
MLA_TYPES = ("sparse_mla", "mla")
# config.json keys of the routed-expert count, in the order the model families use them.
EXPERT_KEYS = ("n_routed_experts", "num_local_experts", "num_experts")
VAR = model_profile.PROFILE_VAR


def _cc(cc: str) -> Tuple[int, int]:
    major, _dot, minor = str(cc).partition(".")
    return int(major), int(minor or 0)


def admitted_capabilities(profile: Mapping[str, Any], ccs: Sequence[str] = COMPUTE_CAPABILITIES) -> List[str]:
    """The compute capabilities of `ccs` at or above the profile's min_compute_capability."""
    floor = profile.get("min_compute_capability")
    return [cc for cc in ccs if floor is None or _cc(cc) >= _cc(floor)]


def _config_value(config: Optional[Mapping[str, Any]], *keys: str) -> Any:
    """The first of `keys` in config.json, top level first, then text_config (multimodal models)."""
    for where in (config or {}, (config or {}).get("text_config") or {}):
        for key in keys:
            if isinstance(where, Mapping) and where.get(key) is not None:
                return where[key]
    return None


def head_size(attention_type: Any, config: Optional[Mapping[str, Any]]) -> Optional[int]:
    """The head size vLLM's attention layer passes to the backend selector, from config.json: the latent
    cache kv_lora_rank + qk_rope_head_dim for MLA (MLAAttention), head_dim or hidden_size / heads for
    the others (ModelConfig.get_head_size).  None when config.json does not say."""
    if attention_type in MLA_TYPES:
        rank, rope = _config_value(config, "kv_lora_rank"), _config_value(config, "qk_rope_head_dim")
        return int(rank) + int(rope) if rank is not None and rope is not None else None
    head_dim = _config_value(config, "head_dim")
    if head_dim is not None:
        return int(head_dim)
    hidden, heads = _config_value(config, "hidden_size"), _config_value(config, "num_attention_heads")
    return int(hidden) // int(heads) if hidden and heads else None


def model_dtype(config: Optional[Mapping[str, Any]]) -> str:
    """The dtype vLLM runs the model in with --dtype auto: config.json's, except that vLLM downcasts a float32 model
    to the platform's first supported dtype (vllm/config/model.py _resolve_auto_dtype), bfloat16 on CUDA 8.0+."""
    dtype = str(_config_value(config, "torch_dtype", "dtype") or "bfloat16")
    return "bfloat16" if dtype in ("float32", "float") else dtype


def build_request(profiles: Mapping[str, Tuple[str, Mapping[str, Any]]],
                  configs: Optional[Mapping[str, Mapping[str, Any]]] = None,
                  ccs: Sequence[str] = COMPUTE_CAPABILITIES) -> Dict[str, Any]:
    """The request for _engine/check.py.  `profiles`: {name: (file, profile)}; `configs`: {name: config.json}
    where known (its dimensions win over the profile's attention_head_size and num_routed_experts).  Per admitted
    capability the profile's constraints are applied as the serve arguments apply them
    (model_profile.effective_settings), and the check says which key set the KV cache dtype."""
    out: List[Dict[str, Any]] = []
    for name in sorted(profiles):
        path, profile = profiles[name]
        config = (configs or {}).get(name)
        dims = model_profile.model_dimensions(profile, config)
        experts = _config_value(config, *EXPERT_KEYS)
        spec: Dict[str, Any] = {
            "profile": name, "file": path, "name": profile.get("name"),
            "attention_type": profile.get("attention_type"),
            "head_size": head_size(profile.get("attention_type"), config) or profile.get("attention_head_size"),
            "dtype": model_dtype(config),
            "num_attention_heads": dims["num_attention_heads"],
            "num_key_value_heads": dims["num_key_value_heads"],
            "num_routed_experts": int(experts) if experts is not None else profile.get("num_routed_experts"),
            "quantization_method": profile.get("quantization_method"),
            "checks": [],
        }
        if isinstance((config or {}).get("quantization_config"), Mapping):
            spec["quantization_config"] = dict(config["quantization_config"])
        sizes = list(profile.get("tensor_parallel_sizes") or DEFAULT_TENSOR_PARALLEL_SIZES)
        for cc in admitted_capabilities(profile, ccs):
            settings = model_profile.effective_settings(profile, [cc])
            key = "kv_cache_dtype"
            for n, constraint in enumerate(profile.get("compute_capability_constraints") or []):
                if cc in (constraint.get("compute_capabilities") or []) and constraint.get("kv_cache_dtype"):
                    key = "compute_capability_constraints[%d].kv_cache_dtype" % n
            spec["checks"].append({"compute_capability": cc, "kv_cache_dtype": settings["kv_cache_dtype"],
                                   "kv_cache_dtype_key": key, "tensor_parallel_sizes": sizes})
        out.append(spec)
    return {"schema_version": SCHEMA_VERSION, "profiles": out}


def parse_output(text: str) -> Dict[str, Any]:
    """The script's record (the last line starting with LINE_PREFIX); {'error': ...} when there is none."""
    found: Optional[Dict[str, Any]] = None
    for line in (text or "").splitlines():
        if line.startswith(LINE_PREFIX):
            try:
                record = json.loads(line[len(LINE_PREFIX):])
            except ValueError:
                continue
            if isinstance(record, dict):
                found = record
    if found is None:
        tail = (text or "").strip()[-400:]
        return {"error": "the engine check printed no result%s" % (": " + tail if tail else "")}
    return found


def _where(row: Mapping[str, Any]) -> str:
    return "%s %s (%s)" % (VAR, row.get("profile"), row.get("file"))


def _refusals(refused: Mapping[str, Sequence[str]]) -> str:
    return "; ".join("%s: %s" % (name, ", ".join(dict.fromkeys(reasons))) for name, reasons in sorted(refused.items()))


def _merge(findings: Sequence[Tuple[str, Any]]) -> List[str]:
    """One message per text, naming every tensor-parallel size it holds at ('%(tp)s' in the text)."""
    sizes: Dict[str, List[str]] = {}
    for text, tp in findings:
        sizes.setdefault(text, []).append(str(tp))
    return [text % {"tp": ", ".join(tps)} for text, tps in sizes.items()]


# vLLM's reasons name FlashInfer when a backend needs it and vLLM has turned it off ("FLASHINFER_MLA_SPARSE_SM120
# requires FlashInfer's sparse MLA decode API", "FA4 sparse MLA runs its prefill batches on FlashInfer's kernel").
FLASHINFER_WORD = "FlashInfer"
FLASHINFER_OFF = ("FlashInfer is off in this vLLM (vllm.utils.flashinfer.has_flashinfer() is false where the unit runs "
                  "it): FlashInfer's precompiled kernels (flashinfer-cubin) are not installed and no CUDA toolkit (nvcc) "
                  "with ninja is on the unit's PATH. Install the kernels with the vllm role (vllm_flashinfer_kernels: "
                  "true, its default for vllm_engine cuda) or run `vllm download-kernels` in the vLLM venv")


def flashinfer_off(output: Mapping[str, Any]) -> bool:
    """Whether the script saw FlashInfer installed but turned off by vLLM (no kernels, no nvcc + ninja)."""
    state = output.get("flashinfer") or {}
    return bool(state.get("installed")) and state.get("has_flashinfer") is False


def _attention_findings(row: Mapping[str, Any], fi_off: bool = False) -> Tuple[List[str], List[str]]:
    problems: List[Tuple[str, Any]] = []
    notes: List[Tuple[str, Any]] = []
    cc, kv, key = row["compute_capability"], row["kv_cache_dtype"], row.get("kv_cache_dtype_key", "kv_cache_dtype")
    where = _where(row).replace("%", "%%")
    for a in row.get("attention") or []:
        tp = a.get("tensor_parallel_size")
        cause = ""
        if fi_off and a.get("backend") is None and any(
                FLASHINFER_WORD in reason for reasons in (a.get("refused") or {}).values() for reason in reasons):
            cause = ". " + FLASHINFER_OFF
        if fi_off and str(a.get("backend") or "").startswith("FLASHINFER"):
            notes.append(("%s on compute capability %s: vLLM selects %s, a FlashInfer backend, although FlashInfer is "
                          "off where the unit runs it (no flashinfer-cubin, no nvcc with ninja on its PATH): it needs "
                          "FlashInfer's kernels when it runs, so install them (vllm_flashinfer_kernels) (tensor "
                          "parallel %%(tp)s)" % (where, cc, a["backend"]), tp))
        if a.get("backend") is None:
            if a.get("backend_with_auto"):
                problems.append((
                    "%s %s %s on compute capability %s: no vLLM attention backend takes it (%s); with "
                    "kv_cache_dtype auto vLLM picks %s, which takes %s (tensor parallel %%(tp)s)"
                    % (where, key, kv, cc, _refusals(a.get("refused") or {}).replace("%", "%%"),
                       a["backend_with_auto"], ", ".join(a.get("backend_with_auto_kv_cache_dtypes") or [])) + cause, tp))
            else:
                problems.append(("%s attention_type %s on compute capability %s: %s (tensor parallel %%(tp)s)%s"
                                 % (where, row.get("attention_type"), cc, str(a.get("error")).replace("%", "%%"),
                                    cause), tp))
        elif not a.get("kv_ok"):
            takes = ", ".join(a.get("backend_kv_cache_dtypes") or [])
            problems.append(("%s %s %s on compute capability %s: vLLM's %s takes only %s (tensor parallel %%(tp)s)"
                             % (where, key, kv, cc, a["backend"], takes), tp))
        for name, why in sorted((a.get("uncertain_because") or {}).items()):
            first = why.split(". ")[0].replace("%", "%%")
            notes.append(("%s on compute capability %s: vLLM ranks %s above %s, and %s could not be imported "
                          "without a GPU (%s), so on a GPU vLLM may pick it (tensor parallel %%(tp)s)"
                          % (where, cc, name, a.get("backend") or "any valid backend", name, first), tp))
    return _merge(problems), _merge(notes)


def interpret(output: Mapping[str, Any]) -> Dict[str, Any]:
    """Problems (each naming the profile file and key), notes, and one row a profile and compute capability:
    {'vllm', 'problems', 'notes', 'rows': [{profile, compute_capability, status, backend, kv, quantization,
    tensor_parallel}]}.  status: ok, problem, uncertain or not checked."""
    if output.get("error"):
        missing = output.get("missing") or []
        return {"vllm": output.get("vllm"), "problems": ["the engine check did not run: %s" % output["error"]],
                "notes": [], "rows": [], "missing": list(missing)}
    problems: List[str] = []
    notes: List[str] = []
    rows: List[Dict[str, Any]] = []
    for row in output.get("results") or []:
        cc = row.get("compute_capability")
        summary: Dict[str, Any] = {"profile": row.get("profile"), "file": row.get("file"), "compute_capability": cc,
                                   "kv_cache_dtype": row.get("kv_cache_dtype")}
        if not row.get("checked"):
            notes.append("%s on compute capability %s: not checked by the engine: %s"
                         % (_where(row), cc, row.get("not_checked")))
            summary.update(status="not checked", backend="-", kv="not checked", quantization="not checked",
                           tensor_parallel="not checked", why=row.get("not_checked"))
            rows.append(summary)
            continue
        row_problems, row_notes = _attention_findings(row, flashinfer_off(output))
        attention = row.get("attention") or []
        backends = {}
        for a in attention:
            backends.setdefault(a.get("backend") or "none", []).append(str(a.get("tensor_parallel_size")))
        summary["backend"] = ", ".join("%s (tp %s)" % (b, "/".join(t)) if len(backends) > 1 else b
                                       for b, t in backends.items())
        resolved = sorted({a.get("kv_cache_dtype_resolved") for a in attention if a.get("kv_cache_dtype_resolved")})
        if any(a.get("backend") is None or not a.get("kv_ok") for a in attention):
            summary["kv"] = "%s refused" % row.get("kv_cache_dtype")
        else:
            summary["kv"] = "%s ok%s" % (row.get("kv_cache_dtype"),
                                         " (-> %s)" % "/".join(resolved) if resolved and resolved != [row.get("kv_cache_dtype")] else "")
        q = row.get("quantization") or {}
        if q.get("ok") is None:
            row_notes.append("%s quantization_method on compute capability %s: not checked by the engine: %s"
                             % (_where(row), cc, q.get("reason")))
            summary["quantization"] = "not checked"
        elif q.get("ok"):
            schemes = ((q.get("scheme") or {}).get("schemes") or {})
            extra = "; ".join("%s %s >= %s" % (t, s["scheme"], s["min_capability"]) for t, s in sorted(schemes.items()))
            summary["quantization"] = "%s ok (min %s%s)" % (
                q.get("method"), q.get("min_capability"), "; " + extra if extra else "")
        else:
            row_problems.append("%s quantization_method %s on compute capability %s: %s"
                                % (_where(row), q.get("method"), cc, q.get("reason")))
            summary["quantization"] = "%s refused" % q.get("method")
        tp_cells = []
        for t in row.get("tensor_parallel") or []:
            size = t.get("tensor_parallel_size")
            for p in t.get("problems") or []:
                row_problems.append("%s %s at tensor parallel %s: %s" % (_where(row), p.get("key"), size, p.get("message")))
            cell = "%s %s" % (size, "ok" if t.get("ok") else "refused")
            if t.get("experts_per_rank_with_expert_parallel") and not t.get("experts_even_with_expert_parallel"):
                cell += " (EP experts uneven %s)" % "/".join(map(str, t["experts_per_rank_with_expert_parallel"]))
            tp_cells.append(cell)
        summary["tensor_parallel"] = ", ".join(tp_cells)
        if row_problems:
            summary["status"] = "problem"
        elif row_notes:
            summary["status"] = "uncertain"
        else:
            summary["status"] = "ok"
        problems += row_problems
        notes += row_notes
        rows.append(summary)
    return {"vllm": output.get("vllm"), "problems": problems, "notes": notes, "rows": rows,
            "symbols": list(output.get("symbols") or []), "flashinfer": dict(output.get("flashinfer") or {})}


TABLE_COLUMNS = (("profile", "profile"), ("compute_capability", "CC"), ("status", "status"), ("backend", "backend"),
                 ("kv", "KV cache dtype"), ("quantization", "quantization"), ("tensor_parallel", "tensor parallel"))


def table(verdict: Mapping[str, Any]) -> str:
    """The rows as a Markdown table, with the vLLM version on top."""
    fi = verdict.get("flashinfer") or {}
    lines = ["vLLM %s engine check" % verdict.get("vllm")]
    if fi:
        lines.append("FlashInfer %s (flashinfer-cubin %s; nvcc %s; ninja %s)" % (
            "on" if fi.get("has_flashinfer") else "off", "yes" if fi.get("has_flashinfer_cubin") else "no",
            fi.get("nvcc") or "none", fi.get("ninja") or "none"))
    lines += ["",
              "| %s |" % " | ".join(title for _key, title in TABLE_COLUMNS),
              "| %s |" % " | ".join("---" for _column in TABLE_COLUMNS)]
    for row in verdict.get("rows") or []:
        lines.append("| %s |" % " | ".join(str(row.get(key, "")) for key, _title in TABLE_COLUMNS))
    return "\n".join(lines)
