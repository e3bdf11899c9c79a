# -*- coding: utf-8 -*-
# Copyright: (c) 2026, moeops.inference contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters over model profiles; documentation in the adjacent YAML files."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible_collections.moeops.inference.plugins.module_utils._policy import model_profile


def _profile(profile):
    problems = model_profile.validate_profile(profile)
    if problems:
        raise AnsibleFilterError("; ".join(problems))
    return profile


def vllm_serve_args(profile, tensor_parallel_size, host, port, facts=None, max_model_len=None,
                    gpu_memory_utilization=None, extra_args=None, model=None):
    """`vllm serve` arguments for a profile on the GPUs in `facts`, its compute-capability constraints applied."""
    return model_profile.serve_args(
        _profile(profile), int(tensor_parallel_size), host, int(port), max_model_len=max_model_len or None,
        gpu_memory_utilization=gpu_memory_utilization or None, extra_args=extra_args or [], model=model or None,
        ccs=model_profile.compute_capabilities(facts or {}))


def model_profile_settings(profile, facts=None, config=None):
    """What a profile resolves to on these GPUs: the model's dimensions (config.json first) and the
    constraints applied for their compute capabilities."""
    ccs = model_profile.compute_capabilities(facts or {})
    settings = model_profile.effective_settings(_profile(profile), ccs)
    settings["dimensions"] = model_profile.model_dimensions(profile, config if isinstance(config, dict) else None)
    settings["compute_capabilities"] = ccs
    return settings


class FilterModule(object):
    def filters(self):
        return {"vllm_serve_args": vllm_serve_args, "model_profile_settings": model_profile_settings}
