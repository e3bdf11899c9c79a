# -*- coding: utf-8 -*-
"""The API front (vllm-front.service, nginx) on the two nodes, probed from the other node, with the real engine
behind it (vLLM's CPU build serving the tiny test model).

Both nodes have vllm_service_host 0.0.0.0, so each has a front; the first serves TLS with a certificate that
prepare.yml made. Every route that the engine on the first node registers (its own build_app, read on the node by
tests/fixtures/vllm/routes.py) is sent through that node's front from the second node, with and without the key.
Read-only: runs before test_safety.py, whose last tests change the nodes.
"""
from __future__ import annotations

import importlib
import json
import os
import re
import shlex

testinfra = importlib.import_module("testinfra")

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
NODES = os.environ["SAFETY_NODES"].split(",")
FIRST, SECOND = NODES
CA = "/etc/moeops-test-tls/front.crt"
PROBE = "python3 /usr/local/lib/moeops-test/http_probe.py"
FRONT_UNIT = "/etc/systemd/system/vllm-front.service"
GIVEN_KEY = "sk-SAFETYgivenKey-9876543210-SECRET"
# The front's allowlist (the role's default, api_front.DEFAULT_ROUTES) and /health.
ALLOWED = {("GET", "/health"), ("GET", "/v1/models"), ("POST", "/v1/chat/completions"), ("POST", "/v1/completions"),
           ("POST", "/v1/responses"), ("GET", "/v1/responses/{response_id}"), ("POST", "/v1/responses/{response_id}/cancel")}
# What the front itself answers (templates/front.nginx.conf.j2): a body that vLLM never sends.
FRONT_BODIES = ('{"error": "Not Found"}\n', '{"error": "Method Not Allowed"}\n')
# systemd-analyze security's exposure above which the front's hardening has regressed (measured 1.3-1.6 here).
MAX_FRONT_EXPOSURE = 2.0


def node(name):
    return testinfra.get_host("podman://" + name)


def address(name):
    return node(name).check_output("python3 -c \"import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); "
                                   "s.connect(('10.255.255.255', 1)); print(s.getsockname()[0])\"")


def http(h, requests):
    return json.loads(h.check_output("%s %s" % (PROBE, shlex.quote(json.dumps(requests)))))


def vllm_routes():
    """The engine's own route table, read on the first node from the vLLM it runs."""
    table = json.loads(node(FIRST).check_output(
        "HF_HUB_OFFLINE=1 /opt/vllm/venv/bin/python /usr/local/lib/moeops-test/routes.py 2>/dev/null"))
    out = []
    for route in table:
        for method in route["methods"] or ["GET"]:
            if method != "HEAD" and (method, route["path"]) not in out:
                out.append((method, route["path"]))
    return out


def test_every_vllm_route_through_the_front_from_the_other_node():
    key = node(FIRST).check_output("cat /etc/vllm/vllm.api-key").strip()
    base = "https://%s:8000" % address(FIRST)
    routes = vllm_routes()
    assert len(routes) >= 30 and ("POST", "/invocations") in routes and ("GET", "/health") in routes
    print("PROBE %d routes of the engine on %s (its own build_app)" % (len(routes), FIRST))
    requests = []
    for method, path in routes:
        url = base + path.replace("{response_id}", "resp_1")
        requests += [{"method": method, "url": url, "cafile": CA}, {"method": method, "url": url, "cafile": CA, "key": key}]
    answers = http(node(SECOND), requests)
    table = []
    for index, (method, path) in enumerate(routes):
        without, with_key = answers[2 * index], answers[2 * index + 1]
        table.append((method, path, without["status"], with_key["status"]))
        if (method, path) == ("GET", "/health"):
            assert (without["status"], with_key["status"]) == (200, 200)
        elif (method, path) in ALLOWED:
            # Passed: vLLM itself asks for the key, and with it answers (400 to an empty body, 404 to an unknown
            # response id: vLLM's words, never the front's).
            assert without["status"] == 401 and with_key["status"] not in (401, 403, 502, 503), (method, path, with_key)
            assert with_key["body"] not in FRONT_BODIES, (method, path, with_key)
        else:
            # Never passed: the front's own 404, or its 405 where the path fits a listed pattern of another method
            # (POST /v1/responses/render fits GET /v1/responses/{response_id}).
            assert without["status"] == with_key["status"] and without["status"] in (404, 405), (method, path, without)
            assert without["body"] in FRONT_BODIES and with_key["body"] in FRONT_BODIES, (method, path, without)
    for method, path, without, with_key in table:
        print("PROBE %-6s %-40s from %s: %s without the key, %s with it" % (method, path, SECOND, without, with_key))
    # A listed path with another method: 405, never passed.
    assert [a["status"] for a in http(node(SECOND), [{"method": "DELETE", "url": base + "/v1/models", "cafile": CA, "key": key},
                                                     {"method": "POST", "url": base + "/health", "cafile": CA}])] == [405, 405]


def test_metrics_only_from_listed_networks_and_vllm_port_closed_outside():
    first_ip = address(FIRST)
    from_second = http(node(SECOND), [
        {"method": "GET", "url": "https://%s:8000/metrics" % first_ip, "cafile": CA},
        {"method": "GET", "url": "http://%s:8001/health" % first_ip},
        {"method": "GET", "url": "http://%s:8001/invocations" % first_ip}])
    from_first = http(node(FIRST), [{"method": "GET", "url": "https://127.0.0.1:8000/metrics", "cafile": CA}])
    print("PROBE GET    /metrics from %s (not listed): %s; from %s over 127.0.0.1 (listed): %s"
          % (SECOND, from_second[0]["status"], FIRST, from_first[0]["status"]))
    print("PROBE GET    :8001 (vLLM's own port) from %s: %s" % (SECOND, from_second[1].get("error")))
    assert from_second[0]["status"] == 404 and from_first[0]["status"] == 200
    assert from_second[1]["status"] is None and "refused" in from_second[1]["error"].lower()
    assert from_second[2]["status"] is None
    # vLLM listens on loopback only, the front on every address.
    listening = node(FIRST).check_output("cat /proc/net/tcp")
    ports = {(line.split()[1]) for line in listening.splitlines()[1:] if line.split()[3] == "0A"}
    assert "0100007F:1F41" in ports and "00000000:1F40" in ports and "00000000:1F41" not in ports


def test_tls_verified_plain_http_refused_and_no_tls_on_the_other_node():
    first_ip = address(FIRST)
    answers = http(node(SECOND), [
        {"method": "GET", "url": "https://%s:8000/health" % first_ip, "cafile": CA},
        {"method": "GET", "url": "https://%s:8000/health" % first_ip},
        {"method": "GET", "url": "http://%s:8000/health" % first_ip},
        {"method": "GET", "url": "http://%s:8000/v1/models" % address(SECOND), "key": GIVEN_KEY}])
    print("PROBE TLS from %s: verified against the test CA %s; system CAs only: %s; plain HTTP: %s"
          % (SECOND, answers[0]["status"], answers[1].get("error"), answers[2]["status"]))
    assert answers[0]["status"] == 200
    assert answers[1]["status"] is None and "CERTIFICATE_VERIFY_FAILED" in answers[1]["error"]
    assert answers[2]["status"] == 400
    assert answers[3]["status"] == 200  # the second node's front: no TLS asked for, plain HTTP
    # The key file stays root-only on disk; systemd hands a copy to the front (LoadCredential).
    key = node(FIRST).file("/etc/moeops-test-tls/front.key")
    assert (key.user, key.mode) == ("root", 0o600)
    assert "LoadCredential=tls.key:/etc/moeops-test-tls/front.key" in node(FIRST).file(FRONT_UNIT).content_string


def test_front_is_hardened_under_its_own_user():
    for name in NODES:
        h = node(name)
        assert h.run("systemd-analyze verify %s" % FRONT_UNIT).rc == 0
        out = h.check_output("systemd-analyze security --offline=yes --no-pager %s" % FRONT_UNIT)
        exposure = float(re.search(r"Overall exposure level for vllm-front.service: ([0-9.]+)", out).group(1))
        print("MEASURED %s vllm-front.service exposure %.1f (test ceiling %.1f)" % (name, exposure, MAX_FRONT_EXPOSURE))
        if name == FIRST:
            for line in out.splitlines():
                print("SECURITY " + line)
        assert exposure <= MAX_FRONT_EXPOSURE
        pid = int(h.check_output("systemctl show -p MainPID --value vllm-front"))
        status = h.check_output("cat /proc/%d/status" % pid)
        assert re.search(r"^Uid:\s+%s\b" % h.user("vllm-front").uid, status, re.M)
        assert re.search(r"^NoNewPrivs:\s+1$", status, re.M) and re.search(r"^Seccomp:\s+2$", status, re.M)
        # The distribution's nginx.service (its default site on port 80) stays off.
        assert h.run("systemctl is-enabled nginx.service").stdout.strip() != "enabled"
        assert h.run("systemctl is-active nginx.service").stdout.strip() != "active"
