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


@pytest.mark.parametrize("desired, deployed, words", [
    ({}, DEPLOYED, "vllm_service_desired"),
    ({"unit_text": UNIT}, {}, "vllm_service_info"),
    ({"unit_text": "[Service]\nExecStart='x\n"}, DEPLOYED, "does not parse"),
])
def test_bad_input(desired, deployed, words):
    with pytest.raises(AnsibleFilterError, match=words):
        settings_report(desired, deployed)
