# -*- coding: utf-8 -*-
"""Preflight over a REAL GPU: the H200 the device tool lends (one GPU, compute capability 9.0,
143771 MiB), as gpu_facts read it there (tests/fixtures/gpu/real/h200-x1-device.nvml.snapshot.json),
and as playbooks/preflight.yml judged it there (h200-x1-device/preflight-reports.json, written by
tests/device/preflight_on_device.sh through the real ansible-playbook, NVML and the preflight module)."""
from __future__ import annotations

import pytest

from ansible_collections.moeops.inference.plugins.module_utils._facts import gpu_topology as topo
from ansible_collections.moeops.inference.plugins.module_utils._common.plan import plan_role
from ansible_collections.moeops.inference.plugins.module_utils._common.specs import spec_roles
from conftest import load_json, role_inputs, role_spec

UBUNTU2404 = {"distribution": "Ubuntu", "distribution_version": "24.04", "distribution_major_version": "24",
              "distribution_release": "noble", "architecture": "x86_64", "os_family": "Debian"}


@pytest.fixture(scope="module")
def h200():
    return topo.from_snapshot(load_json("real", "h200-x1-device.nvml.snapshot.json"), "h200-x1-device")


def replay(facts, model):
    """The rules over the captured facts, as preflight runs them for the roles of a deploy, with what the device run
    had: Ubuntu 24.04, the default driver branch 580 to install, and no weights read (their disk is not part of the
    capture). Each problem without its role's name, as the device report recorded it."""
    report = {"problems": [], "warnings": []}
    for role, over in (("nvidia_driver", {}), ("vllm_service", {
            "vllm_service_profile": model, "vllm_service_env_file": "/etc/vllm/vllm.env",
            "vllm_service_api_key_file": "/etc/vllm/vllm.api-key"})):
        values = dict(role_inputs(role), **over)
        result = plan_role(role, role_spec(role), values, sorted(values), spec_roles(),
                           {"gpus": facts, "facts": UBUNTU2404})
        for key in ("problems", "warnings"):
            report[key] += [m[len(role) + 2:] for m in result[key]]
        if role == "vllm_service":
            report["tensor_parallel_size"] = result["plan"]["tensor_parallel_size"]
    return report


@pytest.fixture(scope="module")
def on_device():
    return load_json("real", "h200-x1-device", "preflight-reports.json")


def gpu_problems(report):
    # The device's disk (64 GiB) is not part of the GPU capture; its problems are checked apart.
    return [p for p in report["problems"] if not p.startswith("disk: ")]


def test_every_shipped_model_is_refused_on_one_h200_with_its_reasons(h200):
    want = {
        "kimi_k25": ["GPU memory: 1 x 150.8 GB at gpu_memory_utilization 0.92 gives 139 GB, but profile kimi-k2.5-int4 "
                     "needs at least 714 GB (min_gpu_memory_gb). Use at least 8 such GPUs (tensor parallel 8: 6 would "
                     "hold it, but tensor parallel 6 does not divide the model's 64 attention heads and cannot split or "
                     "replicate its 64 key/value heads evenly), or a smaller model/quantization."],
        "glm5": ["GPU memory: 1 x 150.8 GB at gpu_memory_utilization 0.90 gives 136 GB, but profile glm-5-nvfp4 needs "
                 "at least 520 GB (min_gpu_memory_gb). Use at least 4 such GPUs (tensor parallel), or a smaller "
                 "model/quantization.",
                 "profile glm-5-nvfp4 needs compute capability 10.0 or newer (min_compute_capability), this host has "
                 "9.0: pick a profile whose weights run on these GPUs."],
        "minimax_m25": ["GPU memory: 1 x 150.8 GB at gpu_memory_utilization 0.90 gives 136 GB, but profile "
                        "minimax-m2.5-fp8 needs at least 280 GB (min_gpu_memory_gb). Use at least 4 such GPUs (tensor "
                        "parallel 4: 3 would hold it, but tensor parallel 3 cannot split or replicate its 8 key/value "
                        "heads evenly), or a smaller model/quantization."],
    }
    for name, problems in want.items():
        report = replay(h200, name)
        assert report["problems"] == problems, name
        # Hopper on driver 580 with P2P not applicable (one GPU): nothing else to say.
        assert report["warnings"] == [] and report["tensor_parallel_size"] == 1


def test_the_device_run_agrees_with_the_replay(h200, on_device):
    # What the real playbook said on the machine is what the checks say over its captured facts.
    assert sorted(on_device) == ["glm5", "kimi_k25", "kimi_k25_nvidia_smi", "minimax_m25", "tiny_local"]
    for case, shipped in (("kimi_k25", "kimi_k25"), ("kimi_k25_nvidia_smi", "kimi_k25"), ("glm5", "glm5"),
                          ("minimax_m25", "minimax_m25")):
        real = on_device[case]
        assert (real["gpu_backend"], real["gpus"], real["gpu_names"]) == (
            "nvidia_smi" if case.endswith("nvidia_smi") else "nvml", 1, ["NVIDIA H200"])
        assert real["rc"] == 2 and real["warnings"] == []
        assert gpu_problems(real) == replay(h200, shipped)["problems"], case
        # The device's root filesystem cannot take any of them: each run also named that, with the numbers.
        disk = [p for p in real["problems"] if p.startswith("disk: ")]
        assert len(disk) == 1 and "/var/cache/vllm/huggingface/hub/models--" in disk[0] and "GB free" in disk[0]
    # Both backends gave the same answer.
    assert on_device["kimi_k25"]["problems"] == on_device["kimi_k25_nvidia_smi"]["problems"]


def test_a_profile_written_for_the_test_passed_there_with_dimensions_from_its_config_json(on_device):
    tiny = on_device["tiny_local"]
    assert (tiny["rc"], tiny["problems"], tiny["warnings"]) == (0, [], [])
    dims = tiny["checked"]["dimensions"]
    assert (dims["hidden_size"], dims["num_attention_heads"]) == (64, 8)
    # config.json gives no key/value head count: as many as its 8 attention heads, not the profile's 8 of 16.
    assert dims["num_key_value_heads"] == 8
    assert set(dims["sources"].values()) == {"config.json"}
    assert tiny["checked"]["weights"]["path"] == "/tmp/moeops-tiny-model"
    assert tiny["checked"]["weights"]["disk"].startswith("not checked: nothing fetches the weights")
