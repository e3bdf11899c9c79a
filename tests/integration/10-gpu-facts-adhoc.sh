#!/usr/bin/env bash
# gpu_facts through the real ansible CLI, and the topology playbook on the
# simulated workstation.  Runs from the repository root with the tooling venv
# on PATH (tests/run sets that up); ansible.cfg finds the collection.
set -euo pipefail
seed=$PWD/tests/fixtures/gpu/constructed/rtxpro6000-x8-2numa.json
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
py=$(command -v python3)

# 1. Ad-hoc module run, snapshot backend, JSON out through the json callback.
ANSIBLE_LOAD_CALLBACK_PLUGINS=1 ANSIBLE_STDOUT_CALLBACK=ansible.builtin.json \
  ansible localhost -c local -e ansible_python_interpreter="$py" \
  -m moeops.inference.gpu_facts -a "backend=snapshot snapshot=$seed dump=$work/again.json" > "$work/out.json"
python3 - "$work" <<'PY'
import json, sys
work = sys.argv[1]
res = json.load(open(work + "/out.json"))["plays"][0]["tasks"][0]["hosts"]["localhost"]
f = res["ansible_facts"]["nvidia_gpu"]
assert f["backend"] == "snapshot" and f["count"] == 8, f
assert f["interconnect"] == {"class": "pcie_cross_numa", "worst_path": "SYS", "p2p_all_ok": True,
                             "nvlink_all": False, "numa_nodes": [0, 1]}, f["interconnect"]
assert res["changed"] is True and json.load(open(work + "/again.json"))["schema_version"] == 1
print("ad-hoc gpu_facts: 8 GPUs, pcie_cross_numa, SYS, dump written")
PY

# 2. A second run with the same dump changes nothing.
ansible localhost -c local -e ansible_python_interpreter="$py" -o \
  -m moeops.inference.gpu_facts -a "backend=snapshot snapshot=$seed dump=$work/again.json" > "$work/second.txt" 2>/dev/null
grep -q '| SUCCESS =>' "$work/second.txt" || { echo "second dump run reported a change:"; cat "$work/second.txt"; exit 1; }
echo "ad-hoc gpu_facts: second dump unchanged"

# 3. No GPU on this machine: auto reports count 0 and backend none, required fails by name.
ANSIBLE_LOAD_CALLBACK_PLUGINS=1 ANSIBLE_STDOUT_CALLBACK=ansible.builtin.json \
  ansible localhost -c local -e ansible_python_interpreter="$py" -m moeops.inference.gpu_facts > "$work/auto.json" || true
python3 -c "
import json,sys
r=json.load(open('$work/auto.json'))['plays'][0]['tasks'][0]['hosts']['localhost']
f=r['ansible_facts']['nvidia_gpu']
assert (f['count'], f['backend']) == (0, 'none'), f
print('ad-hoc gpu_facts on this GPU-less machine: count 0, backend none:', f['unavailable'][0]['reason'])
"
if ansible localhost -c local -e ansible_python_interpreter="$py" -m moeops.inference.gpu_facts -a required=true > "$work/req.txt" 2>&1; then
  echo "required=true passed on a machine without GPUs"; exit 1
fi
grep -q "no NVIDIA GPU could be read" "$work/req.txt"
echo "ad-hoc gpu_facts required=true: fails with a message"

# 4. The topology playbook, on this machine with the seed snapshot, prints the hand-tuned unit's variables.
ansible-playbook playbooks/gpu_topology.yml -i localhost, -c local -e ansible_python_interpreter="$py" \
  -e gpu_topology_backend=snapshot -e gpu_topology_snapshot="$seed" > "$work/play.txt"
for want in 'NCCL_ALGO=Ring \[policy' 'NCCL_P2P_LEVEL=SYS \[policy' 'NCCL_PROTO=LL \[policy' 'tensor-parallel 8' 'custom all-reduce False'; do
  grep -q "$want" "$work/play.txt" || { echo "playbook output lacks: $want"; cat "$work/play.txt"; exit 1; }
done
grep -q 'failed=0' "$work/play.txt"
echo "gpu_topology playbook with the seed snapshot: SYS / LL / Ring, TP 8"
