#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, moeops.inference contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: preflight
short_description: Check that a host can take a model, and every role's inputs, before anything changes
version_added: 0.2.0
description:
  - Runs every preflight check and reports every problem found in one failure, not just the first.
  - Checks the distribution (Ubuntu 22.04/24.04, Debian 12/13), the GPUs (found, of one model unless the profile
    allows mixing), GPU memory at the profile's C(gpu_memory_utilization) against its C(min_gpu_memory_gb), the
    tensor-parallel size (divides the attention heads, not above the GPU count, one vLLM accepts), the driver branch
    against the compute capability, free disk space where the weights will live (unless they are already there),
    and the model profile's schema.
  - Validates the inputs of every role given in O(role_specs) against its C(meta/argument_specs.yml) options, plus what
    an argument spec cannot say (absolute paths, port ranges, string-only NCCL overrides).
  - P2P reported unsupported between GPUs is a warning, never a failure; it names the likely causes and how to check.
  - Changes nothing. The pure check logic lives in C(plugins/module_utils/preflight.py).
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
    description:
      - The host's distribution, from the setup facts - keys V(distribution), V(version), V(major_version),
        V(os_family). Empty skips the distribution check.
    type: dict
    default: {}
  gpu_facts:
    description: The C(nvidia_gpu) facts from M(moeops.inference.gpu_facts).
    type: dict
    default: {}
  gpus_required:
    description: A host where no GPU can be read is a problem; when V(false) it is a warning and the GPU checks are skipped.
    type: bool
    default: false
  profile:
    description:
      - The model profile (see C(docs/model-profiles.md)). Omitted skips the model checks.
      - Any type is accepted so that a wrong one is reported with every other problem.
    type: raw
  profile_var:
    description: The variable the profile came from, for the messages.
    type: str
    default: vllm_service_profile
  profile_error:
    description: A problem found while loading the profile (such as an unknown profile name), reported with the rest.
    type: str
    default: ""
  tensor_parallel_size:
    description:
      - The tensor-parallel size that will be used; null takes the topology policy's.
      - Any type is accepted so that a wrong one is reported with every other problem.
    type: raw
  gpu_memory_utilization:
    description:
      - The gpu_memory_utilization that will be used; null takes the profile's.
      - Any type is accepted; one that is not a number is reported through the role-input checks.
    type: raw
  extra_args:
    description:
      - Further C(vllm serve) arguments, checked against the profile's compute-capability constraints.
      - Any type is accepted; one that is not a list of strings is reported through the role-input checks.
    type: raw
    default: []
  weights_path:
    description:
      - Absolute path on the node where the weights are or will be, to use instead of working it out. Free space is
        measured on its nearest existing ancestor; bytes already there count towards the weights, and a
        C(config.json) found there supplies the model's dimensions.
      - Empty works it out from O(variables) - C(vllm_service_model_path); else, for an C(http) or C(rsync)
        C(model_weights_source), C(model_weights_dest) or C(/var/cache/vllm/models/<name>) (C(model_weights_name), else
        the profile's name); else C(model_weights_local_path) for a C(local) source; else the profile's source when it
        is an absolute path, or the Hugging Face cache's directory for the repository under O(hf_home).
    type: path
    default: ""
  disk_check:
    description:
      - V(auto) checks the free space for the weights when this run fetches them, decided from O(variables) and
        O(gpu_facts) - the model_weights role stages them (C(model_weights_source) other than V(none); a V(local)
        source is used where it is and needs no room), or the service starts (C(vllm_service_start) V(always), or
        V(auto) with GPUs read from hardware, the facts' C(from_hardware)), since vLLM downloads a repository at start.
      - V(always) and V(never) force it. When it is not checked the weights' C(config.json) is still read.
    type: str
    choices: [auto, always, never]
    default: auto
  hf_home:
    description: Absolute path of the Hugging Face cache (HF_HOME) the service uses.
    type: path
    default: /var/cache/vllm/huggingface
  role_specs:
    description: Role name to its C(argument_specs.main.options), for every role whose inputs are checked.
    type: dict
    default: {}
  variables:
    description:
      - Variable name to value, for the variables that start with a role's prefix; each is checked against the role
        with the longest matching prefix.
      - They also decide what this run does, where a role's option is not set its argument spec's default counts -
        the driver branch it would install (C(nvidia_driver_branch), when C(nvidia_driver) is in O(role_specs)),
        whether it installs the driver (C(nvidia_driver_install_packages)), whether the disk is checked
        (O(disk_check)) and where the weights will be (O(weights_path)).
      - Leave secrets out (options with C(no_log), and names that look like a secret but are no option), since module
        arguments show in the task's invocation at C(-vvv); give those names in O(secret_variable_names).
    type: dict
    default: {}
  secret_variables:
    description:
      - The role options that are secrets (C(no_log) in their argument spec), by name; checked like O(variables) (no
        line break, no whitespace), but never shown, in the invocation or in a message.
    type: dict
    default: {}
  secret_variable_names:
    description:
      - Role-prefixed variables left out of O(variables) because their names look like a secret (C(token), C(passw),
        C(secret), C(api_key), C(apikey), C(credential)) and no role has such an option; only their names are checked,
        for the unknown-variable warning (a typo such as C(vllm_service_apikey) for C(vllm_service_api_key)).
    type: list
    elements: str
    default: []
  known_other_variables:
    description: Role-prefixed variables that are not role options but are expected (no unknown-variable warning).
    type: list
    elements: str
    default: []
  fail_on_problems:
    description: Fail when a problem is found. V(false) only reports.
    type: bool
    default: true
seealso:
  - name: Model profiles
    description: The profile schema, in the collection's C(docs/model-profiles.md).
    link: https://docs.vllm.ai/projects/recipes/
"""

EXAMPLES = r"""
- name: Check the host before anything changes
  moeops.inference.preflight:
    distro:
      distribution: "{{ ansible_facts.distribution }}"
      version: "{{ ansible_facts.distribution_version }}"
      major_version: "{{ ansible_facts.distribution_major_version }}"
      os_family: "{{ ansible_facts.os_family }}"
    gpu_facts: "{{ ansible_facts.nvidia_gpu }}"
    profile: "{{ lookup('moeops.inference.model_profile', 'kimi_k25') }}"
    role_specs:
      nvidia_driver: "{{ lookup('moeops.inference.role_argument_spec', 'nvidia_driver') }}"
    variables:
      nvidia_driver_branch: 580

- name: Survey a host, with the weights in a place of its own and no disk check
  moeops.inference.preflight:
    gpu_facts: "{{ ansible_facts.nvidia_gpu }}"
    profile: "{{ lookup('moeops.inference.model_profile', 'glm5') }}"
    weights_path: /srv/models/glm5
    disk_check: never
    fail_on_problems: false
"""

RETURN = r"""
problems:
  description: Every problem found; the module fails when there is one (O(fail_on_problems)).
  returned: always
  type: list
  elements: str
  sample: ["GPU memory: 4 x 102.6 GB at gpu_memory_utilization 0.92 gives 378 GB, but profile kimi-k2.5-int4 needs at least 714 GB"]
preflight_warnings:
  description: Warnings (also emitted as Ansible warnings), such as P2P unsupported between GPUs.
  returned: always
  type: list
  elements: str
checked:
  description:
    - What was checked - distribution, roles, GPU count, tensor-parallel size, model dimensions with their source
      (config.json or profile), the compute-capability constraints applied, and the weights location.
    - C(decisions) holds what the module worked out from O(variables) - C(driver_branch) (null when no driver role is
      checked), C(installs_driver), C(check_disk) and C(weights_path).
  returned: always
  type: dict
  sample: {"gpus": 8, "tensor_parallel_size": 8, "roles": ["nvidia_driver", "vllm", "vllm_service"],
           "decisions": {"driver_branch": 580, "installs_driver": true, "check_disk": true,
                         "weights_path": "/var/cache/vllm/huggingface/hub/models--moonshotai--Kimi-K2.5"}}
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.moeops.inference.plugins.module_utils._roles import preflight


def group_variables(specs, variables):
    """{role: {name: value}}: a variable goes to every role whose spec declares it (the shared names such as
    vllm_user are declared by each role that uses them), else to the role with the longest matching prefix."""
    grouped = dict((role, {}) for role in specs)
    for name, value in variables.items():
        declared = [r for r in specs if name in (specs[r] or {})]
        roles = declared or [max([r for r in specs if name.startswith(r + "_")], key=len, default=None)]
        for role in roles:
            if role is not None:
                grouped[role][name] = value
    return grouped


def main():
    module = AnsibleModule(
        argument_spec=dict(
            distro=dict(type="dict", default={}),
            gpu_facts=dict(type="dict", default={}),
            gpus_required=dict(type="bool", default=False),
            profile=dict(type="raw"),
            profile_var=dict(type="str", default="vllm_service_profile"),
            profile_error=dict(type="str", default=""),
            tensor_parallel_size=dict(type="raw"),
            gpu_memory_utilization=dict(type="raw"),
            extra_args=dict(type="raw", default=[]),
            weights_path=dict(type="path", default=""),
            disk_check=dict(type="str", default="auto", choices=list(preflight.DISK_CHECK_MODES)),
            hf_home=dict(type="path", default="/var/cache/vllm/huggingface"),
            role_specs=dict(type="dict", default={}),
            variables=dict(type="dict", default={}),
            secret_variables=dict(type="dict", default={}, no_log=True),
            secret_variable_names=dict(type="list", elements="str", default=[], no_log=False),
            known_other_variables=dict(type="list", elements="str", default=[]),
            fail_on_problems=dict(type="bool", default=True),
        ),
        supports_check_mode=True,
    )
    p = module.params
    specs = p["role_specs"]
    decisions = preflight.decide(specs, p["variables"], p["gpu_facts"], p["profile"], p["disk_check"],
                                 p["weights_path"] or "", p["hf_home"])
    path = decisions["weights_path"]
    weights = preflight.read_weights_dir(path) if path.startswith("/") else {}
    inputs = dict(
        distro=p["distro"], gpu_facts=p["gpu_facts"], gpus_required=p["gpus_required"], profile=p["profile"],
        profile_var=p["profile_var"], profile_error=p["profile_error"],
        tensor_parallel_size=p["tensor_parallel_size"], gpu_memory_utilization=p["gpu_memory_utilization"],
        extra_args=p["extra_args"], driver_branch=decisions["driver_branch"],
        installs_driver=decisions["installs_driver"], weights=weights, check_disk=decisions["check_disk"],
        disk_check=p["disk_check"], role_specs=specs, role_values=group_variables(specs, dict(p["variables"], **p["secret_variables"])),
        variable_names=sorted(set(p["variables"]) | set(p["secret_variable_names"])), known_other_variables=p["known_other_variables"],
    )
    report = preflight.run_preflight(inputs)
    report["checked"]["decisions"] = decisions
    for warning in report["warnings"]:
        module.warn(warning)
    result = dict(changed=False, problems=report["problems"], preflight_warnings=report["warnings"],
                  checked=report["checked"])
    if report["problems"] and p["fail_on_problems"]:
        module.fail_json(
            msg="preflight found %d problem(s); nothing was changed: %s"
                % (len(report["problems"]), " | ".join("(%d) %s" % (i + 1, m) for i, m in enumerate(report["problems"]))),
            **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
