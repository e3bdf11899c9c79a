#!/usr/bin/env bash
# The built collection as a user installs it, on the device tool's GPU machine: ansible-core 2.21.5 alone
# (carried as wheels, docs/dev/device.md), no ansible bundle and no other collection, the tarball from
# tests/run's artifact stage installed by ansible-galaxy into an empty collections path, then used by name
# from outside the checkout: gpu_facts ad hoc through NVML and through nvidia-smi, and the gpu_topology
# playbook. Carry: .whl and tests/output/artifact. Writes into $OUT: the outputs and timings.
set -euo pipefail
: "${OUT:?set OUT}"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
tarball=$(ls "$PWD"/tests/output/artifact/moeops-inference-*.tar.gz)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site PATH=/tmp/site/bin:$PATH ANSIBLE_HOME=/tmp/ah-installed
installed=$(mktemp -d)
export ANSIBLE_COLLECTIONS_PATH=$installed
cd "$(mktemp -d)"
{ ansible --version | head -n1; python3 -V; } | tee "$OUT/versions.txt"
# The collection declares no dependency: ansible-core alone runs it.
ansible-galaxy collection install --offline --no-deps -p "$installed" "$tarball" | tee "$OUT/install.txt"
ansible-galaxy collection list --format json > "$OUT/collections.json"
py=$(command -v python3)
for b in nvml nvidia_smi; do
  t0=$EPOCHREALTIME
  ANSIBLE_STDOUT_CALLBACK=ansible.builtin.minimal ansible localhost -c local -e ansible_python_interpreter="$py" \
    -m moeops.inference.gpu_facts -a "backend=$b required=true" > "$OUT/$b.txt"
  echo "$b $(python3 -c "import sys; print(round(float(sys.argv[1]) - float(sys.argv[2]), 2))" "$EPOCHREALTIME" "$t0") s" | tee -a "$OUT/timings.txt"
done
t0=$EPOCHREALTIME
ansible-playbook moeops.inference.gpu_topology -i localhost, -c local -e ansible_python_interpreter="$py" \
  > "$OUT/gpu_topology.txt"
echo "gpu_topology $(python3 -c "import sys; print(round(float(sys.argv[1]) - float(sys.argv[2]), 2))" "$EPOCHREALTIME" "$t0") s" | tee -a "$OUT/timings.txt"
python3 - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
cols = json.load(open(out + "/collections.json"))
names = sorted(n for path in cols.values() for n in path)
print("collections visible:", names)
assert "community.general" not in names, names
for b in ("nvml", "nvidia_smi"):
    line = open("%s/%s.txt" % (out, b)).read()
    facts = json.loads(line[line.index("{"):])["ansible_facts"]["nvidia_gpu"]
    g = facts["gpus"][0]
    print(b, facts["backend"], facts["count"], g["name"], g["compute_capability"], g["memory_total_mib"],
          facts["driver_version"], facts["interconnect"]["class"])
PY
tail -n 15 "$OUT/gpu_topology.txt"
