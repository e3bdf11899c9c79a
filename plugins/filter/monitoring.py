# -*- coding: utf-8 -*-
# Copyright: (c) 2026, moeops.inference contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The monitoring role's decisions and facts; documentation in monitoring_plan.yml and monitoring_facts.yml."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible_collections.moeops.inference.plugins.module_utils import monitoring as _monitoring


def monitoring_plan(listen, allow, firewall, ports, dcgm, vllm_target="", vllm_scheme="http", max_exposure=None):
    """What the monitoring role derives from its inputs (module_utils/monitoring.py, plan)."""
    try:
        return _monitoring.plan(listen, list(allow or []), bool(firewall), dict(ports), bool(dcgm), vllm_target or "",
                                vllm_scheme or "http", max_exposure)
    except (ValueError, TypeError, KeyError) as exc:
        raise AnsibleFilterError("monitoring_plan: %s" % exc)


def monitoring_facts(deployed, report=None, canary=None, drift_why=""):
    """The facts the monitoring role's textfile writer turns into metrics (module_utils/monitoring.py)."""
    if not isinstance(deployed, dict) or "unit" not in deployed:
        raise AnsibleFilterError("monitoring_facts: expects the result of moeops.inference.vllm_service_info")
    facts = _monitoring.textfile_facts(deployed, report if isinstance(report, dict) else None,
                                       canary if isinstance(canary, dict) else None, drift_why or "")
    facts["vllm_target"] = _monitoring.vllm_local_target(deployed)
    return facts


class FilterModule(object):
    def filters(self):
        return {"monitoring_plan": monitoring_plan, "monitoring_facts": monitoring_facts}
