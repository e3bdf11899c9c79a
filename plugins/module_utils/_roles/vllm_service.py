# -*- coding: utf-8 -*-
# Copyright: (c) 2026, moeops.inference contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Everything the vllm_service role derives from its variables, in one pure function.

`plan(inputs)` takes the role's variables (renamed to short keys, see INPUTS) and
returns what the unit, the summary and the settings report need: whether to start,
the tensor-parallel layout, the NCCL policy, the `vllm serve` argv and where each of
its arguments comes from, the unit's Environment= variables and their sources, the
model settings, the hardening directives, the API-key decision, the health timeout
and the paths.  No I/O, no Ansible templating: the vllm_service_plan filter calls it,
and unit tests call it directly.

Wrong inputs raise ValueError naming the role variable (for example
`vllm_service_nccl_overrides.NCCL_PROTO`); preflight (role_inputs) refuses most of
them earlier, with the same names.
"""

from __future__ import annotations

import math
import re
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.moeops.inference.plugins.module_utils._policy import api_front
from ansible_collections.moeops.inference.plugins.module_utils._facts import gpu_topology
from ansible_collections.moeops.inference.plugins.module_utils._policy import model_profile
from ansible_collections.moeops.inference.plugins.module_utils._policy import nccl_policy
from ansible_collections.moeops.inference.plugins.module_utils._policy.settings import serve_settings

# key of `inputs`: (the role variable it comes from, required).  Optional keys default to "nothing"
# (None, '', [], {} or 1 pipeline stage); every other default lives in the role's defaults/main.yml.
INPUTS: Dict[str, Tuple[str, bool]] = {
    "profile": ("vllm_service_profile", True),
    "facts": ("ansible_facts.nvidia_gpu", True),
    "tuning": ("the stored NCCL tuning result (moeops.inference.nccl_tune_info)", False),
    "model_path": ("vllm_service_model_path", False),
    "config": ("model_weights_config", False),
    "name": ("vllm_service_name", True),
    "venv": ("vllm_venv", True),
    "hf_home": ("vllm_hf_home", True),
    "home": ("vllm_home", True),
    "host": ("vllm_service_host", True),
    "port": ("vllm_service_port", True),
    "tensor_parallel_size": ("vllm_service_tensor_parallel_size", False),
    "max_model_len": ("vllm_service_max_model_len", False),
    "gpu_memory_utilization": ("vllm_service_gpu_memory_utilization", False),
    "extra_args": ("vllm_service_extra_args", False),
    "nccl_overrides": ("vllm_service_nccl_overrides", False),
    "environment": ("vllm_service_environment", False),
    "start": ("vllm_service_start", True),
    "health_timeout": ("vllm_service_health_timeout", False),
    "health_timeout_base": ("vllm_service_health_timeout_base", True),
    "weights_read_mb_per_s": ("vllm_service_weights_read_mb_per_s", True),
    "hardening": ("vllm_service_hardening", True),
    "hardening_overrides": ("vllm_service_hardening_overrides", False),
    "api_key_given": ("vllm_service_api_key (whether one is given)", True),
    "stage_dir": ("vllm_service_stage_dir", True),
    "restart_sec": ("vllm_service_restart_sec", True),
    "ray_address": ("vllm_service_ray_address", False),
    "pipeline_parallel_size": ("vllm_service_pipeline_parallel_size", False),
    "ray_environment": ("vllm_service_ray_environment", False),
    "p2p_gate": ("vllm_service_p2p_gate", False),
    "p2p_gate_backend": ("vllm_service_p2p_gate_backend", False),
    "p2p_fallback": ("the P2P gate's failure, when vllm_service_p2p_fallback starts vLLM anyway", False),
    "shutdown_timeout": ("vllm_service_shutdown_timeout", False),
    "backend_port": ("vllm_service_backend_port", False),
    "front_routes": ("vllm_service_front_routes", False),
    "front_metrics_cidrs": ("vllm_service_front_metrics_cidrs", False),
    "front_tls_cert": ("vllm_service_front_tls_cert", False),
    "front_tls_key": ("vllm_service_front_tls_key", False),
    "front_read_timeout": ("vllm_service_front_read_timeout", False),
    "front_retry_after": ("vllm_service_front_retry_after", False),
    "engine": ("vllm_engine", False),
    "canary": ("vllm_service_canary", False),
}

OUTPUTS = ("from_hardware", "start", "why_not_started", "tensor_parallel_size", "layout", "nccl", "executable", "args",
           "arg_sources", "environment", "environment_sources", "model_settings", "hardening", "loopback",
           "generate_api_key", "health_timeout", "start_limit_interval", "health_url", "unit_path", "stage_path",
           "previous_dir", "p2p_gate", "shutdown_timeout", "timeout_stop_sec", "front", "engine", "canary")

START_CHOICES = ("auto", "always", "never")
# vllm_engine: the vllm role's choice. The CPU build (simulation and CI) serves without a GPU.
ENGINES = ("cuda", "cpu")
# The /health wait without a weights size in the profile.
HEALTH_TIMEOUT_UNSIZED = 3600
UNIT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@-]*$")
INTEGER = re.compile(r"^[+-]?[0-9]+$")
NUMBER = re.compile(r"^-?[0-9]+(\.[0-9]+)?$")
# What a report falls back to for a setting nothing else claims.
ROLE_SOURCE = {"source": "role", "rule": "vllm.service.j2", "reason": ""}


def _src(source: str, rule: str, reason: str = "") -> Dict[str, str]:
    return {"source": source, "rule": rule, "reason": reason}


# --- input checks: each names the role variable ----------------------------------------------------

def _kind(value: Any) -> str:
    return "%s %r" % (type(value).__name__, value)


def _int(var: str, value: Any, minimum: int) -> int:
    """A whole number (an integer string from -e too), at least `minimum`; never a boolean."""
    if isinstance(value, str) and INTEGER.match(value.strip()):
        value = int(value.strip())
    elif isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError("%s must be a whole number, got %s" % (var, _kind(value)))
    if value < minimum:
        raise ValueError("%s must be at least %d, got %d" % (var, minimum, value))
    return value


def _number(var: str, value: Any) -> float:
    """A number above 0 (a numeric string from -e too); never a boolean."""
    if isinstance(value, str) and NUMBER.match(value.strip()):
        value = float(value.strip())
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError("%s must be a number, got %s" % (var, _kind(value)))
    if value <= 0:
        raise ValueError("%s must be above 0, got %r" % (var, value))
    return value


def _str(var: str, value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError("%s must be a string, got %s" % (var, _kind(value)))
    return value


def _abs_path(var: str, value: Any) -> str:
    if not _str(var, value).startswith("/"):
        raise ValueError("%s must be an absolute path, got %r" % (var, value))
    return value


def _mapping(var: str, value: Any) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ValueError("%s must be a mapping, got %s" % (var, _kind(value)))
    return value


def _env(var: str, value: Any, allow_null: bool) -> Dict[str, Any]:
    """Environment variable name -> string (None removes one where `allow_null`)."""
    out: Dict[str, Any] = {}
    for name, val in _mapping(var, value).items():
        if not isinstance(name, str) or not name:
            raise ValueError("%s: variable names must be non-empty strings, got %r" % (var, name))
        if val is None and allow_null:
            out[name] = None
        elif not isinstance(val, str):
            raise ValueError("%s.%s must be a string (quote it in YAML)%s, got %s"
                             % (var, name, " or null to remove it" if allow_null else "", type(val).__name__))
        else:
            out[name] = val
    return out


def _strings(var: str, value: Any) -> List[str]:
    if not isinstance(value, (list, tuple)):
        raise ValueError("%s must be a list of strings, got %s" % (var, _kind(value)))
    for index, item in enumerate(value):
        if not isinstance(item, str):
            raise ValueError("%s[%d] must be a string, got %s" % (var, index, type(item).__name__))
    return list(value)


def _bool(var: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError("%s must be true or false, got %s" % (var, _kind(value)))
    return value


def _checked(inputs: Any) -> Dict[str, Any]:
    if not isinstance(inputs, Mapping):
        raise ValueError("expected a mapping of the vllm_service role's inputs, got %s" % type(inputs).__name__)
    unknown = sorted(str(k) for k in inputs if k not in INPUTS)
    if unknown:
        raise ValueError("unknown input(s) %s (known: %s)" % (", ".join(unknown), ", ".join(sorted(INPUTS))))
    missing = [k for k, (_var, required) in INPUTS.items() if required and k not in inputs]
    if missing:
        raise ValueError("missing input(s) %s (%s)"
                         % (", ".join(missing), ", ".join(INPUTS[k][0] for k in missing)))
    v: Dict[str, Any] = dict.fromkeys(INPUTS)  # an optional input left out: None, read as "none" below
    v.update(inputs)
    var = {k: name for k, (name, _required) in INPUTS.items()}

    problems = model_profile.validate_profile(v["profile"], var["profile"])
    if problems:
        raise ValueError("; ".join(problems))
    facts = _mapping(var["facts"], v["facts"])
    if "count" not in facts:
        raise ValueError("%s: expected the nvidia_gpu facts from moeops.inference.gpu_facts (no count in it)" % var["facts"])
    _int(var["facts"] + ".count", facts["count"] if facts["count"] is not None else 0, 0)
    if "from_hardware" in facts:
        _bool(var["facts"] + ".from_hardware", facts["from_hardware"])
    tuning = v.get("tuning")
    if tuning is not None and not isinstance(tuning, Mapping):
        raise ValueError("%s must be a mapping or null, got %s" % (var["tuning"], type(tuning).__name__))
    v["tuning"] = tuning or None
    v["model_path"] = _abs_path(var["model_path"], v["model_path"]) if v.get("model_path") else None
    v["config"] = _mapping(var["config"], v["config"]) if v.get("config") is not None else {}

    name = _str(var["name"], v["name"])
    if not UNIT_NAME.match(name):
        raise ValueError("%s must be a systemd unit name (letters, digits, _ . @ -), got %r" % (var["name"], name))
    for key in ("venv", "hf_home", "home", "stage_dir"):
        _abs_path(var[key], v[key])
    _str(var["host"], v["host"])
    port = _int(var["port"], v["port"], 1)
    if port > 65535:
        raise ValueError("%s must be a TCP port in 1-65535, got %d" % (var["port"], port))
    v["port"] = port

    if v.get("tensor_parallel_size") is not None:
        v["tensor_parallel_size"] = _int(var["tensor_parallel_size"], v["tensor_parallel_size"], 1)
    v["max_model_len"] = _int(var["max_model_len"], v["max_model_len"], 1) if v.get("max_model_len") else None
    v["gpu_memory_utilization"] = (_number(var["gpu_memory_utilization"], v["gpu_memory_utilization"])
                                   if v.get("gpu_memory_utilization") else None)
    v["extra_args"] = _strings(var["extra_args"], v["extra_args"]) if v.get("extra_args") is not None else []
    v["nccl_overrides"] = _env(var["nccl_overrides"], v.get("nccl_overrides") or {}, allow_null=True)
    v["p2p_fallback"] = _str(var["p2p_fallback"], v["p2p_fallback"]) if v.get("p2p_fallback") else None
    v["environment"] = _env(var["environment"], v.get("environment") or {}, allow_null=False)

    v["engine"] = v.get("engine") or "cuda"
    if v["engine"] not in ENGINES:
        raise ValueError("%s must be one of %s, got %r" % (var["engine"], ", ".join(ENGINES), v["engine"]))
    v["canary"] = True if v.get("canary") is None else _bool(var["canary"], v["canary"])
    if v["start"] not in START_CHOICES:
        raise ValueError("%s must be one of %s, got %r" % (var["start"], ", ".join(START_CHOICES), v["start"]))
    if v.get("health_timeout") is not None:
        v["health_timeout"] = _int(var["health_timeout"], v["health_timeout"], 1)
    v["health_timeout_base"] = _int(var["health_timeout_base"], v["health_timeout_base"], 0)
    v["weights_read_mb_per_s"] = _number(var["weights_read_mb_per_s"], v["weights_read_mb_per_s"])
    _mapping(var["hardening"], v["hardening"])
    v["hardening_overrides"] = _mapping(var["hardening_overrides"], v.get("hardening_overrides") or {})
    _bool(var["api_key_given"], v["api_key_given"])
    v["restart_sec"] = _int(var["restart_sec"], v["restart_sec"], 0)

    v["ray_address"] = _str(var["ray_address"], v.get("ray_address") or "")
    v["pipeline_parallel_size"] = (_int(var["pipeline_parallel_size"], v["pipeline_parallel_size"], 1)
                                   if v["pipeline_parallel_size"] is not None else 1)
    v["ray_environment"] = _env(var["ray_environment"], v.get("ray_environment") or {}, allow_null=False)

    v["shutdown_timeout"] = _int(var["shutdown_timeout"], v["shutdown_timeout"], 0) if v["shutdown_timeout"] is not None else 0
    backend = _int(var["backend_port"], v["backend_port"], 1) if v["backend_port"] is not None else port + 1
    if backend > 65535:
        raise ValueError("%s must be a TCP port in 1-65535, got %d" % (var["backend_port"], backend))
    v["backend_port"] = backend
    v["front_routes"] = (list(api_front.DEFAULT_ROUTES) if v["front_routes"] is None
                         else _strings(var["front_routes"], v["front_routes"]))
    v["front_metrics_cidrs"] = v["front_metrics_cidrs"] or []
    for key in ("front_tls_cert", "front_tls_key"):
        v[key] = _str(var[key], v[key] or "")
    v["front_read_timeout"] = (_int(var["front_read_timeout"], v["front_read_timeout"], 1)
                               if v["front_read_timeout"] is not None else 3600)
    v["front_retry_after"] = (_int(var["front_retry_after"], v["front_retry_after"], 1)
                              if v["front_retry_after"] is not None else 30)
    return v


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
           port: int) -> Dict[str, Any]:
    """The generation canary after /health (module vllm_canary, rules in module_utils/_canary.py): the profile's
    question, asked the way clients ask it: through the front where there is one (its certificate names the host's
    public name, not loopback, so it is not verified on this hop), else vLLM itself."""
    plan = dict(model_profile.canary(profile), run=False, why="")
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
                             "or a list of strings, got %s" % _kind(allow))
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

    def of(key: str, reason: str = "") -> Dict[str, str]:
        return _src("profile", "%s.%s" % (name, key), reason)

    candidates: Dict[str, Dict[str, str]] = {
        "executable": _src("variable", "vllm_venv"),
        "subcommand": dict(ROLE_SOURCE),
        "model": (_src("variable", "vllm_service_model_path", "the staged weights") if model_path else of("source")),
        "--revision": of("revision"),
        "--served-model-name": of("served_name"),
        "--tensor-parallel-size": (_src("inventory", "vllm_service_tensor_parallel_size") if tp_given else
                                   _src("policy", "parallel_layout", layout["reasons"]["tensor_parallel_size"])),
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


def environment(hf_home: str, inventory: Mapping[str, str], nccl_settings: Mapping[str, Mapping[str, str]],
                ray_address: str, ray_environment: Mapping[str, str]) -> Tuple[Dict[str, str], Dict[str, Dict[str, str]]]:
    """The unit's Environment= variables (secrets aside: they are in the EnvironmentFile) and where each comes
    from, in the unit's order; a variable set twice keeps the later value, as systemd does."""
    env: Dict[str, str] = {"HF_HOME": hf_home}
    sources: Dict[str, Dict[str, str]] = {"HF_HOME": _src("variable", "vllm_hf_home")}
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
    """As the model_profile_settings filter: the constraints for these GPUs, the model's dimensions
    (config.json first) and the compute capabilities."""
    ccs = model_profile.compute_capabilities(facts)
    settings = model_profile.effective_settings(profile, ccs)
    settings["dimensions"] = model_profile.model_dimensions(profile, config or None)
    settings["compute_capabilities"] = ccs
    return settings


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

def plan(inputs: Mapping[str, Any]) -> Dict[str, Any]:
    """Everything the vllm_service role derives; see the module docstring and INPUTS / OUTPUTS."""
    v = _checked(inputs)
    profile, facts = v["profile"], v["facts"]
    count = int(facts.get("count") or 0)
    hardware = from_hardware(facts)
    started, why = start_decision(v["start"], hardware, str(facts.get("backend") or ""), v["engine"])

    layout = nccl_policy.parallel_layout(facts)
    tp = v["tensor_parallel_size"] if v["tensor_parallel_size"] is not None else int(layout["tensor_parallel_size"])
    nccl = nccl_policy.nccl_policy(facts, v["nccl_overrides"], v["tuning"], v["p2p_fallback"])

    ccs = model_profile.compute_capabilities(facts)
    front = api_front.front(v["name"], v["host"], v["port"], v["backend_port"], v["front_routes"], v["front_metrics_cidrs"],
                            v["front_tls_cert"], v["front_tls_key"], v["front_read_timeout"], v["front_retry_after"],
                            int(v["max_model_len"] or profile["max_model_len"]))
    # Behind a front vLLM listens on loopback only; the front takes the address and the port.
    host, port = ("127.0.0.1", v["backend_port"]) if front["enabled"] else (v["host"], v["port"])
    args = model_profile.serve_args(profile, tp, host, port, max_model_len=v["max_model_len"],
                                    gpu_memory_utilization=v["gpu_memory_utilization"], extra_args=v["extra_args"],
                                    model=v["model_path"], ccs=ccs)
    args += ray_args(v["ray_address"], v["pipeline_parallel_size"])
    # In-flight requests finish on SIGTERM (vLLM's default 0 aborts them); TimeoutStopSec is derived above it.
    args += ["--shutdown-timeout", str(v["shutdown_timeout"])]
    executable = v["venv"] + "/bin/vllm"  # as the unit's ExecStart= writes it
    sources = arg_sources(profile, ccs, [executable] + args, layout, v["tensor_parallel_size"] is not None,
                          v["max_model_len"] is not None, v["gpu_memory_utilization"] is not None, v["model_path"],
                          v["extra_args"], v["ray_address"], front)
    env, env_sources = environment(v["hf_home"], v["environment"], nccl["settings"], v["ray_address"],
                                   v["ray_environment"])

    settings = model_settings(profile, facts, v["config"])
    gate = p2p_gate(v["p2p_gate"], v["p2p_gate_backend"], started, why, tp,
                    (settings.get("dimensions") or {}).get("hidden_size"), hardware)
    loopback = api_front.is_loopback(v["host"])
    timeout = health_timeout(v["health_timeout"], profile.get("weights_size_gb"), v["health_timeout_base"],
                             v["weights_read_mb_per_s"])
    return {
        "from_hardware": hardware,
        "start": started,
        "why_not_started": why,
        "tensor_parallel_size": tp,
        "layout": layout,
        "nccl": nccl,
        "executable": executable,
        "args": args,
        "arg_sources": sources,
        "environment": env,
        "environment_sources": env_sources,
        "model_settings": settings,
        "hardening": hardening(v["hardening"], v["hardening_overrides"], count),
        "loopback": loopback,
        "generate_api_key": not v["api_key_given"] and not loopback,
        "health_timeout": timeout,
        "start_limit_interval": start_limit_interval(v["restart_sec"], timeout),
        "health_url": health_url(host, port),
        "unit_path": "/etc/systemd/system/%s.service" % v["name"],
        "stage_path": "%s/%s.service" % (v["stage_dir"], v["name"]),
        "previous_dir": "%s/previous" % v["stage_dir"],
        "p2p_gate": gate,
        "shutdown_timeout": v["shutdown_timeout"],
        "timeout_stop_sec": api_front.stop_timeout(v["shutdown_timeout"]),
        "front": front,
        "engine": v["engine"],
        "canary": canary(v["canary"], started, profile, front, v["host"], v["port"]),
    }
