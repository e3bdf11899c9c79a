# -*- coding: utf-8 -*-
"""The settings_report filter: a thin shell over vllm_settings.build_report."""
from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.moeops.inference.plugins.filter.settings_report import settings_report

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
    assert sum(1 for line in pcie if line.startswith("PCIe     WARNING acs: bridge 0000:")) == 8
    assert "remedy: boot with iommu=pt" in pcie[0]
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


@pytest.mark.parametrize("desired, deployed, words", [
    ({}, DEPLOYED, "vllm_service_desired"),
    ({"unit_text": UNIT}, {}, "vllm_service_info"),
    ({"unit_text": "[Service]\nExecStart='x\n"}, DEPLOYED, "does not parse"),
])
def test_bad_input(desired, deployed, words):
    with pytest.raises(AnsibleFilterError, match=words):
        settings_report(desired, deployed)
