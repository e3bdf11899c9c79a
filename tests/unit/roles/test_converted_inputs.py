# -*- coding: utf-8 -*-
"""Every bool option of every role is used as the plan's converted value, never as the raw variable (issue 28, class 6).

`-e pcie_host_iommu_passthrough=false` is the string "false", which Jinja takes as true: a GRUB drop-in with iommu=pt.
Each role's check registers its plan as `_<role>` (the role_plan action), whose `inputs` hold every option converted by
its declared type. Two halves prove the class, for every bool option the argument specs declare, found by reading
them (an option added later is covered):
- here, statically: no Jinja expression in any role's tasks, handlers, templates, vars or defaults, or in a shipped
  playbook, reads a bool option other than through `<plan>.inputs.<name>`;
- the plan converts `false`, `no`, `0` and `off` to False for every one of them: below, through the plan's code, and in
  tests/artifact/installed.sh, through `ansible-playbook -e` and the real action, on the installed collection.
"""
from __future__ import annotations

import glob
import os
import re

import pytest
import yaml

from conftest import role_inputs, role_spec
from ansible_collections.moeops.inference.plugins.module_utils._common.plan import plan_role
from ansible_collections.moeops.inference.plugins.module_utils._common.specs import spec_roles

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
EXPRESSION_KEYS = ("when", "that", "changed_when", "failed_when", "until")
JINJA = re.compile(r"\{\{(.*?)\}\}|\{%(.*?)%\}", re.S)
# Read as `ray_cluster_firewall | bool` by the Ray firewall's tasks, whose retirement (retire.yml) includes them with
# the variable set to false: the firewall's work of issue 28 owns those files. Ansible's bool filter gives the spec's
# own conversion for every value the plan accepts.
EXEMPT = {("roles/ray_cluster/tasks/firewall.yml", "ray_cluster_firewall")}


def bool_options():
    """{option: [roles declaring it]} over every entry point of every role's argument spec."""
    found = {}
    for path in glob.glob(os.path.join(ROOT, "roles", "*", "meta", "argument_specs.yml")):
        role = path.split(os.sep)[-3]
        with open(path) as f:
            specs = yaml.safe_load(f)["argument_specs"]
        for entry in specs.values():
            for name, opt in (entry.get("options") or {}).items():
                if opt.get("type") == "bool":
                    found.setdefault(name, set()).add(role)
    return {name: sorted(roles) for name, roles in found.items()}


BOOLS = bool_options()


def expressions(value, key=None):
    """Every Jinja expression in a loaded YAML document: {{ }} and {% %} in any string, and the bare expressions of
    when/that/changed_when/failed_when/until."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield from expressions(v, k)
    elif isinstance(value, list):
        for item in value:
            yield from expressions(item, key)
    elif isinstance(value, str):
        if key in EXPRESSION_KEYS and "{{" not in value:
            yield value
        for match in JINJA.finditer(value):
            yield match.group(1) or match.group(2)


def raw_uses(text):
    """The bool options an expression reads bare: not as an attribute (x.name), not quoted ('name')."""
    text = re.sub(r"'[^']*'|\"[^\"]*\"", "''", text)
    return sorted(name for name in BOOLS if re.search(r"(?<![\w.])%s(?!\w)" % re.escape(name), text))


def sources():
    """(relative path, expressions) for every file the roles and the shipped playbooks read."""
    patterns = ["roles/*/tasks/*.yml", "roles/*/handlers/*.yml", "roles/*/vars/*.yml", "roles/*/defaults/*.yml",
                "playbooks/*.yml"]
    for pattern in patterns:
        for path in sorted(glob.glob(os.path.join(ROOT, pattern))):
            with open(path) as f:
                yield os.path.relpath(path, ROOT), list(expressions(yaml.safe_load(f)))
    for path in sorted(glob.glob(os.path.join(ROOT, "roles", "*", "templates", "*.j2"))):
        with open(path) as f:
            text = re.sub(r"\{#.*?#\}", "", f.read(), flags=re.S)
        yield os.path.relpath(path, ROOT), [m.group(1) or m.group(2) for m in JINJA.finditer(text)]


def test_every_role_has_bool_options_to_check():
    assert len(BOOLS) >= 20 and "pcie_host_iommu_passthrough" in BOOLS and "ray_cluster_dashboard_enabled" in BOOLS


def test_the_scanner_sees_a_raw_use():
    assert raw_uses(" 'iommu=pt' if pcie_host_iommu_passthrough else '' ") == ["pcie_host_iommu_passthrough"]
    assert raw_uses("pcie_host_reboot | bool") == ["pcie_host_reboot"]
    assert raw_uses("_pcie_host.inputs.pcie_host_reboot and 'pcie_host_reboot' in x") == []
    assert list(expressions({"when": ["not pcie_host_reboot"], "msg": "set pcie_host_reboot true"})) == \
        ["not pcie_host_reboot"]


def test_no_role_or_playbook_reads_a_bool_option_raw():
    found = []
    for path, exprs in sources():
        for expr in exprs:
            for name in raw_uses(expr):
                if (path, name) not in EXEMPT:
                    found.append("%s: %s in {{ %s }}" % (path, name, " ".join(expr.split())[:120]))
    assert found == [], "read them as _<role>.inputs.<name>:\n" + "\n".join(found)


def test_the_exemptions_are_still_needed():
    used = {(path, name) for path, exprs in sources() for expr in exprs for name in raw_uses(expr)}
    assert EXEMPT <= used, "drop the exemption: %s" % sorted(EXEMPT - used)


@pytest.mark.parametrize("word", ["false", "no", "0", "off", "False", "OFF"])
def test_every_bool_option_of_every_role_from_the_command_line_is_false(word):
    """What -e gives (a string) is converted by the plan of every role that declares the option."""
    for role in spec_roles():
        spec = role_spec(role)
        names = [n for n, o in spec.items() if o.get("type") == "bool"]
        values = dict(role_inputs(role), **{n: word for n in names})
        values.setdefault("vllm_service_profile", "kimi_k25")
        result = plan_role(role, spec, values, sorted(values), spec_roles(), {}, plan=False)
        assert not [p for p in result["problems"] if any(n in p for n in names)], result["problems"]
        assert {n: result["values"][n] for n in names} == {n: False for n in names}, role
