# -*- coding: utf-8 -*-
"""vllm_service: which model `vllm serve` loads, rendered with Ansible's own templating from the role's files."""
from __future__ import annotations

import role_templating

PROFILE = {"name": "tiny", "source": "org/tiny", "served_name": "tiny", "max_model_len": 4096,
           "gpu_memory_utilization": 0.9, "quantization": "bf16", "weights_size_gb": 1, "min_gpu_memory_gb": 1,
           "hidden_size": 64, "num_attention_heads": 4}


def serve_args(**overrides):
    # A fixed tensor-parallel size keeps the topology filters out of this rendering.
    data = role_templating.role_vars("vllm_service", vllm_service_model=PROFILE, vllm_service_tensor_parallel_size=1,
                                     **overrides)
    return role_templating.render("{{ _vllm_service_args }}", data)


def test_default_loads_the_profiles_source():
    args = serve_args()
    assert args[:2] == ["serve", "org/tiny"]
    assert args[args.index("--served-model-name") + 1] == "tiny"


def test_model_path_replaces_the_source_and_keeps_the_served_name():
    snap = "/var/cache/vllm/huggingface/hub/models--org--tiny/snapshots/" + "a" * 40
    args = serve_args(vllm_service_model_path=snap)
    assert args[:2] == ["serve", snap]
    assert args.count(snap) == 1 and "org/tiny" not in args
    assert args[args.index("--served-model-name") + 1] == "tiny"
