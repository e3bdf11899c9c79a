# -*- coding: utf-8 -*-
"""The vllm_service role's secrets: what the root-only environment file (templates/vllm.env.j2) holds, rendered
with Ansible's own templating.  The API-key decision comes from the role's plan (tested in
tests/unit/plugins/module_utils/test_vllm_service_plan.py, with the hardening and health rules that were here);
the secrets themselves never reach the plan, so this stays a test of the template."""
from __future__ import annotations

import os

import role_templating

from ansible_collections.moeops.inference.plugins.module_utils._facts import gpu_topology as topo
from conftest import load_json, role_result

TEMPLATE = os.path.join(role_templating.ROLES, "vllm_service", "templates", "vllm.env.j2")
PROFILE = {"name": "kimi-k2.5-int4", "source": "moonshotai/Kimi-K2.5", "served_name": "kimi-k2.5",
           "max_model_len": 131072, "gpu_memory_utilization": 0.92, "weights_size_gb": 595,
           "quantization": "int4", "min_gpu_memory_gb": 714, "hidden_size": 7168, "num_attention_heads": 64}


def env_file(host="127.0.0.1", api_key="", hf_token="", **extra):
    """The environment file for these inputs, the plan worked out as the role's check does (role_plan)."""
    gpus = topo.from_snapshot(load_json("constructed", "rtxpro6000-x8-2numa.json"), "rtxpro6000-x8-2numa")
    result = role_result("vllm_service", {"gpus": gpus, "profile": PROFILE}, vllm_service_host=host,
                         vllm_service_api_key=api_key)
    assert result["problems"] == [], result["problems"]
    with open(TEMPLATE) as f:
        text = f.read()
    return role_templating.render(text, dict(extra, ansible_managed="Ansible managed", vllm_service_name="vllm",
                                             vllm_service_api_key=api_key, vllm_service_hf_token=hf_token,
                                             _vllm_service=result))


def test_secrets_go_to_the_environment_file_only():
    env = env_file(hf_token="hf_x", api_key="sk-y")
    assert "HF_TOKEN=hf_x\n" in env and "VLLM_API_KEY=sk-y\n" in env
    # The key generated on the node (slurped, base64) where the server listens beyond loopback without one.
    generated = env_file(host="0.0.0.0", _vllm_service_generated_key={"content": "c2stZ2VuCg=="})
    assert "VLLM_API_KEY=sk-gen\n" in generated and "HF_TOKEN" not in generated
    assert "VLLM_API_KEY" not in env_file()
    # On loopback nothing is generated, so a stray key file is not read into the unit's environment.
    assert "VLLM_API_KEY" not in env_file(_vllm_service_generated_key={"content": "c2stZ2VuCg=="})
