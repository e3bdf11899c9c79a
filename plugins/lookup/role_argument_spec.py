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

import typing as t

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase
from ansible_collections.moeops.inference.plugins.module_utils._common import specs

# The collection's roles directory (in a checkout and installed alike) and the roles with a spec there.
ROLES_DIR = specs.ROLES_DIR
PREFIX = "%s.role_argument_spec" % specs.COLLECTION


def spec_roles(roles_dir: str = ROLES_DIR) -> t.List[str]:
    """The roles under `roles_dir` that have an argument spec file, sorted."""
    return specs.spec_roles(roles_dir)


def role_options(role: t.Any, entry_point: str = "main", roles_dir: str = ROLES_DIR) -> t.Dict[str, t.Any]:
    """The options of a role's entry point (module_utils/_common/specs.py reads them), errors as lookup errors."""
    try:
        return specs.role_options(role, entry_point, roles_dir)
    except specs.SpecError as exc:
        raise AnsibleLookupError("%s: %s" % (PREFIX, exc)) from None


class LookupModule(LookupBase):

    def run(self, terms, variables=None, **kwargs):
        self.set_options(var_options=variables, direct=kwargs)
        entry_point = self.get_option("entry_point")
        return [role_options(term, entry_point) for term in terms]
