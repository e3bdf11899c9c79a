#!/usr/bin/env bash
# Runs moeops.inference.gpu_facts for real on a GPU machine lent by the device
# tool (no ansible there: ansible-core comes as wheels in .whl/, see
# docs/dev/device.md).  Writes into $OUT: both backends' facts and snapshots, the
# raw nvidia-smi outputs, and timings (N runs each of ping, nvml, nvidia_smi).
set -euo pipefail
: "${OUT:?set OUT}"
FINAL=$OUT
OUT=$(mktemp -d)
trap 'tar -C "$OUT" -czf "$FINAL/gpu-facts-device.tgz" .' EXIT
RUNS=${RUNS:-5}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
# shellcheck source=tests/device/carry_ansible.sh
. tests/device/carry_ansible.sh ansible.builtin.default
adhoc() { ansible localhost -c local -e ansible_python_interpreter="$py" "$@"; }

for c in "topo -m" "topo -p2p r" "topo -p2p w" "topo -p2p n" "topo -p2p a" "nvlink -s" "-q -x" "-L"; do
  f=$(echo "$c" | tr ' ' '_' | tr -d -)
  read -r -a args <<< "$c"
  nvidia-smi "${args[@]}" > "$OUT/nvidia-smi.$f.txt" 2>&1 || echo "rc=$?" >> "$OUT/nvidia-smi.$f.txt"
done
nvidia-smi --query-gpu=index,name,pci.bus_id,pcie.link.gen.max,pcie.link.width.max,memory.total,persistence_mode,compute_cap --format=csv > "$OUT/nvidia-smi.query.csv"
python3 -c 'import pynvml; print(pynvml.__file__)' > "$OUT/pynvml.txt" 2>&1 || true
python3 -m pip show nvidia-ml-py >> "$OUT/pynvml.txt" 2>&1 || true

for b in nvml nvidia_smi; do
  adhoc -m moeops.inference.gpu_facts -a "backend=$b dump=$OUT/$b.snapshot.json dump_description='device tool machine'" \
    -o > "$OUT/$b.facts.txt"
  # One-line -o output: "localhost | CHANGED => {json}"
  sed -e 's/^[^{]*//' "$OUT/$b.facts.txt" > "$OUT/$b.facts.json"
done
python3 - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
a = json.load(open(out + "/nvml.facts.json"))["ansible_facts"]["nvidia_gpu"]
b = json.load(open(out + "/nvidia_smi.facts.json"))["ansible_facts"]["nvidia_gpu"]
diff = {}
for k in ("count", "driver_version", "cuda_driver_version", "pairs", "interconnect"):
    if a[k] != b[k]:
        diff[k] = [a[k], b[k]]
for i, (x, y) in enumerate(zip(a["gpus"], b["gpus"])):
    for k in x:
        if x[k] != y.get(k):
            diff["gpus[%d].%s" % (i, k)] = [x[k], y.get(k)]
json.dump(diff, open(out + "/backend-diff.json", "w"), indent=2)
print("backend disagreements:", json.dumps(diff) if diff else "none")
print("count", a["count"], "arch", [g["architecture"] for g in a["gpus"]], "cc", [g["compute_capability"] for g in a["gpus"]],
      "class", a["interconnect"]["class"], "nvlink active", [g["nvlink"]["active_links"] for g in a["gpus"]])
PY

: > "$OUT/timings.txt"
for _run in $(seq "$RUNS"); do
  for what in ping nvml nvidia_smi; do
    if [ "$what" = ping ]; then args=(-m ansible.builtin.ping); else args=(-m moeops.inference.gpu_facts -a "backend=$what"); fi
    s=$(date +%s.%N); adhoc "${args[@]}" > /dev/null; e=$(date +%s.%N)
    echo "$what $(echo "$e - $s" | bc -l 2>/dev/null || python3 -c "print($e-$s)")" >> "$OUT/timings.txt"
  done
done
# In-process cost of each backend, without the ansible CLI start-up.
python3 - >> "$OUT/timings.txt" <<'PY'
import subprocess, sys, time
sys.path.insert(0, "/tmp/ac")
import pynvml
from ansible_collections.moeops.inference.plugins.module_utils._facts import gpu_topology as t
for _ in range(5):
    s = time.perf_counter(); pynvml.nvmlInit(); t.read_nvml(pynvml); pynvml.nvmlShutdown(); e = time.perf_counter()
    print("inproc_nvml", e - s)
PY
python3 - "$OUT/timings.txt" <<'PY'
import statistics, sys, collections
d = collections.defaultdict(list)
for line in open(sys.argv[1]):
    k, v = line.split(); d[k].append(float(v))
for k, v in d.items():
    print("%-12s median %.3f s  (n=%d, min %.3f, max %.3f)" % (k, statistics.median(v), len(v), min(v), max(v)))
PY
