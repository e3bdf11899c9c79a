#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, moeops.inference contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: role_inputs
short_description: Refuse bad inputs of one of this collection's roles, as the role will use them
version_added: 0.5.0
description:
  - Reads the role's options from its C(meta/argument_specs.yml), takes the value of every one of them that is set
    for the host (as Ansible templates it, not a converted copy), and fails with every problem at once, each naming
    the variable and what is allowed.
  - The rules are those of C(plugins/module_utils/role_inputs.py) - the argument spec's own type check, no line break
    (newline, carriage return or NUL) in any string, strict integers, booleans and ports, lists and dicts not given as
    strings, absolute normalised paths, then the role's semantic rules (accounts that are not root, ranges, hardening
    overrides limited to sandboxing directives, C(vllm serve) arguments that have a dedicated variable, no secret
    where a secret does not belong).
  - Options that are not set are not checked (the role's defaults pass by construction, a unit test proves it).
  - A no_log option is checked like any other, but its value never appears in a message or in the result.
  - Each role's C(check) entry point runs it first; the preflight role applies the same rules to every role at once.
  - This is an action plugin; it runs on the controller and changes nothing.
author:
  - moeops.inference contributors (@moeops)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.flow
attributes:
  action:
    support: full
  async:
    support: none
  bypass_host_loop:
    support: none
  check_mode:
    support: full
    details: Only reads variables and the role's argument spec.
  diff_mode:
    support: none
  platform:
    platforms: all
options:
  role:
    description:
      - The role whose inputs are checked, by its short name (V(vllm_service)) or its fully qualified name.
    type: str
    required: true
  entry_point:
    description: The entry point whose options are checked.
    type: str
    default: main
seealso:
  - plugin: moeops.inference.role_argument_spec
    plugin_type: lookup
  - module: moeops.inference.preflight
"""

EXAMPLES = r"""
- name: Check the inputs of the vllm_service role before the role changes anything
  moeops.inference.role_inputs:
    role: vllm_service
"""

RETURN = r"""
problems:
  description: Every problem found, each starting with the role's name; empty when the inputs are fine.
  returned: always
  type: list
  elements: str
  sample: ["vllm_service: vllm_service_port must be a TCP port in 1-65535, got 70000"]
checked:
  description: The names of the options that were set, and so checked.
  returned: always
  type: list
  elements: str
  sample: [vllm_service_port, vllm_service_profile]
"""
