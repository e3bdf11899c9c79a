# -*- coding: utf-8 -*-
# Copyright: (c) 2026, moeops.inference contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The vllm_service role's unit: everything it renders and runs, derived from the role's converted inputs, the GPU facts
and the model profile. Private to the collection (the role's plan, module_utils/_roles/vllm_service/__init__.py).

`unit_plan(v, ctx)` takes the role's options by their names (converted by their argument spec's types) and the
context its check gathered (facts, profile, stored NCCL tuning result, staged weights, a P2P fallback) and returns
what the unit, the front, the summary and the settings report need: whether to start, the tensor-parallel layout,
the NCCL policy, the `vllm serve` argv and where each argument comes from, the environment, the hardening, the API
key decision, the health timeout, the paths, the canary. Pure: no I/O.
"""

from __future__ import annotations

import math
import re
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.moeops.inference.plugins.module_utils._engine import benchmark as bench
from ansible_collections.moeops.inference.plugins.module_utils._policy import api_front
from ansible_collections.moeops.inference.plugins.module_utils._policy import canary as canary_rules
from ansible_collections.moeops.inference.plugins.module_utils._facts import gpu_topology
from ansible_collections.moeops.inference.plugins.module_utils._policy import model_profile
from ansible_collections.moeops.inference.plugins.module_utils._policy import nccl_policy
from ansible_collections.moeops.inference.plugins.module_utils._policy import weight_shapes
from ansible_collections.moeops.inference.plugins.module_utils._policy import workload as serving_workload
from ansible_collections.moeops.inference.plugins.module_utils._policy.settings import serve_settings
from ansible_collections.moeops.inference.plugins.module_utils._roles.vllm_service import serve_args

# The /health wait without a weights size in the profile.
HEALTH_TIMEOUT_UNSIZED = 3600
NUMBER = re.compile(r"^-?[0-9]+(\.[0-9]+)?$")
# vLLM 0.33.0 binds no GPU worker to a NUMA node unless --numa-bind is given; 0.34.0 binds where it can by default
# (ParallelConfig.numa_bind None). The flag keeps 0.33.0's behaviour whichever vLLM the unit runs.
NUMA_BIND_REASON = ("GPU workers are not bound to NUMA nodes, vLLM 0.33.0's default, set explicitly since vLLM 0.34.0 "
                    "binds where it can; --numa-bind in vllm_service_extra_args turns it on")
# What a report falls back to for a setting nothing else claims.
ROLE_SOURCE = {"source": "role", "rule": "vllm.service.j2", "reason": ""}


def _src(source: str, rule: str, reason: str = "") -> Dict[str, str]:
    return {"source": source, "rule": rule, "reason": reason}


# --- the rules, each usable alone ----------------------------------------------------------------

def from_hardware(facts: Mapping[str, Any]) -> bool:
    """gpu_facts' own `from_hardware`; facts from before it carried one: nvml/nvidia_smi with GPUs."""
    return gpu_topology.reported_from_hardware(facts)


def start_decision(start: str, hardware: bool, backend: str, engine: str = "cuda") -> Tuple[bool, str]:
    """(start the service and wait for /health, why not: '' when started). auto starts where the GPUs were read from
    hardware, or with the CPU build, which needs none."""
    started = start == "always" or (start == "auto" and (hardware or engine == "cpu"))
    if started:
        return True, ""
    if backend == "snapshot":
        return False, "GPUs replayed from a snapshot, not read from hardware"
    if start == "never":
        return False, "vllm_service_start is never"
    return False, "no GPU read"


def canary(enabled: bool, started: bool, profile: Mapping[str, Any], front_plan: Mapping[str, Any], host: str,
           port: int, unit_name: str = "vllm") -> Dict[str, Any]:
    """The generation canary after /health (module vllm_canary, rules in module_utils/_policy/canary.py): the profile's
    question, asked the way clients ask it: through the front where there is one (its certificate names the host's
    public name, not loopback, so it is not verified on this hop), else vLLM itself. Its result is kept in `record`
    for the settings report."""
    plan = dict(model_profile.canary(profile), run=False, why="", record=canary_rules.record_path(unit_name))
    if not enabled:
        plan["why"] = "vllm_service_canary is false: a hung or garbling engine would pass the deploy"
    elif not started:
        plan["why"] = "the service does not start in this run"
    else:
        plan["run"] = True
    if front_plan.get("enabled"):
        plan.update(url=front_plan["url"], validate_certs=False, via=front_plan["unit"])
    else:
        plan.update(url=health_url(host, port)[:-len("/health")], validate_certs=True, via="vLLM directly")
    return plan


def engine_gate(v: Mapping[str, Any], started: bool, max_model_len: int) -> Dict[str, Any]:
    """The engine gate (tasks/engine_gate*.yml): when a start switches the unit to another engine (venv), the serving
    engine is benchmarked just before the drain and the new one after its canary, with vLLM's own client on the same
    latency workload (module vllm_benchmark), each record kept in its engine's receipt; the new one is compared with
    the old (module vllm_engines, step compare, benchmark.py's regression rules). A regression above `fail` on any
    gated metric rolls back like a failed canary; above `warn` it warns. Measured on the same box minutes apart, so
    the comparison is of the engines, not of two machines or two days."""
    scenario = bench.scenario_plan("latency", input_len=v["vllm_service_engine_gate_input_len"],
                                   output_len=v["vllm_service_engine_gate_output_len"],
                                   num_prompts=v["vllm_service_engine_gate_prompts"])
    plan = {"enabled": False, "why": "", "scenario": scenario, "warn": v["vllm_service_engine_gate_warn"],
            "fail": v["vllm_service_engine_gate_fail"], "metrics": list(v["vllm_service_engine_gate_metrics"]),
            "describe": bench.describe(scenario), "problems": []}
    need = scenario["input_len"] + scenario["output_len"] + bench.MODEL_LEN_MARGIN
    if v["vllm_service_engine_gate"] and need > max_model_len:
        plan["problems"].append(
            "the engine gate's requests need %d + %d tokens (and %d spare) but the unit serves --max-model-len %d: lower "
            "vllm_service_engine_gate_input_len or vllm_service_engine_gate_output_len" % (
                scenario["input_len"], scenario["output_len"], bench.MODEL_LEN_MARGIN, max_model_len))
    if not v["vllm_service_engine_gate"]:
        plan["why"] = "vllm_service_engine_gate is false: a slower engine is kept if it answers the canary"
    elif not started:
        plan["why"] = "the service does not start in this run"
    else:
        plan["enabled"] = True
    return plan


def hardening(directives: Mapping[str, Any], overrides: Mapping[str, Any], gpu_count: int) -> Dict[str, Any]:
    """The directives with the overrides applied (a value sets or replaces, null removes the line);
    where DeviceAllow stays, each GPU's /dev/nvidiaN joins it."""
    merged = dict(directives)
    merged.update(overrides)
    merged = {k: v for k, v in merged.items() if v is not None}
    if "DeviceAllow" in merged:
        allow = merged["DeviceAllow"]
        if isinstance(allow, str):
            allow = [allow]
        elif not isinstance(allow, (list, tuple)) or any(not isinstance(a, str) for a in allow):
            raise ValueError("vllm_service_hardening.DeviceAllow (with vllm_service_hardening_overrides) must be a string "
                             "or a list of strings, got %s %r" % (type(allow).__name__, allow))
        merged["DeviceAllow"] = list(allow) + ["/dev/nvidia%d rw" % i for i in range(gpu_count)]
    return merged


def health_url(host: str, port: int) -> str:
    """Where the role polls /health: the wildcard addresses are polled on loopback, and an IPv6 literal
    goes in brackets (http://[::1]:8000/health)."""
    address = "127.0.0.1" if host in api_front.WILDCARD_HOSTS else host
    if ":" in address and not address.startswith("["):
        address = "[%s]" % address
    return "http://%s:%d/health" % (address, port)


def health_timeout(given: Optional[int], weights_size_gb: Any, base: int, mb_per_s: float) -> int:
    """Seconds for the /health wait and TimeoutStartSec: the given value, else the base plus reading the
    weights at `mb_per_s` (rounded up), else HEALTH_TIMEOUT_UNSIZED without a size."""
    if given is not None:
        return int(given)
    size = float(weights_size_gb or 0)
    if size > 0:
        return int(base) + int(math.ceil(size * 1024 / float(mb_per_s)))
    return HEALTH_TIMEOUT_UNSIZED


def start_limit_interval(restart_sec: int, timeout: int) -> int:
    """StartLimitIntervalSec: long enough that 3 failed loads of the model stop the restart loop."""
    return max(restart_sec * 10, timeout)


def ray_args(ray_address: str, pipeline_parallel_size: int) -> List[str]:
    if not ray_address:
        return []
    return ["--distributed-executor-backend", "ray", "--pipeline-parallel-size", str(int(pipeline_parallel_size))]


def _flags(args: Sequence[str]) -> List[str]:
    """The option names among `args` (--flag=value counts as --flag), as desired.yml took them."""
    return [re.sub(r"^(--?[^=]+).*$", r"\1", a) for a in args if a.startswith("-") and len(a) > 1 and not NUMBER.match(a)]


def arg_sources(profile: Mapping[str, Any], ccs: Sequence[str], argv: Sequence[str], layout: Mapping[str, Any],
                tp_given: bool, max_model_len_given: bool, gpu_memory_utilization_given: bool,
                model_path: Optional[str], extra_args: Sequence[str], ray_address: str,
                front: Optional[Mapping[str, Any]] = None) -> Dict[str, Dict[str, str]]:
    """Where each argument of `argv` (the executable first) comes from: {source, rule, reason} for
    'executable', 'subcommand', 'model' and every option in it (the keys vllm_settings.serve_settings reads)."""
    name = profile["name"]
    weights = layout.get("weights")

    def of(key: str, reason: str = "") -> Dict[str, str]:
        return _src("profile", "%s.%s" % (name, key), reason)

    candidates: Dict[str, Dict[str, str]] = {
        "executable": _src("variable", "vllm_venv", "the venv it links to, where it is a link (the vllm role's engine)"),
        "subcommand": dict(ROLE_SOURCE),
        "model": (_src("variable", "vllm_service_model_path", "the staged weights") if model_path else of("source")),
        "--revision": of("revision"),
        "--served-model-name": of("served_name"),
        "--tensor-parallel-size": (_src("inventory", "vllm_service_tensor_parallel_size") if tp_given else
                                   _src("policy", "parallel_layout", layout["reasons"]["tensor_parallel_size"])
                                   if not weights or weights["tensor_parallel_size"] == layout["tensor_parallel_size"]
                                   else _src("policy", "weight_shapes", weights["reason"])),
        "--enable-expert-parallel": _src("policy", "weight_shapes", weights["reason"] if weights else ""),
        "--no-numa-bind": _src("role", "numa_bind", NUMA_BIND_REASON),
        "--max-model-len": (_src("inventory", "vllm_service_max_model_len") if max_model_len_given
                            else of("max_model_len")),
        "--gpu-memory-utilization": (_src("inventory", "vllm_service_gpu_memory_utilization") if gpu_memory_utilization_given
                                     else of("gpu_memory_utilization")),
        "--trust-remote-code": of("trust_remote_code"),
        "--enable-auto-tool-choice": of("tool_call_parser"),
        "--tool-call-parser": of("tool_call_parser"),
        "--reasoning-parser": of("reasoning_parser"),
        "--chat-template": of("chat_template"),
        "--chat-template-content-format": of("chat_template_content_format"),
        "--default-chat-template-kwargs": of("default_chat_template_kwargs"),
        "--kv-cache-dtype": of("kv_cache_dtype"),
        "--host": _src("variable", "vllm_service_host"),
        "--port": _src("variable", "vllm_service_port"),
        "--shutdown-timeout": _src("variable", "vllm_service_shutdown_timeout",
                                   "in-flight requests finish on a restart (0 would abort them)"),
    }
    if front and front.get("enabled"):
        candidates["--host"] = _src("policy", "api_front", "loopback only: %s listens on %s" % (front["unit"], front["listen"]))
        candidates["--port"] = _src("variable", "vllm_service_backend_port", "behind %s" % front["unit"])
    # The compute-capability constraints that apply to these GPUs, in the profile's order (a later one wins,
    # as in model_profile.effective_settings).
    constraint_extra: Dict[str, Dict[str, str]] = {}
    for index, constraint in enumerate(profile.get("compute_capability_constraints") or []):
        if not set(constraint.get("compute_capabilities") or []) & set(ccs):
            continue
        rule = "compute_capability_constraints[%d]" % index
        if constraint.get("kv_cache_dtype"):
            candidates["--kv-cache-dtype"] = of(rule, constraint["reason"])
        if constraint.get("disable_custom_all_reduce"):
            candidates["--disable-custom-all-reduce"] = of(rule, constraint["reason"])
        for flag in _flags(constraint.get("extra_args") or []):
            constraint_extra[flag] = of(rule + ".extra_args", constraint["reason"])
    # Later arguments win in vLLM's argparse: the profile's extra arguments, the constraints', the inventory's.
    for flag in _flags(profile.get("extra_args") or []):
        candidates[flag] = of("extra_args")
    candidates.update(constraint_extra)
    for flag in _flags(extra_args):
        candidates[flag] = _src("inventory", "vllm_service_extra_args")
    if ray_address:
        candidates["--distributed-executor-backend"] = _src(
            "variable", "vllm_service_ray_address", "multi-node: the engine runs on the Ray cluster at %s" % ray_address)
        candidates["--pipeline-parallel-size"] = _src(
            "variable", "vllm_service_pipeline_parallel_size", "pipeline stages across the Ray nodes")
    return {key: dict(candidates.get(key, ROLE_SOURCE)) for key in serve_settings(list(argv))}


# The compile and JIT caches that vLLM and the libraries below it keep in the service's home, each moved into a
# directory of the engine's own, so that a switch back to an engine finds its caches warm and an engine never reads
# kernels another build compiled (their formats follow the torch, Triton and FlashInfer versions of each venv).
ENGINE_CACHES = (
    ("VLLM_CACHE_ROOT", "vllm", "vLLM's own cache (torch.compile graphs)"),
    ("TORCHINDUCTOR_CACHE_DIR", "torchinductor", "PyTorch Inductor's compiled kernels"),
    ("TRITON_CACHE_DIR", "triton", "Triton's compiled kernels"),
    ("FLASHINFER_WORKSPACE_BASE", "flashinfer", "FlashInfer's JIT workspace (it adds .cache/flashinfer)"),
    ("TORCH_EXTENSIONS_DIR", "torch_extensions", "PyTorch's JIT-built extensions"),
    ("CUDA_CACHE_PATH", "cuda", "the CUDA driver's PTX JIT cache"),
)
CACHES_SUBDIR = "engine-caches"


def engine_caches_dir(home: str) -> str:
    """Where the engines' caches live: in the service's home, which the unit may write (StateDirectory)."""
    return "%s/%s" % (home.rstrip("/"), CACHES_SUBDIR)


def engine_caches(home: str, engine_venv: str) -> Dict[str, str]:
    """The cache variables of one engine: <home>/engine-caches/<engine's venv name>/<cache>."""
    base = "%s/%s" % (engine_caches_dir(home), engine_venv.rstrip("/").rsplit("/", 1)[-1])
    return {name: "%s/%s" % (base, sub) for name, sub, _what in ENGINE_CACHES}


def environment(hf_home: str, inventory: Mapping[str, str], nccl_settings: Mapping[str, Mapping[str, str]],
                ray_address: str, ray_environment: Mapping[str, str],
                caches: Optional[Mapping[str, str]] = None) -> Tuple[Dict[str, str], Dict[str, Dict[str, str]]]:
    """The unit's Environment= variables (secrets aside: they are in the EnvironmentFile) and where each comes
    from, in the unit's order; a variable set twice keeps the later value, as systemd does."""
    env: Dict[str, str] = {"HF_HOME": hf_home}
    sources: Dict[str, Dict[str, str]] = {"HF_HOME": _src("variable", "vllm_hf_home")}
    what = {name: text for name, _sub, text in ENGINE_CACHES}
    # As the template's dictsort orders them (case-insensitive).
    for name, value in sorted((caches or {}).items(), key=lambda kv: kv[0].lower()):
        env[name], sources[name] = value, _src("engine", "one cache directory per engine",
                                               "%s, kept per engine so a switch back finds it warm" % what.get(name, name))
    for name, value in sorted(inventory.items()):
        env[name], sources[name] = value, _src("inventory", "vllm_service_environment")
    for name, setting in sorted(nccl_settings.items()):
        env[name] = setting["value"]
        sources[name] = _src(setting["source"], setting["rule"], setting["reason"])
    if ray_address:
        env["RAY_ADDRESS"], sources["RAY_ADDRESS"] = ray_address, _src("variable", "vllm_service_ray_address")
        for name, value in sorted(ray_environment.items()):
            env[name], sources[name] = value, _src("variable", "vllm_service_ray_environment")
    return env, sources


def model_settings(profile: Mapping[str, Any], facts: Mapping[str, Any], config: Optional[Mapping[str, Any]]) -> Dict[str, Any]:
    """The constraints for these GPUs, the model's dimensions
    (config.json first) and the compute capabilities."""
    ccs = model_profile.compute_capabilities(facts)
    settings = model_profile.effective_settings(profile, ccs)
    settings["dimensions"] = model_profile.model_dimensions(profile, config or None)
    settings["compute_capabilities"] = ccs
    return settings


def weight_layout(profile: Mapping[str, Any], ccs: Sequence[str], config: Optional[Mapping[str, Any]], base_tp: int,
                  given_tp: Optional[int], extra_args: Sequence[str]) -> Dict[str, Any]:
    """The tensor-parallel size and expert parallel that vLLM's weight loader takes for the model
    (_policy/weight_shapes.py): the topology's tensor parallel, with expert parallel where the weight-shape rules need
    it. A size in vllm_service_tensor_parallel_size and an expert-parallel flag in the arguments (the profile's, the
    constraints', vllm_service_extra_args: the last wins, as in vLLM's argparse) are kept as given.
    `render_expert_parallel`: the role adds --enable-expert-parallel (the arguments set no flag of their own)."""
    args = model_profile.effective_settings(profile, ccs)["extra_args"] + list(extra_args or [])
    given_ep = serve_args.switch(args, "enable_expert_parallel")
    shapes = weight_shapes.model_shapes(profile, model_profile.model_dimensions(profile, config))
    out = weight_shapes.choose_layout(shapes, base_tp, given_tp, given_ep,
                                      eplb=bool(serve_args.switch(args, "enable_eplb")))
    out["render_expert_parallel"] = bool(out["expert_parallel"]) and given_ep is None
    out["given"] = ", ".join(
        ["vllm_service_tensor_parallel_size %d" % given_tp] if given_tp is not None else ["the policy's tensor parallel"])
    out["given"] += (", expert parallel %s in the arguments" % ("on" if given_ep else "off") if given_ep is not None
                     else ", expert parallel by the policy")
    out["shapes"] = shapes
    out["base_tensor_parallel_size"] = base_tp
    return out


# --- the P2P gate ---------------------------------------------------------------------------------

def p2p_gate(enabled: Any, backend: Any, started: bool, why_not: str, tensor_parallel_size: int,
             hidden_size: Any, hardware: bool = True) -> Dict[str, Any]:
    """Whether the P2P gate (moeops.inference.p2p_gate) runs before this start, and with what: on the GPUs of
    this node that the service uses (its tensor-parallel size), only when the service starts in this run.
    backend gloo (CPU ranks, two of them) is the tests' mode on machines without GPUs: it proves the harness."""
    backend = "nccl" if backend in (None, "") else str(backend)
    if backend not in ("nccl", "gloo"):
        raise ValueError("vllm_service_p2p_gate_backend must be nccl or gloo, got %r" % backend)
    world = 2 if backend == "gloo" else int(tensor_parallel_size)
    gate = {"run": False, "why": "", "backend": backend, "world_size": world, "hidden_size": int(hidden_size or 0)}
    if enabled is False:
        gate["why"] = "vllm_service_p2p_gate is false"
    elif not started:
        gate["why"] = "the service does not start in this run (%s)" % why_not
    elif backend == "nccl" and not hardware:
        gate["why"] = "the GPUs were not read from hardware (a snapshot): there are no GPUs to prove"
    elif world < 2:
        gate["why"] = "%d GPU: nothing to prove" % world
    elif not gate["hidden_size"]:
        gate["why"] = "the model's hidden size is not known (profile or config.json)"
    else:
        gate["run"] = True
    return gate


# --- the plan -------------------------------------------------------------------------------------

def unit_plan(v: Mapping[str, Any], ctx: Mapping[str, Any]) -> Dict[str, Any]:
    """Everything the role renders and runs; see the module docstring. `v`: the role's converted options by name;
    `ctx`: gpus (the nvidia_gpu facts), profile (loaded and checked), tuning (a stored NCCL sweep result or None),
    tuning_stale (lines naming stored results an NCCL or driver upgrade made stale: warnings, never used),
    model_weights_path and model_weights_config (the model_weights role's results, where it staged the weights),
    p2p_fallback (the P2P gate's failure, when vllm_service_p2p_fallback starts vLLM anyway), front_tls_files (the
    front's TLS files as the check step read them on the node: path -> Ansible's stat)."""
    profile, facts = ctx["profile"], ctx["gpus"]
    count = int(facts.get("count") or 0)
    hardware = from_hardware(facts)
    started, why = start_decision(v["vllm_service_start"], hardware, str(facts.get("backend") or ""), v["vllm_engine"])
    port = int(v["vllm_service_port"])
    backend_port = v["vllm_service_backend_port"] if v["vllm_service_backend_port"] is not None else port + 1
    given_tp, max_model_len = v["vllm_service_tensor_parallel_size"], v["vllm_service_max_model_len"]
    gmu = v["vllm_service_gpu_memory_utilization"]
    model_path = v["vllm_service_model_path"] or ctx.get("model_weights_path") or None

    layout = nccl_policy.parallel_layout(facts)
    ccs = model_profile.compute_capabilities(facts)
    weights = weight_layout(profile, ccs, ctx.get("model_weights_config") or None, int(layout["tensor_parallel_size"]),
                            given_tp, v["vllm_service_extra_args"])
    tp = given_tp if given_tp is not None else int(weights["tensor_parallel_size"])
    workload = v["vllm_service_workload"]
    nccl = nccl_policy.nccl_policy(facts, v["vllm_service_nccl_overrides"],
                                   (ctx.get("tuning") or None) if v["vllm_service_nccl_tuning"] else None,
                                   ctx.get("p2p_fallback") or None, workload=workload,
                                   stale=list(ctx.get("tuning_stale") or []),
                                   single_box=not v["vllm_service_ray_address"])

    routes = v["vllm_service_front_routes"]
    front = api_front.front(v["vllm_service_name"], v["vllm_service_host"], port, backend_port,
                            list(api_front.DEFAULT_ROUTES) if routes is None else routes,
                            v["vllm_service_front_metrics_cidrs"], v["vllm_service_front_tls_cert"],
                            v["vllm_service_front_tls_key"], v["vllm_service_front_read_timeout"],
                            v["vllm_service_front_retry_after"], int(max_model_len or profile["max_model_len"]),
                            unsafe_routes=v["vllm_service_front_unsafe_routes"], tls_files=ctx.get("front_tls_files"),
                            client_connections=v["vllm_service_front_client_connections"],
                            client_timeout=v["vllm_service_front_client_timeout"])
    # Behind a front vLLM listens on loopback only; the front takes the address and the port.
    host, listen_port = ("127.0.0.1", backend_port) if front["enabled"] else (v["vllm_service_host"], port)
    args = model_profile.serve_args(profile, tp, host, listen_port, max_model_len=max_model_len,
                                    gpu_memory_utilization=gmu, extra_args=v["vllm_service_extra_args"],
                                    model=model_path, ccs=ccs, expert_parallel=weights["render_expert_parallel"],
                                    numa_bind_off=v["vllm_engine"] == "cuda")
    ray_address = v["vllm_service_ray_address"]
    args += ray_args(ray_address, v["vllm_service_pipeline_parallel_size"])
    # The workload's vLLM knobs (none for balanced, vLLM's defaults): --performance-mode, a queue cap for throughput.
    served = serving_workload.vllm_plan(workload, v["vllm_service_max_queued_requests"], facts, v["vllm_engine"],
                                        tp * int(v["vllm_service_pipeline_parallel_size"] if ray_address else 1), args)
    args += served["args"]
    # In-flight requests finish on SIGTERM (vLLM's default 0 aborts them); TimeoutStopSec is derived above it.
    args += ["--shutdown-timeout", str(v["vllm_service_shutdown_timeout"])]
    # As the unit's ExecStart= writes it: the venv a link vllm_venv points at (read on the node), not the link.
    executable = (ctx.get("engine_venv") or v["vllm_venv"]) + "/bin/vllm"
    sources = arg_sources(profile, ccs, [executable] + args, dict(layout, weights=weights), given_tp is not None,
                          max_model_len is not None, gmu is not None, model_path, v["vllm_service_extra_args"],
                          ray_address, front)
    sources.update(served["sources"])
    caches = engine_caches(v["vllm_home"], executable[:-len("/bin/vllm")])
    env, env_sources = environment(v["vllm_hf_home"], v["vllm_service_environment"], nccl["settings"], ray_address,
                                   v["vllm_service_ray_environment"], caches)

    settings = model_settings(profile, facts, ctx.get("model_weights_config") or {})
    gate = p2p_gate(v["vllm_service_p2p_gate"], v["vllm_service_p2p_gate_backend"], started, why, tp,
                    (settings.get("dimensions") or {}).get("hidden_size"), hardware)
    loopback = api_front.is_loopback(v["vllm_service_host"])
    timeout = health_timeout(v["vllm_service_health_timeout"], profile.get("weights_size_gb"),
                             v["vllm_service_health_timeout_base"], v["vllm_service_weights_read_mb_per_s"])
    stage_dir = v["vllm_service_stage_dir"]
    return {
        "from_hardware": hardware,
        "start": started,
        "why_not_started": why,
        "tensor_parallel_size": tp,
        "layout": layout,
        "weight_layout": weights,
        "nccl": nccl,
        "workload": served,
        "executable": executable,
        "engine_venv": executable[:-len("/bin/vllm")],
        "engines_dir": v["vllm_engines_dir"],
        "engine_caches": caches,
        "engine_caches_dir": engine_caches_dir(v["vllm_home"]),
        "keep_engines": v["vllm_service_keep_engines"],
        "args": args,
        "arg_sources": sources,
        "environment": env,
        "environment_sources": env_sources,
        "model_settings": settings,
        "model_path": model_path,
        "hardening": hardening(v["vllm_service_hardening"], v["vllm_service_hardening_overrides"], count),
        "loopback": loopback,
        "generate_api_key": not v["vllm_service_api_key"] and not loopback,
        "health_timeout": timeout,
        "start_limit_interval": start_limit_interval(v["vllm_service_restart_sec"], timeout),
        "health_url": health_url(host, listen_port),
        "unit_path": "/etc/systemd/system/%s.service" % v["vllm_service_name"],
        "stage_path": "%s/%s.service" % (stage_dir, v["vllm_service_name"]),
        "previous_dir": "%s/previous" % stage_dir,
        "p2p_gate": gate,
        "shutdown_timeout": v["vllm_service_shutdown_timeout"],
        "timeout_stop_sec": api_front.stop_timeout(v["vllm_service_shutdown_timeout"]),
        "front": front,
        "engine": v["vllm_engine"],
        "canary": canary(v["vllm_service_canary"], started, profile, front, v["vllm_service_host"], port,
                         v["vllm_service_name"]),
        "engine_gate": engine_gate(v, started, int(max_model_len or profile["max_model_len"])),
    }
