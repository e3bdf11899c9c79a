# -*- coding: utf-8 -*-
# Copyright: (c) 2026, moeops.inference contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The API front's policy, in one place: when vLLM gets a reverse proxy in front of it, and what passes.

vLLM 0.33.0's ``--api-key`` guards only paths under /v1, /v2, /inference and /cohere
(``GUARDED_PREFIX`` in vllm/entrypoints/serve/middleware/authenticate.py). Everything else that
``vllm serve`` registers answers anyone: ``POST /invocations`` and ``POST /generative_scoring`` run the
model, ``/tokenize``, ``/scale_elastic_ep``, ``/metrics`` and ``/docs`` are open (the route table:
tests/fixtures/vllm/routes-0.33.0-generate.json). So a server that listens beyond loopback gets a front
(nginx, the distribution's own package): vLLM moves to loopback, and the front passes an explicit
allowlist, ``/health``, and ``/metrics`` from listed networks only; the rest gets 404.

The allowlist holds routes under vLLM's guarded prefixes (``vllm_service_front_routes``: vLLM asks for the key there);
a route outside them passes only when named in ``vllm_service_front_unsafe_routes``. A ``{parameter}`` in a path's
first two segments would match every route under it, so it is refused in both lists.

Pure: no I/O. The vllm_service plan (module_utils/_roles/vllm_service/unit.py) calls `front()`; the role's
templates render what it returns; tests call it directly.
"""

from __future__ import annotations

import hashlib
import ipaddress
import math
import re
from typing import Any, Dict, List, Mapping, Optional, Sequence

from ansible_collections.moeops.inference.plugins.module_utils._common import inputs

# The OpenAI-compatible routes of a generative model (vllm/entrypoints/openai/*/api_router.py in 0.33.0).
# Not passed by default: the Anthropic /v1/messages, vLLM's own /v1/systemone and /v1/decisions, the
# scale-out /render and /derender helpers and /v1/chat/completions/batch; add them to
# vllm_service_front_routes if you serve them.
DEFAULT_ROUTES = (
    "GET /v1/models",
    "POST /v1/chat/completions",
    "POST /v1/completions",
    "POST /v1/responses",
    "GET /v1/responses/{response_id}",
    "POST /v1/responses/{response_id}/cancel",
)
# Always passed, without the key (vLLM never asks for one there): load balancers and the role's own wait.
HEALTH_ROUTE = "GET /health"
# vLLM asks for the API key only on paths under these (GUARDED_PREFIX in 0.33.0's
# vllm/entrypoints/serve/middleware/authenticate.py); the front's own rule is by whole segment.
GUARDED_PREFIXES = ("/v1", "/v2", "/inference", "/cohere")
# vLLM mounts its Prometheus app with the regex ^/metrics(?P<path>.*)$: every path that starts with this string
# reaches it, so no allowlist entry may start with it (/metrics has its own rule, vllm_service_front_metrics_cidrs).
METRICS_PREFIX = "/metrics"
# TLS 1.2 suites: ECDHE key exchange (forward secrecy) with AEAD ciphers only, the TLS 1.2 part of Mozilla's
# "intermediate" configuration (version 5.7) less its DHE suites, which need a dhparam file. TLS 1.3's suites are all
# forward-secret and are OpenSSL's defaults.
TLS12_CIPHERS = ("ECDHE-ECDSA-AES128-GCM-SHA256", "ECDHE-RSA-AES128-GCM-SHA256", "ECDHE-ECDSA-AES256-GCM-SHA384",
                 "ECDHE-RSA-AES256-GCM-SHA384", "ECDHE-ECDSA-CHACHA20-POLY1305", "ECDHE-RSA-CHACHA20-POLY1305")
METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
ROUTE = re.compile(r"^(%s) (/(?:[A-Za-z0-9_.-]+|\{[A-Za-z_][A-Za-z0-9_]*\})(?:/(?:[A-Za-z0-9_.-]+|\{[A-Za-z_][A-Za-z0-9_]*\}))*)$"
                   % "|".join(METHODS))
WILDCARD_HOSTS = ("0.0.0.0", "::", "")
# vLLM drains within --shutdown-timeout; then its engine processes need a little longer to exit.
STOP_MARGIN_S = 30
# A token of prompt text is about 4 bytes, JSON escaping can double it, images and tool schemas add more:
# 64 bytes a token of the context, at least 16 MiB.
BODY_BYTES_PER_TOKEN = 64
BODY_MIN_MIB = 16
# nginx's worker_connections (templates/front.nginx.conf.j2): no one client may hold more than one worker can.
WORKER_CONNECTIONS = 4096
# What the front's own key check lets through to vLLM on a guarded route: vLLM 0.33.0 answers 401 to any request
# whose Authorization is not "<scheme> <token>" with the scheme "bearer" in any case (verify_token in
# vllm/entrypoints/serve/middleware/authenticate.py). The token itself is vLLM's to check.
BEARER_REGEX = r"^[Bb][Ee][Aa][Rr][Ee][Rr] "


def is_loopback(host: str) -> bool:
    """The input rules' loopback (inputs.is_loopback): a literal 127.0.0.0/8 or ::1 address, or exactly localhost."""
    return inputs.is_loopback(host)


def is_guarded(path: str) -> bool:
    """Whether vLLM asks for the API key on this route path: its first segment is one of GUARDED_PREFIXES."""
    return "/" + path.split("/")[1] in GUARDED_PREFIXES


def route_regex(path: str) -> str:
    """The nginx location regex of a route path: each {parameter} is one path segment."""
    parts = [r"[^/]+" if seg.startswith("{") else re.escape(seg) for seg in path.split("/")[1:]]
    return "^/" + "/".join(parts) + "$"


def _route_path_problem(path: str, unsafe: bool, unsafe_var: str, routes_var: str) -> str:
    """Why a well-formed route path may not be listed (in the unsafe list when `unsafe`), or ''."""
    segments = path.split("/")[1:]
    if any(seg.startswith("{") for seg in segments[:2]):
        return ("a {parameter} in the first two segments matches every route under it (a catch-all): name the "
                "route, e.g. GET /v1/responses/{response_id}")
    if path.startswith(METRICS_PREFIX):
        return ("vLLM serves its metrics on every path that starts with /metrics; /metrics passes only from the "
                "networks of vllm_service_front_metrics_cidrs")
    if path == "/health":
        return "GET and HEAD /health always pass; no other method may"
    guarded = is_guarded(path)
    if unsafe and guarded:
        return "%s is under a prefix where vLLM asks for the API key: list it in %s" % (path, routes_var)
    if not unsafe and not guarded:
        return ("%s is outside the prefixes where vLLM asks for the API key (%s): anyone who reaches the front "
                "could call it without a key; list it in %s if that is meant"
                % (path, ", ".join(GUARDED_PREFIXES), unsafe_var))
    return ""


class FrontError(ValueError):
    """The front's inputs refused: one message a problem (`problems`), so that a report counts and numbers each."""

    def __init__(self, problems: Sequence[str]):
        super(FrontError, self).__init__("; ".join(problems))
        self.problems = list(problems)


def routes(var: str, given: Sequence[Any], unsafe_var: str = "", unsafe_given: Sequence[Any] = ()) -> List[Dict[str, Any]]:
    """The allowlist: /health, then `given` (routes under vLLM's guarded prefixes), then `unsafe_given` (routes
    outside them, named in `unsafe_var`); one entry a path, with its methods, in that order. Each entry says
    whether vLLM's API key guards it (``unsafe`` false)."""
    unsafe_var = unsafe_var or var.replace("front_routes", "front_unsafe_routes")
    by_path: Dict[str, Dict[str, Any]] = {}
    lists = [(var, given, False), (unsafe_var, unsafe_given, True)]
    for name, items, _unsafe in lists:
        if not isinstance(items, (list, tuple)):
            raise ValueError("%s must be a list of 'METHOD /path' strings, got %s" % (name, type(items).__name__))
    problems = []
    for name, items, unsafe in [(None, [HEALTH_ROUTE], False)] + lists:
        for index, item in enumerate(items):
            match = ROUTE.match(item) if isinstance(item, str) else None
            if not match or any(seg in (".", "..") for seg in match.group(2).split("/")):
                problems.append("%s[%d] must be 'METHOD /path' (METHOD one of %s; path segments of letters, digits, "
                                "_ . - or a {parameter}), got %r" % (name, index, ", ".join(METHODS), item))
                continue
            method, path = match.groups()
            why = _route_path_problem(path, unsafe, unsafe_var, var) if name else ""
            if why:
                problems.append("%s[%d] %r is refused: %s" % (name, index, item, why))
                continue
            # guarded: vLLM asks for the key there, and the front refuses a request without one first (BEARER_REGEX).
            entry = by_path.setdefault(path, {"path": path, "methods": [], "regex": route_regex(path), "unsafe": unsafe,
                                              "guarded": is_guarded(path)})
            if method not in entry["methods"]:
                entry["methods"].append(method)
    if problems:
        raise FrontError(problems)
    return list(by_path.values())


def cidrs(var: str, given: Sequence[Any]) -> List[str]:
    """The networks of an allowlist, by the shared network type (inputs.networks: canonical, no zone id)."""
    if not isinstance(given, (list, tuple)):
        raise ValueError("%s must be a list of networks (CIDR), got %s" % (var, type(given).__name__))
    problems = inputs.networks(var, given)
    if problems:
        raise ValueError("; ".join(problems))
    return [str(ipaddress.ip_network(str(item), strict=False)) for item in given]


def body_limit_mib(max_model_len: int) -> int:
    return max(BODY_MIN_MIB, int(math.ceil(max_model_len * BODY_BYTES_PER_TOKEN / float(1 << 20))))


def stop_timeout(shutdown_timeout: int) -> int:
    """TimeoutStopSec: above vLLM's own --shutdown-timeout, so systemd never kills a drain."""
    return int(shutdown_timeout) + STOP_MARGIN_S


def listen_address(host: str, port: int) -> str:
    """nginx's `listen` for the front: a wildcard or one address (IPv6 in brackets)."""
    if host in ("", "0.0.0.0"):
        return "0.0.0.0:%d" % port
    if ":" in host and not host.startswith("["):
        return "[%s]:%d" % (host, port)
    return "%s:%d" % (host, port)


def config_path(unit: str) -> str:
    return "/etc/vllm/%s.nginx.conf" % unit


def input_problems(port: int, backend_port: int, given_routes: Any, metrics_cidrs: Any, tls_cert: str, tls_key: str,
                   var_prefix: str = "vllm_service_", unsafe_routes: Any = ()) -> List[str]:
    """What is wrong with the front's inputs, one message each naming the variable: the role_plan step reports
    them before anything changes, and front() refuses them."""
    problems: List[str] = []
    if backend_port == port:
        problems.append("%sbackend_port must differ from %sport (%s): the front listens on the port, vLLM on "
                        "127.0.0.1:%sbackend_port" % (var_prefix, var_prefix, port, var_prefix))
    if bool(tls_cert) != bool(tls_key):
        problems.append("%sfront_tls_cert and %sfront_tls_key are given together or not at all" % (var_prefix, var_prefix))
    for var, path in (("front_tls_cert", tls_cert), ("front_tls_key", tls_key)):
        if path and not path.startswith("/"):
            problems.append("%s%s must be an absolute path on the node, got %r" % (var_prefix, var, path))
    try:
        routes(var_prefix + "front_routes", given_routes, var_prefix + "front_unsafe_routes", unsafe_routes)
    except ValueError as exc:
        problems.extend(getattr(exc, "problems", None) or [str(exc)])
    # The shared network type's messages (the plan applies it too: one message each, as the plan drops repeats).
    problems += inputs.networks(var_prefix + "front_metrics_cidrs", metrics_cidrs) if isinstance(
        metrics_cidrs, (list, tuple)) else []
    return problems


def tls_file_problems(tls_cert: str, tls_key: str, files: Optional[Mapping[str, Any]],
                      var_prefix: str = "vllm_service_") -> List[str]:
    """The TLS files as the check step read them on the node (`files`: path -> Ansible's stat of it, links followed),
    before anything changes: both exist as regular files, and the key is root's with no group or other access.
    Without `files` (nothing read: preflight's plan of a host it cannot stat) there is nothing to say."""
    if not files:
        return []
    problems: List[str] = []
    for var, path in (("front_tls_cert", tls_cert), ("front_tls_key", tls_key)):
        found = files.get(path)
        if not isinstance(found, Mapping):
            continue
        if not found.get("exists"):
            problems.append("%s%s %s does not exist on the node" % (var_prefix, var, path))
        elif not found.get("isreg"):
            problems.append("%s%s %s is not a regular file" % (var_prefix, var, path))
    key = files.get(tls_key)
    if isinstance(key, Mapping) and key.get("exists") and key.get("isreg"):
        try:
            mode = int(str(key.get("mode")), 8)
        except ValueError:
            mode = 0o777
        if key.get("uid") != 0 or mode & 0o077:
            owner = key.get("pw_name", key.get("uid"))
            problems.append("%sfront_tls_key %s must be owned by root with no group or other access (chown root; chmod "
                            "0600): it is owned by %s with mode %s" % (var_prefix, tls_key, owner, key.get("mode")))
    return problems


def tls_digest(tls_cert: str, tls_key: str, files: Optional[Mapping[str, Any]]) -> str:
    """One digest of both TLS files' checksums as read by the check step: written into the nginx configuration, so
    that a new certificate or key changes it and the front reloads (and reads them again)."""
    sums = [str(((files or {}).get(path) or {}).get("checksum") or "") for path in (tls_cert, tls_key)]
    return hashlib.sha256(" ".join(sums).encode("utf-8")).hexdigest()[:16] if all(sums) else ""


def front(name: str, host: str, port: int, backend_port: int, given_routes: Sequence[Any], metrics_cidrs: Sequence[Any],
          tls_cert: str, tls_key: str, read_timeout: int, retry_after: int, max_model_len: int,
          var_prefix: str = "vllm_service_", unsafe_routes: Sequence[Any] = (),
          tls_files: Optional[Mapping[str, Any]] = None, *, client_connections: int,
          client_timeout: int) -> Dict[str, Any]:
    """The front of `<name>.service`, or {"enabled": False, "why", and its unit's and configuration's paths, for
    removing a front left by an earlier run} on a loopback host. `tls_files`: the TLS files as the check step read
    them on the node (tls_file_problems)."""
    unit = "%s-front" % name
    paths = {"unit": unit, "unit_path": "/etc/systemd/system/%s.service" % unit, "config_path": config_path(unit),
             # What may change without a restart: the TLS copies, the checks, the stop timeout (a reload applies it).
             "dropin_dir": "/etc/systemd/system/%s.service.d" % unit,
             "dropin_path": "/etc/systemd/system/%s.service.d/moeops-reloadable.conf" % unit}
    if is_loopback(host):
        return dict(paths, enabled=False, why="%shost %s is loopback: vLLM answers only this machine" % (var_prefix, host))
    problems = input_problems(port, backend_port, given_routes, metrics_cidrs, tls_cert, tls_key, var_prefix, unsafe_routes)
    tls = bool(tls_cert)
    if tls:
        problems += tls_file_problems(tls_cert, tls_key, tls_files, var_prefix)
    if problems:
        raise FrontError(problems)
    scheme = "https" if tls else "http"
    address = "127.0.0.1" if host in WILDCARD_HOSTS else host
    runtime_dir = "/run/%s" % unit
    return dict(paths, **{
        "enabled": True,
        "why": "%shost %s is not loopback: vLLM listens on 127.0.0.1:%d behind the front" % (var_prefix, host, backend_port),
        "user": unit,
        "listen": listen_address(host, port),
        "url": "%s://%s:%d" % (scheme, "[%s]" % address if ":" in address else address, port),
        "backend": "127.0.0.1:%d" % backend_port,
        "tls": tls,
        "tls_cert": tls_cert,
        "tls_key": tls_key,
        # Copied by root (the unit's ExecStartPre=+ and ExecReload=+) into the front's runtime directory, readable by
        # the front's user only, at every start and reload: the files on disk stay root-only, and a new certificate
        # needs a reload only.
        "tls_copies": ([[tls_cert, runtime_dir + "/tls.crt"], [tls_key, runtime_dir + "/tls.key"]] if tls else []),
        "tls_digest": tls_digest(tls_cert, tls_key, tls_files) if tls else "",
        "ssl_ciphers": ":".join(TLS12_CIPHERS),
        "runtime_dir": runtime_dir,
        "routes": routes(var_prefix + "front_routes", given_routes, var_prefix + "front_unsafe_routes", unsafe_routes),
        "metrics_cidrs": cidrs(var_prefix + "front_metrics_cidrs", metrics_cidrs),
        "read_timeout": int(read_timeout),
        "retry_after": int(retry_after),
        "body_limit": "%dm" % body_limit_mib(max_model_len),
        "worker_connections": WORKER_CONNECTIONS,
        "client_connections": int(client_connections),
        "client_timeout": int(client_timeout),
        "bearer_regex": BEARER_REGEX,
        "privileged_port": port < 1024,
        # While this file exists the front answers 503 with Retry-After (a deploy's restart, the rollback's).
        "drain_flag": runtime_dir + "/draining",
    })


def summary(front_plan: Mapping[str, Any]) -> str:
    """One line for the settings report."""
    if not front_plan.get("enabled"):
        return "none: %s" % front_plan.get("why", "")
    allowed = ", ".join("%s %s%s" % ("|".join(r["methods"]), r["path"], " (UNSAFE: no API key)" if r.get("unsafe") else "")
                        for r in front_plan["routes"])
    return "%s on %s (TLS %s) -> %s; passes %s; /metrics from %s; else 404" % (
        front_plan["unit"], front_plan["listen"], "on" if front_plan["tls"] else "off", front_plan["backend"], allowed,
        ", ".join(front_plan["metrics_cidrs"]) or "nowhere")
