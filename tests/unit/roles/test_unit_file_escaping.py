# -*- coding: utf-8 -*-
"""What the units carry through systemd unchanged: `%` (specifiers) and `$` (Exec lines) are escaped where the
templates write a value, and a line break is refused. The vllm unit is rendered with Ansible's own templating
from the role's plan (its check's role_plan step), then checked by `systemd-analyze verify` where it is installed."""
from __future__ import annotations

import os
import shutil
import subprocess

import pytest
import role_templating

from ansible.errors import AnsibleError
from ansible_collections.moeops.inference.plugins.module_utils._facts import gpu_topology as topo
from ansible_collections.moeops.inference.plugins.module_utils._common import systemd_unit
from conftest import load_json, role_result

TEMPLATE = os.path.join(role_templating.ROLES, "vllm_service", "templates", "vllm.service.j2")
PROFILE = {"name": "tiny", "source": "example-org/tiny", "served_name": "tiny 100%", "max_model_len": 4096,
           "gpu_memory_utilization": 0.9, "weights_size_gb": 1, "quantization": "bf16", "min_gpu_memory_gb": 1,
           "hidden_size": 1024, "num_attention_heads": 16}


def unit(tmp_path, environment=None, extra_args=None, nccl_overrides=None):
    venv = str(tmp_path / "venv")
    gpus = topo.from_snapshot(load_json("constructed", "rtxpro6000-x8-2numa.json"), "rtxpro6000-x8-2numa")
    result = role_result("vllm_service", {"gpus": gpus, "profile": PROFILE}, vllm_venv=venv,
                         vllm_service_environment=environment or {}, vllm_service_extra_args=extra_args or [],
                         vllm_service_nccl_overrides=nccl_overrides or {})
    if result["problems"]:
        raise ValueError("; ".join(result["problems"]))
    variables = role_templating.role_vars("vllm_service")
    variables.update(ansible_managed="Ansible managed", _vllm_service=result, vllm_venv=venv,
                     vllm_service_environment=environment or {}, ansible_facts={"nvidia_gpu": gpus})
    with open(TEMPLATE) as f:
        return role_templating.render(f.read(), variables)


def test_percent_and_dollar_reach_the_service_unchanged(tmp_path):
    text = unit(tmp_path, environment={"NCCL_DEBUG_FILE": "/var/log/nccl.%h.%p.log"},
                extra_args=["--default-chat-template-kwargs", '{"x": "$HOME"}'],
                nccl_overrides={"NCCL_DEBUG_SUBSYS": "INIT%COLL"})
    lines = text.splitlines()
    assert "Environment=NCCL_DEBUG_FILE=/var/log/nccl.%%h.%%p.log" in lines
    assert "Environment=NCCL_DEBUG_SUBSYS=INIT%%COLL" in lines
    assert "Description=vLLM OpenAI-compatible server (tiny 100%%)" in lines
    assert any(line.strip().startswith('--default-chat-template-kwargs "{\\"x\\": \\"$$HOME\\"}"') for line in lines), text
    # Nothing else in the unit holds a lone % or $ outside comments.
    body = [line for line in lines if not line.startswith("#")]
    assert not [line for line in body if "%" in line.replace("%%", "")], body
    assert not [line for line in body if "$" in line.replace("$$", "")], body


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed")
def test_systemd_verifies_the_escaped_unit_without_a_word(tmp_path):
    """Warnings are errors: systemd-analyze prints nothing about the unit. A backslash in shell quotes was
    "Invalid syntax, ignoring" (the whole Environment= assignment dropped); in systemd's quoting it is kept.
    (tests/integration/60-bad-inputs.sh loads such units into a node's systemd and reads back every value.)"""
    (tmp_path / "venv" / "bin").mkdir(parents=True)
    vllm = tmp_path / "venv" / "bin" / "vllm"
    vllm.write_text("#!/bin/sh\n")
    vllm.chmod(0o755)
    path = tmp_path / "vllm.service"
    path.write_text(unit(tmp_path, environment={"NCCL_DEBUG_FILE": "/var/log/nccl.%h.%p.log",
                                                "WINDOWS_PATH": "C:\\models\\new", "QUOTED": "it's \"quoted\""},
                         extra_args=["--default-chat-template-kwargs", '{"x": "$HOME", "stop": ["\\n"]}']))
    done = subprocess.run(["systemd-analyze", "verify", str(path)], capture_output=True, text=True, check=False)
    said = [line for line in (done.stdout + done.stderr).splitlines() if "vllm.service" in line]
    assert said == [], done.stderr


def test_quote_writes_systemds_quoting():
    assert systemd_unit.quote("NCCL_PROTO=LL") == "NCCL_PROTO=LL"
    assert systemd_unit.quote("A=C:\\m\\n") == '"A=C:\\\\m\\\\n"'
    assert systemd_unit.quote('Q=it\'s "x"') == '"Q=it\'s \\"x\\""'
    assert systemd_unit.quote("F=%h $HOME", exec_arg=True) == '"F=%%h $$HOME"'
    assert systemd_unit.quote("") == '""'


def test_the_unescaped_control_would_be_expanded(tmp_path):
    """The check above can fail: the same value written raw is a specifier systemd resolves."""
    assert systemd_unit.escape("/var/log/nccl.%h.log") != "/var/log/nccl.%h.log"
    assert systemd_unit.escape("a$b", exec_arg=True) == "a$$b" and systemd_unit.escape("a$b") == "a$b"


def test_a_line_break_is_refused_not_written(tmp_path):
    with pytest.raises((AnsibleError, ValueError), match="no value may span lines"):
        unit(tmp_path, environment={"NCCL_PROTO": "LL\nExecStartPre=/bin/id"})
