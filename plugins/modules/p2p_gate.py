#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, moeops.inference contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: p2p_gate
short_description: Prove GPU peer-to-peer works before vLLM starts
version_added: 0.5.0
description:
  - On PCIe-only boxes NCCL can hang at the first all-reduce while NVML reports P2P OK (an IOMMU in translated mode,
    ACS redirect bits on the bridges). This module proves P2P first, in the vLLM venv's own PyTorch and NCCL, with
    the unit's NCCL environment, each step under a hard timeout.
  - Step 1, on GPUs, copies from every GPU to every other and checks the bytes. Step 2 runs an all-reduce across
    all the GPUs (one rank a GPU) at the model's decode message size (O(hidden_size) times the dtype's bytes) and
    at 1 MiB, and checks the sums.
  - A failure or a timeout names the step, the pair or the rank that did not answer, the likely cause from the
    PCIe host findings of O(gpu_facts) (C(docs/pcie-host-facts.md)) and the remedy.
  - With fewer than two GPUs there is nothing to prove; it says so and runs nothing.
  - O(backend=gloo) runs step 2 on CPU ranks (no step 1). That proves the harness, the timeout and the reporting,
    not P2P; the tests use it on machines without GPUs.
author:
  - moeops.inference contributors (@moeops)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: partial
    details: In check mode the module reports what it would run, and runs nothing.
  diff_mode:
    support: none
  platform:
    platforms: posix
options:
  python:
    description: Absolute path of the Python whose PyTorch and NCCL the service runs (the vLLM venv's).
    type: path
    default: /opt/vllm/engine/bin/python
  gpu_facts:
    description: The C(nvidia_gpu) facts from M(moeops.inference.gpu_facts); their C(host) section gives the likely cause.
    type: dict
    required: true
  world_size:
    description: Number of GPUs to prove; defaults to the GPU count of O(gpu_facts).
    type: int
  hidden_size:
    description: The model's hidden size; the decode message of one token is this many elements.
    type: int
    required: true
  dtype:
    description: The activations' dtype.
    type: str
    choices: [bfloat16, float16, float32]
    default: bfloat16
  environment:
    description: The NCCL (and other) environment of the vLLM unit, which the ranks run with.
    type: dict
    default: {}
  timeout:
    description: Seconds each step may take before its processes are killed and the gate fails.
    type: int
    default: 120
  backend:
    description: V(nccl) on the GPUs; V(gloo) on CPU ranks (the harness only, for tests without GPUs).
    type: str
    choices: [nccl, gloo]
    default: nccl
  user:
    description: Run the steps as this user (the service user), through C(setpriv); empty runs them as the module's user.
    type: str
    default: ""
  record:
    description: Absolute path of a JSON file where the result and its time are recorded (root-only directory advised).
    type: path
  fail_on_error:
    description: Fail when the gate fails; V(false) reports the failure in RV(passed) and RV(message) only.
    type: bool
    default: true
  hang_rank:
    description:
      - TEST DOUBLE knob - this rank never answers (it sleeps before the first collective), to show the timeout. Never
        set it on a real box.
    type: int
notes:
  - The ranks are started by the collection's rank harness (the same as M(moeops.inference.nccl_tune)'s), written to a
    temporary directory readable by O(user).
seealso:
  - module: moeops.inference.nccl_tune
  - module: moeops.inference.gpu_facts
"""

EXAMPLES = r"""
- name: Prove P2P with the unit's NCCL environment before vLLM starts
  moeops.inference.p2p_gate:
    gpu_facts: "{{ ansible_facts.nvidia_gpu }}"
    hidden_size: 7168
    environment: {NCCL_P2P_LEVEL: SYS, NCCL_PROTO: LL, NCCL_ALGO: Ring}
    user: vllm
    record: /var/lib/moeops/p2p-gate.json
"""

RETURN = r"""
passed:
  description: Whether every step passed (true with nothing to prove).
  returned: always
  type: bool
nothing_to_prove:
  description: True with fewer than two GPUs; nothing ran.
  returned: always
  type: bool
message:
  description: One line - what passed, or the failing step, pair or rank, the likely cause and the remedy.
  returned: always
  type: str
seconds:
  description: Wall-clock seconds of the whole gate.
  returned: always
  type: float
steps:
  description: One entry a step - C(name), C(passed), C(seconds), C(detail), and C(pairs) (copy) or C(sizes) (all-reduce, slowest rank in microseconds).
  returned: always
  type: list
  elements: dict
"""

import json
import os
import pwd
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.moeops.inference.plugins.module_utils._nccl import tune
from ansible_collections.moeops.inference.plugins.module_utils._nccl import p2p_gate as gate
from ansible_collections.moeops.inference.plugins.module_utils._common import state_files


def run_step(module, argv, spec):
    """One step through the launcher: (launch record, {rank: records})."""
    rc, out, err = module.run_command(argv + [json.dumps(spec)])
    launches = [r for r in tune.parse_rank_lines(out) if r.get("event") == "launch"]
    if rc != 0 or not launches:
        return {"failure": "the launcher failed (rc %d): %s" % (rc, (err or out).strip()[-1000:]), "stuck": []}, {}
    ranks = launches[0].get("ranks") or {}
    return launches[0], {int(k): tune.parse_rank_lines(v.get("stdout", "")) for k, v in ranks.items()}


def main():
    module = AnsibleModule(
        argument_spec=dict(
            python=dict(type="path", default="/opt/vllm/engine/bin/python"),
            gpu_facts=dict(type="dict", required=True),
            world_size=dict(type="int"),
            hidden_size=dict(type="int", required=True),
            dtype=dict(type="str", default="bfloat16", choices=sorted(gate.DTYPES)),
            environment=dict(type="dict", default={}),
            timeout=dict(type="int", default=120),
            backend=dict(type="str", default="nccl", choices=["nccl", "gloo"]),
            user=dict(type="str", default=""),
            record=dict(type="path"),
            fail_on_error=dict(type="bool", default=True),
            hang_rank=dict(type="int"),
        ),
        supports_check_mode=True,
    )
    p = module.params
    world = p["world_size"] if p["world_size"] is not None else int(p["gpu_facts"].get("count") or 0)
    env = {str(k): str(v) for k, v in p["environment"].items()}
    plan = gate.steps(world, p["hidden_size"], p["dtype"], p["backend"], p["timeout"], env, p["hang_rank"])
    result = dict(changed=False, passed=True, nothing_to_prove=not plan, steps=[], seconds=0.0)
    if not plan:
        result["message"] = "%d GPU: nothing to prove (no peer-to-peer traffic)" % world
        module.exit_json(**result)
    if module.check_mode:
        result["message"] = "check mode: would run %s" % ", ".join(s["name"] for s in plan)
        module.exit_json(**result)

    began = time.monotonic()
    prefix = []
    if p["user"] and os.geteuid() == 0:
        try:
            account = pwd.getpwnam(p["user"])
        except KeyError:
            module.fail_json(msg="p2p_gate: user %s does not exist" % p["user"])
        prefix = ["setpriv", "--reuid", str(account.pw_uid), "--regid", str(account.pw_gid), "--init-groups", "--"]
    with tune.rank_script("p2p-gate-") as script:
        os.chmod(os.path.dirname(script), 0o755)  # readable by the service user the ranks run as
        os.chmod(script, 0o644)
        for spec in plan:
            t0 = time.monotonic()
            launch, per_rank = run_step(module, prefix + [p["python"], script, "--launch"], spec)
            if spec["step"] == "copy":
                outcome = gate.copy_outcome(launch, per_rank.get(0, []), p["timeout"])
            else:
                outcome = gate.allreduce_outcome(launch, per_rank, world, p["timeout"])
            outcome.update(name=spec["name"], seconds=round(time.monotonic() - t0, 3))
            result["steps"].append(outcome)
            if not outcome["passed"]:
                break
    result["seconds"] = round(time.monotonic() - began, 3)
    failed = [s for s in result["steps"] if not s["passed"]]
    result["passed"] = not failed
    if failed:
        cause = gate.likely_cause(p["gpu_facts"])
        result["message"] = "P2P gate failed at %s: %s; %s" % (failed[0]["name"], failed[0]["detail"], cause)
    else:
        done = "; ".join("%s: %s" % (s["name"], s["detail"]) for s in result["steps"])
        result["message"] = "P2P gate passed in %.1f s: %s" % (result["seconds"], done)
    if p["record"]:
        doc = {"at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "backend": p["backend"], "world_size": world,
               "passed": result["passed"], "message": result["message"], "seconds": result["seconds"],
               "steps": result["steps"], "environment": env}
        result["changed"] = state_files.write_json(p["record"], doc, mode=0o644, move=module.atomic_move)
    if failed and p["fail_on_error"]:
        module.fail_json(msg=result.pop("message"), **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
