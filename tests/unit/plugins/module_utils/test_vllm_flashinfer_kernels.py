# -*- coding: utf-8 -*-
"""The vllm role's FlashInfer kernels (vllm_flashinfer_kernels; plugins/module_utils/_roles/vllm.py): what it installs,
from where and with what, and when it installs nothing.  The install itself cannot run here or in CI (FlashInfer's
index is not reachable), so the plan and its command line are what is tested."""
from __future__ import annotations

import os

import yaml

from conftest import REPO, role_result

# {venv}: the engine's venv, known once its lock is resolved (tasks/install.yml replaces it).
UV_PIP = ["/opt/vllm/uv/bin/uv", "pip", "install", "--python", "{venv}/bin/python", "--no-deps"]


def test_the_cuda_build_gets_flashinfers_kernels_from_flashinfers_index():
    result = role_result("vllm", {})
    assert result["problems"] == []
    fi = result["plan"]["flashinfer"]
    assert fi["install"] is True
    # FlashInfer's index alone, from the environment (as --index-url would be, but out of argv).
    assert fi["install_argv"] == UV_PIP and fi["env"]["UV_DEFAULT_INDEX"] == "https://flashinfer.ai/whl"
    # The requirement is flashinfer-cubin at the installed flashinfer-python's public version (tasks/install.yml).
    assert (fi["python"], fi["cubin"]) == ("flashinfer-python", "flashinfer-cubin")
    assert result["outcome"].endswith("; FlashInfer's kernels (flashinfer-cubin) from https://flashinfer.ai/whl")
    # With the role's uv environment: its cache, its CA bundle, no downloaded Python.
    assert result["plan"]["uv_env"]["UV_PYTHON_DOWNLOADS"] == "never"


def test_a_mirror_and_a_ca_bundle_are_used():
    result = role_result("vllm", {}, vllm_flashinfer_index_url="https://pypi.lab.example/flashinfer/",
                         vllm_ca_bundle="/etc/ssl/certs/lab.pem")
    assert result["plan"]["flashinfer"]["env"]["UV_DEFAULT_INDEX"] == "https://pypi.lab.example/flashinfer/"
    assert result["plan"]["uv_env"]["SSL_CERT_FILE"] == "/etc/ssl/certs/lab.pem"
    assert result["plan"]["flashinfer"]["env"]["SSL_CERT_FILE"] == "/etc/ssl/certs/lab.pem"


def test_off_or_the_cpu_build_installs_no_kernels_and_says_why():
    off = role_result("vllm", {}, vllm_flashinfer_kernels=False)
    assert off["plan"]["flashinfer"]["install"] is False and off["plan"]["flashinfer"]["install_argv"] == []
    assert "no FlashInfer kernels (vllm_flashinfer_kernels is false" in off["outcome"]
    cpu = role_result("vllm", {}, vllm_engine="cpu", vllm_version="0.32.0")
    assert cpu["problems"] == [] and cpu["plan"]["flashinfer"]["install"] is False
    assert "vllm_engine cpu: its build has no FlashInfer (vllm_flashinfer_kernels is ignored)" in cpu["outcome"]


def test_an_empty_index_is_refused_only_where_it_would_be_used():
    problems = role_result("vllm", {}, vllm_flashinfer_index_url=" ")["problems"]
    assert len(problems) == 1 and problems[0].startswith("vllm: vllm_flashinfer_index_url is empty")
    assert role_result("vllm", {}, vllm_flashinfer_index_url="", vllm_flashinfer_kernels=False)["problems"] == []


def _tasks(*names):
    with open(os.path.join(REPO, "roles", "vllm", "tasks", *names)) as f:
        return yaml.safe_load(f)


def _walk(tasks):
    for task in tasks:
        yield task
        yield from _walk(task.get("block") or [])


def test_the_install_task_pins_the_public_version_and_changes_only_when_it_differs():
    """The kernels are part of an engine's build (a new venv): pinned to the public version of the flashinfer-python
    in the venv (vLLM's pin, or the role's declared override), verified, and listed in the receipt."""
    include = next(t for t in _walk(_tasks("install.yml")) if t.get("name") == "Install FlashInfer's kernels for the CUDA build")
    assert include["when"] == "_vllm.plan.flashinfer.install"
    assert "split('+')[0]" in include["vars"]["_vllm_flashinfer_version"]
    assert include["vars"]["_vllm_requirement"] == "{{ _vllm.plan.flashinfer.cubin }}=={{ _vllm_flashinfer_version }}"
    steps = {t["name"]: t for t in _tasks("flashinfer.yml")}
    install = steps["FlashInfer | Install FlashInfer's kernels at that version"]
    assert install["changed_when"] is True and "_vllm_requirement" in install["ansible.builtin.command"]["argv"]
    verify = steps["FlashInfer | Verify the kernels from the venv's package metadata"]
    assert verify["failed_when"] == "_vllm_flashinfer_verified.stdout | trim != _vllm_flashinfer_version"
