# -*- coding: utf-8 -*-
# Copyright: (c) 2026, moeops.inference contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One role's plan: every rule of the role applied to its inputs, in one place. Private to the collection.

`plan_role` is what the role_plan action runs for a role's check entry point, and what the preflight role runs for
every role of a deploy. In order:
1. the generic rules (_common/inputs.py) on every option, as its argument spec declares it, which also convert the
   values by their declared types: the role's rules and its plan see `False` for `-e x=false`, never the string;
2. the names: a removed name is refused naming its replacement, an unknown name with the role's prefix is refused
   with a "did you mean" (warned about instead with moeops_unknown_names: warn);
3. the address and port types (_common/inputs.py) on the options the role's module declares (ADDRESS_OPTIONS,
   PORT_OPTIONS): canonical addresses without a zone id, ports that are neither the SSH port the inventory connects on
   (the context's ssh_port, which the role_plan action sets from ansible_port), nor privileged (unless
   moeops_allow_privileged_ports), nor another role's port (`elsewhere`, from the action);
4. the role's own rules and plan, in its private module _roles/<role>.py: `input_problems(values)` and
   `plan(values, context)`; the plan runs only when every value passed, unless the module sets
   PLAN_DESPITE_PROBLEMS (the preflight role: its plan names the roles to check, which a refused input of its own
   must not leave unchecked).
Every problem starts with the role's name; a no_log option's value never appears in a message, nor a URL's
credentials in a message or the outcome line.
"""

from __future__ import annotations

import importlib
from typing import Any, Dict, List, Mapping, Optional, Sequence

from ansible_collections.moeops.inference.plugins.module_utils._common import inputs, urls

ROLES_PACKAGE = "ansible_collections.moeops.inference.plugins.module_utils._roles"


class PlanError(ValueError):
    """Raised by a role's plan for problems it finds while planning (each message names the variable)."""

    def __init__(self, problems: Sequence[str]):
        super(PlanError, self).__init__("; ".join(problems))
        self.problems = list(problems)


def role_module(role: str) -> Any:
    return importlib.import_module("%s.%s" % (ROLES_PACKAGE, role))


def owner(name: str, roles: Sequence[str]) -> str:
    """The role whose prefix a variable has: the longest (vllm_service_x is vllm_service's, not vllm's); '' for none."""
    return max((r for r in roles if name.startswith(r + "_")), key=len, default="")


def redact(messages: List[str], spec: Mapping[str, Any], values: Mapping[str, Any]) -> List[str]:
    """`messages` with the value of every no_log option replaced by asterisks, and the credentials of every URL in them
    masked (urls.mask_userinfo: an index or mirror URL may carry a password): a secret is checked like any value, but
    never quoted."""
    for name, opt in spec.items():
        secret = values.get(name)
        if isinstance(opt, Mapping) and opt.get("no_log") and isinstance(secret, str) and secret:
            messages = [m.replace(repr(secret), "'********'").replace(secret, "********") for m in messages]
    return [urls.mask_userinfo(m) for m in messages]


def typed_problems(module: Any, values: Mapping[str, Any], ssh_port: Any,
                   elsewhere: Optional[Mapping[str, Any]] = None) -> List[str]:
    """The address and port types of the options `module` declares, on the checked values."""
    problems: List[str] = []
    for name, kind in sorted(getattr(module, "ADDRESS_OPTIONS", {}).items()):
        problems += kind.problems(name, values.get(name))
    privileged = values.get(inputs.PRIVILEGED_SWITCH) is True
    for name in getattr(module, "PORT_OPTIONS", ()):
        problems += inputs.port(name, values.get(name), ssh_port, privileged, elsewhere)
    return problems


def other_port_options(role: str, spec: Mapping[str, Any], roles: Sequence[str]) -> Dict[str, List[str]]:
    """{other role: its port options} that `role` does not declare itself: the ports no port of `role` may take (the
    role_plan action reads the values the host sets)."""
    found: Dict[str, List[str]] = {}
    for other in roles:
        if other == role:
            continue
        names = [n for n in getattr(role_module(other), "PORT_OPTIONS", ()) if n not in spec]
        if names:
            found[other] = names
    return found


def plan_role(role: str, spec: Mapping[str, Any], values: Mapping[str, Any], set_names: Sequence[str],
              roles: Sequence[str], context: Mapping[str, Any], plan: bool = True,
              elsewhere: Optional[Mapping[str, Any]] = None, unknown_names: Any = None) -> Dict[str, Any]:
    """The role's plan from its option values (every option, as Ansible templated it), the names of the variables set
    for the host (for the name rules), the context its check passes (facts, results read on the node) and the value of
    moeops_unknown_names (None: unset). With plan false only the input rules run (a playbook that derives some inputs
    later checks the others first).
    `context` may hold ssh_port (the port Ansible connects on; 22 without it); `elsewhere` the other roles' port
    options and their values on this host, which no port of this role may take.

    Returns {plan, problems, warnings, outcome, values}: `values` are the converted option values; `plan` is None
    when a problem stopped the planning."""
    values = {k: v for k, v in values.items() if k in spec}
    problems, converted, refused = inputs.generic_problems(spec, values)
    mine = [n for n in set_names if owner(n, roles) == role]
    problems += inputs.removed_name_problems(role, set_names)
    module = role_module(role)
    mode, switch_problems = inputs.unknown_names_mode(unknown_names)
    problems += switch_problems
    unknown = inputs.unknown_name_messages(role + "_", list(spec), mine, getattr(module, "KNOWN_OTHER", ()), mode)
    warnings = unknown if mode == "warn" else []
    problems += [] if mode == "warn" else unknown
    # The role's rules run even when a generic rule refused some value, so that every problem is told at once: they
    # see the spec's default in place of a refused value (a value that spans lines already has its one message).
    checked = {k: (spec[k].get("default") if k in refused else v) for k, v in converted.items() if k in values}
    problems += inputs.shared_name_problems(checked)
    problems += typed_problems(module, checked, context.get("ssh_port", 22), elsewhere)
    problems += inputs.url_option_problems(checked)
    problems += module.input_problems(checked)
    result: Dict[str, Any] = {"plan": None, "outcome": "", "values": converted}
    # Planning needs every value valid; a role whose plan says what else to check (preflight: the roles to plan) plans
    # anyway, over the checked values, so that one refused input of its own does not hide every other problem.
    despite = bool(problems) and getattr(module, "PLAN_DESPITE_PROBLEMS", False)
    if (not problems or despite) and plan:
        try:
            planned = module.plan(checked if despite else converted, dict(context))
        except PlanError as exc:
            problems += exc.problems
        else:
            problems += planned.get("problems", [])
            warnings += planned.get("warnings", [])
            result.update(plan=planned.get("plan"), outcome=redact([planned.get("outcome", "")], spec, values)[0])
    result.update(problems=redact(["%s: %s" % (role, p) for p in dict.fromkeys(problems)], spec, values),
                  warnings=redact(["%s: %s" % (role, w) for w in dict.fromkeys(warnings)], spec, values))
    return result


def action_result(planned: Mapping[str, Any], checked: Sequence[str], fail_on_problems: bool,
                  msg: str = "") -> Dict[str, Any]:
    """What the role_plan action returns for `planned` (plan_role's result): the plan, the converted inputs, the
    outcome and the names checked, for the tasks that read them, unless it refuses. A refusal (problems, and
    fail_on_problems) fails with only the message (`msg`, else the problems joined), the problems and the warnings:
    Ansible prints a failed result whole, and the plan and the inputs (5 to 22 KB) would bury the message, while no
    task runs after it to read them."""
    problems, warnings = list(planned["problems"]), list(planned["warnings"])
    # Ansible shows `warnings` as [WARNING] lines; plan_warnings keeps the list in the result (the preflight's report).
    result: Dict[str, Any] = {"changed": False, "problems": problems, "warnings": warnings, "plan_warnings": warnings}
    if problems and fail_on_problems:
        result.update(failed=True, msg=msg or "; ".join(problems))
    else:
        result.update(plan=planned["plan"], outcome=planned["outcome"], checked=sorted(checked),
                      inputs=planned["values"])
    return result
