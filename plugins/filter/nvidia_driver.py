# -*- coding: utf-8 -*-
# Copyright: (c) 2026, moeops.inference contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The nvidia_driver role's decisions; documentation in the adjacent YAML file."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible_collections.moeops.inference.plugins.module_utils._roles import nvidia_driver as _driver


def nvidia_driver_plan(facts, gpu_facts, branch, source, cuda_repo_url="", cuda_keyring_url=""):
    """What the nvidia_driver role derives from the host's facts, the GPUs and its inputs (module_utils/nvidia_driver.py)."""
    try:
        return _driver.driver_plan(facts, gpu_facts, branch, source, cuda_repo_url, cuda_keyring_url)
    except (ValueError, TypeError) as exc:
        raise AnsibleFilterError("nvidia_driver_plan: %s" % exc)


class FilterModule(object):
    def filters(self):
        return {"nvidia_driver_plan": nvidia_driver_plan}
