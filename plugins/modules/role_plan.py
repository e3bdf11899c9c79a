#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, moeops.inference contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: role_plan
short_description: One of this collection's roles, planned - its inputs checked and converted, every rule applied
version_added: 0.6.0
description:
  - Reads the role's options from its C(meta/argument_specs.yml) and takes the value of each as Ansible templates it
    for the host (a role that is not running, as the preflight role plans them, gets its C(defaults/main.yml)).
  - Converts every value by its declared type, the way the spec's own validation does, and returns the converted
    values as RV(inputs); the role uses them. C(-e x=false) is the string C("false"), which Jinja takes as true; converted, it is
    false.
  - Refuses what the rules refuse, all at once, each message naming the variable - the spec's own type check, no line
    break (newline, carriage return or NUL) in any string, strict integers, booleans and ports, lists and dicts not
    given as strings, absolute normalised paths; a removed variable name (naming its replacement); the address and
    port types of the options the role declares (canonical addresses without a zone id; ports neither the SSH port
    Ansible connects on - C(ansible_port), else the connection's port, else 22 - nor another role's port - its value
    on the host, else that role's default - nor below 1024 unless C(moeops_allow_privileged_ports)); then the role's own
    rules, which live in one private module of the role (C(plugins/module_utils/_roles/<role>)).
  - Refuses a variable with the role's prefix that is no option (usually a typo), with the closest option; the
    variable C(moeops_unknown_names) set to V(warn) (for an inventory shared with other tools) makes that a warning.
    V(refuse) is the default; any other value is refused.
  - Returns the role's plan (what it will render and run) and a one-line outcome. A no_log option's value never
    appears in a message or in the result.
  - A refusal (a problem, with O(fail_on_problems)) fails with the message, RV(problems) and RV(plan_warnings) only,
    not the plan or the inputs, so that the message is what Ansible prints.
  - Each role's C(check) entry point runs it first; the preflight role runs it for every role of a deploy and reports
    everything together. This is an action plugin; it runs on the controller and changes nothing.
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
    details: Only reads variables and the role's files.
  diff_mode:
    support: none
  platform:
    platforms: all
options:
  role:
    description: The role, by its short name (V(vllm_service)) or its fully qualified name.
    type: str
    required: true
  entry_point:
    description: The entry point whose options are planned.
    type: str
    default: main
  context:
    description:
      - What the role's check read before planning, by name - C(gpus) (the C(nvidia_gpu) facts), C(facts) (the
        distribution facts) and what one role needs (the vllm_service role's stored NCCL tuning result, staged weights).
      - C(ssh_port), when not given, is the port Ansible connects on, read by the action.
    type: dict
    default: {}
  fail_on_problems:
    description: Fail when a rule refuses an input; false returns the problems (the preflight role collects them).
    type: bool
    default: true
  plan:
    description:
      - V(false) applies the input rules only, without the role's plan (a playbook that derives some of a role's inputs
        later, such as the multi-node one, checks the others before anything changes).
    type: bool
    default: true
seealso:
  - plugin: moeops.inference.role_argument_spec
    plugin_type: lookup
  - module: moeops.inference.preflight
"""

EXAMPLES = r"""
- name: Plan the vllm_service role before it changes anything
  moeops.inference.role_plan:
    role: vllm_service
    context:
      gpus: "{{ ansible_facts.nvidia_gpu }}"
  register: vllm_service_plan

- name: Show the outcome
  ansible.builtin.debug:
    msg: "{{ vllm_service_plan.outcome }}"
"""

RETURN = r"""
plan:
  description: What the role will render and run (its keys are the role's own); null when a rule refused an input.
  returned: unless refused (a problem, with O(fail_on_problems))
  type: dict
inputs:
  description:
    - Every option's value, converted by its declared type (no_log values masked).
    - Named C(inputs), not C(values), so that C(result.inputs.x) reaches it in Jinja (C(values) is a mapping's method).
  returned: unless refused
  type: dict
problems:
  description: Every problem found, each starting with the role's name; empty when the plan stands.
  returned: always
  type: list
  elements: str
  sample: ["vllm_service: vllm_service_tensor_parallel_size 3 cannot split or replicate its 8 key/value heads evenly"]
plan_warnings:
  description: The warnings (also shown as Ansible warnings), such as a misspelt variable with a "did you mean"
    where C(moeops_unknown_names) is V(warn).
  returned: always
  type: list
  elements: str
outcome:
  description: One line - what the role will do.
  returned: unless refused
  type: str
checked:
  description: The names of the options planned.
  returned: unless refused
  type: list
  elements: str
"""
