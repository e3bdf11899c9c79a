# -*- coding: utf-8 -*-
# Copyright: (c) 2026, moeops.inference contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Whether vLLM's weight loader can split the model's weights over a parallel layout: the checks the pinned vLLM
(0.33.0) makes when it creates each rank's share of the weights. vLLM's argument parser and backend selector accept
layouts that these checks refuse only once the weights load (after the download), so the policy asks them first.
Private to the collection (the vllm_service role's fit rules and layout, the preflight report, the docs' table).

Each rule names the vLLM file and function it comes from, takes plain numbers and returns findings
{rule, status, source, message}. status is "ok", "refused" (vLLM raises or asserts for these numbers) or "uncertain"
(vLLM's result depends on what only the GPU settles, such as which kernel its backend selector picks, or a number
the profile does not give). An uncertain rule never counts as a pass.

A layout is (tensor parallel, expert parallel, data parallel). vLLM's fused MoE layers shard over all the ranks of
tensor and data parallel together unless expert parallel is on, when each rank holds whole experts instead
(vllm/model_executor/layers/fused_moe/config.py, FusedMoEParallelConfig.make).
"""

from __future__ import annotations

import math
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

OK, UNCERTAIN, REFUSED = "ok", "uncertain", "refused"
_RANK = {OK: 0, UNCERTAIN: 1, REFUSED: 2}
Finding = Dict[str, str]

# vllm/model_executor/layers/quantization/utils/marlin_utils.py
MARLIN_MOE_GROUP_SIZES = (-1, 32, 64, 128)
# vllm/model_executor/layers/fused_moe/oracle/fp8.py, refine_fp8_moe_block_shape: the finest refined block it makes.
FP8_MIN_REFINED_BLOCK = 32
# The expert-parallel flags of `vllm serve` (vllm/engine/arg_utils.py: BooleanOptionalAction).

SRC = {
    "attention_heads": "vllm/config/model.py ModelConfig.verify_with_parallel_config",
    "kv_heads": "vllm/model_executor/layers/linear.py QKVParallelLinear.__init__",
    "moe_intermediate_split": "vllm/model_executor/layers/fused_moe/config.py FusedMoEConfig.__post_init__",
    "experts_over_ranks": ("vllm/model_executor/layers/fused_moe/expert_map_manager.py determine_expert_map; "
                           "fused_moe/layer.py (EPLB)"),
    "fp8_block_linear": "vllm/model_executor/layers/quantization/utils/fp8_utils.py validate_fp8_block_shape",
    "fp8_block_moe": ("vllm/model_executor/layers/quantization/utils/fp8_utils.py validate_fp8_block_shape_moe; "
                      "fused_moe/oracle/fp8.py refine_fp8_moe_block_shape"),
    "wna16_moe_group": ("vllm/model_executor/layers/quantization/compressed_tensors/compressed_tensors_moe/"
                        "compressed_tensors_moe_wna16.py CompressedTensorsWNA16MoEMethod.create_weights"),
    "marlin_moe_shape": "vllm/model_executor/layers/quantization/utils/marlin_utils.py check_moe_marlin_supports_config",
    "nvfp4_moe_group": "vllm/model_executor/layers/quantization/modelopt.py ModelOptNvFp4FusedMoE.create_weights",
}


def _f(rule: str, status: str, message: str) -> Finding:
    return {"rule": rule, "status": status, "source": SRC[rule], "message": message}


def _known(*values: Any) -> bool:
    return all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in values)


# --- the rules ------------------------------------------------------------------------------------

def head_phrases(tp: int, heads: Optional[int], kv: Optional[int]) -> List[str]:
    """Why vLLM refuses tensor parallel `tp` for these head counts ([] when it does not): the attention heads split
    evenly over the ranks; key/value heads are split (kv >= tp, tp divides them) or replicated (tp > kv, kv divides
    tp)."""
    out = []
    if _known(heads) and heads % tp:
        out.append("does not divide the model's %d attention heads" % heads)
    if _known(kv) and (kv % tp if kv >= tp else tp % kv):
        out.append("cannot split or replicate its %d key/value heads evenly" % kv)
    return out


def attention_heads(tp: int, heads: Optional[int]) -> List[Finding]:
    if not _known(heads):
        return []
    bad = head_phrases(tp, heads, None)
    return [_f("attention_heads", REFUSED if bad else OK, "tensor parallel %d %s" % (
        tp, bad[0] if bad else "gives %d attention heads a rank" % (heads // tp)))]


def kv_heads(tp: int, kv: Optional[int]) -> List[Finding]:
    if not _known(kv):
        return []
    bad = head_phrases(tp, None, kv)
    return [_f("kv_heads", REFUSED if bad else OK, "tensor parallel %d %s" % (
        tp, bad[0] if bad else "splits or replicates its %d key/value heads evenly" % kv))]


def moe_intermediate_split(moe_tp: int, intermediate: Optional[int]) -> List[Finding]:
    """assert intermediate_size % tp_size == 0 for the MoE layers' tensor-parallel size."""
    if not _known(intermediate):
        return [_f("moe_intermediate_split", UNCERTAIN, "the expert intermediate size is not known "
                   "(moe_intermediate_size)")]
    if intermediate % moe_tp:
        return [_f("moe_intermediate_split", REFUSED, "the MoE layers' tensor parallel %d does not divide the expert "
                   "intermediate size %d" % (moe_tp, intermediate))]
    return [_f("moe_intermediate_split", OK, "expert intermediate size %d / %d = %d a rank"
               % (intermediate, moe_tp, intermediate // moe_tp))]


def experts_over_ranks(ep: int, experts: Optional[int], eplb: bool = False) -> List[Finding]:
    """Expert parallel places whole experts on ranks, as evenly as possible (a remainder goes to the first ranks);
    with EPLB the experts must divide evenly. More ranks than experts leaves ranks without an expert."""
    if ep < 2:
        return []
    if not _known(experts):
        return [_f("experts_over_ranks", UNCERTAIN, "the routed expert count is not known (num_routed_experts)")]
    if eplb and experts % ep:
        return [_f("experts_over_ranks", REFUSED, "EPLB needs the %d experts to divide evenly over expert parallel %d"
                   % (experts, ep))]
    if experts < ep:
        return [_f("experts_over_ranks", UNCERTAIN, "expert parallel %d is more ranks than the %d experts: some ranks "
                   "hold none" % (ep, experts))]
    return [_f("experts_over_ranks", OK, "%d experts over expert parallel %d: %s a rank"
               % (experts, ep, experts // ep if not experts % ep else "%d-%d" % (experts // ep, experts // ep + 1)))]


def fp8_block_linear(tp: int, block: Optional[Sequence[int]], heads: Optional[int], kv: Optional[int],
                     head_dim: Optional[int]) -> List[Finding]:
    """Block-FP8 linear layers: a row-parallel layer's input share is a multiple of block_k, a column-parallel (or
    merged) layer's output shares multiples of block_n. Checked for the attention projections of a GQA model: QKV
    (column parallel, merged q/k/v; key/value heads replicated where tp > kv) and o_proj (row parallel)."""
    if tp < 2 or not block or not _known(heads, kv, head_dim):
        return []
    block_n, block_k = int(block[0]), int(block[1])
    if heads % tp:
        return []  # attention_heads refuses it
    q = heads // tp * head_dim
    kv_rank = max(1, kv // tp) * head_dim
    bad = ["q/k/v output share %d %% block_n %d" % (w, block_n) for w in (q, kv_rank) if w % block_n]
    if q % block_k:
        bad.append("o_proj input share %d %% block_k %d" % (q, block_k))
    if bad:
        return [_f("fp8_block_linear", REFUSED, "block-FP8 attention at tensor parallel %d: %s"
                   % (tp, "; ".join(sorted(set(bad)))))]
    return [_f("fp8_block_linear", OK, "block-FP8 attention shares q %d, k/v %d are whole %dx%d blocks"
               % (q, kv_rank, block_n, block_k))]


def fp8_block_moe(moe_tp: int, intermediate: Optional[int], hidden: Optional[int],
                  block: Optional[Sequence[int]]) -> List[Finding]:
    """Block-FP8 fused MoE: each rank's intermediate share must be a multiple of block_n (and of block_k when the
    MoE layers are tensor parallel). Where it is not, vLLM 0.33.0 refines the checkpoint's scale blocks to
    gcd(block_n, block_k, share, hidden) when that is at least 32, a grid only its Triton MoE kernels take; which
    kernel runs is the backend selector's choice on the GPU (an explicit --moe-backend pads the share instead), so
    that case is uncertain. A finer gcd leaves validate_fp8_block_shape_moe to raise."""
    if not block:
        return [_f("fp8_block_moe", UNCERTAIN, "the FP8 weight block size is not known (weight_block_size)")]
    if not _known(intermediate, hidden) or intermediate % moe_tp:
        return [] if _known(intermediate) else [_f("fp8_block_moe", UNCERTAIN, "the expert intermediate size or "
                                                   "hidden size is not known")]
    block_n, block_k = int(block[0]), int(block[1])
    share = intermediate // moe_tp
    if share % block_n == 0 and (moe_tp == 1 or share % block_k == 0):
        return [_f("fp8_block_moe", OK, "expert share %d is whole %dx%d blocks" % (share, block_n, block_k))]
    refine = math.gcd(math.gcd(block_n, block_k), math.gcd(share, hidden))
    what = "expert share %d (intermediate %d / %d) is not a multiple of the %dx%d FP8 blocks" % (
        share, intermediate, moe_tp, block_n, block_k)
    if refine >= FP8_MIN_REFINED_BLOCK:
        return [_f("fp8_block_moe", UNCERTAIN, "%s; vLLM refines the scales to %dx%d blocks, which only its Triton MoE "
                   "kernels take: the GPU's backend choice settles it" % (what, refine, refine))]
    return [_f("fp8_block_moe", REFUSED, "%s, and no refined block of at least %d fits it"
               % (what, FP8_MIN_REFINED_BLOCK))]


def wna16_moe_group(moe_tp: int, intermediate: Optional[int], hidden: Optional[int],
                    group: Optional[int]) -> List[Finding]:
    """compressed-tensors WNA16 MoE with group scales: hidden size and each rank's intermediate share are whole
    groups."""
    if not _known(group):
        return [_f("wna16_moe_group", UNCERTAIN, "the quantization group size is not known (quantization_group_size)")]
    if not _known(intermediate, hidden) or intermediate % moe_tp:
        return [] if _known(intermediate) else [_f("wna16_moe_group", UNCERTAIN, "the expert intermediate size or "
                                                   "hidden size is not known")]
    share = intermediate // moe_tp
    bad = ["hidden size %d %% group %d" % (hidden, group)] if hidden % group else []
    if share % group:
        bad.append("expert share %d %% group %d" % (share, group))
    if bad:
        return [_f("wna16_moe_group", REFUSED, "INT4 group scales would cross rank boundaries: %s" % "; ".join(bad))]
    return [_f("wna16_moe_group", OK, "expert share %d and hidden %d are whole groups of %d" % (share, hidden, group))]


def marlin_moe_shape(moe_tp: int, intermediate: Optional[int], hidden: Optional[int],
                     group: Optional[int]) -> List[Finding]:
    """Marlin's MoE kernel (with tile padding): hidden % 128, the share whole groups, a group size it has. Where it
    does not fit, vLLM needs another WNA16 MoE backend, which its selector picks on the GPU."""
    if not _known(intermediate, hidden, group) or intermediate % moe_tp:
        return []
    share = intermediate // moe_tp
    if hidden % 128 == 0 and share % group == 0 and group in MARLIN_MOE_GROUP_SIZES:
        return [_f("marlin_moe_shape", OK, "Marlin MoE takes hidden %d, share %d, group %d" % (hidden, share, group))]
    return [_f("marlin_moe_shape", UNCERTAIN, "Marlin MoE does not take hidden %d, share %d, group %d; another "
               "backend must" % (hidden, share, group))]


def nvfp4_moe_group(moe_tp: int, intermediate: Optional[int], group: Optional[int]) -> List[Finding]:
    """ModelOpt NVFP4 MoE: two FP4 values a byte and one scale a group along each rank's intermediate share, sized
    by floor division with no check of its own, so a share that is not whole groups cannot be judged here."""
    if not _known(group):
        return [_f("nvfp4_moe_group", UNCERTAIN, "the quantization group size is not known (quantization_group_size)")]
    if not _known(intermediate) or intermediate % moe_tp:
        return [] if _known(intermediate) else [_f("nvfp4_moe_group", UNCERTAIN, "the expert intermediate size is "
                                                   "not known")]
    share = intermediate // moe_tp
    if share % group or share % 2:
        return [_f("nvfp4_moe_group", UNCERTAIN, "expert share %d is not whole NVFP4 groups of %d: vLLM sizes the "
                   "scales by floor division and does not check it" % (share, group))]
    return [_f("nvfp4_moe_group", OK, "expert share %d is whole NVFP4 groups of %d" % (share, group))]


# --- the model and the layout ---------------------------------------------------------------------

def model_shapes(profile: Mapping[str, Any], dims: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
    """The numbers the rules read: the dimensions (config.json first, model_profile.model_dimensions) and the
    profile's weight-shape keys."""
    dims = dims or {}
    out = {key: dims.get(key, profile.get(key)) for key in ("hidden_size", "num_attention_heads", "num_key_value_heads")}
    for key in ("attention_type", "attention_head_size", "num_routed_experts", "quantization_method",
                "moe_intermediate_size", "weight_block_size", "quantization_group_size"):
        out[key] = profile.get(key)
    out["name"] = profile.get("name")
    out["check_heads"] = profile.get("tensor_parallel_divides_attention_heads", True) is not False
    return out


def layout_findings(shapes: Mapping[str, Any], tp: int, ep: bool = False, dp: int = 1,
                    eplb: bool = False) -> List[Finding]:
    """Every rule for the model at tensor parallel `tp`, expert parallel on or off, data parallel `dp`."""
    found: List[Finding] = []
    if shapes.get("check_heads", True):
        found += attention_heads(tp, shapes.get("num_attention_heads"))
        found += kv_heads(tp, shapes.get("num_key_value_heads"))
    method = shapes.get("quantization_method")
    block, group = shapes.get("weight_block_size"), shapes.get("quantization_group_size")
    hidden, inter = shapes.get("hidden_size"), shapes.get("moe_intermediate_size")
    if method == "fp8" and shapes.get("attention_type") == "gqa":
        found += fp8_block_linear(tp, block, shapes.get("num_attention_heads"), shapes.get("num_key_value_heads"),
                                  shapes.get("attention_head_size"))
    if not shapes.get("num_routed_experts"):
        return found  # no MoE layers known
    moe_tp = 1 if ep else tp * dp
    found += experts_over_ranks(tp * dp if ep else 1, shapes.get("num_routed_experts"), eplb)
    found += moe_intermediate_split(moe_tp, inter)
    if method == "fp8":
        found += fp8_block_moe(moe_tp, inter, hidden, block)
    elif method == "compressed-tensors":
        found += wna16_moe_group(moe_tp, inter, hidden, group)
        found += marlin_moe_shape(moe_tp, inter, hidden, group)
    elif method == "modelopt_fp4":
        found += nvfp4_moe_group(moe_tp, inter, group)
    return found


def verdict(findings: Sequence[Finding]) -> str:
    return max((f["status"] for f in findings), key=_RANK.__getitem__, default=OK)


def layout_name(tp: int, ep: bool, dp: int = 1) -> str:
    return "tensor parallel %d%s%s" % (tp, " with expert parallel" if ep else "",
                                       " x data parallel %d" % dp if dp > 1 else "")


def candidates(base_tp: int) -> List[Tuple[int, bool]]:
    """The one-server layouts from tensor parallel `base_tp` (the topology policy's, nccl_policy.parallel_layout) down
    by halves, each without then with expert parallel (the role runs one vLLM server: no data parallel)."""
    out, tp = [], max(int(base_tp), 1)
    while tp >= 1:
        out += [(tp, False)] + ([(tp, True)] if tp > 1 else [])
        tp //= 2
    return out


def loading_layouts(shapes: Mapping[str, Any], base_tp: int) -> List[str]:
    """The one-server layouts up to tensor parallel `base_tp` that every rule passes, largest first."""
    return [layout_name(tp, ep) for tp, ep in candidates(base_tp) if verdict(layout_findings(shapes, tp, ep)) == OK]


def choose_layout(shapes: Mapping[str, Any], base_tp: int, tp: Optional[int] = None,
                  ep: Optional[bool] = None, eplb: bool = False) -> Dict[str, Any]:
    """The layout the role runs: `tp` and `ep` where the user gave them, else the policy's. The policy keeps the
    topology's tensor parallel `base_tp` and adds expert parallel only where the rules pass with it and not without;
    failing both, it takes the largest smaller layout the rules pass (preflight then checks its memory). Returns
    tensor_parallel_size, expert_parallel, status, findings, the layouts that load, and the reason."""
    pool = candidates(base_tp) if tp is None else [(int(tp), False), (int(tp), True)]
    options = [(t, e) for t, e in pool if ep is None or e == ep]
    judged = [(t, e, layout_findings(shapes, t, e, eplb=eplb)) for t, e in options]
    pick = next((j for j in judged if verdict(j[2]) == OK), None) \
        or next((j for j in judged if verdict(j[2]) == UNCERTAIN), None) or judged[0]
    t, e, findings = pick
    if tp is not None and ep is not None:
        reason = "as given"
    elif (t, e) == judged[0][:2]:
        reason = "the weight-shape rules pass it" if verdict(findings) == OK else "no layout passes every rule"
    else:
        why = "; ".join("%s (%s)" % (f["message"], f["rule"]) for f in judged[0][2] if f["status"] != OK)
        reason = "%s: %s; %s passes every weight-shape rule" % (layout_name(*judged[0][:2]), why, layout_name(t, e))
    return {"tensor_parallel_size": t, "expert_parallel": e, "status": verdict(findings), "findings": findings,
            "loads": loading_layouts(shapes, base_tp), "reason": reason}


def layout_report(shapes: Mapping[str, Any], tp: int, ep: bool, base_tp: int, given: str,
                  eplb: bool = False) -> Dict[str, List[str]]:
    """Problems (a rule refuses the layout) and warnings (a rule cannot tell), each naming the rule, its vLLM source,
    the numbers and the layouts that load. The head rules are left to the tensor-parallel check
    (module_utils/_roles/vllm_service/fit.py), which reports them with the sizes that divide; a size they refuse gets
    no second refusal here. `given`: what set the layout, for the message."""
    findings = layout_findings(shapes, tp, ep, eplb=eplb)
    if any(f["status"] == REFUSED and f["rule"] in ("attention_heads", "kv_heads") for f in findings):
        return {"problems": [], "warnings": []}
    loads = loading_layouts(shapes, base_tp)
    out: Dict[str, List[str]] = {"problems": [], "warnings": []}
    for f in findings:
        if f["status"] == OK or f["rule"] in ("attention_heads", "kv_heads"):
            continue
        line = ("%s (%s) for model %s: %s: %s [rule %s, from vLLM 0.33.0 %s]. Layouts that load: %s"
                % (layout_name(tp, ep), given, shapes.get("name"),
                   "vLLM's weight loader refuses it" if f["status"] == REFUSED else "uncertain, only the GPU can tell",
                   f["message"], f["rule"], f["source"], ", ".join(loads) or "none up to tensor parallel %d" % base_tp))
        out["problems" if f["status"] == REFUSED else "warnings"].append(line)
    return out
