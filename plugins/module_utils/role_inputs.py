# -*- coding: utf-8 -*-
# Copyright: (c) 2026, moeops.inference contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The roles' input rules, in one place: what preflight applies to every role's variables before any
role changes anything.

Two kinds, applied to the value the role will really use (as Ansible templated it, not a converted copy):
- generic rules, derived from each option's `meta/argument_specs.yml` entry, so that an option added later
  is covered without anyone remembering: the spec's own type check, no line break in any string, strict
  integers and booleans, lists and dicts not given as strings, paths absolute, normalised and without
  whitespace, TCP ports;
- one semantic check per role (SEMANTIC_CHECKS) for what a spec cannot say: accounts that are not root,
  hosts that are IP addresses or host names, ranges, hardening overrides limited to sandboxing directives, `vllm serve` arguments that have a
  dedicated variable, secrets where a secret does not belong.
Every message names the role, the variable (and the place in it), and what is allowed; never a secret.
"""

from __future__ import annotations

import ipaddress
import json
import posixpath
import re
from typing import Any, Callable, Dict, List, Mapping, Tuple

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible_collections.moeops.inference.plugins.module_utils import api_front
from ansible_collections.moeops.inference.plugins.module_utils import monitoring

# systemd splits a unit file into lines before it reads quotes, so one of these in any value that reaches a
# unit, an env file, a path or an account starts a directive of the caller's choosing (ExecStartPre=...).
LINE_BREAKERS = {"\n": "a newline (\\n)", "\r": "a carriage return (\\r)", "\0": "a NUL byte"}
# Debian's adduser NAME_REGEX (also what useradd accepts on Ubuntu), without the trailing $ of machine accounts.
ACCOUNT_NAME = re.compile(r"^[a-z][-a-z0-9_]{0,31}$")
PINNED_PACKAGE = re.compile(r"^[A-Za-z0-9_.-]+(\[[A-Za-z0-9_,.-]+\])?==[^=\s]+$")
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
INTEGER = re.compile(r"^[+-]?[0-9]+$")
# Names of environment variables that carry secrets: they belong in the root-only env file, through the
# dedicated variables, never in a 0644 unit.
SECRET_ENV_NAME = re.compile(r"(_TOKEN|_KEY|_SECRET)$|PASSWORD|^HF_TOKEN$|^VLLM_API_KEY$", re.IGNORECASE)
SECRET_HINT = "set secrets with vllm_service_hf_token or vllm_service_api_key (they go to the root-only env file)"
# systemd rejects a time span this long, and a number of seconds above it is not a timeout anyone means.
SYSTEMD_MAX_SECONDS = 2 ** 32 // 1000  # about 49 days

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

Problems = List[str]


# --- generic rules, from the argument specs -----------------------------------------------------------

def line_safety_problems(name: str, value: Any) -> Problems:
    """Every string in `value` (a dict's keys and values, a list's items, at any depth) that holds a line
    breaker, each named by its place under `name`: e.g. "vllm_service_nccl_overrides.NCCL_PROTO contains
    a newline (\\n)". The value itself is not printed (it may be a secret, and it is the broken part)."""
    if isinstance(value, str):
        found = [what for char, what in LINE_BREAKERS.items() if char in value]
        return ["%s contains %s: no value may span lines (systemd reads each line as a directive)"
                % (name, " and ".join(found))] if found else []
    problems: Problems = []
    if isinstance(value, Mapping):
        for key, item in value.items():
            where = "%s.%s" % (name, key)
            if isinstance(key, str) and any(char in key for char in LINE_BREAKERS):
                where = "%s key %r" % (name, key)
                problems.extend(line_safety_problems(where, key))
            problems.extend(line_safety_problems(where, item))
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            problems.extend(line_safety_problems("%s[%d]" % (name, index), item))
    return problems


def _shown(value: Any) -> str:
    return json.dumps(value) if isinstance(value, (bool, type(None))) else repr(value)


def _type_problems(name: str, opt: Mapping[str, Any], raw: Any) -> Problems:
    """What the spec's own conversion would let through, or turn into something else: a boolean taken as
    1, `1e4` as a number, a string split into characters, a relative or `~` path made absolute."""
    kind = opt.get("type", "str")
    if kind in ("int", "float") and isinstance(raw, bool):
        return ["%s must be a number, got the boolean %s" % (name, _shown(raw))]
    if kind == "int" and isinstance(raw, str) and not INTEGER.match(raw.strip()):
        return ["%s must be a whole number, got %r" % (name, raw)]
    if kind == "int" and isinstance(raw, float) and not raw.is_integer():
        return ["%s must be a whole number, got %r" % (name, raw)]
    if kind == "bool" and not isinstance(raw, bool) and str(raw).lower() not in ("true", "false", "yes", "no"):
        return ["%s must be true or false, got %r" % (name, raw)]
    if kind in ("list", "dict") and isinstance(raw, str):
        example = '["..."]' if kind == "list" else '{"KEY": "value"}'
        return ["%s must be a %s, got the string %r; from the command line pass JSON: -e '{\"%s\": %s}'"
                % (name, kind, raw, name, example)]
    if kind == "path" and isinstance(raw, str) and not (raw == "" and opt.get("default") == ""):
        if not raw.startswith("/"):
            return ["%s must be an absolute path, got %r" % (name, raw)]
        if re.search(r"\s", raw):
            # systemd splits ReadWritePaths=, StateDirectory= and the like on whitespace: one path would become two.
            return ["%s must be an absolute path without whitespace (systemd reads path lists split on spaces), got %r"
                    % (name, raw)]
        bare = raw.rstrip("/") or "/"  # a trailing slash names the same directory
        if posixpath.normpath(bare) != bare or bare.startswith("//"):
            return ["%s must be a normalised absolute path (no '..', '.' or '//'), got %r; use %r"
                    % (name, raw, posixpath.normpath(bare))]
    if name.endswith("_port") and kind == "int" and not isinstance(raw, bool):
        try:
            port = int(str(raw).strip())
        except ValueError:
            return []  # the spec's conversion names it
        if not 1 <= port <= 65535:
            return ["%s must be a TCP port in 1-65535, got %r" % (name, raw)]
    return []


def generic_problems(spec: Mapping[str, Any], values: Mapping[str, Any]) -> Tuple[Problems, Dict[str, Any]]:
    """The spec's own validation plus the rules above, for the options set in `values`; and the
    validated values (the spec's conversions applied) for the semantic checks."""
    result = ArgumentSpecValidator(dict(spec)).validate(dict(values))
    broken = {name: line_safety_problems(name, raw) for name, raw in values.items()}

    def names(message: str, name: str) -> bool:
        return "'%s'" % name in message or " %s " % name in message

    # A value that spans lines gets that one message: the spec's own (a choice's "got: ...") would echo it.
    problems = [str(m) for m in result.error_messages if not any(broken[n] and names(str(m), n) for n in values)]
    for name in sorted(values):
        raw = values[name]
        problems.extend(broken[name])
        named = broken[name] or any(names(m, name) for m in result.error_messages)
        if raw is not None and not named:  # one message per mistake: the spec's own, when it has one
            problems.extend(_type_problems(name, spec[name], raw))
    return problems, dict(result.validated_parameters)


# --- semantic checks, one per role ----------------------------------------------------------------

def _account(name: str, value: Any) -> Problems:
    if not isinstance(value, str):
        return []
    if value in ("root", "0") or not ACCOUNT_NAME.match(value):
        return ["%s must be an unprivileged account name (lower case, starting with a letter, as adduser allows; "
                "not root), got %r" % (name, value)]
    return []


def _number_in(name: str, value: Any, low: float, high: float, low_open: bool = True, what: str = "") -> Problems:
    if value is None or isinstance(value, bool):
        return []
    try:
        number = float(value)
    except (TypeError, ValueError):
        return []  # the spec's conversion names it
    if (number <= low if low_open else number < low) or number > high:
        return ["%s must be %s, got %r" % (name, what, value)]
    return []


def _env_mapping(name: str, value: Any, allow_null: bool) -> Problems:
    """Keys are environment variable names, values strings (null removes an override where allowed), and
    no secret rides in a 0644 unit."""
    if not isinstance(value, Mapping):
        return []
    problems: Problems = []
    for var, val in sorted(value.items(), key=lambda kv: str(kv[0])):
        if not isinstance(var, str) or not ENV_NAME.match(var):
            problems.append("%s key %r is not an environment variable name" % (name, var))
            continue
        if SECRET_ENV_NAME.search(var):
            problems.append("%s.%s looks like a secret and would be written to the world-readable unit: %s"
                            % (name, var, SECRET_HINT))
        if val is None and allow_null:
            continue
        if not isinstance(val, str):
            problems.append("%s.%s must be a string (quote it in YAML: \"%s\")%s, got %s %r"
                            % (name, var, json.dumps(val).lower(), " or null to remove it" if allow_null else "",
                               type(val).__name__, val))
    return problems


def _extra_args(name: str, value: Any) -> Problems:
    if not isinstance(value, list):
        return []
    problems: Problems = []
    for index, arg in enumerate(value):
        if not isinstance(arg, str):
            problems.append("%s[%d] must be a string, got %s %r" % (name, index, type(arg).__name__, arg))
            continue
        flag = arg.split("=", 1)[0]
        if flag in DEDICATED_ARGS:
            problems.append("%s[%d] %s: set %s instead (given here, it would silently override the role's own "
                            "value)%s" % (name, index, flag, DEDICATED_ARGS[flag],
                                          "; the value is not shown" if flag in ("--api-key", "--hf-token") else ""))
    return problems


def _hardening_overrides(name: str, value: Any) -> Problems:
    if not isinstance(value, Mapping):
        return []
    return ["%s.%s is not a sandboxing directive this variable may set (allowed: systemd.exec sandboxing and "
            "resource directives, docs/role-variables.md); User, Group, Exec*, Environment* and others are refused"
            % (name, key) for key in sorted(value, key=str) if key not in HARDENING_DIRECTIVES]


UNIT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@-]*$")
# RFC 1123 host names: dot-separated labels of letters, digits and inner hyphens, 253 characters at most.
HOST_NAME = re.compile(r"^(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
                       r"(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?$")


def _host(name: str, value: Any, empty_means: str = "") -> Problems:
    """An IP address or a host name: it is written into argv and the unit as one word, and bound or dialled."""
    if not isinstance(value, str) or (value == "" and empty_means):
        return []
    try:
        ipaddress.ip_address(value)
        return []
    except ValueError:
        pass
    if HOST_NAME.match(value):
        return []
    return ["%s must be an IP address or a host name%s, got %r"
            % (name, " (empty: %s)" % empty_means if empty_means else "", value)]


def _unit_name(name: str, value: Any) -> Problems:
    if isinstance(value, str) and not UNIT_NAME.match(value):
        return ["%s must be a systemd unit name without .service (letters, digits, _ . @ -), got %r" % (name, value)]
    return []


def _no_whitespace(name: str, value: Any) -> Problems:
    if isinstance(value, str) and re.search(r"\s", value):
        return ["%s must not contain whitespace" % name]
    return []


def _front(v: Mapping[str, Any]) -> Problems:
    """The API front's inputs, by the front's own rules (api_front): they are written into nginx's configuration."""
    port, backend = v.get("vllm_service_port"), v.get("vllm_service_backend_port")
    routes, cidrs = v.get("vllm_service_front_routes"), v.get("vllm_service_front_metrics_cidrs")
    # Compared as text: either may come from -e as a string (the spec's conversion names a value that is no port).
    problems = api_front.input_problems(
        str(port), str(backend) if backend is not None and not isinstance(backend, bool) else None,
        routes if isinstance(routes, list) else [], cidrs if isinstance(cidrs, list) else [],
        v.get("vllm_service_front_tls_cert") or "", v.get("vllm_service_front_tls_key") or "")
    return (problems
            + _number_in("vllm_service_backend_port", backend, 0, 65535, what="a TCP port in 1-65535 (null: the port + 1)")
            + _number_in("vllm_service_shutdown_timeout", v.get("vllm_service_shutdown_timeout"), 0,
                         SYSTEMD_MAX_SECONDS - api_front.STOP_MARGIN_S, low_open=False,
                         what="0 or more seconds, below %d" % (SYSTEMD_MAX_SECONDS - api_front.STOP_MARGIN_S))
            + _number_in("vllm_service_front_read_timeout", v.get("vllm_service_front_read_timeout"), 0,
                         SYSTEMD_MAX_SECONDS, what="a positive number of seconds")
            + _number_in("vllm_service_front_retry_after", v.get("vllm_service_front_retry_after"), 0, 86400,
                         what="a positive number of seconds, at most a day"))


def _check_vllm_service(v: Mapping[str, Any]) -> Problems:
    return (_front(v) + _unit_name("vllm_service_name", v.get("vllm_service_name"))
            + _host("vllm_service_host", v.get("vllm_service_host"), empty_means="every address")
            + _no_whitespace("vllm_service_api_key", v.get("vllm_service_api_key"))
            + _no_whitespace("vllm_service_hf_token", v.get("vllm_service_hf_token"))
            + _number_in("vllm_service_max_exposure", v.get("vllm_service_max_exposure"), 0, 10, low_open=False,
                         what="between 0 and 10, as systemd-analyze security counts (null: no limit)")
            + _number_in("vllm_service_health_poll_interval", v.get("vllm_service_health_poll_interval"), 0, 3600,
                         what="a positive number of seconds")
            + _number_in("vllm_service_weights_read_mb_per_s", v.get("vllm_service_weights_read_mb_per_s"), 0, 10 ** 6,
                         what="a positive read rate in MB/s")
            + _account("vllm_user", v.get("vllm_user"))
            + _account("vllm_group", v.get("vllm_group"))
            + _number_in("vllm_service_gpu_memory_utilization", v.get("vllm_service_gpu_memory_utilization"), 0, 1,
                         what="above 0 and at most 1 (null takes the profile's)")
            + _number_in("vllm_service_max_model_len", v.get("vllm_service_max_model_len"), 0, 2 ** 31,
                         what="a positive number of tokens (null takes the profile's)")
            + _number_in("vllm_service_health_timeout", v.get("vllm_service_health_timeout"), 0, SYSTEMD_MAX_SECONDS,
                         what="a positive number of seconds below %d (null sizes it from the weights)"
                         % SYSTEMD_MAX_SECONDS)
            + _number_in("vllm_service_restart_sec", v.get("vllm_service_restart_sec"), 0, SYSTEMD_MAX_SECONDS,
                         low_open=False, what="0 or more seconds, below %d" % SYSTEMD_MAX_SECONDS)
            + _number_in("vllm_service_tensor_parallel_size", v.get("vllm_service_tensor_parallel_size"), 0, 1024,
                         what="a positive number of GPUs (null takes the policy's)")
            + _env_mapping("vllm_service_nccl_overrides", v.get("vllm_service_nccl_overrides"), allow_null=True)
            + _env_mapping("vllm_service_environment", v.get("vllm_service_environment"), allow_null=False)
            + _extra_args("vllm_service_extra_args", v.get("vllm_service_extra_args"))
            + _hardening_overrides("vllm_service_hardening_overrides", v.get("vllm_service_hardening_overrides")))


def _matches(name: str, value: Any, pattern: str, what: str) -> Problems:
    if isinstance(value, str) and not re.match(pattern, value):
        return ["%s must be %s, got %r" % (name, what, value)]
    return []


def _check_vllm(v: Mapping[str, Any]) -> Problems:
    packages = v.get("vllm_extra_packages")
    unpinned = [p for p in packages if isinstance(p, str) and not PINNED_PACKAGE.match(p)] \
        if isinstance(packages, list) else []
    return (_account("vllm_user", v.get("vllm_user")) + _account("vllm_group", v.get("vllm_group"))
            + _matches("vllm_version", v.get("vllm_version"), r"^[0-9]+(\.[0-9]+)+([.a-z0-9+]*)$",
                       "an exact vLLM version such as 0.33.0")
            + _matches("vllm_uv_version", v.get("vllm_uv_version"), r"^[0-9]+(\.[0-9]+)+$",
                       "an exact uv version such as 0.13.8")
            + (["vllm_venv and vllm_uv_venv must be two different directories, both are %r" % v.get("vllm_venv")]
               if v.get("vllm_venv") is not None and v.get("vllm_venv") == v.get("vllm_uv_venv") else [])
            + (["vllm_extra_packages must be pinned as name==version (or name[extra]==version), got %r" % unpinned]
               if unpinned else []))


def _check_model_weights(v: Mapping[str, Any]) -> Problems:
    source = v.get("model_weights_source")
    problems = (_account("vllm_user", v.get("vllm_user")) + _account("vllm_group", v.get("vllm_group"))
                + _number_in("model_weights_download_timeout", v.get("model_weights_download_timeout"), 0,
                             SYSTEMD_MAX_SECONDS, what="a positive number of seconds")
                + _number_in("model_weights_poll_interval", v.get("model_weights_poll_interval"), 0, 86400,
                             what="a positive number of seconds")
                + _number_in("model_weights_max_workers", v.get("model_weights_max_workers"), 0, 1024,
                             what="a positive number of parallel downloads"))
    if source == "local" and not v.get("model_weights_local_path"):
        problems.append("model_weights_source local needs model_weights_local_path (the absolute directory of the weights)")
    if source in ("http", "rsync") and not v.get("model_weights_mirror_url"):
        problems.append("model_weights_source %s needs model_weights_mirror_url" % source)
    url = v.get("model_weights_mirror_url")
    if source == "http" and isinstance(url, str) and url and not re.match(r"^https?://", url):
        problems.append("model_weights_source http needs an http:// or https:// model_weights_mirror_url, got %r" % url)
    if source == "rsync" and isinstance(url, str) and url and not re.match(r"^rsync://|^[^/:]+::", url):
        problems.append("model_weights_source rsync needs an rsync:// model_weights_mirror_url, got %r" % url)
    return problems


def _check_nvidia_driver(v: Mapping[str, Any]) -> Problems:
    problems = _matches("nvidia_driver_branch", None if v.get("nvidia_driver_branch") is None
                        else str(v.get("nvidia_driver_branch")), r"^[0-9]{3}$", "a driver branch such as 580")
    if v.get("nvidia_driver_source") == "mirror":
        url, keyring = v.get("nvidia_driver_mirror_url"), v.get("nvidia_driver_mirror_signed_by")
        if not (isinstance(url, str) and re.match(r"^(https?|file)://", url)):
            problems.append("nvidia_driver_source mirror needs nvidia_driver_mirror_url (an http, https or file URL), "
                            "got %r" % url)
        if not (isinstance(keyring, str) and keyring.startswith("/")):
            problems.append("nvidia_driver_source mirror needs nvidia_driver_mirror_signed_by (the absolute path of the "
                            "mirror's keyring), got %r" % keyring)
    return problems


def _check_nvidia_persistenced(v: Mapping[str, Any]) -> Problems:
    return (_account("nvidia_persistenced_user", v.get("nvidia_persistenced_user"))
            + (["nvidia_persistenced_package must name a package"]
               if v.get("nvidia_persistenced_package") == "" else []))


def _check_ray_cluster(v: Mapping[str, Any]) -> Problems:
    extras = v.get("ray_cluster_ray_extras")
    bad = [e for e in extras if not (isinstance(e, str) and re.match(r"^[a-z][a-z0-9_-]*$", e))] \
        if isinstance(extras, list) else []
    return (_account("vllm_user", v.get("vllm_user"))
            + _account("vllm_group", v.get("vllm_group"))
            + _unit_name("ray_cluster_service_name", v.get("ray_cluster_service_name"))
            + _host("ray_cluster_head_address", v.get("ray_cluster_head_address"))
            + _host("ray_cluster_node_address", v.get("ray_cluster_node_address"))
            + _host("ray_cluster_dashboard_host", v.get("ray_cluster_dashboard_host"))
            + (["ray_cluster_ray_extras must be Ray extras such as default, got %r" % bad] if bad else [])
            + _number_in("ray_cluster_join_timeout", v.get("ray_cluster_join_timeout"), 0, SYSTEMD_MAX_SECONDS,
                         what="a positive number of seconds")
            + _number_in("ray_cluster_clock_skew_max", v.get("ray_cluster_clock_skew_max"), 0, 3600,
                         what="a positive number of seconds")
            + _env_mapping("ray_cluster_nccl_overrides", v.get("ray_cluster_nccl_overrides"), allow_null=True)
            + _env_mapping("ray_cluster_environment", v.get("ray_cluster_environment"), allow_null=False))


def _check_monitoring(v: Mapping[str, Any]) -> Problems:
    """The monitoring role's rules live beside its plan (module_utils/monitoring.py)."""
    return monitoring.input_problems(v)


SEMANTIC_CHECKS: Dict[str, Callable[[Mapping[str, Any]], Problems]] = {
    "vllm_service": _check_vllm_service,
    "vllm": _check_vllm,
    "model_weights": _check_model_weights,
    "nvidia_persistenced": _check_nvidia_persistenced,
    "nvidia_driver": _check_nvidia_driver,
    "ray_cluster": _check_ray_cluster,
    "monitoring": _check_monitoring,
}


def role_input_problems(role: str, spec: Mapping[str, Any], values: Mapping[str, Any]) -> Problems:
    """Every problem with one role's inputs (only the options of its spec; unknown names are preflight's
    typo warning), each prefixed with the role's name; a no_log option's value is never quoted (redact)."""
    values = {k: v for k, v in values.items() if k in spec}
    problems, validated = generic_problems(spec, values)
    semantic = SEMANTIC_CHECKS.get(role)
    if semantic is not None:
        # The raw value where it is set (what the role uses), never the spec's conversion of it; a value that spans
        # lines already has its one message, and the semantic one would echo it.
        problems.extend(semantic({k: values.get(k, validated.get(k)) for k in values
                                  if not line_safety_problems(k, values[k])}))
    return redact(["%s: %s" % (role, p) for p in dict.fromkeys(problems)], spec, values)


def redact(problems: Problems, spec: Mapping[str, Any], values: Mapping[str, Any]) -> Problems:
    """`problems` with the value of every no_log option replaced by asterisks: a secret is checked like any
    value (whitespace, a line break), but never quoted."""
    for name, opt in spec.items():
        secret = values.get(name)
        if isinstance(opt, Mapping) and opt.get("no_log") and isinstance(secret, str) and secret:
            problems = [p.replace(repr(secret), "'********'").replace(secret, "********") for p in problems]
    return problems
