# -*- coding: utf-8 -*-
# Copyright: (c) 2026, moeops.inference contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""This collection's own facts as Prometheus metrics, for node_exporter's textfile collector.

    moeops-textfile FACTS_JSON PROM_FILE

FACTS_JSON is what the monitoring role read on its last run (roles/monitoring/tasks/textfile.yml): the vLLM unit
as moeops.inference.vllm_service_info reads it (its NCCL environment and where each variable comes from, the
engine and its version, the P2P gate's record), the settings report's drift and the canary's last answer where
the play had one. PROM_FILE is replaced atomically: the text goes to a hidden file in the same directory whose
name does not end in .prom (the collector reads only *.prom), is flushed to disk, and is renamed over it, so a
scrape never sees half a file.

Standard library only: it runs with the node's /usr/bin/python3 (Python 3.8 or newer) from a sandboxed oneshot
unit (moeops-textfile.service).
"""
import calendar
import json
import os
import sys
import time

# Every metric this writes: name -> (type, help). tests/unit/roles/test_monitoring_names.py takes the known
# moeops_* names from here.
METRICS = {
    "moeops_vllm_deployed": (
        "gauge", "1 when the vLLM unit file exists (moeops.inference.vllm_service_info), else 0."),
    "moeops_vllm_info": (
        "gauge", "The engine the vLLM unit runs, as labels (engine cuda, or cpu: vLLM's CPU build for simulation; "
                 "version; package and package_version, the distribution installed); always 1."),
    "moeops_nccl_env_info": (
        "gauge", "One NCCL variable of the vLLM unit's effective environment, as labels (variable, value; source and "
                 "rule: the NCCL policy rule, profile key or inventory variable that sets it; file: the unit file or "
                 "drop-in it is written in); always 1."),
    "moeops_p2p_gate_recorded": (
        "gauge", "1 when the P2P gate's record (/var/lib/moeops/p2p-gate.json) was read, else 0."),
    "moeops_p2p_gate_passed": (
        "gauge", "1 when the last recorded P2P gate passed, 0 when it failed."),
    "moeops_p2p_gate_duration_seconds": (
        "gauge", "How long the last recorded P2P gate ran."),
    "moeops_p2p_gate_timestamp_seconds": (
        "gauge", "When the last recorded P2P gate ran (Unix time)."),
    "moeops_settings_drift_checked": (
        "gauge", "1 when the settings report was made on the monitoring role's last run (monitoring_drift), else 0."),
    "moeops_settings_drift": (
        "gauge", "1 when the deployed vLLM unit differs from what the deploy would install now (settings report), "
                 "else 0."),
    "moeops_settings_differs": (
        "gauge", "One setting that differs from what the deploy would install (labels category, name); always 1."),
    "moeops_canary_recorded": (
        "gauge", "1 when the play that ran the monitoring role had the vllm_service role's canary answer, else 0."),
    "moeops_canary_passed": (
        "gauge", "1 when that canary answer passed, 0 when it failed."),
    "moeops_canary_duration_seconds": (
        "gauge", "Seconds the canary took, from the request to the whole answer."),
}


def escape(value):
    """A label value as the text exposition format writes it: backslash, double quote and newline escaped."""
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value):
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    return repr(float(value))


def _sample(name, labels, value):
    if labels:
        inner = ",".join('%s="%s"' % (key, escape(labels[key])) for key in sorted(labels))
        return "%s{%s} %s" % (name, inner, _number(value))
    return "%s %s" % (name, _number(value))


def unix_seconds(text):
    """The P2P gate's "at" (%Y-%m-%dT%H:%M:%SZ, UTC) as Unix seconds; None when it is not that."""
    try:
        return calendar.timegm(time.strptime(str(text), "%Y-%m-%dT%H:%M:%SZ"))
    except ValueError:
        return None


def samples(facts):
    """{metric name: [(labels, value)]} from the facts the role wrote; a metric without samples is left out."""
    out = dict((name, []) for name in METRICS)
    unit = facts.get("unit") or ""
    out["moeops_vllm_deployed"].append(({"unit": unit}, bool(facts.get("deployed"))))
    vllm = facts.get("vllm") or {}
    if facts.get("deployed") or vllm.get("version"):
        out["moeops_vllm_info"].append(({
            "unit": unit, "engine": vllm.get("engine") or "", "version": vllm.get("version") or "",
            "package": vllm.get("package") or "", "package_version": vllm.get("package_version") or ""}, 1))
    for env in facts.get("nccl") or []:
        out["moeops_nccl_env_info"].append(({
            "unit": unit, "variable": env.get("variable", ""), "value": env.get("value", ""),
            "source": env.get("source", ""), "rule": env.get("rule", ""), "file": env.get("file", "")}, 1))
    gate = facts.get("p2p_gate")
    out["moeops_p2p_gate_recorded"].append(({}, bool(gate)))
    if gate:
        labels = {"backend": gate.get("backend") or "", "world_size": gate.get("world_size", "")}
        out["moeops_p2p_gate_passed"].append((labels, bool(gate.get("passed"))))
        if isinstance(gate.get("seconds"), (int, float)) and not isinstance(gate.get("seconds"), bool):
            out["moeops_p2p_gate_duration_seconds"].append((labels, gate["seconds"]))
        at = unix_seconds(gate.get("at"))
        if at is not None:
            out["moeops_p2p_gate_timestamp_seconds"].append((labels, at))
    drift = facts.get("drift") or {}
    out["moeops_settings_drift_checked"].append(({}, bool(drift.get("checked"))))
    if drift.get("checked"):
        out["moeops_settings_drift"].append(({}, bool(drift.get("drift"))))
        for row in drift.get("rows") or []:
            out["moeops_settings_differs"].append(({"category": row.get("category", ""), "name": row.get("name", "")}, 1))
    canary = facts.get("canary") or {}
    out["moeops_canary_recorded"].append(({}, bool(canary.get("recorded"))))
    if canary.get("recorded"):
        out["moeops_canary_passed"].append(({}, bool(canary.get("passed"))))
        if isinstance(canary.get("elapsed_s"), (int, float)) and not isinstance(canary.get("elapsed_s"), bool):
            out["moeops_canary_duration_seconds"].append(({}, canary["elapsed_s"]))
    return dict((name, rows) for name, rows in out.items() if rows)


def render(facts):
    """The exposition text: HELP and TYPE, then the samples, for every metric that has one."""
    lines = []
    for name, rows in sorted(samples(facts).items()):
        kind, text = METRICS[name]
        lines += ["# HELP %s %s" % (name, text.replace("\\", "\\\\").replace("\n", "\\n")), "# TYPE %s %s" % (name, kind)]
        seen = set()
        for labels, value in rows:
            key = tuple(sorted(labels.items()))
            if key in seen:  # one series once: node_exporter rejects the whole file otherwise
                continue
            seen.add(key)
            lines.append(_sample(name, labels, value))
    return "\n".join(lines) + "\n"


def write_atomically(path, text):
    """Replace `path` with `text`: a hidden temporary file beside it (not *.prom), flushed, 0644, renamed."""
    directory, base = os.path.split(os.path.abspath(path))
    tmp = os.path.join(directory, ".%s.%d.tmp" % (base, os.getpid()))
    try:
        with open(tmp, "w") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o644)
        os.rename(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def main(argv):
    if len(argv) != 2:
        sys.stderr.write("usage: moeops-textfile FACTS_JSON PROM_FILE\n")
        return 2
    with open(argv[0]) as handle:
        facts = json.load(handle)
    text = render(facts)
    write_atomically(argv[1], text)
    sys.stdout.write("wrote %s: %d metric(s)\n" % (argv[1], len(samples(facts))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
