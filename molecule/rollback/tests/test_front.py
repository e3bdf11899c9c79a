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
import time

testinfra = importlib.import_module("testinfra")

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
NODES = os.environ["SAFETY_NODES"].split(",")
FIRST, SECOND = NODES
CA = "/etc/moeops-test-tls/front.crt"
PROBE = "python3 /usr/local/lib/moeops-test/http_probe.py"
FRONT_UNIT = "/etc/systemd/system/vllm-front.service"
FRONT_DROPIN = "/etc/systemd/system/vllm-front.service.d/moeops-reloadable.conf"
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


def api_key(name):
    """The key of a node's front: generated on the first node, given on the second."""
    return node(FIRST).check_output("cat /etc/vllm/vllm.api-key").strip() if name == FIRST else GIVEN_KEY


def vllm_routes():
    """The engine's own route table, read on the first node from the vLLM it runs."""
    table = json.loads(node(FIRST).check_output(
        "HF_HUB_OFFLINE=1 /opt/vllm/engine/bin/python /usr/local/lib/moeops-test/routes.py 2>/dev/null"))
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
    # The key file stays root-only on disk; the unit copies it, as root, into the front's runtime directory at every
    # start and reload, readable by the front's user only.
    key = node(FIRST).file("/etc/moeops-test-tls/front.key")
    assert (key.user, key.mode) == ("root", 0o600)
    dropin = node(FIRST).file(FRONT_DROPIN).content_string.splitlines()
    copy = "+/usr/bin/install -m 0400 -o vllm-front -g vllm-front -T /etc/moeops-test-tls/front.key /run/vllm-front/tls.key"
    assert "ExecStartPre=" + copy in dropin and "ExecReload=" + copy in dropin
    running = node(FIRST).file("/run/vllm-front/tls.key")
    assert (running.user, running.mode) == ("vllm-front", 0o400)


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


# --------------------------------------------------------------------------- issue 28: what the front lets through

# The front's own 400s (templates/front.nginx.conf.j2).
NOT_NORMAL = '{"error": "the request path must be in normal form: no . or .. segments, no //, no %-escapes"}\n'
HTTP_09 = '{"error": "HTTP/1.0 or HTTP/1.1 only"}\n'
# Targets that nginx normalises to another path: each must get the front's 400 and never reach vLLM. {m}: a route
# of the allowlist, {x}: one that is not.
ODD_TARGETS = [
    "/metrics/../v1/models", "/metrics/../health", "/metrics/%2e%2e/v1/models", "/metrics/%2E%2E/v1/models",
    "/metrics/..%2Fv1/models", "/metrics/..%2fhealth", "/metrics/./../v1/models", "/v1/models/../../metrics",
    "/v1/models/..", "/v1/./models", "/./v1/models", "//v1/models", "/v1//models", "//metrics", "/v1/models//",
    "/v1%2Fmodels", "/%76%31/models", "/v1/model%73", "/health/../metrics", "/health/%2e%2e/metrics",
    "/v1/responses/../../metrics", "/v1/responses/resp_1/..%2f..%2f..%2fmetrics",
]


def fronts():
    """(name, the node that probes it, its address, TLS): the first node's TLS front, the second's plain one."""
    return [(FIRST, SECOND, address(FIRST), True), (SECOND, FIRST, address(SECOND), False)]


def raw(target_ip, tls, request, **more):
    return dict({"raw": request, "host": target_ip, "port": 8000, "tls": tls, "cafile": CA if tls else None}, **more)


def _logged_path(line):
    """The path of the request in one line of uvicorn's access log ('... "GET /path?query HTTP/1.1" 401 ...')."""
    request = line.split('"')[1] if line.count('"') >= 2 else line
    target = request.split(" ")[1] if request.count(" ") >= 2 else request
    return target.split("?")[0]


def vllm_access_log_through(h, since, last, seconds=30):
    """vLLM's access-log lines since `since`, read once the line of the request `last` is among them: the journal gets
    a line a little after the answer (polled every 0.2 s; `seconds` only bounds a line that never comes)."""
    t0 = time.monotonic()
    while True:
        lines = [line for line in h.check_output("journalctl -u vllm --no-pager -o cat --since @%d" % since).splitlines()
                 if " HTTP/1." in line]
        if any(last in line for line in lines):
            return lines
        assert time.monotonic() - t0 < seconds, "%r not in vLLM's access log after %d s: %s" % (last, seconds, lines[-3:])
        time.sleep(0.2)


def test_paths_that_normalising_would_change_get_400_and_never_reach_vllm():
    """Dot segments (also %2e%2e and ..%2F), doubled slashes and %-escapes, in the origin and the absolute form, GET and
    POST, over TLS and plain HTTP, from the other node; and every route of the engine reached through a dot segment
    from an allowlisted path. Before issue 28 GET /metrics/../v1/models answered vLLM's whole Prometheus output."""
    key = node(FIRST).check_output("cat /etc/vllm/vllm.api-key").strip()
    routes = vllm_routes()
    total, since = 0, int(time.time())
    for name, prober, ip, tls in fronts():
        targets = list(ODD_TARGETS) + ["/v1/models/.." + path.replace("{response_id}", "resp_1") for _m, path in routes]
        requests = []
        for target in targets:
            for method in ("GET", "POST"):
                head = "%s %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Length: 2\r\n" \
                       "Content-Type: application/json\r\nConnection: close\r\n\r\n{}" % (method, target, ip, key if name == FIRST else GIVEN_KEY)
                requests.append(raw(ip, tls, head))
            # The absolute form, as a proxy would get it.
            requests.append(raw(ip, tls, "GET %s://%s:8000%s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n"
                                % ("https" if tls else "http", ip, target, ip)))
        answers = http(node(prober), requests)
        wrong = [(r["raw"].split("\r\n")[0], a) for r, a in zip(requests, answers)
                 if a.get("status") != 400 or a.get("body") != NOT_NORMAL]
        print("PROBE %d odd request targets at %s's front (%s) from %s: %d answered 400 by the front, %d otherwise"
              % (len(requests), name, "TLS" if tls else "plain HTTP", prober, len(requests) - len(wrong), len(wrong)))
        assert not wrong, wrong[:5]
        total += len(requests)
        # The same paths in normal form still pass: the absolute form too (with the key: the front answers a request
        # without one itself).
        auth = "Authorization: Bearer %s\r\n" % api_key(name)
        clean = http(node(prober), [
            raw(ip, tls, "GET /v1/models HTTP/1.1\r\nHost: %s\r\n%sConnection: close\r\n\r\n" % (ip, auth)),
            raw(ip, tls, "GET %s://%s:8000/v1/models HTTP/1.1\r\nHost: %s\r\n%sConnection: close\r\n\r\n"
                % ("https" if tls else "http", ip, ip, auth)),
            raw(ip, tls, "GET /v1/models?x=/../metrics HTTP/1.1\r\nHost: %s\r\n%sConnection: close\r\n\r\n"
                % (ip, auth))])
        assert [a["status"] for a in clean] == [200, 200, 200], clean  # vLLM's own answer
    # vLLM never saw one of them: its access log (uvicorn's) has no odd path since the probe began. Only the path
    # counts: the clean probe above sends "/../" in a query string, which is no path and passes on purpose. That
    # request came last, so once its line is in the journal every earlier one that reached vLLM is there too.
    for name in NODES:
        logged = vllm_access_log_through(node(name), since, "/v1/models?x=/../metrics HTTP/1.")
        seen = [line for line in logged if any(odd in _logged_path(line) for odd in ("/.", "%2", "%7", "//"))]
        assert not seen, (name, seen[:5])
    print("PROBE %d odd request targets in all, every one refused by the front; none in vLLM's access logs" % total)


def test_head_health_is_answered_and_http_0_9_is_refused():
    for name, prober, ip, tls in fronts():
        scheme = "https" if tls else "http"
        head, get = http(node(prober), [{"method": "HEAD", "url": "%s://%s:8000/health" % (scheme, ip), "cafile": CA},
                                        {"method": "GET", "url": "%s://%s:8000/health" % (scheme, ip), "cafile": CA}])
        # HTTP/0.9: a request line without a version; the answer has no status line, only the body.
        old = http(node(prober), [raw(ip, tls, "GET /v1/models\r\n"), raw(ip, tls, "GET /health\r\n")])
        print("PROBE %s's front (%s) from %s: HEAD /health %s, GET /health %s; HTTP/0.9 GET /v1/models: %r"
              % (name, scheme, prober, head["status"], get["status"], old[0].get("body")))
        assert head["status"] == 200 and head["body"] == "" and get["status"] == 200
        assert [(a["status"], a["body"]) for a in old] == [(None, HTTP_09), (None, HTTP_09)], old


def front_log(h, marker):
    """The front's access log lines (syslog tag vllm_front) that hold `marker`."""
    return [line for line in h.check_output("journalctl -t vllm_front --no-pager -o cat").splitlines() if marker in line]


def front_logs(h, *markers, seconds=30):
    """front_log() for each marker, once every one has a line: the front logs through syslog, so a line reaches the
    journal a little after the answer (polled every 0.2 s; `seconds` only bounds a line that never comes)."""
    t0 = time.monotonic()
    while True:
        found = [front_log(h, marker) for marker in markers]
        if all(found) or time.monotonic() - t0 > seconds:
            return found
        time.sleep(0.2)


def test_a_chunked_body_over_the_limit_gets_413_and_never_reaches_vllm():
    """The body limit of the tiny model's front is 16 MiB (64 bytes a token of its 2048, at least 16 MiB). A chunked
    body of 17 MiB gets 413 before vLLM sees a byte: the front reads every body whole before it connects to vLLM."""
    key = node(FIRST).check_output("cat /etc/vllm/vllm.api-key").strip()
    for name, prober, ip, tls in fronts():
        marker = "chunked-%s-%d" % ("tls" if tls else "plain", int(time.time()))
        head = ("POST /v1/completions?probe=%s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n"
                "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
                % ("%s", ip, key if name == FIRST else GIVEN_KEY))
        over, under = http(node(prober), [raw(ip, tls, head % (marker + "-over"), chunks=[17, 1 << 20]),
                                          raw(ip, tls, head % (marker + "-under"), chunks=[2, 1024])])
        logged_over, logged_under = front_logs(node(name), marker + "-over", marker + "-under")
        vllm_saw = [line for line in node(name).check_output("journalctl -u vllm --no-pager -o cat").splitlines()
                    if marker in line]
        print("PROBE %s's front (%s) from %s: chunked 17 MiB -> %s (%s); chunked 2 KiB -> %s (%s); vLLM's log: %s"
              % (name, "TLS" if tls else "plain", prober, over["status"], logged_over, under["status"], logged_under,
                 vllm_saw))
        assert over["status"] == 413 and logged_over and all("upstream=-/-" in line for line in logged_over)
        # Under the limit the chunked body passes, and vLLM answers it (400: "x" * 2048 is no JSON).
        assert under["status"] == 400 and under["body"] != NOT_NORMAL and logged_under
        assert all("upstream=127.0.0.1:8001/400" in line for line in logged_under), logged_under
        assert not [line for line in vllm_saw if "-over" in line], vllm_saw


def test_tls_1_2_offers_forward_secret_suites_only():
    """Every TLS 1.2 suite this OpenSSL knows, one handshake each: the front accepts ECDHE with AES-GCM or
    ChaCha20-Poly1305 only (the test certificate is RSA, so the ECDSA ones cannot be chosen). nginx's default list
    accepted 27, 16 of them with plain RSA key exchange."""
    ip = address(FIRST)
    found = http(node(SECOND), [{"ciphers": True, "host": ip, "port": 8000}])[0]
    print("PROBE TLS 1.2 suites accepted by %s's front: %d of %d tried: %s; TLS 1.3 negotiates %s"
          % (FIRST, len(found["tls12"]), found["tried"], " ".join(found["tls12"]), found["tls13"]))
    assert sorted(found["tls12"]) == ["ECDHE-RSA-AES128-GCM-SHA256", "ECDHE-RSA-AES256-GCM-SHA384",
                                      "ECDHE-RSA-CHACHA20-POLY1305"]
    assert found["tls13"].startswith("TLS_")


# --------------------------------------------------------------------------- issue 41: one client, one request

UNAUTHORIZED = '{"error": "Unauthorized"}\n'


def test_a_request_without_a_bearer_key_gets_401_from_the_front_before_its_body_and_while_vllm_restarts():
    """A keyless POST that announces a 15 MiB body and sends none: the front answers 401 at once (it would otherwise
    wait for the body, and then 408); so does a Basic one. While the drain flag is up (a restart) a keyless request
    still gets 401 and a keyed one the front's 503 with Retry-After. None of them reaches vLLM."""
    for name, prober, ip, tls in fronts():
        marker = "keyless-%s-%d" % ("tls" if tls else "plain", int(time.time()))
        key = api_key(name)
        head = ("POST /v1/completions?probe=%s HTTP/1.1\r\nHost: %s\r\n%sContent-Type: application/json\r\n"
                "Content-Length: 15000000\r\nConnection: close\r\n\r\n")
        t0 = time.monotonic()
        keyless, basic = http(node(prober), [raw(ip, tls, head % (marker + "-none", ip, "")),
                                             raw(ip, tls, head % (marker + "-basic", ip, "Authorization: Basic eDp5\r\n"))])
        seconds = time.monotonic() - t0
        flag = "/run/vllm-front/draining"
        node(name).check_output("install -m 0644 /dev/null %s" % flag)
        try:
            draining = http(node(prober), [
                raw(ip, tls, "GET /v1/models?probe=%s-drain-none HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n"
                    % (marker, ip)),
                raw(ip, tls, "GET /v1/models?probe=%s-drain-key HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n"
                    "Connection: close\r\n\r\n" % (marker, ip, key))])
        finally:
            node(name).check_output("rm -f %s" % flag)
        logged = front_logs(node(name), marker + "-none", marker + "-basic", marker + "-drain-none", marker + "-drain-key")
        print("PROBE %s's front (%s) from %s: keyless POST announcing 15 MiB -> %s, Basic -> %s, both in %.1f s; "
              "draining: keyless -> %s, keyed -> %s (Retry-After %s)"
              % (name, "TLS" if tls else "plain", prober, keyless["status"], basic["status"], seconds,
                 draining[0]["status"], draining[1]["status"], draining[1]["retry_after"]))
        assert (keyless["status"], keyless["body"]) == (401, UNAUTHORIZED) and basic["status"] == 401
        assert [a["status"] for a in draining] == [401, 503] and draining[1]["retry_after"] == "30"
        # Answered by the front itself, none of them passed to vLLM.
        assert all("upstream=-/-" in line for lines in logged for line in lines), logged


def test_one_client_holds_at_most_its_share_and_a_body_that_never_comes_is_cut():
    """From the first node, 264 connections to the second node's front, each a keyed POST whose body never comes: 8 get
    429 at once (vllm_service_front_client_connections 256), and once they have, one more request from the same
    address gets 429 too. Each of the 256 held is ended by the front after vllm_service_front_client_timeout (10 s
    without a byte), and none reaches vLLM. Event-driven: the 429s are awaited, not slept for. Judged by what the
    client got: the front's access log goes to syslog as datagrams, and of 256 lines written in the same instant
    (every held request timing out at once) the journal kept 211 in one run."""
    ip = address(SECOND)
    marker = "held-%d" % int(time.time())
    head = ("POST /v1/completions?probe=%s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n"
            "Content-Type: application/json\r\nContent-Length: 1000\r\nConnection: close\r\n\r\n" % (marker, ip, GIVEN_KEY))
    then = "GET /v1/models?probe=%s-more HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nConnection: close\r\n\r\n" \
        % (marker, ip, GIVEN_KEY)
    since = int(time.time())
    found = http(node(FIRST), [dict(raw(ip, False, head), hold=264, early=8, then=then)])[0]
    # vLLM's access log, read once a request sent after the probe is in it: no request of the probe reached vLLM.
    last = "/v1/models?probe=%s-after" % marker
    request = "GET %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nConnection: close\r\n\r\n" % (last, ip, GIVEN_KEY)
    after = http(node(FIRST), [raw(ip, False, request)])[0]
    reached = [line for line in vllm_access_log_through(node(SECOND), since, last + " HTTP/1.") if marker + " " in line
               or marker + "-more" in line]
    timed_out = [t for status, t in zip(found["ended"], found["seconds"]) if status != 429]
    print("PROBE %s's front from %s: %d opened, %d got 429 at once; one more then -> %s; the other %d ended (%s) after "
          "%.1f-%.1f s; in vLLM's access log: %d" % (SECOND, FIRST, found["held"], found["ended"].count(429),
                                                     found["then"]["status"], len(timed_out),
                                                     sorted(set(s for s in found["ended"] if s != 429), key=str),
                                                     min(timed_out), max(timed_out), len(reached)))
    assert found["ended"].count(429) == 8 and found["then"]["status"] == 429
    # The held ones: ended by the front (nginx logs 408 and closes), long before the probe's own 120 s.
    assert len(timed_out) == 256 and set(s for s in found["ended"] if s != 429) <= {408, None} and max(timed_out) < 60
    assert after["status"] == 200 and not reached, reached[:3]
