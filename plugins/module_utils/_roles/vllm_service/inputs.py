# -*- coding: utf-8 -*-
# Copyright: (c) 2026, moeops.inference contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The vllm_service role's input rules, beyond what its argument spec says and the address and port types declared
here: the front's inputs (by the front's own rules), the unit's name, secrets without whitespace, ranges, `vllm serve` arguments that have a dedicated
variable, hardening overrides limited to sandboxing directives. Private to the collection
(module_utils/_roles/vllm_service/__init__.py applies them to the converted values).
"""

from __future__ import annotations

from typing import Any, List, Mapping

from ansible_collections.moeops.inference.plugins.module_utils._common import inputs, specs
from ansible_collections.moeops.inference.plugins.module_utils._engine import benchmark as bench
from ansible_collections.moeops.inference.plugins.module_utils._policy import api_front, model_profile
from ansible_collections.moeops.inference.plugins.module_utils._roles.vllm_service import serve_args

# `vllm serve` options the roles derive themselves, by the dest vLLM's parser gives them (serve_args.py reads every
# spelling: --api_key, the prefix --hos, --host=..., -tp): given again in extra args, argparse keeps the last one and
# silently undoes the variable (--host 0.0.0.0 in extra args bound publicly without an API key).
DEDICATED_ARGS = {
    "host": "vllm_service_host",
    "port": "vllm_service_port",
    "api_key": "vllm_service_api_key",
    "hf_token": "vllm_service_hf_token",
    "model": "the model profile's source (or vllm_service_model_path)",
    "served_model_name": "the model profile's served_name",
    "tensor_parallel_size": "vllm_service_tensor_parallel_size",
    "pipeline_parallel_size": "vllm_service_pipeline_parallel_size",
    "max_model_len": "vllm_service_max_model_len",
    "gpu_memory_utilization": "vllm_service_gpu_memory_utilization",
    "distributed_executor_backend": "vllm_service_ray_address (Ray) or nothing (one host)",
    "download_dir": "vllm_hf_home",
    "shutdown_timeout": "vllm_service_shutdown_timeout (TimeoutStopSec is sized from it)",
    "performance_mode": "vllm_service_workload (latency: interactivity, throughput: throughput)",
    "max_num_queued_reqs": "vllm_service_max_queued_requests",
}
# Options no variable stands for, refused by dest all the same: each would undo what the role checked.
REFUSED_ARGS = {
    "config": "vLLM reads further options from that file, which no rule here sees (--host and --api-key among them); "
              "give them in vllm_service_extra_args",
    "help": "vLLM prints its help and exits: the service never starts",
    "uds": "vLLM would listen on that Unix socket instead of vllm_service_host and vllm_service_port, where the front, "
           "the health checks and the clients connect",
    "grpc": "vLLM would serve gRPC on the port instead of the OpenAI API that the front, the health checks and the "
            "canary use",
    "grpc_port": "vLLM would open a second listener on that port, outside vllm_service_host and the front",
}
SECRET_DESTS = ("api_key", "hf_token")

# The directives vllm_service_hardening_overrides may set: systemd.exec(5)'s sandboxing and resource
# directives. User, Group, Exec*, Environment* and unknown names are refused: an override is there to
# loosen or tighten the sandbox, never to change who runs what.
HARDENING_DIRECTIVES = frozenset("""
AmbientCapabilities CacheDirectory CapabilityBoundingSet ConfigurationDirectory DeviceAllow DevicePolicy
InaccessiblePaths IPAddressAllow IPAddressDeny KeyringMode LimitCORE LimitMEMLOCK LimitNOFILE LimitNPROC
LockPersonality LogsDirectory MemoryDenyWriteExecute NoExecPaths NoNewPrivileges PrivateDevices PrivateIPC
PrivateMounts PrivateNetwork PrivateTmp PrivateUsers ProcSubset ProtectClock ProtectControlGroups ProtectHome
ProtectHostname ProtectKernelLogs ProtectKernelModules ProtectKernelTunables ProtectProc ProtectSystem
ReadOnlyPaths ReadWritePaths RemoveIPC RestrictAddressFamilies RestrictFileSystems RestrictNamespaces
RestrictRealtime RestrictSUIDSGID RuntimeDirectory StateDirectory SystemCallArchitectures SystemCallErrorNumber
SystemCallFilter TemporaryFileSystem UMask
""".split())


# The shared types (_common/inputs.py), applied by the plan before input_problems.
ADDRESS_OPTIONS = {"vllm_service_host": inputs.host_type(empty_means="every address"),
                   "vllm_service_front_metrics_cidrs": inputs.NETWORKS,
                   "vllm_service_ray_address": inputs.ENDPOINT_TYPE}
PORT_OPTIONS = ("vllm_service_port", "vllm_service_backend_port")


def extra_args_problems(name: str, value: Any) -> List[str]:
    """Each item as the pinned vLLM's own parser reads it (serve_args.py): an option the role derives or one that undoes its
    checks is refused by the dest it sets, whatever the spelling; what vLLM itself refuses (an unknown option, an
    ambiguous prefix, a missing value, a stray value) is refused now rather than at the service's start."""
    if not isinstance(value, list):
        return []
    problems: List[str] = []
    strings = []
    for index, arg in enumerate(value):
        if not isinstance(arg, str):
            problems.append("%s[%d] must be a string, got %s %r" % (name, index, inputs.type_name(arg), arg))
        strings.append(arg if isinstance(arg, str) else "")
    if problems:
        return problems
    for found in serve_args.read(strings):
        where = "%s[%d]" % (name, found["index"])
        given, dest = found["given"], found["dest"]
        if not found["option"] and not given.startswith("-"):
            problems.append("%s is a value that belongs to no option: vLLM refuses it (unrecognized arguments); the "
                            "value is not shown" % where)
            continue
        read_as = " (vLLM reads it as %s)" % found["option"] if found["option"] and given != found["option"] else ""
        if dest in DEDICATED_ARGS:
            problems.append("%s %s%s: set %s instead (given here, it would silently override the role's own value)%s"
                            % (where, given, read_as, DEDICATED_ARGS[dest],
                               "; the value is not shown" if dest in SECRET_DESTS else ""))
        elif dest in REFUSED_ARGS:
            problems.append("%s %s%s is refused: %s" % (where, given, read_as, REFUSED_ARGS[dest]))
        elif found["error"]:
            problems.append("%s %s%s%s" % (where, given, read_as, " " + found["error"] if found["error"].startswith("is ")
                                           else ": vLLM refuses it: " + found["error"]))
    return problems


def hardening_override_problems(name: str, value: Any) -> List[str]:
    if not isinstance(value, Mapping):
        return []
    return ["%s.%s is not a sandboxing directive this variable may set (allowed: systemd.exec sandboxing and "
            "resource directives, docs/role-variables.md); User, Group, Exec*, Environment* and others are refused"
            % (name, key) for key in sorted(value, key=str) if key not in HARDENING_DIRECTIVES]


def backend_port_problems(v: Mapping[str, Any]) -> List[str]:
    """Behind a front (a host that is not loopback) vLLM listens on vllm_service_backend_port, null taking the port + 1:
    the user's port must leave room for it. Named by the port the user set, never by the derived one."""
    port, backend, host = v.get("vllm_service_port"), v.get("vllm_service_backend_port"), v.get("vllm_service_host")
    if backend is not None or not isinstance(port, int) or isinstance(port, bool) or port < 65535:
        return []
    if not isinstance(host, str) or inputs.is_loopback(host):
        return []
    return ["vllm_service_port %d leaves no port for vLLM behind the front: vllm_service_host %s is not loopback, so the "
            "front listens on vllm_service_port and vLLM on vllm_service_backend_port, which is null (the port + 1, "
            "beyond 65535); set vllm_service_backend_port, or a lower vllm_service_port" % (port, host or "''")]


def _front(v: Mapping[str, Any]) -> List[str]:
    """The API front's inputs, by the front's own rules (api_front): they are written into nginx's configuration."""
    port, backend = v.get("vllm_service_port"), v.get("vllm_service_backend_port")
    routes, cidrs = v.get("vllm_service_front_routes"), v.get("vllm_service_front_metrics_cidrs")
    unsafe = v.get("vllm_service_front_unsafe_routes")
    # Compared as text: either may come from -e as a string (the spec's conversion names a value that is no port).
    problems = api_front.input_problems(
        str(port), str(backend) if backend is not None and not isinstance(backend, bool) else None,
        routes if isinstance(routes, list) else [], cidrs if isinstance(cidrs, list) else [],
        v.get("vllm_service_front_tls_cert") or "", v.get("vllm_service_front_tls_key") or "",
        unsafe_routes=unsafe if isinstance(unsafe, list) else [])
    return (problems
            + inputs.number_in("vllm_service_shutdown_timeout", v.get("vllm_service_shutdown_timeout"), 0,
                               inputs.SYSTEMD_MAX_SECONDS - api_front.STOP_MARGIN_S, low_open=False,
                               what="0 or more seconds, below %d" % (inputs.SYSTEMD_MAX_SECONDS - api_front.STOP_MARGIN_S))
            + inputs.number_in("vllm_service_front_read_timeout", v.get("vllm_service_front_read_timeout"), 0,
                               inputs.SYSTEMD_MAX_SECONDS, what="a positive number of seconds")
            + inputs.number_in("vllm_service_front_retry_after", v.get("vllm_service_front_retry_after"), 0, 86400,
                               what="a positive number of seconds, at most a day")
            + inputs.number_in("vllm_service_front_client_connections", v.get("vllm_service_front_client_connections"),
                               0, api_front.WORKER_CONNECTIONS, what="a positive number, at most nginx's "
                               "worker_connections (%d)" % api_front.WORKER_CONNECTIONS)
            + inputs.number_in("vllm_service_front_client_timeout", v.get("vllm_service_front_client_timeout"), 0,
                               3600, what="a positive number of seconds, at most an hour"))


def input_problems(v: Mapping[str, Any]) -> List[str]:
    """The role's own input rules (what a spec cannot say), on its converted values."""
    return (model_profile.unset_problems(v.get("vllm_service_profile"), specs.PROFILES_DIR)
            + _front(v) + inputs.unit_name("vllm_service_name", v.get("vllm_service_name"))
            + inputs.no_whitespace("vllm_service_api_key", v.get("vllm_service_api_key"))
            + inputs.no_whitespace("vllm_service_hf_token", v.get("vllm_service_hf_token"))
            + inputs.number_in("vllm_service_max_exposure", v.get("vllm_service_max_exposure"), 0, 10, low_open=False,
                               what="between 0 and 10, as systemd-analyze security counts (null: no limit)")
            + inputs.number_in("vllm_service_health_poll_interval", v.get("vllm_service_health_poll_interval"), 0, 3600,
                               what="a positive number of seconds")
            + inputs.number_in("vllm_service_weights_read_mb_per_s", v.get("vllm_service_weights_read_mb_per_s"), 0, 10 ** 6,
                               what="a positive read rate in MB/s")
            + inputs.number_in("vllm_service_gpu_memory_utilization", v.get("vllm_service_gpu_memory_utilization"), 0, 1,
                               what="above 0 and at most 1 (null takes the profile's)")
            + inputs.number_in("vllm_service_max_model_len", v.get("vllm_service_max_model_len"), 0, 2 ** 31,
                               what="a positive number of tokens (null takes the profile's)")
            + inputs.number_in("vllm_service_health_timeout", v.get("vllm_service_health_timeout"), 0, inputs.SYSTEMD_MAX_SECONDS,
                               what="a positive number of seconds below %d (null sizes it from the weights)"
                               % inputs.SYSTEMD_MAX_SECONDS)
            + inputs.number_in("vllm_service_canary_timeout", v.get("vllm_service_canary_timeout"), 0,
                               inputs.SYSTEMD_MAX_SECONDS,
                               what="a positive number of seconds (0 fails every canary, which rolls back a good deploy)")
            + inputs.number_in("vllm_service_restart_sec", v.get("vllm_service_restart_sec"), 0, inputs.SYSTEMD_MAX_SECONDS,
                               low_open=False, what="0 or more seconds, below %d" % inputs.SYSTEMD_MAX_SECONDS)
            # 0 would remove the engine a rollback goes back to, and the serving one is never removed anyway.
            + inputs.number_in("vllm_service_keep_engines", v.get("vllm_service_keep_engines"), 0, 1000,
                               what="1 or more (the serving engine is always kept)")
            # Also without a Ray address: 0 would reach the unit as --pipeline-parallel-size 0 once one is set.
            + inputs.number_in("vllm_service_pipeline_parallel_size", v.get("vllm_service_pipeline_parallel_size"), 0,
                               1024, what="a positive number of pipeline stages (the Ray nodes)")
            + inputs.number_in("vllm_service_tensor_parallel_size", v.get("vllm_service_tensor_parallel_size"), 0, 1024,
                               what="a positive number of GPUs (null takes the policy's)")
            + inputs.number_in("vllm_service_max_queued_requests", v.get("vllm_service_max_queued_requests"), 0, 2 ** 31,
                               low_open=False, what="0 (no cap) or a positive number of requests (null: the workload's)")
            + inputs.nccl_overrides("vllm_service_nccl_overrides", v.get("vllm_service_nccl_overrides"))
            + inputs.env_mapping("vllm_service_environment", v.get("vllm_service_environment"), allow_null=False)
            + inputs.env_mapping("vllm_service_ray_environment", v.get("vllm_service_ray_environment"), allow_null=False)
            + extra_args_problems("vllm_service_extra_args", v.get("vllm_service_extra_args"))
            + hardening_override_problems("vllm_service_hardening_overrides", v.get("vllm_service_hardening_overrides"))
            + backend_port_problems(v)
            + engine_gate_problems(v))


def engine_gate_problems(v: Mapping[str, Any]) -> List[str]:
    """The engine gate's thresholds (fractions, warn below fail), workload (whole numbers that fit the model's length,
    as vllm_benchmark checks them) and metrics (the benchmark's own names)."""
    problems = (inputs.number_in("vllm_service_engine_gate_warn", v.get("vllm_service_engine_gate_warn"), 0, 100,
                                 what="a regression above 0, as a fraction (0.10 is 10%)")
                + inputs.number_in("vllm_service_engine_gate_fail", v.get("vllm_service_engine_gate_fail"), 0, 100,
                                   what="a regression above 0, as a fraction (0.25 is 25%)"))
    warn, fail = v.get("vllm_service_engine_gate_warn"), v.get("vllm_service_engine_gate_fail")
    if isinstance(warn, float) and isinstance(fail, float) and not problems and warn > fail:
        problems.append("vllm_service_engine_gate_warn (%s) must not be above vllm_service_engine_gate_fail (%s): a "
                        "regression would fail before it warns" % (warn, fail))
    for name in ("vllm_service_engine_gate_prompts", "vllm_service_engine_gate_input_len",
                 "vllm_service_engine_gate_output_len"):
        problems += inputs.number_in(name, v.get(name), 0, 10 ** 6, what="a whole number of at least 1")
    metrics = v.get("vllm_service_engine_gate_metrics")
    if isinstance(metrics, list):
        unknown = [m for m in metrics if m not in bench.METRIC_KEYS]
        if unknown or not metrics:
            problems.append("vllm_service_engine_gate_metrics must name at least one of %s; got %s"
                            % (", ".join(bench.METRIC_KEYS), ", ".join(map(str, unknown)) or "none"))
    return problems
