#!/usr/bin/env bash
# The P2P gate on a GPU machine lent by the device tool (ansible-core as wheels in .whl/, as
# tests/device/gpu_facts_on_device.sh). With ONE GPU:
#  1. the module on the GPUs read by NVML: "nothing to prove", timed;
#  2. the gate's all-reduce step through the launcher on the real NCCL path of one rank (communicator init,
#     decode size and 1 MiB, verified), timed; and its copy step (no pair on one GPU);
#  3. the module on 2 CPU ranks through gloo: a pass, then a rank that never answers (timeout 20 s).
# Usage (repo root): OUT=/some/dir bash tests/device/p2p_gate_on_device.sh
set -euo pipefail
: "${OUT:?set OUT}"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
# shellcheck source=tests/device/carry_ansible.sh
. tests/device/carry_ansible.sh ansible.builtin.default
nvidia-smi -L > "$OUT/nvidia-smi-L.txt"

# 2. The launcher alone, one NCCL rank, the gate's own all-reduce spec (Kimi-K2.5: hidden 7168, bf16).
spec=$(PYTHONPATH=/tmp/ac:$PYTHONPATH python3 -c '
import json
from ansible_collections.moeops.inference.plugins.module_utils._nccl import p2p_gate
steps = p2p_gate.steps(2, 7168, "bfloat16", "nccl", 120, {"NCCL_P2P_LEVEL": "SYS", "NCCL_PROTO": "LL", "NCCL_ALGO": "Ring"})
spec = dict(steps[1], world_size=1)
print(json.dumps(spec))')
start=$EPOCHREALTIME
python3 plugins/module_utils/_nccl/rank.py --launch "$spec" > "$OUT/allreduce-1rank.stdout"
echo "all-reduce step, 1 NCCL rank: $(awk "BEGIN {print $EPOCHREALTIME - $start}") s" | tee "$OUT/timings.txt"
grep -o '"failure": "[^"]*"' "$OUT/allreduce-1rank.stdout" | head -1
copy=$(echo "$spec" | python3 -c 'import json,sys; s=json.load(sys.stdin); s.update(step="copy", copy_bytes=64<<20); print(json.dumps(s))')
python3 plugins/module_utils/_nccl/rank.py --launch "$copy" > "$OUT/copy-1gpu.stdout"

# 1 and 3. The module, through Ansible.
cat > /tmp/gate.yml <<YML
- hosts: localhost
  connection: local
  gather_facts: false
  vars:
    ansible_python_interpreter: $py
  tasks:
    - moeops.inference.gpu_facts:
        backend: nvml
        required: true
    - moeops.inference.p2p_gate:
        python: $py
        gpu_facts: "{{ ansible_facts.nvidia_gpu }}"
        hidden_size: 7168
        record: /tmp/p2p-gate-gpu.json
      register: gpu
    - moeops.inference.p2p_gate:
        python: $py
        gpu_facts: "{{ ansible_facts.nvidia_gpu }}"
        hidden_size: 64
        backend: gloo
        world_size: 2
        timeout: 60
        record: /tmp/p2p-gate-gloo.json
      register: gloo
    - moeops.inference.p2p_gate:
        python: $py
        gpu_facts: "{{ ansible_facts.nvidia_gpu }}"
        hidden_size: 64
        backend: gloo
        world_size: 2
        timeout: 20
        hang_rank: 1
        fail_on_error: false
      register: hang
    - ansible.builtin.copy:
        dest: $OUT/gate-results.json
        content: "{{ {'gpu': gpu, 'gloo': gloo, 'hang': hang} | to_nice_json }}"
        mode: "0644"
    - ansible.builtin.debug:
        msg: ["{{ gpu.message }} ({{ gpu.seconds }} s)", "{{ gloo.message }}", "{{ hang.message }} ({{ hang.seconds }} s)"]
YML
start=$SECONDS
ansible-playbook /tmp/gate.yml 2>&1 | tee "$OUT/playbook.log"
echo "playbook: $((SECONDS - start)) s" | tee -a "$OUT/timings.txt"
