# -*- coding: utf-8 -*-
"""The vllm_service role's safety on two nodes where the real engine serves (vLLM's CPU build, the tiny test model).

Runs after converge (no idempotence step: the check-mode run on the converged first node below must predict no
change); the tests run in file order and build on each other: hardening, secrets,
check mode and diff on the converged nodes; systemd's default KillMode cutting streams in flight (what the unit's
KillMode=mixed prevents); a good change whose restart drains two streams through the front; then a bad change
rolled out one node at a time that must be rolled back on the first node, drain the same way, and never reach the
second.
"""
from __future__ import annotations

import importlib
import json
import os
import re
import shlex
import subprocess
import sys
import time

import pytest

from stream_record import CUT, REFUSED, UNANSWERED, WHOLE, finish, killmode_verdict, verdict, wait_for_line

# pytest-testinfra (requirements/dev.txt); imported by name so sanity's pylint needs no copy of it.
testinfra = importlib.import_module("testinfra")

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
INVENTORY = os.environ["SAFETY_INVENTORY"]
NODES = os.environ["SAFETY_NODES"].split(",")
FIRST, SECOND = NODES
UNIT = "/etc/systemd/system/vllm.service"
ENV_FILE = "/etc/vllm/vllm.env"
KEY_FILE = "/etc/vllm/vllm.api-key"
# The fake secrets of inventory/group_vars/vllm_servers/safety.yml and host_vars/moeops-rb-2.yml.
HF_TOKEN = "hf_SAFETYtoken0123456789abcdefSECRET"
GIVEN_KEY = "sk-SAFETYgivenKey-9876543210-SECRET"
# The drain tests' streams: two, of this many tokens each (about 10 s on the CPU build; the model takes 2048).
STREAM_TOKENS = 1900
# The streams start when the play reaches the front's exposure report, a few tasks before the front refuses new
# requests and vLLM gets SIGTERM; drain_client.py relays them from then on, so some are in flight at the restart however
# long those tasks take (11 to 22 s measured on a loaded machine, against 8 to 14 s for one 1900-token stream).
# How long a drain client may run at most (it ends itself once it has seen the restart and a 200 after it, or after
# this many seconds of polling): only a bound on a hang, 3 to 10 times the 60 to 190 s measured.
CLIENT_LIMIT = 600
STREAMS_AT = "TASK [moeops.inference.vllm_service : Front | Report the front unit's systemd-analyze security exposure]"
# A good change (the restart drains) that the bad change keeps, so that its rollback returns to it.
GOOD_CHANGE = ("-e", json.dumps({"vllm_service_extra_args": ["--max-num-seqs", "64"]}))
# systemd-analyze security's overall exposure (0-10) above which the hardening has regressed.
# The default directives measure 1.9 on Debian 12 (main's unit before hardening: 9.2). What is left
# open is needed to serve on GPUs: the network (0.5 + 0.3 + 0.2 IP allow list), device access to
# the NVIDIA nodes (PrivateDevices, DeviceAllow), W+X pages for CUDA/Triton JIT, full /proc for
# torch/psutil, netlink/unix sockets for zmq and NCCL. 2.5 leaves room for other systemd
# releases scoring the same unit a little differently, and still fails if any one of
# NoNewPrivileges, ProtectSystem, the system call filter or the capability bounding set is lost.
MAX_EXPOSURE = 2.5
LOG_DIR = os.environ.get("SAFETY_LOG_DIR", "")
OUTPUTS: list[str] = []


def node(name):
    return testinfra.get_host("podman://" + name)


def play(*extra, check=False, trigger=None, on_trigger=None):
    """Run playbooks/deploy.yml (the inventory names the tiny model's profile) against both nodes as an operator
    would; return (rc, output). With `trigger`, `on_trigger()` is called once, as soon as a line of the run's output
    contains it."""
    argv = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-v", "-i", INVENTORY, "playbooks/deploy.yml", "--diff"]
    if check:
        argv.append("--check")
    argv += list(extra)
    t0 = time.monotonic()
    run = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           env=dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0"))
    lines = []
    for line in run.stdout:
        lines.append(line)
        if trigger and trigger in line:
            on_trigger()
            trigger = None
    rc = run.wait()
    out = "".join(lines)
    OUTPUTS.append(out)
    if LOG_DIR:
        with open(os.path.join(LOG_DIR, "play-%d.log" % len(OUTPUTS)), "w") as f:
            f.write(out)
    what = " ".join(extra + (("--check",) if check else ()))
    print("MEASURED play %s: rc %d in %.0f s" % (what, rc, time.monotonic() - t0))
    return rc, out


def recap(out):
    return {m.group(1): dict((k, int(v)) for k, v in re.findall(r"(\w+)=(\d+)", m.group(2)))
            for m in re.finditer(r"^(\S+)\s+:\s+(ok=.*)$", out, re.M)}


def main_pid(h):
    return int(h.check_output("systemctl show -p MainPID --value vllm"))


# Both nodes listen on 0.0.0.0, so each has the API front (vllm-front.service); the first one serves TLS with the
# certificate prepare.yml made. vLLM itself is on 127.0.0.1:8001.
CA = "/etc/moeops-test-tls/front.crt"
PROBE = "python3 /usr/local/lib/moeops-test/http_probe.py"


def front_url(name):
    return "https://127.0.0.1:8000" if name == FIRST else "http://127.0.0.1:8000"


def http(h, requests):
    """The test client on node h (files/http_probe.py): [{method, url, key, cafile}] -> [{status, ...}]."""
    return json.loads(h.check_output("%s %s" % (PROBE, shlex.quote(json.dumps(requests)))))


def health(h, name):
    return str(http(h, [{"method": "GET", "url": front_url(name) + "/health", "cafile": CA}])[0]["status"])


def state(h):
    return {"unit": h.file(UNIT).sha256sum, "env": h.check_output("sha256sum %s" % ENV_FILE),
            "pid": main_pid(h), "mtime": h.file(UNIT).mtime}


@pytest.fixture(scope="module")
def generated_key():
    return node(FIRST).check_output("cat %s" % KEY_FILE).strip()


def test_hardened_unit_and_exposure():
    for name in NODES:
        h = node(name)
        text = h.file(UNIT).content_string
        for line in ["User=vllm", "NoNewPrivileges=true", "ProtectSystem=strict", "ProtectHome=true", "PrivateTmp=true",
                     "ProtectKernelTunables=true", "ProtectKernelModules=true", "ProtectControlGroups=true",
                     "DevicePolicy=closed", "DeviceAllow=/dev/nvidiactl rw", "DeviceAllow=/dev/nvidia-uvm rw",
                     "DeviceAllow=/dev/nvidia-uvm-tools rw", "DeviceAllow=char-nvidia-caps rw",
                     "DeviceAllow=/dev/nvidia7 rw", "RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6 AF_NETLINK",
                     "LimitMEMLOCK=infinity", "UMask=0027", "StateDirectory=vllm",
                     "CacheDirectory=vllm/huggingface", "EnvironmentFile=/etc/vllm/vllm.env"]:
            assert line in text.splitlines(), line
        assert h.run("systemd-analyze verify %s" % UNIT).rc == 0
        out = h.check_output("systemd-analyze security --offline=yes --no-pager %s" % UNIT)
        exposure = float(re.search(r"Overall exposure level for vllm.service: ([0-9.]+)", out).group(1))
        print("MEASURED %s exposure %.1f (test ceiling %.1f)" % (name, exposure, MAX_EXPOSURE))
        assert exposure <= MAX_EXPOSURE
        # The running vLLM really is sandboxed: its own user, no new privileges, seccomp on.
        pid = main_pid(h)
        status = h.check_output("cat /proc/%d/status" % pid)
        assert re.search(r"^Uid:\s+%s\b" % h.user("vllm").uid, status, re.M)
        assert re.search(r"^NoNewPrivs:\s+1$", status, re.M) and re.search(r"^Seccomp:\s+2$", status, re.M)
        assert h.run("nsenter -t %d -m test -w /usr/lib" % pid).rc != 0  # ProtectSystem=strict
        # The HF cache and the state directory are the service user's; uv's cache stays root's.
        assert (h.file("/var/cache/vllm/huggingface").user, h.file("/var/lib/vllm").user) == ("vllm", "vllm")
        assert h.file("/var/cache/vllm").user == "root"
        # nvidia_uvm is loaded at boot (NoNewPrivileges stops nvidia-modprobe from creating its node).
        assert "nvidia_uvm" in h.file("/etc/modules-load.d/nvidia.conf").content_string.split()


def test_secrets_never_in_unit_show_or_cmdline(generated_key):
    assert len(generated_key) >= 40
    for name, key in [(FIRST, generated_key), (SECOND, GIVEN_KEY)]:
        h = node(name)
        env = h.file(ENV_FILE)
        assert (env.user, env.group, env.mode) == ("root", "root", 0o600)
        assert env.contains("^HF_TOKEN=%s$" % HF_TOKEN) and env.contains("^VLLM_API_KEY=%s$" % key)
        places = {"unit": h.file(UNIT).content_string,
                  "systemctl show": h.check_output("systemctl show vllm"),
                  "cmdline": h.check_output("tr '\\0' ' ' < /proc/%d/cmdline" % main_pid(h)),
                  "journal": h.check_output("journalctl -u vllm --no-pager")}
        for where, text in places.items():
            for secret in (HF_TOKEN, key):
                assert secret not in text, "secret in %s on %s" % (where, name)
        # vLLM takes the key from VLLM_API_KEY: /v1 needs it, /health does not.
        url = front_url(name) + "/v1/models"
        answers = http(h, [{"method": "GET", "url": url, "cafile": CA}, {"method": "GET", "url": url, "cafile": CA, "key": key}])
        assert [a["status"] for a in answers] == [401, 200]
        assert health(h, name) == "200"
    assert not node(SECOND).file(KEY_FILE).exists  # a key was given: none generated


def test_check_mode_on_converged_nodes_changes_nothing():
    # The first node: both converged from the same play, and the next test runs check mode on both.
    before = state(node(FIRST))
    rc, out = play("--limit", _inv(FIRST), check=True)
    assert rc == 0, out[-3000:]
    assert recap(out)[_inv(FIRST)]["changed"] == 0, out[-3000:]
    assert state(node(FIRST)) == before


def _inv(name):
    suffix = os.environ.get("MOEOPS_NODE_SUFFIX", "")
    return name[: len(name) - len(suffix)] if suffix and name.endswith(suffix) else name


def test_check_mode_shows_exactly_the_changed_unit_lines():
    before = {n: state(node(n)) for n in NODES}
    rc, out = play("-e", "vllm_service_max_model_len=1024", check=True)
    assert rc == 0, out[-3000:]
    # The unit's diff block of each host: only the changed ExecStart line, nothing else.
    blocks = re.findall(r"^--- before: %s\n\+\+\+ after: .*?\n(.*?)(?=^changed:|^ok:|^skipping:)" % re.escape(UNIT),
                        out, re.M | re.S)
    assert len(blocks) == 2, out[-4000:]
    for block in blocks:
        changed = [line for line in block.splitlines() if line[:1] in ("+", "-")]
        assert changed == ["-    --max-model-len 2048 \\", "+    --max-model-len 1024 \\"], block
    for name in NODES:
        r = recap(out)[_inv(name)]
        assert r["changed"] >= 2 and r["failed"] == 0  # the unit and the predicted restart
        assert state(node(name)) == before[name]  # check mode: nothing touched
    assert re.search(r"TASK \[moeops.inference.vllm_service : Restart vLLM with the changed unit or environment\][ *]*\n"
                     r"changed: \[", out), "restart not predicted in check mode"


def node_address(h):
    return h.check_output("python3 -c \"import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); "
                          "s.connect(('10.255.255.255', 1)); print(s.getsockname()[0])\"")


def drain_client(h, url, key, cafile, poll_seconds, *mode):
    """files/drain_client.py on node h, in the background: two streams of STREAM_TOKENS, polls while asked. Its
    record is read with stream_record.finish()."""
    return subprocess.Popen(["podman", "exec", h.backend.name, "python3", "/usr/local/lib/moeops-test/drain_client.py",
                             url, key, cafile, str(STREAM_TOKENS), "2", str(poll_seconds), *mode],
                            stdout=subprocess.PIPE, text=True)


def records(clients):
    """The records of drain clients begun together, in order (each bounded by its own limit; killed 5 minutes after)."""
    return [finish(c, CLIENT_LIMIT + 300) for c in clients]


def direct_drain_client(key, poll_seconds):
    """drain_client.py on the first node straight to vLLM (127.0.0.1:8001, behind the front), relaying its streams
    until vLLM's port closes at the SIGTERM: the front stops letting streams through at the drain flag, several
    seconds of the play's tasks earlier, so only these show a stream that spans the SIGTERM."""
    return drain_client(node(FIRST), "http://127.0.0.1:8001", key, "", poll_seconds, "direct")


def wait_healthy(h, name, seconds=300):
    t0 = time.monotonic()
    while time.monotonic() - t0 < seconds:
        if health(h, name) == "200":
            return time.monotonic() - t0
        time.sleep(2)
    raise AssertionError("%s not healthy after %d s" % (name, seconds))


def journal_since(h, wall0):
    """The unit's journal since `wall0`, each MESSAGE as text: journalctl's JSON gives a message that is not valid
    UTF-8 (vLLM's progress bars, cut mid-character) as a list of byte values."""
    text = h.check_output("journalctl -u vllm --no-pager -o json --since @%d" % int(wall0))
    lines = [json.loads(j) for j in text.splitlines() if j.strip()]
    for line in lines:
        if isinstance(line.get("MESSAGE"), list):
            line["MESSAGE"] = bytes(line["MESSAGE"]).decode("utf-8", "replace")
    return lines


def per_stream(streams, key):
    """One figure of each stream of a drain_client.py record, as "1900/950/1900"."""
    return "/".join(str(s[key]) for s in streams)


def answered_after(polls, refused):
    """The polls answered 200 after the last of the `refused` ones (none when none was refused)."""
    return [p for p in polls if p["status"] == 200 and refused and p["t"] > refused[-1]["t"]]


def drain_report(what, record, wall0, restart_at):
    """Print the DRAIN line (seconds after `wall0`) and return (refused polls, first 200 after them)."""
    polls = record["polls"]
    refused = [p for p in polls if p["status"] == 503]
    first_ok_after = answered_after(polls, refused)
    last = max((s["last_token"] or wall0) for s in record["streams"])
    print("DRAIN %s: streams start %.1f s, restart begins (SIGTERM) %.1f s, last token of the old streams %.1f s, "
          "first 503 %.1f s, last 503 %.1f s, first 200 after %.1f s (seconds after the deploy started); tokens %s of "
          "%s; %d polls: %s" % (
              what, record["stream_start"] - wall0, restart_at - wall0, last - wall0,
              (refused[0]["t"] - wall0) if refused else -1, (refused[-1]["t"] - wall0) if refused else -1,
              (first_ok_after[0]["t"] - wall0) if first_ok_after else -1,
              per_stream(record["streams"], "tokens"), per_stream(record["streams"], "max_tokens"), len(polls),
              " ".join(str(p["status"]) for p in polls)))
    return refused, first_ok_after


def whole_streams(record):
    """The whole streams of a drain_client.py record; none may have been cut. Judged by what each received
    (stream_record.verdict): [DONE], and every token it asked for (STREAM_TOKENS, or half that for the first of the
    second relay), with no error; a stream that began and ended short was cut, whether or not the transport said so."""
    cut = [s for s in record["streams"] if verdict(s) == CUT]
    assert not cut, ("cut streams", cut, record["streams"])
    return [s for s in record["streams"] if verdict(s) == WHOLE]


def drained_streams(record, restart_at):
    """The streams the front let through (drain_client.py relays them until the front refuses one): each got every
    token with no error; whether one was still streaming when the restart began (SIGTERM) is printed. A stream begun
    after the drain flag got the front's 503 and nothing else."""
    old = whole_streams(record)
    assert old, record["streams"]
    assert all(verdict(s) == REFUSED and s["status"] == 503 for s in record["streams"] if verdict(s) != WHOLE), \
        record["streams"]
    in_flight = [s for s in old if s["start"] < restart_at < s["last_token"]]
    # Printed only: the front's refusals end its relay at the drain flag, 7 to 11 s of the play's tasks before the
    # SIGTERM, about a stream's length (8 to 14 s). spanned_sigterm() asserts it on the streams straight to vLLM.
    print("DRAIN %d of %d streams the front let through were in flight when the restart began"
          % (len(in_flight), len(old)))
    return old


def spanned_sigterm(record, restart_at):
    """The streams straight to vLLM (direct_drain_client): each one vLLM accepted got every token with no error, and
    at least one was streaming when systemd sent SIGTERM, so it was drained (KillMode=mixed, --shutdown-timeout).
    Those that vLLM did not accept began at or after the SIGTERM and got no token."""
    whole = whole_streams(record)
    for stream in record["streams"]:
        if verdict(stream) != WHOLE:
            assert verdict(stream) in (REFUSED, UNANSWERED) and stream["start"] > restart_at - 1, (
                restart_at, record["streams"])
    spanning = [s for s in whole if s["start"] < restart_at < s["last_token"]]
    print("DRAIN straight to vLLM: %d whole streams of %s tokens, %d of them streaming at the SIGTERM (last token %.1f s "
          "after it), %d refused after it" % (
              len(whole), per_stream(whole, "max_tokens"), len(spanning),
              max((s["last_token"] for s in spanning), default=restart_at) - restart_at,
              len(record["streams"]) - len(whole)))
    assert spanning, (restart_at, record["streams"])


def sigterm_time(lines):
    """When systemd began stopping vLLM: its "Stopping" line (the API server logs the signal only later)."""
    stops = [j for j in lines if j.get("MESSAGE", "").startswith("Stopping vllm.service")]
    assert stops, [j.get("MESSAGE") for j in lines][-20:]
    return int(stops[0]["__REALTIME_TIMESTAMP"]) / 1e6


def test_systemds_default_killmode_cuts_the_streams_in_flight(generated_key):
    """The check the drain tests make fails under systemd's default KillMode (control-group: SIGTERM to every
    process at once): vLLM's worker exits with the API server, and the streams in flight end early with an error.
    The unit's KillMode=mixed (only the API server gets SIGTERM; it drains, then stops its children) is what the
    next tests prove. A drop-in sets the default for one restart; it is gone before the next test's deploy.
    The streams are relayed straight to vLLM (as in the drain tests), and the restart comes when the client has its
    first token (not after a guessed sleep: one pair of streams begun 3 s before it got 1818 of 1900 tokens on a quiet
    machine), so streams are in flight at the restart however fast the tiny model streams. A stream counts as cut by
    what it received (stream_record.killmode_verdict): a server that closes the response cleanly sends no error."""
    first = node(FIRST)
    dropin = "/etc/systemd/system/vllm.service.d/killmode-default.conf"
    first.check_output("mkdir -p %s && printf '[Service]\\nKillMode=control-group\\n' > %s && systemctl daemon-reload"
                       % (os.path.dirname(dropin), dropin))
    wall0 = time.time()
    try:
        assert first.check_output("systemctl show -p KillMode --value vllm") == "control-group"
        client = direct_drain_client(generated_key, CLIENT_LIMIT)
        waited = wait_for_line(client, "FIRST TOKEN", 300)
        first.check_output("systemctl restart vllm")
    finally:
        first.check_output("rm -f %s && systemctl daemon-reload" % dropin)
    record, = records([client])
    restart_at = sigterm_time(journal_since(first, wall0))
    streams = record["streams"]
    cut, drained = killmode_verdict(streams, restart_at)
    print("MEASURED first token %.1f s after the client began; restart then" % waited)
    print("DRAIN KillMode=control-group (systemd's default): tokens %s of %s, %d cut at the SIGTERM, %d whole more "
          "than 1 s after it; errors %s" % (
              per_stream(streams, "tokens"), per_stream(streams, "max_tokens"), len(cut),
              len(drained), [s["error"] for s in streams if s["error"]]))
    assert cut and not drained, (restart_at, streams)
    assert first.check_output("systemctl show -p KillMode --value vllm") == "mixed"
    back = answered_after(record["polls"], [p for p in record["polls"] if p.get("refused")])  # after its port closed
    print("MEASURED vLLM answered again %s after the SIGTERM; healthy %.0f s after the client ended" % (
        "%.1f s" % (back[0]["t"] - restart_at) if back else "not yet", wait_healthy(first, FIRST)))


def test_a_good_change_restarts_with_the_streams_in_flight_finished(generated_key):
    """A change that comes up: the restart drains two streams through the first node's front (both get every token),
    new requests get 503 with Retry-After meanwhile, then 200 from the new vLLM."""
    first = node(FIRST)
    url = "https://%s:8000" % node_address(first)
    clients = []
    t0, wall0 = time.monotonic(), time.time()
    rc, out = play("--limit", _inv(FIRST), *GOOD_CHANGE, trigger=STREAMS_AT,
                   on_trigger=lambda: clients.extend((drain_client(node(SECOND), url, generated_key, CA, CLIENT_LIMIT),
                                                      direct_drain_client(generated_key, CLIENT_LIMIT))))
    print("MEASURED good change run: %.0f s, rc %d" % (time.monotonic() - t0, rc))
    assert rc == 0, out[-4000:]
    assert "--max-num-seqs 64" in first.check_output("tr '\\0' ' ' < /proc/%d/cmdline" % main_pid(first))
    assert clients, "the run never reached %s: %s" % (STREAMS_AT, out[-2000:])
    record, direct = records(clients)
    restart_at = sigterm_time(journal_since(first, wall0))
    refused, first_ok_after = drain_report("good change", record, wall0, restart_at)
    old = drained_streams(record, restart_at)
    spanned_sigterm(direct, restart_at)
    assert refused and all(p.get("retry_after") == "30" for p in refused), record["polls"]
    assert refused[0]["t"] < max(s["last_token"] for s in old)  # refused while the old ones streamed
    assert first_ok_after, record["polls"]


def test_bad_change_rolls_back_first_node_and_stops_before_second_and_drains_through_the_front(generated_key):
    """A bad change rolled out one node at a time: the first node's vLLM restarts with it, fails, and is rolled back;
    the second node is never touched. Meanwhile two long streams run through the first node's front from the second
    node: they end with all their tokens (the restart drains them), new requests get 503 with Retry-After while vLLM
    restarts and rolls back, then 200 once the previous vLLM is healthy (the rollback path clears the drain)."""
    before = {n: state(node(n)) for n in NODES}
    first, second = node(FIRST), node(SECOND)
    url = "https://%s:8000" % node_address(first)
    clients = []
    # A max_model_len beyond the model's positions (2048): vLLM refuses to start.
    t0, wall0 = time.monotonic(), time.time()
    rc, out = play("-e", "moeops_serial=1", "-e", "vllm_service_max_model_len=1048576", *GOOD_CHANGE,
                   trigger=STREAMS_AT,
                   on_trigger=lambda: clients.extend((drain_client(second, url, generated_key, CA, CLIENT_LIMIT),
                                                      direct_drain_client(generated_key, CLIENT_LIMIT))))
    print("MEASURED rollback run: %.0f s, rc %d" % (time.monotonic() - t0, rc))
    assert rc != 0
    assert "Rolled back: the previous unit and environment file are restored" in out, out[-4000:]
    assert "greater than the derived max_model_len" in out  # vLLM's own refusal, from the journal tail
    # The first node serves as before: same unit and environment, a restarted old server, healthy.
    after = state(first)
    assert (after["unit"], after["env"]) == (before[FIRST]["unit"], before[FIRST]["env"])
    assert after["pid"] != before[FIRST]["pid"] and health(first, FIRST) == "200"
    assert "--max-model-len 2048" in first.check_output("tr '\\0' ' ' < /proc/%d/cmdline" % after["pid"])
    assert first.file(KEY_FILE).content_string.strip() == generated_key  # kept across runs
    # serial 1: the first node's failure stopped the play; the second was never touched.
    assert state(second) == before[SECOND]
    assert _inv(SECOND) not in recap(out) or recap(out)[_inv(SECOND)]["ok"] == 0, out[-2000:]
    assert "TASK [moeops.inference.gpu_facts : Read the GPUs]" in out and not re.search(r"^ok: \[%s\]" % re.escape(_inv(SECOND)), out, re.M)

    # The drain, through the front.
    assert clients, "the run never reached %s: %s" % (STREAMS_AT, out[-2000:])
    record, direct = records(clients)
    restart_at = sigterm_time(journal_since(first, wall0))
    refused, first_ok_after = drain_report("bad change, rolled back", record, wall0, restart_at)
    old = drained_streams(record, restart_at)
    spanned_sigterm(direct, restart_at)
    assert refused and all(p.get("retry_after") == "30" for p in refused), record["polls"]
    assert refused[0]["t"] < max(s["last_token"] for s in old)
    assert first_ok_after, record["polls"]  # the rollback cleared the drain


def test_a_failing_canary_rolls_back_like_a_failed_health_wait(tmp_path):
    """A TEST CASE, not a fault of the engine: the tiny model's profile with a canary expectation it cannot meet
    (everything else the same), deployed with a change that starts fine. vLLM starts and /health says 200, the canary
    fails on the answer, and the first node is rolled back to its previous unit and serving again; serial 1 leaves
    the second node untouched. The message shows the answer the model gave."""
    import yaml  # the controller's PyYAML (ansible-core's own dependency)

    with open(os.path.join(ROOT, "tests", "fixtures", "model", "tiny_deepseek_v3.yml")) as f:
        profile = yaml.safe_load(f)
    profile["canary"] = dict(profile["canary"], expect="^this is not what the model says$")
    wrong = tmp_path / "tiny_deepseek_v3_wrong_canary.yml"
    wrong.write_text(yaml.safe_dump(profile))
    before = {n: state(node(n)) for n in NODES}
    t0 = time.monotonic()
    # A change of its own (the unit must change for a deploy to restart and be rolled back).
    change = ("-e", json.dumps({"vllm_service_extra_args": ["--max-num-seqs", "48"]}))
    rc, out = play("-e", "moeops_serial=1", "-e", "vllm_service_profile=%s" % wrong, *change)
    print("MEASURED failing canary run: %.0f s, rc %d" % (time.monotonic() - t0, rc))
    assert rc != 0
    assert "Rolled back: the previous unit and environment file are restored" in out, out[-4000:]
    assert "canary" in out and "380swerthe" in out, out[-4000:]  # the model's real answer, shown
    first = node(FIRST)
    after = state(first)
    assert (after["unit"], after["env"]) == (before[FIRST]["unit"], before[FIRST]["env"])
    assert health(first, FIRST) == "200"
    assert state(node(SECOND)) == before[SECOND]


def test_no_secret_in_any_captured_output(generated_key):
    assert OUTPUTS
    for out in OUTPUTS:
        for secret in (HF_TOKEN, GIVEN_KEY, generated_key):
            assert secret not in out
    if LOG_DIR:
        with open(os.path.join(LOG_DIR, "secrets"), "w") as f:
            f.write("\n".join([HF_TOKEN, GIVEN_KEY, generated_key]) + "\n")
