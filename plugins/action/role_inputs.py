# -*- coding: utf-8 -*-
# Copyright: (c) 2026, moeops.inference contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The role_inputs action: one role's inputs, read from the host's variables as the role will use them, against
the role's argument spec and the rules of module_utils/role_inputs.py. Documentation in plugins/modules/role_inputs.py."""

from __future__ import annotations

from ansible.errors import AnsibleError, AnsibleUndefinedVariable
from ansible.plugins.action import ActionBase
from ansible.plugins.loader import lookup_loader
from ansible_collections.moeops.inference.plugins.lookup.role_argument_spec import role_options
from ansible_collections.moeops.inference.plugins.module_utils._common import role_inputs


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("role", "entry_point"))
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        task_vars = task_vars or {}
        args = self.validate_argument_spec(argument_spec={
            "role": {"type": "str", "required": True},
            "entry_point": {"type": "str", "default": "main"},
        })[1]
        role = args["role"].rsplit(".", 1)[-1]
        try:
            spec = role_options(role, args["entry_point"])
        except AnsibleError as exc:
            result.update(failed=True, msg=str(exc), problems=[], checked=[])
            return result
        # The values as the role will see them: templated by Ansible's own vars lookup, on 2.19 and later alike. A
        # default built from facts not gathered yet (ray_cluster_node_address) is left to the role's later steps.
        lookup = lookup_loader.get("ansible.builtin.vars", loader=self._loader, templar=self._templar)
        values, names = {}, []
        for name in sorted(n for n in spec if n in task_vars):
            try:
                values[name] = lookup.run([name], variables=task_vars)[0]
            except AnsibleUndefinedVariable:
                continue
            names.append(name)
        problems = role_inputs.role_input_problems(role, spec, values)
        result.update(problems=problems, checked=names, changed=False)
        if problems:
            result.update(failed=True, msg="; ".join(problems))
        return result
