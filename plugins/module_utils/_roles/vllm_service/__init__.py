# -*- coding: utf-8 -*-
# Copyright: (c) 2026, moeops.inference contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The vllm_service role's rules and plan, in one place. Private to the collection.

The role_plan action (module_utils/_common/plan.py) calls `input_problems` and `plan` with the role's converted
option values. The rules live in this package:
- inputs.py: the role's inputs beyond the argument spec (the front, the host, ranges, extra arguments, hardening);
- fit.py: the model on this host (GPUs read, compute capability, memory, tensor-parallel size);
- engine.py: what the pinned vLLM refuses (the engine check as recorded), and the engine check the role runs on the node;
- unit.py: the unit, the front, the canary and where every setting comes from.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping

from ansible_collections.moeops.inference.plugins.module_utils._common import specs
from ansible_collections.moeops.inference.plugins.module_utils._common.plan import PlanError
from ansible_collections.moeops.inference.plugins.module_utils._policy import model_profile
from ansible_collections.moeops.inference.plugins.module_utils._policy import weight_shapes
from ansible_collections.moeops.inference.plugins.module_utils._roles.vllm_service import engine as engine_rules
from ansible_collections.moeops.inference.plugins.module_utils._roles.vllm_service import fit
from ansible_collections.moeops.inference.plugins.module_utils._roles.vllm_service.inputs import (
    ADDRESS_OPTIONS, PORT_OPTIONS, input_problems)
from ansible_collections.moeops.inference.plugins.module_utils._roles.vllm_service.unit import unit_plan

__all__ = ["ADDRESS_OPTIONS", "KNOWN_OTHER", "PORT_OPTIONS", "input_problems", "plan"]

# Variables with the role's prefix that are results, not options.
KNOWN_OTHER = ("vllm_service_summary", "vllm_service_desired", "vllm_service_canary_result",
               "vllm_service_p2p_gate_result", "vllm_service_engine_gate_result")


def plan(v: Mapping[str, Any], ctx: Mapping[str, Any]) -> Dict[str, Any]:
    """The role's plan: the profile loaded, the model's fit checked, the unit worked out. `ctx` holds the GPU facts
    (gpus), and optionally the profile already loaded (profile), the stored NCCL tuning result (tuning) and the lines
    naming results an upgrade made stale (tuning_stale), the staged weights (model_weights_path, model_weights_config),
    the P2P gate's failure for the fallback (p2p_fallback), the front's TLS files as read on the node
    (front_tls_files), vllm_service_host looked up on the node (host_lookup: see host_lookup_problems), and report (true for a
    read-only report: no GPU read is a warning unless required)."""
    profile = ctx.get("profile")
    if profile is None:
        try:
            profile = model_profile.load_profile(v["vllm_service_profile"], specs.PROFILES_DIR)
        except model_profile.ProfileError as exc:
            raise PlanError([str(exc)])
    else:  # a profile the caller loaded (tests; a playbook that holds one): checked as the loader checks it
        problems = model_profile.validate_profile(profile)
        if problems:
            raise PlanError(problems)
    facts = ctx.get("gpus") or {}
    if not isinstance(facts, Mapping) or "count" not in facts or isinstance(facts["count"], bool) or not isinstance(
            facts["count"] or 0, int):
        raise PlanError(["ansible_facts.nvidia_gpu: expected the facts of moeops.inference.gpu_facts (a whole count "
                         "of GPUs in it)"])
    for key in ("tuning", "model_weights_config", "front_tls_files", "host_lookup"):
        if ctx.get(key) is not None and not isinstance(ctx[key], Mapping):
            raise PlanError(["%s: expected a mapping or nothing, got %s" % (
                {"tuning": "the stored NCCL tuning result"}.get(key, key), type(ctx[key]).__name__)])
    stale = ctx.get("tuning_stale")
    if stale is not None and (not isinstance(stale, (list, tuple)) or not all(isinstance(x, str) for x in stale)):
        raise PlanError(["tuning_stale: expected a list of lines (nccl_tune_info's stale results), got %r" % (stale,)])
    ctx = dict(ctx, profile=profile, gpus=facts)
    engine = v["vllm_engine"]
    tp_given = v["vllm_service_tensor_parallel_size"]
    try:
        unit = unit_plan(v, ctx)
    except ValueError as exc:
        raise PlanError(getattr(exc, "problems", None) or [str(exc)])
    tp = unit["tensor_parallel_size"] if tp_given is None else tp_given
    gmu = v["vllm_service_gpu_memory_utilization"] or profile["gpu_memory_utilization"]
    # A read-only report (ctx report: the settings playbook) says that no GPU was read instead of refusing, unless the
    # user said GPUs are required.
    required = v["gpu_facts_required"]
    if ctx.get("report") and required is None:
        required = False
    found = fit.model_fit(profile, facts, tp, gmu, v["vllm_service_extra_args"], ctx.get("model_weights_config"),
                          required, engine, tp_given=tp_given is not None)
    ccs = unit["model_settings"]["compute_capabilities"]
    recorded = engine_rules.recorded_problems(profile, ccs, v["vllm_service_extra_args"], engine,
                                              str(v["vllm_service_profile"]),
                                              engine_rules.flashinfer_condition(v["vllm_flashinfer_kernels"],
                                                                                unit["environment"]))
    found["problems"] += recorded["problems"]
    found["problems"] += unit["engine_gate"]["problems"]
    found["problems"] += host_lookup_problems(v["vllm_service_host"], ctx.get("host_lookup"), unit["front"])
    found["warnings"] += recorded["warnings"]
    if int(facts.get("count") or 0) or tp_given is not None:
        # What vLLM's weight loader refuses (or only the GPU can settle) for the layout the unit runs. These rules need
        # no hardware: with no GPU read they still judge a tensor-parallel size the user gave (Kimi-K2.5's 64 heads
        # refuse TP 3 on any box).
        weights = unit["weight_layout"]
        report = weight_shapes.layout_report(weights["shapes"], tp, bool(weights["expert_parallel"]),
                                             weights["base_tensor_parallel_size"], weights["given"])
        found["problems"] += report["problems"]
        found["warnings"] += report["warnings"]
    # No GPU read and none required: no unit that would claim a tensor-parallel size over 0 GPUs.
    unit["install"] = bool(int(facts.get("count") or 0) or engine == "cpu")
    unit["profile"] = profile
    # Named in the outcome line, the summary and the settings report: which profile, and where it came from.
    unit["profile_origin"] = model_profile.profile_origin(v["vllm_service_profile"])
    unit["engine_check"] = engine_rules.check_plan(v, profile, ccs, tp, ctx.get("model_weights_config"),
                                                   unit["environment"])
    if not unit["install"]:
        unit["start"], unit["why_not_started"] = False, "no GPU read: no unit written"
        unit["canary"]["run"] = False
    return {"plan": unit, "problems": found["problems"], "warnings": found["warnings"],
            "outcome": outcome(v, unit, profile)}


def host_lookup_problems(host: Any, lookup: Any, front: Mapping[str, Any]) -> List[str]:
    """A vllm_service_host name that the node cannot resolve (`lookup`: {name, ahosts}, ahosts the facts of
    ansible.builtin.getent's ahosts on the node, in the role's check and preflight: keyed by the addresses found, or
    holding the name itself with null when there is none): whatever binds it, the front's nginx (`listen`) or vLLM,
    fails at start, after the run changed the node (nginx -t refused it late, issue 41, class 5). An address resolves
    to itself."""
    ahosts = lookup.get("ahosts") if isinstance(lookup, Mapping) and lookup.get("name") == host else None
    if not isinstance(ahosts, Mapping) or host not in ahosts or ahosts[host] is not None:
        return []
    binder = "the front's nginx (listen)" if front.get("enabled") else "vLLM (--host)"
    return ["vllm_service_host %r does not resolve on the node (getent ahosts finds no address): %s binds it at start "
            "and would fail there, after this run had changed the node; use an address, or a name the node resolves"
            % (host, binder)]


def outcome(v: Mapping[str, Any], unit: Mapping[str, Any], profile: Mapping[str, Any]) -> str:
    """One line: what the role will serve and whether it starts it."""
    if not unit["install"]:
        return "vllm_service: nothing to install: %s" % unit["why_not_started"]
    where = unit["front"]["url"] if unit["front"]["enabled"] else unit["health_url"][:-len("/health")]
    check = unit["engine_check"]
    return ("vllm_service: %s (%s) from vllm_service_profile %s, at tensor parallel %d%s, %s at %s; %s; %s" % (
        profile["served_name"], profile["name"], unit["profile_origin"], unit["tensor_parallel_size"],
        " with expert parallel" if unit["weight_layout"]["expert_parallel"] else "",
        "vLLM's CPU build" if v["vllm_engine"] == "cpu" else "vLLM", where,
        "asks the installed vLLM first (engine check)" if check["run"] else "no engine check (%s)" % check["why"],
        "starts, waits for /health%s" % (", asks the canary" if unit["canary"]["run"] else "")
        if unit["start"] else "not started: %s" % unit["why_not_started"]))
