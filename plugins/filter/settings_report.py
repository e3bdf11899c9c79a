# -*- coding: utf-8 -*-
# Copyright: (c) 2026, moeops.inference contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""settings_report filter; documentation in settings_report.yml."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible_collections.moeops.inference.plugins.module_utils._engine import benchmark as bench
from ansible_collections.moeops.inference.plugins.module_utils._policy import settings as vllm_settings


def settings_report(desired, deployed, gpu_facts=None, host=""):
    """Compare the vllm_service role's desired unit with what vllm_service_info read."""
    if not isinstance(desired, dict) or "unit_text" not in desired:
        raise AnsibleFilterError("settings_report: expects the vllm_service_desired fact "
                                 "(moeops.inference.vllm_service, tasks_from desired), got %r" % type(desired).__name__)
    if not isinstance(deployed, dict) or "unit" not in deployed:
        raise AnsibleFilterError("settings_report: the first argument must be the result of moeops.inference.vllm_service_info")
    # The newest benchmark record beside the settings now (its fingerprint read again from what is deployed).
    last_benchmark = bench.last_result(deployed.get("benchmark"), deployed.get("benchmark_reason") or "", deployed,
                                       gpu_facts or {}, desired.get("profile") or "", desired.get("collection_version") or "")
    try:
        return vllm_settings.build_report(host, desired, deployed, gpu_facts or {}, last_benchmark)
    except vllm_settings.UnitSyntaxError as exc:
        raise AnsibleFilterError("settings_report: the role's own unit does not parse: %s" % exc)


class FilterModule(object):
    def filters(self):
        return {"settings_report": settings_report}
