#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, moeops.inference contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: vllm_engine_check
short_description: Ask the installed vLLM whether it takes a model profile on given GPUs, without a GPU
version_added: 0.6.0
description:
  - Runs the collection's engine check in the vLLM venv, with that venv's Python. For each profile and each compute
    capability it pins vLLM's CUDA platform to that capability and asks the installed vLLM's own code which attention
    backend it selects for the profile's attention type (C(attention_type)) and whether that backend takes the KV cache
    dtype, whether the quantization method (C(quantization_method)) runs on that capability, and whether tensor
    parallel splits the heads and places the experts evenly.
  - No GPU is used. The check starts with C(CUDA_VISIBLE_DEVICES) empty, and on a host without the NVIDIA driver it
    loads a CUDA driver stub, so every device call fails.
  - vLLM is asked in the environment the C(vllm.service) unit gives it, not the module's. That is systemd's default
    C(PATH) (C(/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin)) with the unit's own C(Environment=) values over it
    (O(environment)), and nothing else. vLLM's answers depend on it. FlashInfer is off unless its precompiled kernels
    (C(flashinfer-cubin)) are installed or C(nvcc) and C(ninja) are on that C(PATH), and then every FlashInfer
    attention backend is refused. A refusal for that reason says so and names the fix, the C(moeops.inference.vllm)
    role's C(vllm_flashinfer_kernels).
  - Each capability is checked as a host with only GPUs of that capability would run the profile, with that
    capability's C(compute_capability_constraints) applied. The KV cache dtype is the one the C(moeops.inference.vllm_service)
    unit's command line would give vLLM, so a C(--kv-cache-dtype) in O(extra_args) wins.
  - Fails when vLLM refuses something, with one message per refusal naming the profile, its file and key and the
    engine's reason, for example that no vLLM attention backend takes
    C(compute_capability_constraints[0].kv_cache_dtype) V(bfloat16) on compute capability 12.0. Also fails when the
    check cannot run, for example when the installed vLLM lacks a function the check uses. An upgrade then needs a
    look before it is trusted.
  - Warns about what the engine did not check (an unknown attention type, no head size) and about uncertain answers (a
    higher-ranked backend that cannot be imported without a GPU). Neither counts as a pass.
  - The answer is kept in a record under O(cache_dir). The record is named by a digest of the request, the check's code
    and the venv's installed distributions, so the same question to the same vLLM is answered without importing vLLM
    again. The bytecode of the modules vLLM imports is kept there too, never in the venv, which makes the next import
    about three times faster (about 45 s, then 17 s, for vLLM 0.33.0 on two busy cores).
  - The C(moeops.inference.vllm_service) role runs it after the C(moeops.inference.vllm) role installed the venv and
    before it installs the unit, unless C(vllm_engine=cpu) (the CPU build has no CUDA backends) or
    C(vllm_service_engine_check=false).
author:
  - moeops.inference contributors (@moeops)
requirements:
  - A venv with vLLM's CUDA build (the C(moeops.inference.vllm) role installs one), reached by O(python).
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details:
      - Asks vLLM as in a normal run, but writes neither the record nor bytecode.
      - Before the venv exists (a fresh node in check mode) it returns RV(checked=false) with a note, not a failure.
  diff_mode:
    support: none
  platform:
    platforms: posix
options:
  python:
    description: Absolute path of the vLLM venv's Python (C(<vllm_venv>/bin/python)).
    type: path
    default: /opt/vllm/engine/bin/python
  profiles:
    description: The model profiles to check.
    type: list
    elements: dict
    required: true
    suboptions:
      name:
        description: The name messages use (the C(vllm_service_profile) value).
        type: str
        required: true
      profile:
        description: The profile mapping, as the C(moeops.inference.model_profile) lookup returns it.
        type: dict
        required: true
      file:
        description: Where the profile came from, for messages. Default O(profiles[].name).
        type: str
      config:
        description:
          - The model's C(config.json) where it is known (the C(model_weights) role's C(model_weights_config)). Its
            head size, expert count, dtype and C(quantization_config) win over the profile's.
        type: dict
        default: {}
  compute_capabilities:
    description:
      - The compute capabilities to check each profile on, such as V(12.0) (the host's, from the C(nvidia_gpu) facts).
      - A capability below a profile's C(min_compute_capability) is left out for that profile.
    type: list
    elements: str
    required: true
  tensor_parallel_sizes:
    description: The tensor-parallel sizes to check. Default the profile's C(tensor_parallel_sizes), else 1, 2, 4 and 8.
    type: list
    elements: int
  extra_args:
    description: Further C(vllm serve) arguments the unit passes (C(vllm_service_extra_args)); a C(--kv-cache-dtype) among them wins.
    type: list
    elements: str
    default: []
  environment:
    description:
      - The unit's C(Environment=) values (the C(vllm_service) role passes its plan's). vLLM is asked with exactly
        these, over systemd's default C(PATH), with C(CUDA_VISIBLE_DEVICES) empty and C(HF_HUB_OFFLINE=1).
      - A C(PATH) among them replaces systemd's default, as it does in the unit.
      - Secrets do not belong here. The values are passed on the check's command line, through C(env -i).
    type: dict
    default: {}
  cache:
    description:
      - Keep the answer in a record under O(cache_dir) and reuse it for the same question, and keep the imported
        modules' bytecode there. V(false) writes nothing.
    type: bool
    default: true
  cache_dir:
    description: Absolute directory of the records.
    type: path
    default: /var/cache/moeops/engine-check
notes:
  - It never reports a change (C(changed=false)). The record only saves the next run the time of importing vLLM.
  - The record's name covers O(environment) too, so another C(PATH) or C(CUDA_HOME) asks again.
  - The collection's C(docs/model-profiles.md) has the check's table for the shipped profiles on each compute capability.
seealso:
  - module: moeops.inference.vllm_service_info
"""

EXAMPLES = r"""
- name: Ask the installed vLLM about GLM-5 on RTX PRO 6000 (compute capability 12.0) at tensor parallel 8
  moeops.inference.vllm_engine_check:
    python: /opt/vllm/engine/bin/python
    profiles:
      - name: glm5
        profile: "{{ lookup('moeops.inference.model_profile', 'glm5') }}"
    compute_capabilities: ["12.0"]
    tensor_parallel_sizes: [8]
  register: engine

- name: Show what vLLM selects
  ansible.builtin.debug:
    msg: "{{ engine.table }}"
"""

RETURN = r"""
checked:
  description: Whether the installed vLLM answered (false in check mode before the venv exists).
  returned: always
  type: bool
cached:
  description: Whether the answer came from the record of an earlier run with the same question.
  returned: always
  type: bool
record:
  description: The record's path; empty when none is kept.
  returned: always
  type: str
vllm:
  description: The version of the vLLM that answered.
  returned: always
  type: str
  sample: 0.33.0
problems:
  description: What vLLM refuses, one message each, naming the profile, its file and key and the engine's reason.
  returned: always
  type: list
  elements: str
  sample:
    - "vllm_service_profile glm5 (profiles/glm5.yml) compute_capability_constraints[0].kv_cache_dtype bfloat16 on compute
       capability 12.0: no vLLM attention backend takes it (FLASHINFER_MLA_SPARSE_SM120: kv_cache_dtype not supported;
       TRITON_MLA: sparse not supported); with kv_cache_dtype auto vLLM picks FLASHINFER_MLA_SPARSE_SM120, which takes
       auto, fp8, fp8_e4m3, fp8_ds_mla (tensor parallel 8)"
notes:
  description: What the engine did not check, and uncertain answers; each is also a warning.
  returned: always
  type: list
  elements: str
rows:
  description:
    - One per profile and compute capability. C(status) is C(ok), C(problem), C(uncertain) or C(not checked).
      C(backend) is the attention backend vLLM selects. C(kv) says whether that backend takes the KV cache dtype,
      and what vLLM makes of it. C(quantization) says whether the method runs there, with its minimum capability.
      C(tensor_parallel) gives each size's verdict.
  returned: always
  type: list
  elements: dict
  sample:
    - {profile: glm5, file: profiles/glm5.yml, compute_capability: "12.0", kv_cache_dtype: auto, status: ok,
       backend: FLASHINFER_MLA_SPARSE_SM120, kv: auto ok (-> fp8_ds_mla), quantization: modelopt_fp4 ok (min 75),
       tensor_parallel: 8 ok}
table:
  description: RV(rows) as a Markdown table, with the vLLM version on top.
  returned: always
  type: str
flashinfer:
  description:
    - vLLM's own answers on FlashInfer where it was asked, from C(vllm.utils.flashinfer). C(has_flashinfer) is whether
      vLLM uses FlashInfer at all, C(has_flashinfer_cubin) whether its precompiled kernels count as installed. The
      C(nvcc) and C(ninja) it found are there too, with C(installed) (the C(flashinfer) package) and the C(path).
    - Empty when the check did not run.
  returned: always
  type: dict
  sample: {installed: true, has_flashinfer: false, has_flashinfer_cubin: false, nvcc: null, ninja: null,
           path: /usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin, VLLM_HAS_FLASHINFER_CUBIN: null}
request:
  description: What the check was asked, per profile and compute capability.
  returned: always
  type: dict
missing:
  description: The vLLM names the check uses that the installed vLLM lacks (the check then did not run).
  returned: when the installed vLLM lacks one
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.moeops.inference.plugins.module_utils._engine import node


def main():
    module = AnsibleModule(
        argument_spec=dict(
            python=dict(type="path", default="/opt/vllm/engine/bin/python"),
            profiles=dict(type="list", elements="dict", required=True, options=dict(
                name=dict(type="str", required=True),
                profile=dict(type="dict", required=True),
                file=dict(type="str"),
                config=dict(type="dict", default={}),
            )),
            compute_capabilities=dict(type="list", elements="str", required=True),
            tensor_parallel_sizes=dict(type="list", elements="int"),
            extra_args=dict(type="list", elements="str", default=[]),
            environment=dict(type="dict", default={}),
            cache=dict(type="bool", default=True),
            cache_dir=dict(type="path", default="/var/cache/moeops/engine-check"),
        ),
        supports_check_mode=True,
    )
    if not module.params["cache_dir"].startswith("/"):
        module.fail_json(msg="cache_dir must be an absolute path, got %s" % module.params["cache_dir"])
    result = node.engine_check(module.params, module.run_command, module.check_mode)
    for note in result["notes"]:
        module.warn(note)
    if result.pop("failed"):
        module.fail_json(**result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
