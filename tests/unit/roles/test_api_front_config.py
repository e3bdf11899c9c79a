# -*- coding: utf-8 -*-
"""The API front's files as the role renders them (its nginx configuration, its unit and the unit's drop-in), from
the plan its check works out, with Ansible's own templating. What each line is for: docs/api-front.md. The same
configuration served by a real nginx in front of the real engine: molecule/rollback/tests/test_front.py."""
from __future__ import annotations

import os
import re

import pytest
import role_templating

from ansible_collections.moeops.inference.plugins.module_utils._facts import gpu_topology as topo
from ansible_collections.moeops.inference.plugins.module_utils._policy import api_front
from conftest import load_json, role_result

TEMPLATES = os.path.join(role_templating.ROLES, "vllm_service", "templates")
PROFILE = {"name": "tiny", "source": "example-org/tiny", "served_name": "tiny", "max_model_len": 4096,
           "gpu_memory_utilization": 0.9, "weights_size_gb": 1, "quantization": "bf16", "min_gpu_memory_gb": 1,
           "hidden_size": 1024, "num_attention_heads": 16}
CERT, KEY = "/etc/tls/front.crt", "/etc/tls/front.key"


def stat(checksum, uid=0, mode="0600", exists=True, isreg=True):
    return {"exists": exists, "isreg": isreg, "uid": uid, "pw_name": "root" if uid == 0 else "someone", "mode": mode,
            "checksum": checksum}


def result(tls=True, files=None, **values):
    gpus = topo.from_snapshot(load_json("constructed", "rtxpro6000-x8-2numa.json"), "rtxpro6000-x8-2numa")
    ctx = {"gpus": gpus, "profile": PROFILE}
    if tls:
        values.update(vllm_service_front_tls_cert=CERT, vllm_service_front_tls_key=KEY)
        ctx["front_tls_files"] = files if files is not None else {CERT: stat("c1", mode="0644"), KEY: stat("k1")}
    values.setdefault("vllm_service_host", "0.0.0.0")
    return role_result("vllm_service", ctx, **values)


def render(name, planned):
    assert not planned["problems"], planned["problems"]
    variables = role_templating.role_vars("vllm_service")
    variables.update(ansible_managed="Ansible managed", _vllm_service=planned)
    with open(os.path.join(TEMPLATES, name)) as f:
        return role_templating.render(f.read(), variables)


def directives(text):
    """The configuration's directives, one a line, comments and blank lines left out."""
    return [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("#")]


# --------------------------------------------------------------------------- the nginx configuration

def test_a_raw_path_that_normalising_would_change_is_refused_before_any_location():
    """nginx picks the location from $uri (normalised) but passes the raw request target on: a path with dot segments,
    // or %-escapes would be allowlisted as one path and reach vLLM as another (GET /metrics/../v1/models opened
    vLLM's /metrics mount). The server refuses it before any location is chosen."""
    conf = directives(render("front.nginx.conf.j2", result()))
    assert 'map $request_uri $front_raw_path {' in conf and '"~^(?<path>[^?]*)" $path;' in conf
    check = conf.index("if ($front_raw_path != $uri) {")
    assert conf[check + 1].startswith("return 400 ")
    # At server level, before every location; and every error_page goes to a named location (an internal redirect
    # to a URI would run the check again with a rewritten $uri).
    assert check < min(i for i, line in enumerate(conf) if line.startswith("location "))
    assert all(re.search(r" (= ?)?@\w+;$|=400 @plain_http;$", line) for line in conf if line.startswith("error_page"))


def test_http_0_9_is_refused_and_head_is_asked_as_get():
    conf = directives(render("front.nginx.conf.j2", result()))
    at = conf.index('if ($server_protocol !~ "^HTTP/1\\.[01]$") {')
    assert conf[at + 1].startswith("return 400 ")
    assert "map $request_method $front_upstream_method {" in conf and "HEAD GET;" in conf
    assert "proxy_method $front_upstream_method;" in conf
    # GET routes (and /health) allow HEAD: nginx's limit_except GET allows HEAD too.
    health = conf.index("location ~ ^/health$ {")
    assert conf[health + 1] == "limit_except GET {"


def test_every_request_gets_its_own_connection_to_vllm_and_bodies_are_read_whole_first():
    conf = directives(render("front.nginx.conf.j2", result()))
    upstream = conf[conf.index("upstream vllm {"):]
    upstream = upstream[:upstream.index("}")]
    assert not [line for line in upstream if line.startswith("keepalive")], upstream
    assert "proxy_set_header Connection close;" in conf
    assert "proxy_request_buffering on;" in conf and "proxy_request_buffering off;" not in conf
    assert "proxy_buffering off;" in conf  # the answer still streams token by token
    assert "client_max_body_size 16m;" in conf


def vllm_verify_token(header, key):
    """vLLM 0.33.0's own check of the key (AuthenticationMiddleware.verify_token in
    vllm/entrypoints/serve/middleware/authenticate.py), less its hashing."""
    if not header:
        return False
    scheme, _sep, param = header.partition(" ")
    return scheme.lower() == "bearer" and param == key


def nginx_unquote(text):
    """What nginx's configuration parser makes of a double-quoted string (\\" and \\\\ are its escapes)."""
    return re.sub(r'\\(["\\])', r"\1", text)


@pytest.mark.parametrize("header", ["", "Bearer", "Bearer ", "Bearer sk-key", "bearer sk-key", "BEARER sk-key",
                                    "Basic c2sta2V5", "Bearersk-key", " Bearer sk-key", "Token sk-key",
                                    "Bearer  sk-key", "bEaReR sk-key"])
def test_the_front_refuses_for_the_key_only_what_vllm_would_refuse(header):
    """Issue 41: a keyless 16 MiB POST was read whole and buffered by the front, and while vLLM restarted it got the
    front's "restarting" 503 instead of 401. On a guarded route the front now answers 401 itself, before the body and
    before the drain flag, to every request vLLM would refuse for its scheme; the token is still vLLM's to check."""
    conf = directives(render("front.nginx.conf.j2", result()))
    check = [line for line in conf if line.startswith("if ($http_authorization !~ ")]
    pattern = nginx_unquote(re.match(r'if \(\$http_authorization !~ "(.*)"\) \{$', check[0]).group(1))
    scheme, space, _token = header.partition(" ")
    # Passed exactly when vLLM's scheme rule would let it on to the token's check.
    assert (re.search(pattern, header) is not None) == (scheme.lower() == "bearer" and space == " ")
    if re.search(pattern, header) is None:
        assert not vllm_verify_token(header, "sk-key")


def test_the_front_checks_for_a_bearer_key_first_on_guarded_routes_only():
    conf = directives(render("front.nginx.conf.j2", result(vllm_service_front_unsafe_routes=["POST /tokenize"])))
    locations = {}
    for at, line in enumerate(conf):
        if line.startswith("location ~ "):
            end = at + conf[at:].index("proxy_pass http://vllm;")
            locations[line.split()[2]] = conf[at:end + 1]
    assert set(locations) == {api_front.route_regex(p) for p in (
        "/health", "/v1/models", "/v1/chat/completions", "/v1/completions", "/v1/responses",
        "/v1/responses/{response_id}", "/v1/responses/{response_id}/cancel", "/tokenize")}
    for regex, body in locations.items():
        checks = [i for i, line in enumerate(body) if line.startswith("if ($http_authorization !~ ")]
        if regex.startswith("^/v1/"):
            drain = [i for i, line in enumerate(body) if line.startswith("if (-f /run/vllm-front/draining)")]
            assert len(checks) == 1 and checks[0] < drain[0], body
            assert body[checks[0] + 1] == "return 401 '{\"error\": \"Unauthorized\"}\\n';"
        else:  # /health for load balancers, and an unsafe route (vLLM asks for no key there)
            assert checks == [], body


def test_one_client_holds_few_connections_and_a_slow_head_or_body_is_cut():
    conf = directives(render("front.nginx.conf.j2", result()))
    assert "limit_conn_zone $binary_remote_addr zone=front_clients:10m;" in conf
    assert "limit_conn front_clients 256;" in conf and "limit_conn_status 429;" in conf
    assert "client_header_timeout 10s;" in conf and "client_body_timeout 10s;" in conf
    # Every location with error pages of its own names 429 too (an error_page in a location replaces the server's).
    pages = [line for line in conf if line.startswith("error_page 413 ")]
    assert len(pages) == len([line for line in conf if line.startswith("error_page 429 = @too_many;")])
    tuned = directives(render("front.nginx.conf.j2", result(vllm_service_front_client_connections=8,
                                                            vllm_service_front_client_timeout=30)))
    assert "limit_conn front_clients 8;" in tuned and "client_body_timeout 30s;" in tuned
    refused = result(vllm_service_front_client_connections=0, vllm_service_front_client_timeout=0)
    assert any("vllm_service_front_client_connections must be a positive number" in p for p in refused["problems"])
    assert any("vllm_service_front_client_timeout must be a positive number" in p for p in refused["problems"])


def test_vllms_own_503_gets_retry_after_on_its_way_through():
    """vLLM answers /health with 503 once its engine died, without Retry-After; the front adds its own."""
    conf = directives(render("front.nginx.conf.j2", result(vllm_service_front_retry_after=45)))
    at = conf.index("map $upstream_status $front_upstream_retry_after {")
    assert conf[at + 1:at + 3] == ["503 45;", 'default "";']
    server = conf[conf.index("server {"):]
    assert "add_header Retry-After $front_upstream_retry_after always;" in server
    # No location but the front's own 503 sets a header of its own (one would drop the server's).
    adds = [line for line in server if line.startswith("add_header")]
    assert adds == ["add_header Retry-After $front_upstream_retry_after always;", "add_header Retry-After 45 always;"]


def test_tls_1_2_offers_forward_secret_aead_suites_only():
    conf = directives(render("front.nginx.conf.j2", result()))
    ciphers = [line for line in conf if line.startswith("ssl_ciphers ")]
    assert ciphers == ["ssl_ciphers %s;" % ":".join(api_front.TLS12_CIPHERS)]
    for suite in api_front.TLS12_CIPHERS:
        assert suite.startswith("ECDHE-") and ("-GCM-" in suite or "CHACHA20-POLY1305" in suite), suite
    assert "ssl_protocols TLSv1.2 TLSv1.3;" in conf and "ssl_session_tickets off;" in conf
    assert "ssl_certificate /run/vllm-front/tls.crt;" in conf and "ssl_certificate_key /run/vllm-front/tls.key;" in conf
    # No TLS asked for: none of it.
    plain = directives(render("front.nginx.conf.j2", result(tls=False)))
    assert not [line for line in plain if line.startswith("ssl_")]


def test_a_new_certificate_or_key_changes_the_configuration_and_nothing_that_restarts():
    """The TLS files' checksums (read by the check) are in the configuration: a new certificate reloads the front. The
    unit, whose change restarts it, holds nothing of them."""
    before = result()
    after = result(files={CERT: stat("c2", mode="0644"), KEY: stat("k2")})
    assert render("front.nginx.conf.j2", before) != render("front.nginx.conf.j2", after)
    assert render("front.service.j2", before) == render("front.service.j2", after)
    assert render("front.dropin.conf.j2", before) == render("front.dropin.conf.j2", after)
    # A new stop timeout changes the drop-in only (a daemon-reload and a reload apply it).
    longer = result(vllm_service_shutdown_timeout=300)
    assert render("front.service.j2", before) == render("front.service.j2", longer)
    assert "TimeoutStopSec=330" in render("front.dropin.conf.j2", longer).splitlines()


def test_the_unit_copies_the_tls_files_as_root_at_every_start_and_reload():
    unit = render("front.service.j2", result())
    dropin = directives(render("front.dropin.conf.j2", result()))
    assert "LoadCredential" not in unit and "ExecStartPre" not in unit and "ExecReload" not in unit
    assert "User=vllm-front" in unit.splitlines() and "KillSignal=SIGQUIT" in unit.splitlines()
    copy = "+/usr/bin/install -m 0400 -o vllm-front -g vllm-front -T %s /run/vllm-front/tls.%s"
    assert dropin == [
        "[Service]",
        "ExecStartPre=" + copy % (CERT, "crt"),
        "ExecStartPre=" + copy % (KEY, "key"),
        "ExecStartPre=/usr/sbin/nginx -t -q -e stderr -c /etc/vllm/vllm-front.nginx.conf",
        "ExecReload=" + copy % (CERT, "crt"),
        "ExecReload=" + copy % (KEY, "key"),
        "ExecReload=/usr/sbin/nginx -t -q -e stderr -c /etc/vllm/vllm-front.nginx.conf",
        "ExecReload=/bin/kill -HUP $MAINPID",
        "TimeoutStopSec=150",
    ]
    plain = directives(render("front.dropin.conf.j2", result(tls=False)))
    assert not [line for line in plain if "install" in line]


def test_unsafe_routes_are_passed_and_marked():
    conf = render("front.nginx.conf.j2", result(vllm_service_front_unsafe_routes=["POST /tokenize"]))
    assert "        # UNSAFE (vllm_service_front_unsafe_routes): vLLM asks for no API key here.\n" \
           "        location ~ ^/tokenize$ {" in conf


# --------------------------------------------------------------------------- the TLS files, checked before any change

@pytest.mark.parametrize("files,message", [
    ({CERT: stat("c"), KEY: stat("k", mode="0644")}, r"vllm_service_front_tls_key /etc/tls/front.key must be owned by root "
                                                     r"with no group or other access .* mode 0644"),
    ({CERT: stat("c"), KEY: stat("k", mode="0640")}, r"vllm_service_front_tls_key .* mode 0640"),
    ({CERT: stat("c"), KEY: stat("k", uid=1000)}, r"vllm_service_front_tls_key .* owned by someone"),
    ({CERT: stat("c", exists=False), KEY: stat("k")}, r"vllm_service_front_tls_cert /etc/tls/front.crt does not exist"),
    ({CERT: stat("c"), KEY: stat("k", isreg=False)}, r"vllm_service_front_tls_key /etc/tls/front.key is not a regular file"),
])
def test_the_plan_refuses_a_missing_tls_file_or_a_key_others_can_read(files, message):
    planned = result(files=files)
    assert planned["plan"] is None
    assert any(re.search(message, p) for p in planned["problems"]), planned["problems"]


def test_a_root_only_key_passes_and_a_loopback_host_reads_no_tls_file():
    assert result()["problems"] == []
    assert result(vllm_service_host="127.0.0.1", files={KEY: stat("k", mode="0666")})["problems"] == []
