# -*- coding: utf-8 -*-
# Copyright: (c) 2026, moeops.inference contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The role_plan action: one role's plan from its inputs, with every rule of the role. A thin shell over
module_utils/_common/plan.py (the order of the rules) and _roles/<role>.py (the role's own rules and plan).
Documentation in plugins/modules/role_plan.py."""

from __future__ import annotations

from ansible.errors import AnsibleError, AnsibleUndefinedVariable
from ansible.plugins.action import ActionBase
from ansible.release import __version__ as ansible_core_version
from ansible.plugins.loader import lookup_loader
from ansible_collections.moeops.inference.plugins.module_utils._common import plan as role_plan
from ansible_collections.moeops.inference.plugins.module_utils._common import specs

try:  # ansible-core 2.19 and later: strings from a file are templated only once trusted.
    from ansible.template import trust_as_template
except ImportError:  # pragma: no cover - the collection needs 2.19 (meta/runtime.yml)
    def trust_as_template(value):
        return value


# plan_role's result when nothing was planned (the controller's ansible-core, or the role itself, is refused).
NOTHING = {"plan": None, "problems": [], "warnings": [], "outcome": "", "values": {}}


def _trusted(value):
    """A role default as Ansible itself trusts it: every string in it may be a template."""
    if isinstance(value, str):
        return trust_as_template(value)
    if isinstance(value, dict):
        return dict((key, _trusted(item)) for key, item in value.items())
    if isinstance(value, list):
        return [_trusted(item) for item in value]
    return value


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("role", "entry_point", "context", "fail_on_problems", "plan"))
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        task_vars = task_vars or {}
        # First, before any argument or input is read: an ansible-core below the supported range is refused as such
        # (each role's check and the preflight start with this step), whatever fail_on_problems says.
        try:
            too_old = specs.ansible_version_problem(ansible_core_version)
        except specs.SpecError as exc:
            too_old = str(exc)
        if too_old:
            result.update(role_plan.action_result(dict(NOTHING, problems=[too_old]), (), True))
            return result
        args = self.validate_argument_spec(argument_spec={
            "role": {"type": "str", "required": True},
            "entry_point": {"type": "str", "default": "main"},
            "context": {"type": "dict", "default": {}},
            "fail_on_problems": {"type": "bool", "default": True},
            "plan": {"type": "bool", "default": True},
        })[1]
        role = specs.short_name(args["role"])
        try:
            spec = specs.role_options(role, args["entry_point"])
            defaults = specs.role_defaults(role)
        except specs.SpecError as exc:
            result.update(role_plan.action_result(dict(NOTHING, problems=[str(exc)]), (), args["fail_on_problems"],
                                                  msg="moeops.inference.role_plan: %s" % exc))
            return result
        values = self._values(spec, defaults, task_vars)
        context = dict(args["context"])
        context.setdefault("ssh_port", self._ssh_port(task_vars))
        roles = specs.spec_roles()
        try:
            elsewhere = self._ports_elsewhere(role, spec, roles, task_vars)
        except specs.SpecError as exc:
            result.update(role_plan.action_result(dict(NOTHING, problems=[str(exc)]), (), args["fail_on_problems"],
                                                  msg="moeops.inference.role_plan: %s" % exc))
            return result
        planned = role_plan.plan_role(role, spec, values, sorted(task_vars), roles, context, plan=args["plan"],
                                      elsewhere=elsewhere,
                                      unknown_names=self._templar.template(task_vars.get("moeops_unknown_names")))
        # A refusal carries the message and the problems, not the plan (action_result says why).
        result.update(role_plan.action_result(planned, values, args["fail_on_problems"]))
        # What a record written from this plan names as its maker (an engine's receipt, a benchmark's fingerprint).
        if not result.get("failed"):
            result["collection_version"] = specs.collection_version()
        # A no_log option's value is never returned (the plan and the values may hold it): masked in the result.
        for name, opt in spec.items():
            if isinstance(opt, dict) and opt.get("no_log") and isinstance(values.get(name), str) and values[name]:
                self._mask(result, values[name])
        return result

    def _ssh_port(self, task_vars):
        """The port Ansible connects on: ansible_port (or the older ansible_ssh_port) as the inventory sets it, else the
        connection's configured port (remote_port), else 22. No role's port and no firewall may take it."""
        lookup = lookup_loader.get("ansible.builtin.vars", loader=self._loader, templar=self._templar)
        for name in ("ansible_port", "ansible_ssh_port"):
            if name in task_vars:
                try:
                    return lookup.run([name], variables=task_vars)[0]
                except AnsibleError:
                    continue
        return getattr(self._play_context, "port", None) or 22

    def _ports_elsewhere(self, role, spec, roles, task_vars):
        """The other roles' port options that this host's variables set, with their values: no port of this role may
        take one. Only those set: a role's default port counts only where that role runs, which a role's plan cannot
        know (Ray's metrics port 8080 would refuse vllm_service_port 8080 on a box without Ray); the shipped defaults
        never collide (tests/unit/roles/test_typed_inputs.py). Options this role declares itself are its own rules'."""
        found = {}
        for other, names in role_plan.other_port_options(role, spec, roles).items():
            other_spec = specs.role_options(other)
            wanted = dict((n, other_spec[n]) for n in names if n in other_spec and n in task_vars)
            found.update(self._values(wanted, specs.role_defaults(other), task_vars))
        return found

    def _values(self, spec, defaults, task_vars):
        """Every option's value as the role will see it: the host's variable as Ansible templates it, else the role's
        default (templated with the host's variables and the role's other defaults: the preflight role plans roles
        that are not running), else the spec's."""
        lookup = lookup_loader.get("ansible.builtin.vars", loader=self._loader, templar=self._templar)
        values, missing = {}, []
        for name in spec:
            if name in task_vars:
                try:
                    values[name] = lookup.run([name], variables=task_vars)[0]
                except AnsibleUndefinedVariable:
                    continue
            else:
                missing.append(name)
        if missing:
            # The role's defaults are trusted templates, also where one default names another
            # (ray_cluster_head_address uses ray_cluster_head_host, itself a template).
            env = dict(task_vars)
            env.update((k, _trusted(v)) for k, v in defaults.items() if k not in task_vars)
            templar = self._templar.copy_with_new_env(available_variables=env)
            for name in missing:
                if name in defaults:
                    try:
                        values[name] = templar.template(env[name])  # the trusted default put there above
                    except AnsibleError:
                        continue  # built from facts not gathered yet (ray_cluster_node_address): the role's later steps
                elif isinstance(spec[name], dict) and "default" in spec[name]:
                    values[name] = spec[name]["default"]
        return values

    @staticmethod
    def _mask(data, secret):
        if isinstance(data, dict):
            for key in list(data):
                if isinstance(data[key], str):
                    data[key] = data[key].replace(secret, "********")
                else:
                    ActionModule._mask(data[key], secret)
        elif isinstance(data, list):
            for index, item in enumerate(data):
                if isinstance(item, str):
                    data[index] = item.replace(secret, "********")
                else:
                    ActionModule._mask(item, secret)
