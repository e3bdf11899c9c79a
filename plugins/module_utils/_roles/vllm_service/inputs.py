# -*- coding: utf-8 -*-
# Copyright: (c) 2026, moeops.inference contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The vllm_service role's input rules, beyond what its argument spec says: the front's inputs (by the front's own
rules), the unit's name, the host, secrets without whitespace, ranges, `vllm serve` arguments that have a dedicated
variable, hardening overrides limited to sandboxing directives. Private to the collection
(module_utils/_roles/vllm_service/__init__.py applies them to the converted values).
"""

from __future__ import annotations

from typing import Any, List, Mapping

from ansible_collections.moeops.inference.plugins.module_utils._common import inputs, specs
from ansible_collections.moeops.inference.plugins.module_utils._policy import api_front, model_profile

# `vllm serve` arguments the roles derive themselves: given again in extra args, argparse keeps the last
# one and silently undoes the variable (--host 0.0.0.0 in extra args bound publicly without an API key).
DEDICATED_ARGS = {
    "--host": "vllm_service_host",
    "--port": "vllm_service_port",
    "--api-key": "vllm_service_api_key",
    "--hf-token": "vllm_service_hf_token",
    "--model": "the model profile's source (or vllm_service_model_path)",
    "--served-model-name": "the model profile's served_name",
    "--tensor-parallel-size": "vllm_service_tensor_parallel_size",
    "-tp": "vllm_service_tensor_parallel_size",
    "--pipeline-parallel-size": "vllm_service_pipeline_parallel_size",
    "-pp": "vllm_service_pipeline_parallel_size",
    "--max-model-len": "vllm_service_max_model_len",
    "--gpu-memory-utilization": "vllm_service_gpu_memory_utilization",
    "--distributed-executor-backend": "vllm_service_ray_address (Ray) or nothing (one host)",
    "--download-dir": "vllm_hf_home",
    "--shutdown-timeout": "vllm_service_shutdown_timeout (TimeoutStopSec is sized from it)",
    "--performance-mode": "vllm_service_workload (latency: interactivity, throughput: throughput)",
    "--max-num-queued-reqs": "vllm_service_max_queued_requests",
}

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


def extra_args_problems(name: str, value: Any) -> List[str]:
    if not isinstance(value, list):
        return []
    problems: List[str] = []
    for index, arg in enumerate(value):
        if not isinstance(arg, str):
            problems.append("%s[%d] must be a string, got %s %r" % (name, index, inputs.type_name(arg), arg))
            continue
        flag = arg.split("=", 1)[0]
        if flag in DEDICATED_ARGS:
            problems.append("%s[%d] %s: set %s instead (given here, it would silently override the role's own "
                            "value)%s" % (name, index, flag, DEDICATED_ARGS[flag],
                                          "; the value is not shown" if flag in ("--api-key", "--hf-token") else ""))
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
            + inputs.number_in("vllm_service_backend_port", backend, 0, 65535, what="a TCP port in 1-65535 (null: the port + 1)")
            + inputs.number_in("vllm_service_shutdown_timeout", v.get("vllm_service_shutdown_timeout"), 0,
                               inputs.SYSTEMD_MAX_SECONDS - api_front.STOP_MARGIN_S, low_open=False,
                               what="0 or more seconds, below %d" % (inputs.SYSTEMD_MAX_SECONDS - api_front.STOP_MARGIN_S))
            + inputs.number_in("vllm_service_front_read_timeout", v.get("vllm_service_front_read_timeout"), 0,
                               inputs.SYSTEMD_MAX_SECONDS, what="a positive number of seconds")
            + inputs.number_in("vllm_service_front_retry_after", v.get("vllm_service_front_retry_after"), 0, 86400,
                               what="a positive number of seconds, at most a day"))


def input_problems(v: Mapping[str, Any]) -> List[str]:
    """The role's own input rules (what a spec cannot say), on its converted values."""
    return (model_profile.unset_problems(v.get("vllm_service_profile"), specs.PROFILES_DIR)
            + _front(v) + inputs.unit_name("vllm_service_name", v.get("vllm_service_name"))
            + inputs.host("vllm_service_host", v.get("vllm_service_host"), empty_means="every address")
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
            + inputs.number_in("vllm_service_restart_sec", v.get("vllm_service_restart_sec"), 0, inputs.SYSTEMD_MAX_SECONDS,
                               low_open=False, what="0 or more seconds, below %d" % inputs.SYSTEMD_MAX_SECONDS)
            + inputs.number_in("vllm_service_tensor_parallel_size", v.get("vllm_service_tensor_parallel_size"), 0, 1024,
                               what="a positive number of GPUs (null takes the policy's)")
            + inputs.number_in("vllm_service_max_queued_requests", v.get("vllm_service_max_queued_requests"), 0, 2 ** 31,
                               low_open=False, what="0 (no cap) or a positive number of requests (null: the workload's)")
            + inputs.nccl_overrides("vllm_service_nccl_overrides", v.get("vllm_service_nccl_overrides"))
            + inputs.env_mapping("vllm_service_environment", v.get("vllm_service_environment"), allow_null=False)
            + inputs.env_mapping("vllm_service_ray_environment", v.get("vllm_service_ray_environment"), allow_null=False)
            + extra_args_problems("vllm_service_extra_args", v.get("vllm_service_extra_args"))
            + hardening_override_problems("vllm_service_hardening_overrides", v.get("vllm_service_hardening_overrides"))
            + backend_port_problems(v))
