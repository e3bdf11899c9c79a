# -*- coding: utf-8 -*-
# Copyright: (c) 2026, moeops.inference contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The roles' input rules as a filter, for each role's check entry point; documentation in the adjacent YAML file."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible_collections.moeops.inference.plugins.module_utils import role_inputs


def role_input_problems(values, role, spec):
    """Every problem with one role's inputs: its argument spec and role_inputs' rules (module_utils/role_inputs.py).
    A secret (a no_log option) is checked like any value, but never quoted in a message."""
    if not isinstance(values, dict) or not isinstance(spec, dict):
        raise AnsibleFilterError("role_input_problems: expects a dict of values and the role's argument spec options")
    problems = role_inputs.role_input_problems(str(role), spec, values)
    for name, opt in spec.items():
        secret = values.get(name)
        if isinstance(opt, dict) and opt.get("no_log") and isinstance(secret, str) and secret:
            problems = [p.replace(repr(secret), "'********'").replace(secret, "********") for p in problems]
    return problems


class FilterModule(object):
    def filters(self):
        return {"role_input_problems": role_input_problems}
