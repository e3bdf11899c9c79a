# -*- coding: utf-8 -*-
# Copyright: (c) 2026, moeops.inference contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: role_argument_spec
author:
  - moeops.inference contributors (@moeops)
version_added: 0.2.0
short_description: The options of an entry point of one of this collection's roles
description:
  - Returns the C(options) mapping of an entry point of a role of the C(moeops.inference) collection, read on the
    controller from the role's C(meta/argument_specs.yml) (each option with its C(type), C(default), C(description)
    and the rest of its argument spec).
  - The file is found in the collection itself, in a checkout and in an installed collection alike, so a playbook
    or role outside the collection can read the specs without knowing where the collection lives.
  - An entry point without options gives an empty mapping.
  - An unknown role (listing the roles that have an argument spec), an unknown entry point (listing the role's
    entry points) or an unreadable argument spec file is an error.
  - With one term, C(lookup) returns the options mapping itself; C(query), or C(lookup) with C(wantlist=true), returns
    a list with one mapping per term.
options:
  _terms:
    description:
      - The roles, each by its short name (V(vllm_service)) or its fully qualified name (V(moeops.inference.vllm_service)).
    type: list
    elements: str
    required: true
  entry_point:
    description:
      - The entry point whose options are returned, the same for every term.
    type: str
    default: main
"""

EXAMPLES = r"""
- name: Show the default port of the vllm_service role
  ansible.builtin.debug:
    msg: "{{ lookup('moeops.inference.role_argument_spec', 'vllm_service').vllm_service_port.default }}"

- name: The options of the staged entry point of model_weights
  ansible.builtin.debug:
    msg: "{{ lookup('moeops.inference.role_argument_spec', 'model_weights', entry_point='staged') | list }}"

- name: The options of several roles' main entry points, by role
  ansible.builtin.set_fact:
    role_options: "{{ dict(wanted_roles | zip(query('moeops.inference.role_argument_spec', *wanted_roles))) }}"
  vars:
    wanted_roles: [vllm, vllm_service]
"""

RETURN = r"""
_raw:
  description:
    - One mapping per term, of option name to its argument spec (C(type), C(default), C(description), C(choices),
      C(elements), C(no_log) and the rest, as written in C(meta/argument_specs.yml)).
    - With a single term, C(lookup) returns that mapping rather than a list.
  type: list
  elements: dict
"""

import os
import re
import typing as t

import yaml
from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase

# The collection's root: plugins/lookup/<this file> is three levels below it, in a checkout and installed alike.
COLLECTION_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ROLES_DIR = os.path.join(COLLECTION_ROOT, "roles")
COLLECTION = "moeops.inference"
ROLE_NAME = re.compile(r"^[a-z0-9_]+$")
SPEC_FILES = ("argument_specs.yml", "argument_specs.yaml")
PREFIX = "%s.role_argument_spec" % COLLECTION


def _spec_file(roles_dir: str, role: str) -> t.Optional[str]:
    """The argument spec file of a role, or None."""
    for name in SPEC_FILES:
        path = os.path.join(roles_dir, role, "meta", name)
        if os.path.isfile(path):
            return path
    return None


def spec_roles(roles_dir: str) -> t.List[str]:
    """The roles under `roles_dir` that have an argument spec file, sorted."""
    try:
        entries = os.listdir(roles_dir)
    except OSError:
        return []
    return sorted(r for r in entries if ROLE_NAME.match(r) and _spec_file(roles_dir, r))


def spec_path(role: t.Any, roles_dir: str) -> str:
    """The meta/argument_specs.yml of `role` (short or fully qualified name); AnsibleLookupError when there is none."""
    name = role[len(COLLECTION) + 1:] if isinstance(role, str) and role.startswith(COLLECTION + ".") else role
    path = _spec_file(roles_dir, name) if isinstance(name, str) and ROLE_NAME.match(name) else None
    if path is None:
        raise AnsibleLookupError(
            "%s: %s has no role %r with an argument spec (meta/argument_specs.yml); roles with one: %s"
            % (PREFIX, COLLECTION, role, ", ".join(spec_roles(roles_dir)) or "none"))
    return path


def entry_point_options(text: str, origin: str, entry_point: t.Any) -> t.Dict[str, t.Any]:
    """The options of `entry_point` in the text of an argument spec file (`origin` names it in messages)."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = " at line %d, column %d" % (mark.line + 1, mark.column + 1) if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).strip().splitlines()[0]
        raise AnsibleLookupError("%s: %s is not valid YAML%s: %s" % (PREFIX, origin, where, problem)) from None
    specs = data.get("argument_specs") if isinstance(data, dict) else None
    if not isinstance(specs, dict):
        raise AnsibleLookupError("%s: %s has no argument_specs mapping" % (PREFIX, origin))
    if not isinstance(entry_point, str) or entry_point not in specs:
        raise AnsibleLookupError("%s: %s has no entry point %r; its entry points: %s"
                                 % (PREFIX, origin, entry_point, ", ".join(sorted(map(str, specs))) or "none"))
    spec = specs[entry_point]
    options = spec.get("options") if isinstance(spec, dict) else None
    if options is None:
        return {}
    if not isinstance(options, dict):
        raise AnsibleLookupError("%s: %s: the options of entry point %s are a %s, not a mapping"
                                 % (PREFIX, origin, entry_point, type(options).__name__))
    return options


def role_options(role: t.Any, entry_point: str = "main", roles_dir: str = ROLES_DIR) -> t.Dict[str, t.Any]:
    """The options of a role's entry point, read from its argument spec file."""
    path = spec_path(role, roles_dir)
    try:
        with open(path, "rb") as f:
            text = f.read().decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise AnsibleLookupError("%s: cannot read %s: %s" % (PREFIX, path, exc)) from None
    role_dir = os.path.dirname(os.path.dirname(path))
    return entry_point_options(text, "role %s (%s)" % (os.path.basename(role_dir), path), entry_point)


class LookupModule(LookupBase):

    def run(self, terms, variables=None, **kwargs):
        self.set_options(var_options=variables, direct=kwargs)
        entry_point = self.get_option("entry_point")
        return [role_options(term, entry_point) for term in terms]
