# -*- coding: utf-8 -*-
"""The vllm_service role's hardening, secrets and health decisions, rendered with Ansible's own templating."""
from __future__ import annotations

import pytest
import role_templating

PROFILE = {"name": "kimi-k2.5-int4", "source": "moonshotai/Kimi-K2.5", "served_name": "kimi-k2.5",
           "max_model_len": 131072, "gpu_memory_utilization": 0.92, "weights_size_gb": 595,
           "quantization": "int4", "min_gpu_memory_gb": 714, "hidden_size": 7168, "num_attention_heads": 64}


def render(expr, **overrides):
    data = role_templating.role_vars("vllm_service", vllm_service_model=PROFILE,
                                     vllm_service_gpu_facts={"count": 8, "backend": "snapshot"})
    data.update(overrides)
    return role_templating.render(expr, data)


def test_default_hardening_has_the_cuda_compatible_sandbox():
    h = render("{{ _vllm_service_hardening }}")
    assert h["NoNewPrivileges"] is True and h["ProtectSystem"] == "strict" and h["DevicePolicy"] == "closed"
    assert h["RestrictAddressFamilies"] == "AF_UNIX AF_INET AF_INET6 AF_NETLINK"
    assert h["LimitMEMLOCK"] == "infinity" and h["UMask"] == "0027"
    # The GPUs' nodes come from the facts, after the control and unified-memory devices.
    assert h["DeviceAllow"][:4] == ["/dev/nvidiactl rw", "/dev/nvidia-uvm rw", "/dev/nvidia-uvm-tools rw",
                                    "char-nvidia-caps rw"]
    assert h["DeviceAllow"][4:] == ["/dev/nvidia%d rw" % i for i in range(8)]
    assert "MemoryDenyWriteExecute" not in h and "PrivateDevices" not in h


def test_each_directive_switches_off_or_changes_alone():
    h = render("{{ _vllm_service_hardening }}",
               vllm_service_hardening_overrides={"SystemCallFilter": None, "UMask": "0077", "ProtectHome": "read-only"})
    assert "SystemCallFilter" not in h
    assert (h["UMask"], h["ProtectHome"], h["NoNewPrivileges"]) == ("0077", "read-only", True)
    assert "DeviceAllow" not in render("{{ _vllm_service_hardening }}",
                                       vllm_service_hardening_overrides={"DeviceAllow": None})


@pytest.mark.parametrize("overrides,seconds", [
    ({}, 600 + 3047),  # 595 GB at 200 MB/s: ceil(3046.4)
    ({"vllm_service_health_timeout": 900}, 900),
    ({"vllm_service_weights_read_mb_per_s": 1000}, 600 + 610),
    ({"vllm_service_model": dict(PROFILE, weights_size_gb=0)}, 3600),
])
def test_health_timeout_is_sized_from_the_weights(overrides, seconds):
    assert int(render("{{ _vllm_service_health_timeout }}", **overrides)) == seconds


@pytest.mark.parametrize("host,key,generate", [
    ("127.0.0.1", "", False), ("localhost", "", False), ("::1", "", False), ("127.0.1.1", "", False),
    ("0.0.0.0", "", True), ("10.0.0.5", "", True), ("0.0.0.0", "sk-given", False),
])
def test_a_key_is_generated_only_beyond_loopback_without_one(host, key, generate):
    assert render("{{ _vllm_service_generate_api_key | bool }}", vllm_service_host=host,
                  vllm_service_api_key=key) is generate


def test_secrets_go_to_the_environment_file_only():
    env = render("{{ _vllm_service_env_content }}", vllm_service_hf_token="hf_x", vllm_service_api_key="sk-y")
    assert "HF_TOKEN=hf_x\n" in env and "VLLM_API_KEY=sk-y\n" in env
    assert "sk-y" not in " ".join(render("{{ _vllm_service_args }}", vllm_service_tensor_parallel_size=8,
                                         vllm_service_api_key="sk-y"))
    generated = render("{{ _vllm_service_env_content }}", vllm_service_host="0.0.0.0",
                       _vllm_service_generated_key={"content": "c2stZ2VuCg=="})
    assert "VLLM_API_KEY=sk-gen\n" in generated and "HF_TOKEN" not in generated
    assert "VLLM_API_KEY" not in render("{{ _vllm_service_env_content }}")
