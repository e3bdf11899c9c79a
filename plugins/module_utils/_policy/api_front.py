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

Pure: no I/O. The vllm_service plan (module_utils/_roles/vllm_service/unit.py) calls `front()`; the role's
templates render what it returns; tests call it directly.
"""

from __future__ import annotations

import ipaddress
import math
import re
from typing import Any, Dict, List, Mapping, Sequence

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


def is_loopback(host: str) -> bool:
    """The input rules' loopback (inputs.is_loopback): a literal 127.0.0.0/8 or ::1 address, or exactly localhost."""
    return inputs.is_loopback(host)


def route_regex(path: str) -> str:
    """The nginx location regex of a route path: each {parameter} is one path segment."""
    parts = [r"[^/]+" if seg.startswith("{") else re.escape(seg) for seg in path.split("/")[1:]]
    return "^/" + "/".join(parts) + "$"


def routes(var: str, given: Sequence[Any]) -> List[Dict[str, Any]]:
    """The allowlist: one entry a path, with its methods, in the given order (/health first)."""
    if not isinstance(given, (list, tuple)):
        raise ValueError("%s must be a list of 'METHOD /path' strings, got %s" % (var, type(given).__name__))
    by_path: Dict[str, Dict[str, Any]] = {}
    for index, item in enumerate([HEALTH_ROUTE] + list(given)):
        match = ROUTE.match(item) if isinstance(item, str) else None
        if not match or any(seg in (".", "..") for seg in match.group(2).split("/")):
            raise ValueError("%s[%d] must be 'METHOD /path' (METHOD one of %s; path segments of letters, digits, "
                             "_ . - or a {parameter}), got %r" % (var, index - 1, ", ".join(METHODS), item))
        method, path = match.groups()
        entry = by_path.setdefault(path, {"path": path, "methods": [], "regex": route_regex(path)})
        if method not in entry["methods"]:
            entry["methods"].append(method)
    return list(by_path.values())


def cidrs(var: str, given: Sequence[Any]) -> List[str]:
    if not isinstance(given, (list, tuple)):
        raise ValueError("%s must be a list of networks (CIDR), got %s" % (var, type(given).__name__))
    out = []
    for index, item in enumerate(given):
        try:
            if "%" in str(item):  # ipaddress takes any text after a '%' (a scope id), which nginx then read
                raise ValueError(item)
            out.append(str(ipaddress.ip_network(str(item), strict=False)))
        except ValueError:
            raise ValueError("%s[%d] must be a network such as 10.0.0.0/8 or an address, got %r" % (var, index, item))
    return out


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
                   var_prefix: str = "vllm_service_") -> List[str]:
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
    for check, value, var in ((routes, given_routes, "front_routes"), (cidrs, metrics_cidrs, "front_metrics_cidrs")):
        try:
            check(var_prefix + var, value)
        except ValueError as exc:
            problems.append(str(exc))
    return problems


def front(name: str, host: str, port: int, backend_port: int, given_routes: Sequence[Any], metrics_cidrs: Sequence[Any],
          tls_cert: str, tls_key: str, read_timeout: int, retry_after: int, max_model_len: int,
          var_prefix: str = "vllm_service_") -> Dict[str, Any]:
    """The front of `<name>.service`, or {"enabled": False, "why", and its unit's and configuration's paths, for
    removing a front left by an earlier run} on a loopback host."""
    unit = "%s-front" % name
    paths = {"unit": unit, "unit_path": "/etc/systemd/system/%s.service" % unit, "config_path": config_path(unit)}
    if is_loopback(host):
        return dict(paths, enabled=False, why="%shost %s is loopback: vLLM answers only this machine" % (var_prefix, host))
    problems = input_problems(port, backend_port, given_routes, metrics_cidrs, tls_cert, tls_key, var_prefix)
    if problems:
        raise ValueError("; ".join(problems))
    tls = bool(tls_cert)
    scheme = "https" if tls else "http"
    address = "127.0.0.1" if host in WILDCARD_HOSTS else host
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
        # Read by systemd as root (LoadCredential=), handed to the front's user: the key file stays root-only.
        "credentials": ({"tls.crt": tls_cert, "tls.key": tls_key} if tls else {}),
        "credential_dir": "/run/credentials/%s.service" % unit,
        "routes": routes(var_prefix + "front_routes", given_routes),
        "metrics_cidrs": cidrs(var_prefix + "front_metrics_cidrs", metrics_cidrs),
        "read_timeout": int(read_timeout),
        "retry_after": int(retry_after),
        "body_limit": "%dm" % body_limit_mib(max_model_len),
        "privileged_port": port < 1024,
        # While this file exists the front answers 503 with Retry-After (a deploy's restart, the rollback's).
        "drain_flag": "/run/%s/draining" % unit,
    })


def summary(front_plan: Mapping[str, Any]) -> str:
    """One line for the settings report."""
    if not front_plan.get("enabled"):
        return "none: %s" % front_plan.get("why", "")
    allowed = ", ".join("%s %s" % ("|".join(r["methods"]), r["path"]) for r in front_plan["routes"])
    return "%s on %s (TLS %s) -> %s; passes %s; /metrics from %s; else 404" % (
        front_plan["unit"], front_plan["listen"], "on" if front_plan["tls"] else "off", front_plan["backend"], allowed,
        ", ".join(front_plan["metrics_cidrs"]) or "nowhere")
