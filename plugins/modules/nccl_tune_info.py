#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, moeops.inference contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: nccl_tune_info
short_description: Find the stored NCCL tuning result that matches the node now
version_added: 0.2.0
description:
  - Computes the fingerprint that M(moeops.inference.nccl_tune) stores its results under (topology from O(gpu_facts),
    driver version, the NCCL version of the PyTorch in O(python), O(world_size)) and returns the stored result for it
    and O(workload).
  - The C(moeops.inference.vllm_service) role passes that result to the NCCL policy, which then prefers the measured
    environment over its static rules; inventory overrides still win.
  - A result for another fingerprint is never returned; RV(stored) lists what is there, so a report can say why none matched.
  - A result of the same box and rank count whose NCCL version or driver differs from now (an upgrade since the
    sweep) is STALE - listed in RV(stale) with what changed, and RV(reason) says so; it is not used.
  - A result whose best environment names an C(NCCL_TOPO_FILE) that no longer exists is not used.
author:
  - moeops.inference contributors (@moeops)
requirements:
  - PyTorch in O(python) to read its NCCL version, unless O(nccl_version) is given.
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: The module only reads.
  diff_mode:
    support: none
  platform:
    platforms: posix
options:
  python:
    description: Absolute path of the Python whose PyTorch the service runs (the vLLM venv's).
    type: path
    default: /opt/vllm/engine/bin/python
  gpu_facts:
    description: The C(nvidia_gpu) facts from M(moeops.inference.gpu_facts).
    type: dict
    required: true
  world_size:
    description:
      - Number of ranks the service runs (its tensor-parallel size); defaults to the topology policy's layout for the
        GPUs (the largest power of two not above their count), as the vllm_service role's unit uses.
    type: int
  nccl_version:
    description: The NCCL version, when known; skips starting O(python).
    type: str
  workload:
    description: The workload the result must be for (the vllm_service role's C(vllm_service_workload)).
    type: str
    choices: [latency, balanced, throughput]
    default: balanced
    version_added: 0.8.0
  store_dir:
    description: Absolute directory of the stored results.
    type: path
    default: /var/lib/moeops/nccl-tuning
"""

EXAMPLES = r"""
- name: Look for a tuning result for this node
  moeops.inference.nccl_tune_info:
    gpu_facts: "{{ ansible_facts.nvidia_gpu }}"
    world_size: 8
    workload: throughput
  register: tuning

- name: Say when an upgrade made a stored result stale
  ansible.builtin.debug:
    msg: "{{ tuning.stale | map(attribute='line') | list }}"
  when: tuning.stale | length > 0

- name: Render the NCCL environment with it
  ansible.builtin.debug:
    msg: "{{ ansible_facts.nvidia_gpu | moeops.inference.nccl_env(tuning=tuning.result, workload='throughput') }}"
"""

RETURN = r"""
found:
  description: Whether a usable result for the fingerprint is stored.
  returned: always
  type: bool
result:
  description: The stored document (see M(moeops.inference.nccl_tune)); null when none matched.
  returned: always
  type: dict
fingerprint:
  description: The fingerprint of the node now (id and components); empty when it could not be computed.
  returned: always
  type: dict
stored_path:
  description: Where a result for this fingerprint and workload is or would be stored.
  returned: always
  type: str
stale:
  description:
    - Results of this box and rank count for this workload measured with another NCCL version or driver; each with
      C(path), C(fingerprint), C(measured_at), C(differs) (component - [then, now]) and C(line), one sentence.
  returned: always
  type: list
  elements: dict
  version_added: 0.8.0
other_workloads:
  description: Workloads with a result for this fingerprint other than O(workload).
  returned: always
  type: list
  elements: str
  version_added: 0.8.0
reason:
  description: Why no result is used, empty when one is.
  returned: always
  type: str
stored:
  description: Every result in O(store_dir), as C(<fingerprint>-<workload>) (or C(<fingerprint>) from before workloads).
  returned: always
  type: list
  elements: str
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.moeops.inference.plugins.module_utils._nccl import tune
from ansible_collections.moeops.inference.plugins.module_utils._common import state_files
from ansible_collections.moeops.inference.plugins.module_utils._policy import nccl_policy


def probe_nccl_version(module, python):
    """(version or None, why not)."""
    if not os.access(python, os.X_OK):
        return None, "%s does not exist (vLLM venv not installed yet)" % python
    with tune.rank_script("nccl-tune-info-") as script:
        record, why = tune.probe(module.run_command, python, script, tail=500)
    return (record or {}).get("nccl_version"), why


def main():
    module = AnsibleModule(
        argument_spec=dict(
            python=dict(type="path", default="/opt/vllm/engine/bin/python"),
            gpu_facts=dict(type="dict", required=True),
            world_size=dict(type="int"),
            nccl_version=dict(type="str"),
            workload=dict(type="str", default="balanced", choices=list(tune.WORKLOADS)),
            store_dir=dict(type="path", default="/var/lib/moeops/nccl-tuning"),
        ),
        supports_check_mode=True,
    )
    p = module.params
    facts = p["gpu_facts"]
    store_dir = p["store_dir"]
    if not os.path.isabs(store_dir):
        module.fail_json(msg="store_dir must be an absolute path, got %s" % store_dir)
    try:
        listing = os.listdir(store_dir)
    except OSError:
        listing = []
    stored = tune.stored_names(listing)
    result = dict(changed=False, found=False, result=None, fingerprint={}, stored_path="", reason="", stored=stored,
                  stale=[], other_workloads=[])
    if not stored:
        result["reason"] = "no tuning result stored in %s" % store_dir
        module.exit_json(**result)
    world_size = p["world_size"] or (int(nccl_policy.parallel_layout(facts)["tensor_parallel_size"])
                                     if int(facts.get("count") or 0) else 0)
    version = p["nccl_version"]
    if version is None:
        version, why = probe_nccl_version(module, p["python"])
        if why:
            result["reason"] = why
            module.exit_json(**result)
    fp = tune.fingerprint(facts, version, world_size)
    chosen = tune.select_result(stored, state_files.read_json_reason, store_dir, fp, p["workload"])
    result.update(fingerprint=fp, stored_path=chosen["path"], reason=chosen["reason"], stale=chosen["stale"],
                  other_workloads=chosen["other_workloads"])
    if chosen["found"]:
        topo_file = ((chosen["result"].get("best") or {}).get("env") or {}).get("NCCL_TOPO_FILE")
        if topo_file and not os.path.isfile(topo_file):
            result["reason"] = ("%s is not usable: its best environment names NCCL_TOPO_FILE=%s, which does not exist "
                                "(run the sweep again)" % (chosen["path"], topo_file))
            module.exit_json(**result)
        result.update(found=True, result=chosen["result"])
    module.exit_json(**result)


if __name__ == "__main__":
    main()
