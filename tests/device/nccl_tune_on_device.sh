#!/usr/bin/env bash
# Runs the NCCL sweep harness for real on a GPU machine lent by the device tool
# (ansible-core as wheels in .whl/, as tests/device/gpu_facts_on_device.sh).
# With ONE GPU it exercises the real NCCL code path (communicator init, CUDA-event
# timing, the module's launch/parse/rank/store, the role's lookup and the policy's
# precedence) at Kimi-K2.5's message sizes, but a 1-rank all-reduce moves no data
# between GPUs: its timings rank nothing and are not a sweep result.
# Usage (repo root): OUT=/some/dir bash tests/device/nccl_tune_on_device.sh
# WORKLOADS="latency balanced throughput" sweeps once a workload (default: balanced alone), each stored on its own;
# the results are sweep-result-<workload>.json (sweep-result.json for balanced alone, as before).
# On 8 GPUs (a kind with 8, or the 8x RTX PRO 6000 box itself, with .whl carried):
#   OUT=... WORLD_SIZE_SWEEP=8 BUDGET=900 WORKLOADS="latency balanced throughput" bash tests/device/nccl_tune_on_device.sh
set -euo pipefail
: "${OUT:?set OUT}"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
WORLD_SIZE_SWEEP=${WORLD_SIZE_SWEEP:-$(nvidia-smi -L | wc -l)}
BUDGET=${BUDGET:-240}
WORKLOADS=${WORKLOADS:-balanced}
# shellcheck source=tests/device/carry_ansible.sh
. tests/device/carry_ansible.sh ansible.builtin.default
nvidia-smi -L > "$OUT/nvidia-smi-L.txt"

# 1. The rank script alone, one rank, NCCL's INIT and TUNING log.
spec='{"backend":"nccl","device":"cuda","dtype":"bfloat16","inner":10,"warmup":5,"iterations":20,"timeout_s":120,
"sizes":[{"name":"decode-1","elements":7168,"bytes":14336},{"name":"decode-128","elements":917504,"bytes":1835008},
{"name":"prefill-8192","elements":58720256,"bytes":117440512}]}'
RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=29533 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,TUNING \
  python3 plugins/module_utils/_nccl/rank.py "$spec" > "$OUT/rank-direct.stdout" 2> "$OUT/rank-direct.stderr"
grep '^NCCL_TUNE' "$OUT/rank-direct.stdout"
grep -c ' NCCL ' "$OUT/rank-direct.stderr" || true

# 2. The module, the info module and the policy, through Ansible, once a workload.
for WORKLOAD in $WORKLOADS; do
suffix=$([ "$WORKLOADS" = balanced ] && echo "" || echo "-$WORKLOAD")
cat > /tmp/sweep.yml <<YML
- hosts: localhost
  connection: local
  gather_facts: false
  vars:
    ansible_python_interpreter: $py
  tasks:
    - moeops.inference.gpu_facts:
        backend: nvml
        required: true
    - moeops.inference.nccl_tune:
        python: $py
        gpu_facts: "{{ ansible_facts.nvidia_gpu }}"
        hidden_size: 7168
        world_size: $WORLD_SIZE_SWEEP
        workload: $WORKLOAD
        pinned: {NCCL_NVLS_ENABLE: "0"}
        nccl_debug: INFO
        time_budget: $BUDGET
        store_dir: /tmp/nccl-tuning
      register: sweep
    - moeops.inference.nccl_tune_info:
        python: $py
        gpu_facts: "{{ ansible_facts.nvidia_gpu }}"
        world_size: $WORLD_SIZE_SWEEP
        workload: $WORKLOAD
        store_dir: /tmp/nccl-tuning
      register: info
    - ansible.builtin.copy:
        dest: $OUT/sweep-result$suffix.json
        content: "{{ {'sweep': sweep, 'info': info,
                      'policy': ansible_facts.nvidia_gpu | moeops.inference.nccl_env({'NCCL_DEBUG': 'WARN'}, explain=true,
                                                                                     tuning=info.result, workload='$WORKLOAD')} | to_nice_json }}"
        mode: "0644"
    - ansible.builtin.debug:
        msg: "{{ sweep.progress + sweep.table + ['info found: ' ~ info.found ~ ' ' ~ info.reason] }}"
YML
start=$SECONDS
ansible-playbook /tmp/sweep.yml 2>&1 | tee "$OUT/playbook$suffix.log"
echo "playbook ($WORKLOAD): $((SECONDS - start)) s"
done
cp /tmp/nccl-tuning/sweep.log "$OUT/sweep.log"
cp /tmp/nccl-tuning/*.json "$OUT/" 2>/dev/null || true
cp -r /tmp/nccl-tuning/topology "$OUT/" 2>/dev/null || true
