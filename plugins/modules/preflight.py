#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, moeops.inference contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: preflight
short_description: Check the host itself before anything changes - the distribution and room for the weights
version_added: 0.2.0
description:
  - The host checks of the preflight role, the ones that read the node. Every other rule is a role's own, applied by
    M(moeops.inference.role_plan) (the preflight role runs it for every role and reports everything at once).
  - Checks the distribution (Ubuntu 22.04/24.04, Debian 12/13) and, as O(disk_check) says, the free space where the
    weights will live, counting what is already there. Reads a C(config.json) found there, for the model's dimensions.
  - Changes nothing. The pure checks live in C(plugins/module_utils/_roles/preflight.py).
author:
  - moeops.inference contributors (@moeops)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: The module only reads, so it runs the same in check mode.
  diff_mode:
    support: none
  platform:
    platforms: posix
options:
  distro:
    description: The distribution facts C(distribution), C(version), C(major_version) and C(os_family).
    type: dict
    default: {}
  weights:
    description:
      - What the roles will do with the weights, from their plans - C(override) (C(preflight_weights_path)),
        C(model_path) (what the unit loads), C(source), C(dest) and C(local_path) (the model_weights role's),
        C(profile_source), C(size_gb) (the profile's C(weights_size_gb)) and C(hf_home).
      - The place is worked out from them (C(plugins/module_utils/_roles/preflight.py), C(weights_place)). Free space is
        measured on its nearest existing ancestor; bytes already there count towards the weights.
    type: dict
    default: {}
  disk_check:
    description:
      - V(auto) checks the free space when this run fetches the weights - the model_weights role stages them (a local
        source is used where it is), or the service starts (O(service_starts)) and vLLM downloads them itself.
      - V(always) and V(never) force it.
    type: str
    choices: [auto, always, never]
    default: auto
  service_starts:
    description: Whether the vllm_service role starts the service in this run (its plan).
    type: bool
    default: false
  fail_on_problems:
    description: Fail when a problem is found; false reports only.
    type: bool
    default: true
seealso:
  - module: moeops.inference.role_plan
"""

EXAMPLES = r"""
- name: Check the host before anything changes
  moeops.inference.preflight:
    distro:
      distribution: "{{ ansible_facts.distribution }}"
      version: "{{ ansible_facts.distribution_version }}"
      major_version: "{{ ansible_facts.distribution_major_version }}"
      os_family: "{{ ansible_facts.os_family }}"
    weights:
      profile_source: moonshotai/Kimi-K2.5
      size_gb: 595
      hf_home: /var/cache/vllm/huggingface
    service_starts: true
"""

RETURN = r"""
problems:
  description: Every problem found; the module fails when there is one (O(fail_on_problems)).
  returned: always
  type: list
  elements: str
  sample: ["disk: /var/cache/vllm (filesystem at /) has 120.0 GB free, but the weights need 625.0 GB more"]
checked:
  description: The distribution and the weights' place (path, bytes present, bytes free, or why the disk was not checked).
  returned: always
  type: dict
config:
  description: The C(config.json) found where the weights are, or null.
  returned: always
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.moeops.inference.plugins.module_utils._roles import preflight


def main():
    module = AnsibleModule(
        argument_spec=dict(
            distro=dict(type="dict", default={}),
            weights=dict(type="dict", default={}),
            disk_check=dict(type="str", default="auto", choices=["auto", "always", "never"]),
            service_starts=dict(type="bool", default=False),
            fail_on_problems=dict(type="bool", default=True),
        ),
        supports_check_mode=True,
    )
    p = module.params
    problems, checked = [], {}
    distro = p["distro"]
    if distro:
        problems += preflight.check_distro(distro.get("distribution", ""), str(distro.get("version", "")),
                                           str(distro.get("major_version", "")), distro.get("os_family", ""))["problems"]
        checked["distro"] = "%s %s" % (distro.get("distribution"), distro.get("version"))
    w = p["weights"]
    path, config = preflight.weights_place(w), None
    check, why = preflight.disk_check_decision(p["disk_check"], str(w.get("source") or "none"), p["service_starts"])
    if path.startswith("/"):
        weights = preflight.read_weights_dir(path)
        config = weights.get("config")
        if check:
            problems += preflight.check_disk(path, int(float(w.get("size_gb") or 0) * preflight.GB),
                                             int(weights.get("present_bytes") or 0), weights.get("free_bytes"),
                                             weights.get("mount"))["problems"]
            checked["weights"] = {"path": path, "present_bytes": weights.get("present_bytes") or 0,
                                  "free_bytes": weights.get("free_bytes")}
        else:
            checked["weights"] = {"path": path, "disk": why}
    result = dict(changed=False, problems=problems, checked=checked, config=config)
    if problems and p["fail_on_problems"]:
        module.fail_json(msg="preflight: %s" % " | ".join(problems), **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
