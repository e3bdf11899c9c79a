#!/usr/bin/env bash
# The NCCL topology file (plugins/module_utils/_nccl/topology.py) on a GPU machine lent by the device tool:
#  1. reads the machine's GPU facts with the collection's own readers, as moeops.inference.gpu_facts does
#     (NVML with the sysfs NUMA fallback, the host section from sysfs, the network from sysfs), and writes the
#     topology file from them;
#  2. runs a one-rank torch.distributed NCCL all-reduce twice: once as NCCL detects the machine itself, once with
#     NCCL_TOPO_FILE naming the generated file; NCCL_TOPO_DUMP_FILE keeps the topology NCCL ended with each time;
#  3. compares the generated file with both dumps (_nccl/topology.py's compare: CPUs, affinity, every GPU's place,
#     link width and speed, dev, sm) and keeps NCCL's topology log lines.
# One rank moves no data between GPUs: this checks that NCCL loads the file and what it makes of it, not speed.
# ansible-core comes as a wheel in .whl/ (the module_utils import it; docs/dev/device.md); carry .whl.
# Usage (repo root): OUT=/some/dir bash tests/device/nccl_topo_on_device.sh
# $OUT gets: facts.json, generated.xml, generated-choices.json, nccl-dump-detected.xml, nccl-dump-loaded.xml,
# nccl-log.txt (the topology lines of both runs), run-logs.txt (both runs whole), comparison.json.
set -euo pipefail
: "${OUT:?set OUT}"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
# shellcheck source=tests/device/carry_ansible.sh
. tests/device/carry_ansible.sh ansible.builtin.default
export PYTHONPATH=/tmp/ac:$PYTHONPATH
work=$(mktemp -d)

# 1. Facts and the file.
python3 - "$OUT" <<'PY'
import json, sys
from ansible_collections.moeops.inference.plugins.modules import gpu_facts
from ansible_collections.moeops.inference.plugins.module_utils._facts import gpu_topology, pcie_host
from ansible_collections.moeops.inference.plugins.module_utils._nccl import topology as nt
out = sys.argv[1]
facts, why = gpu_facts.read_with_nvml()
if facts is None:
    sys.exit("no GPU facts: %s" % why)
facts["from_hardware"] = gpu_topology.from_hardware(facts)
facts["network"] = gpu_topology.read_network("/sys")
facts["host"] = pcie_host.read_host("/", facts["gpus"])
topo = nt.nccl_topology(facts)
json.dump(facts, open(out + "/facts.json", "w"), indent=1, sort_keys=True)
open(out + "/generated.xml", "w").write(topo["xml"])
json.dump({k: topo[k] for k in ("choices", "notes", "gpus_written", "gpus_left_out")},
          open(out + "/generated-choices.json", "w"), indent=1)
print(topo["xml"])
print("notes:", *topo["notes"], sep="\n  ")
PY
cp "$OUT/generated.xml" "$work/generated.xml"

# 2. One rank, NCCL as it detects the machine, then with the file.
cat > "$work/one_rank.py" <<'PY'
import sys
import torch
import torch.distributed as dist
torch.cuda.set_device(0)
dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda", 0))
x = torch.ones(1 << 20, device="cuda")
dist.all_reduce(x)
torch.cuda.synchronize()
ok = bool((x == 1).all())
print("ALL_REDUCE sum_ok=%s torch=%s nccl=%s" % (ok, torch.__version__, ".".join(map(str, torch.cuda.nccl.version()))))
dist.destroy_process_group()
sys.exit(0 if ok else 1)
PY
# The lines that say which topology NCCL read and what it made of it.
topology_lines='NCCL version|TOPO_FILE|TOPO_DUMP|[Tt]opology|XML|Ignoring element|KV Convert|=== System|CPU/|GPU/|PCI/'
topology_lines+='|NIC/|NET/[0-9]|Pattern|Init COMPLETE|WARN|ALL_REDUCE'
run() {  # label, then extra environment
  local label=$1 rc=0
  shift
  echo "=== $label: $*" | tee -a "$OUT/run-logs.txt"
  env "$@" MASTER_ADDR=127.0.0.1 MASTER_PORT=29541 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ENV,GRAPH \
    NCCL_TOPO_DUMP_FILE="$OUT/nccl-dump-$label.xml" python3 "$work/one_rank.py" > "$work/$label.log" 2>&1 || rc=$?
  cat "$work/$label.log" >> "$OUT/run-logs.txt"
  echo "=== $label: rc=$rc" | tee -a "$OUT/run-logs.txt"
  grep -E "$topology_lines" "$work/$label.log" | sed "s/^/[$label] /" >> "$OUT/nccl-log.txt" || true
}
# NCCL loads this file by itself when no NCCL_TOPO_FILE is set (topo.cc ncclTopoGetSystem).
if [ -e /var/run/nvidia-topologyd/virtualTopology.xml ]; then virtual=present; else virtual=absent; fi
echo "[machine] /var/run/nvidia-topologyd/virtualTopology.xml: $virtual" >> "$OUT/nccl-log.txt"
run detected
run loaded NCCL_TOPO_FILE="$work/generated.xml"
cat "$OUT/nccl-log.txt"

# 3. The file against both dumps.
python3 - "$OUT" <<'PY'
import json, os, sys
from ansible_collections.moeops.inference.plugins.module_utils._nccl import topology as nt
out = sys.argv[1]
generated = open(out + "/generated.xml").read()
result = {"machine": {}}
for line in open("/proc/cpuinfo"):
    key, _, value = line.partition(":")
    if key.strip() in ("vendor_id", "cpu family", "model", "model name") and key.strip() not in result["machine"]:
        result["machine"][key.strip()] = value.strip()
for label in ("detected", "loaded"):
    path = "%s/nccl-dump-%s.xml" % (out, label)
    if not os.path.exists(path):
        result[label] = "NCCL wrote no dump"
        continue
    result[label] = nt.compare(generated, open(path).read())
    print("== generated vs NCCL's dump (%s): %d matched, %d differed" % (
        label, len(result[label]["matched"]), len(result[label]["differed"])))
    for d in result[label]["differed"]:
        print("  differed:", json.dumps(d))
    for o in result[label]["only_in_dump"]:
        print("  only in the dump:", o)
    print("  added by NCCL:", json.dumps(result[label]["added_by_nccl"]))
json.dump(result, open(out + "/comparison.json", "w"), indent=1)
print("machine:", json.dumps(result["machine"]))
PY
