# -*- coding: utf-8 -*-
"""vllm_service: which model `vllm serve` loads, rendered with Ansible's own templating from the role's files."""
from __future__ import annotations

import os

import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

ROLE = os.path.join(os.path.dirname(__file__), "..", "..", "..", "roles", "vllm_service")
PROFILE = {"name": "tiny", "source": "org/tiny", "served_name": "tiny", "max_model_len": 4096,
           "gpu_memory_utilization": 0.9, "quantization": "bf16", "weights_size_gb": 1, "min_gpu_memory_gb": 1,
           "hidden_size": 64, "num_attention_heads": 4}


def trusted(value):
    if isinstance(value, str):
        return trust_as_template(value)
    if isinstance(value, dict):
        return {k: trusted(v) for k, v in value.items()}
    if isinstance(value, list):
        return [trusted(v) for v in value]
    return value


def serve_args(**overrides):
    data = {}
    for part in ("defaults", "vars"):
        with open(os.path.join(ROLE, part, "main.yml")) as f:
            data.update(trusted(yaml.safe_load(f)))
    # A fixed tensor-parallel size keeps the topology filters out of this rendering.
    data.update(vllm_service_model=PROFILE, vllm_service_tensor_parallel_size=1, **overrides)
    return Templar(loader=DataLoader(), variables=data).template(trust_as_template("{{ _vllm_service_args }}"))


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
