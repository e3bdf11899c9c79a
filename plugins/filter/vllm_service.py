# -*- coding: utf-8 -*-
# Copyright: (c) 2026, moeops.inference contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The vllm_service role's derived settings; documentation in the adjacent YAML file."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible_collections.moeops.inference.plugins.module_utils._roles import vllm_service as _plan


def vllm_service_plan(inputs):
    """Everything the vllm_service role derives from its variables (module_utils/vllm_service_plan.py)."""
    try:
        return _plan.plan(inputs)
    except (ValueError, TypeError) as exc:
        raise AnsibleFilterError("vllm_service_plan: %s" % exc)


class FilterModule(object):
    def filters(self):
        return {"vllm_service_plan": vllm_service_plan}
