# -*- coding: utf-8 -*-
# Copyright: (c) 2026, moeops.inference contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters over the topology policy; documentation in the adjacent YAML files."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible_collections.moeops.inference.plugins.module_utils._policy import nccl_policy


def _facts(facts):
    if not isinstance(facts, dict) or "count" not in facts:
        raise AnsibleFilterError("expects the nvidia_gpu facts from moeops.inference.gpu_facts, got %r" % type(facts).__name__)
    return facts


def nccl_env(facts, overrides=None, explain=False, tuning=None, workload="balanced"):
    """NCCL environment for the topology and workload, a stored tuning result and inventory overrides applied."""
    if overrides is not None and not isinstance(overrides, dict):
        raise AnsibleFilterError("nccl_env: overrides must be a dict of VAR: string (or null to remove)")
    if tuning is not None and not isinstance(tuning, dict):
        raise AnsibleFilterError("nccl_env: tuning must be a result from moeops.inference.nccl_tune_info (a dict) or null")
    try:
        result = nccl_policy.nccl_policy(_facts(facts), overrides, tuning or None, workload=workload)
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError(str(exc))
    return result if explain else result["env"]


def vllm_parallel_layout(facts, gpus=None):
    """vLLM tensor-parallel size, expert parallel and custom all-reduce for the topology."""
    return nccl_policy.parallel_layout(_facts(facts), gpus)


class FilterModule(object):
    def filters(self):
        return {"nccl_env": nccl_env, "vllm_parallel_layout": vllm_parallel_layout}
