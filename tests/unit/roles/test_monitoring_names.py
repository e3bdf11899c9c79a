# -*- coding: utf-8 -*-
"""Every metric name of the monitoring role's alert rules and Grafana dashboard is one the engines really expose, so that
an upgrade that renames a metric fails here and not on a dashboard that silently goes blank:

- vLLM's names come from the REAL /metrics the collection's engine served on the simulated node
  (tests/fixtures/vllm/metrics-<version>.txt; counters carry _total, histograms _bucket/_sum/_count);
- DCGM's from the field list of the pinned DCGM and dcgm-exporter (tests/fixtures/dcgm/fields-<dcgm>-<exporter>.txt,
  chosen by the role's monitoring_dcgm_version and monitoring_dcgm_exporter_version: a new pin needs a new list), and
  each must be collected by the role's counters file;
- node_exporter's from its REAL /metrics on the simulated node (tests/fixtures/node_exporter/metrics-<version>.txt);
- the collection's own moeops_* from its textfile writer (roles/monitoring/files/moeops_textfile.py);
- `up`, Prometheus's own.
The counters file is also read by the exporter's own rules (3 fields, known type, no double quote)."""
from __future__ import annotations

import copy
import csv
import glob
import importlib.util
import io
import json
import os
import re

import pytest
import yaml

import role_templating

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
ROLE = os.path.join(ROOT, "roles", "monitoring")
FIXTURES = os.path.join(ROOT, "tests", "fixtures")
# The vLLM version whose real /metrics the names are checked against: the engine the simulated node runs.
VLLM_METRICS = os.path.join(FIXTURES, "vllm", "metrics-0.32.0.txt")
NODE_EXPORTER_METRICS = os.path.join(FIXTURES, "node_exporter", "metrics-1.5.0.txt")
PROMETHEUS_OWN = {"up"}
PROMQL_WORDS = {"and", "or", "unless", "by", "without", "on", "ignoring", "group_left", "group_right", "bool",
                "offset", "inf", "nan"}
IDENT = re.compile(r"(?<![\w.:$])([A-Za-z_:][A-Za-z0-9_:]*)")
SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(\{|\s)")
TYPE_LINE = re.compile(r"^# TYPE ([A-Za-z_:][A-Za-z0-9_:]*) (\w+)")


def _load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


TEXTFILE = _load("moeops_textfile_names", os.path.join(ROLE, "files", "moeops_textfile.py"))


def exposition_names(path):
    """Every series name a /metrics text offers: its samples, and the sample names its TYPE lines promise (a histogram
    without samples still has _bucket, _sum and _count)."""
    names = set()
    with open(path) as f:
        for line in f:
            match = SAMPLE.match(line)
            if match and not line.startswith("#"):
                names.add(match.group(1))
            typed = TYPE_LINE.match(line)
            if typed:
                name, kind = typed.groups()
                names |= {name + s for s in ("_bucket", "_sum", "_count")} if kind in ("histogram", "summary") else set()
                names |= {name + "_total"} if kind == "counter" and not name.endswith("_total") else {name}
    return names


def promql_names(expr):
    """The metric names a PromQL (or Grafana) expression selects: label matchers, strings, ranges, grouping
    clauses, Grafana variables and numbers taken out, functions and keywords left aside."""
    text = re.sub(r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'', '""', expr)
    text = re.sub(r"\{[^}]*\}", "", text)
    text = re.sub(r"\[[^\]]*\]", "", text)
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)
    text = re.sub(r"\$\{?\w+\}?", " ", text)
    names = set()
    for match in IDENT.finditer(text):
        word = match.group(1)
        if word.lower() in PROMQL_WORDS or re.match(r"\s*\(", text[match.end():]):
            continue
        names.add(word)
    return names


def role_variables(**overrides):
    return role_templating.role_vars("monitoring", ansible_managed="Ansible managed", inventory_hostname="box1",
                                     **overrides)


def rendered(template, variables):
    with open(os.path.join(ROLE, "templates", template)) as f:
        return role_templating.render(f.read(), variables)


def rule_exprs(variables=None):
    rules = yaml.safe_load(rendered("alerts.yml.j2", variables or role_variables()))
    return {r["alert"]: r["expr"] for group in rules["groups"] for r in group["rules"]}


def dashboard_exprs(dashboard):
    exprs = {}
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            exprs["%s/%s" % (panel["title"], target["refId"])] = target["expr"]
    for var in dashboard["templating"]["list"]:
        query = var.get("query")
        query = query.get("query") if isinstance(query, dict) else query
        if var.get("type") == "query":
            match = re.match(r"^label_values\((.*),\s*\w+\)$", query)
            exprs["$" + var["name"]] = match.group(1) if match else query
    return exprs


def load_dashboard():
    with open(os.path.join(ROLE, "files", "moeops-dashboard.json")) as f:
        return json.load(f)


def dcgm_fields_file(variables):
    dcgm = re.sub(r"^[0-9]+:", "", variables["monitoring_dcgm_version"]).rsplit("-", 1)[0]
    exporter = variables["monitoring_dcgm_exporter_version"].rsplit("-", 1)[0]
    return os.path.join(FIXTURES, "dcgm", "fields-%s-%s.txt" % (dcgm, exporter))


def dcgm_field_list(variables):
    with open(dcgm_fields_file(variables)) as f:
        return {line.strip() for line in f if line.strip() and not line.startswith("#")}


def counters(variables):
    """The role's counters file read as dcgm-exporter 4.8.2 reads it (internal/pkg/counters/counter_config.go):
    comment '#', records of exactly 3 fields trimmed of spaces, Go's strict quoting, a known Prometheus type."""
    text = rendered("dcgm-counters.csv.j2", variables)
    body = "\n".join(line for line in text.splitlines() if not line.startswith("#"))
    assert '"' not in body, "a double quote breaks Go's strict CSV reader"
    records = []
    for record in csv.reader(io.StringIO(body), strict=True):
        if not record:
            continue
        record = [field.strip(" ") for field in record]
        assert len(record) == 3, record
        assert record[1] in ("gauge", "counter", "histogram", "summary", "label"), record
        records.append(record)
    return records


def known_names(variables):
    enabled = {r[0] for r in counters(variables) if r[1] != "label"}
    return (exposition_names(VLLM_METRICS) | exposition_names(NODE_EXPORTER_METRICS) | enabled
            | set(TEXTFILE.METRICS) | PROMETHEUS_OWN)


def unknown(exprs, known):
    return {where: sorted(promql_names(expr) - known) for where, expr in exprs.items() if promql_names(expr) - known}


def test_the_extractor_finds_metric_names_and_nothing_else():
    expr = ('histogram_quantile(0.99, sum by (node, le) (rate(vllm:time_to_first_token_seconds_bucket{node=~"$node", '
            'le!="1e9"}[$__rate_interval]))) > 10 and on (node) (increase(DCGM_FI_DEV_PCIE_REPLAY_COUNTER[10m] offset 5m)'
            ' / 1e9) unless up{job=~"moeops_node|x"} == bool 0')
    assert promql_names(expr) == {"vllm:time_to_first_token_seconds_bucket", "DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "up"}


def test_the_known_names_come_from_the_real_outputs():
    vllm = exposition_names(VLLM_METRICS)
    # Counters carry _total in the exposition, histograms their suffixes; the bare family name is no series.
    assert {"vllm:generation_tokens_total", "vllm:num_preemptions_total", "vllm:time_to_first_token_seconds_bucket",
            "vllm:kv_cache_usage_perc", "vllm:num_requests_running"} <= vllm
    assert "vllm:generation_tokens" not in vllm and "vllm:num_preemptions" not in vllm
    # vLLM's deprecated names are gone from the engine the collection runs (renamed metrics vanish after two minor
    # versions): the rules must not use them.
    assert "vllm:gpu_cache_usage_perc" not in vllm and "vllm:time_per_output_token_seconds_bucket" not in vllm
    assert {"node_load1", "node_textfile_scrape_error", "node_systemd_unit_state"} <= exposition_names(NODE_EXPORTER_METRICS)


def test_no_rule_or_dashboard_uses_an_unknown_metric_name():
    variables = role_variables()
    known = known_names(variables)
    exprs = dict(rule_exprs(variables), **dashboard_exprs(load_dashboard()))
    assert len(exprs) > 40
    assert unknown(exprs, known) == {}


def test_a_renamed_metric_fails_the_check():
    """What an upgrade does: vLLM's counter without _total, a DCGM field as exporter 4.9 names it, a moeops_ name
    the writer does not write. Each is caught where it is used."""
    known = known_names(role_variables())
    dashboard = copy.deepcopy(load_dashboard())
    text = json.dumps(dashboard).replace("vllm:num_preemptions_total", "vllm:num_preemptions") \
        .replace("DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_GPU_TEMP_CELSIUS").replace("moeops_p2p_gate_passed", "moeops_p2p_passed")
    found = unknown(dashboard_exprs(json.loads(text)), known)
    assert sorted(name for names in found.values() for name in names) == [
        "DCGM_FI_DEV_GPU_TEMP_CELSIUS", "moeops_p2p_passed", "vllm:num_preemptions"], found
    rules = {k: v.replace("vllm:generation_tokens_total", "vllm:generation_tokens") for k, v in rule_exprs().items()}
    assert unknown(rules, known) == {"VllmEngineStall": ["vllm:generation_tokens"]}


def test_every_alert_of_the_rules_is_unit_tested_by_promtool():
    with open(os.path.join(ROOT, "tests", "integration", "monitoring", "alerts.test.yml")) as f:
        tests = yaml.safe_load(f)["tests"]
    tested = {t["alertname"] for test in tests for t in test["alert_rule_test"] if t.get("exp_alerts")}
    assert tested == set(rule_exprs())


def test_the_thresholds_reach_the_rules():
    exprs = rule_exprs(role_variables(monitoring_alert_waiting_requests=33, monitoring_alert_kv_cache_usage=0.9,
                                      monitoring_alert_engine_stall_window="90s"))
    assert exprs["VllmRequestsWaiting"].endswith("> 33")
    assert exprs["VllmKvCacheFull"].endswith("> 0.9")
    assert "increase(vllm:generation_tokens_total[90s])" in exprs["VllmEngineStall"]


def test_the_counters_are_fields_of_the_pinned_dcgm_and_collected():
    variables = role_variables()
    assert os.path.exists(dcgm_fields_file(variables)), (
        "no field list for DCGM %s / dcgm-exporter %s: record tests/fixtures/dcgm/fields-<dcgm>-<exporter>.txt from that "
        "release (docs/monitoring.md)" % (variables["monitoring_dcgm_version"], variables["monitoring_dcgm_exporter_version"]))
    fields = dcgm_field_list(variables)
    records = counters(variables)
    assert [r[0] for r in records if r[0] not in fields] == []
    assert len({r[0] for r in records}) == len(records), "a field twice"
    # What the alerts need is collected.
    assert {"DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "DCGM_EXP_XID_ERRORS_COUNT"} <= {r[0] for r in records}
    # Every DCGM name the rules and the dashboard use is collected by this file (else it never reaches Prometheus).
    used = set()
    for expr in list(rule_exprs(variables).values()) + list(dashboard_exprs(load_dashboard()).values()):
        used |= {n for n in promql_names(expr) if n.startswith("DCGM_")}
    assert used - {r[0] for r in records if r[1] != "label"} == set()


def test_a_moved_pin_without_its_field_list_fails():
    variables = role_variables(monitoring_dcgm_version="1:4.8.0-1", monitoring_dcgm_exporter_version="4.10.0-1")
    assert not os.path.exists(dcgm_fields_file(variables))
    assert glob.glob(os.path.join(FIXTURES, "dcgm", "fields-*.txt")) == [dcgm_fields_file(role_variables())]


@pytest.mark.parametrize("breaks, message", [
    ("DCGM_FI_DEV_SM_CLOCK, gauge, SM clock, in MHz.", "3 fields"),
    ('DCGM_FI_DEV_SM_CLOCK, gauge, the "SM" clock.', "double quote"),
    ("DCGM_FI_DEV_SM_CLOCK, gauges, SM clock.", "type"),
])
def test_the_counters_reader_refuses_what_the_exporter_refuses(monkeypatch, breaks, message):
    real = rendered("dcgm-counters.csv.j2", role_variables())
    broken = real.replace("DCGM_FI_DEV_SM_CLOCK,  gauge, SM clock frequency (in MHz).", breaks)
    assert broken != real
    monkeypatch.setattr(__import__(__name__), "rendered", lambda template, variables: broken)
    with pytest.raises((AssertionError, csv.Error)):
        counters(role_variables())
