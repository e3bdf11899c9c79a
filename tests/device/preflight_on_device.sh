#!/usr/bin/env bash
# Runs playbooks/preflight.yml for real on a GPU machine lent by the device tool: the facts come from
# NVML (gpu_facts backend auto), the checks from the preflight module, through ansible-core carried as
# wheels (scripts/device-wheels, docs/device.md).  The machine has no systemd and no sudo: only the
# read-only preflight can run there, as root, with become off.
# Cases: the three shipped profiles (Kimi-K2.5 a second time with the nvidia_smi backend), and a profile written for the test (tests/integration/bad-inputs/
# tiny_model.yml) over a tiny local weights directory, which must pass with its dimensions read from
# that directory's config.json.  Writes into $OUT: each run's JSON (json callback), and
# preflight-reports.json: per case the play's rc and the preflight task's problems, warnings and checked.
# Usage (repo root): OUT=/some/dir bash tests/device/preflight_on_device.sh
# ($OUT gets preflight-reports.json and, packed so the device tool returns them, the runs' outputs.)
set -euo pipefail
: "${OUT:?set OUT}"
FINAL=$OUT
OUT=$(mktemp -d)
trap 'cp "$OUT/preflight-reports.json" "$FINAL/" 2>/dev/null || true; tar -C "$OUT" -czf "$FINAL/preflight-device.tgz" .' EXIT
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site PATH=/tmp/site/bin:$PATH ANSIBLE_HOME=/tmp/ah
root=/tmp/ac/ansible_collections
mkdir -p "$root/moeops" "$root/community" "$root/ansible"
ln -sfn "$PWD" "$root/moeops/inference"
ln -sfn "$PWD/.whl/community.general" "$root/community/general"
ln -sfn "$PWD/.whl/ansible.posix" "$root/ansible/posix"
printf "[defaults]\nstdout_callback = ansible.posix.json\n" > /tmp/ansible.cfg
export ANSIBLE_COLLECTIONS_PATH=/tmp/ac ANSIBLE_CONFIG=/tmp/ansible.cfg ANSIBLE_LOAD_CALLBACK_PLUGINS=1
py=$(command -v python3)
tiny=/tmp/moeops-tiny-model
python3 tests/integration/model_weights/make_tiny_model.py "$tiny" > /dev/null

preflight() {  # name, then extra ansible-playbook arguments
  local name=$1; shift
  local s e rc=0
  s=$(date +%s.%N)
  ansible-playbook playbooks/preflight.yml -i localhost, -c local -e moeops_hosts=localhost \
    -e ansible_python_interpreter="$py" -e ansible_become=false "$@" > "$OUT/preflight-$name.json" 2> "$OUT/preflight-$name.stderr" || rc=$?
  e=$(date +%s.%N)
  echo "$name $rc $(python3 -c "print(round($e - $s, 2))")" >> "$OUT/preflight-runs.txt"
}
: > "$OUT/preflight-runs.txt"
preflight kimi_k25 -e moeops_model=kimi_k25
# The same check with the facts read through nvidia-smi instead of NVML: the answer must not change.
preflight kimi_k25_nvidia_smi -e moeops_model=kimi_k25 -e gpu_topology_backend=nvidia_smi
preflight glm5 -e moeops_model=glm5
preflight minimax_m25 -e moeops_model=minimax_m25
preflight tiny_local -e moeops_model="$PWD/tests/integration/bad-inputs/tiny_model.yml" \
  -e model_weights_source=local -e model_weights_local_path="$tiny"

python3 - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
reports = {}
for line in open(out + "/preflight-runs.txt"):
    name, rc, secs = line.split()
    run = json.load(open("%s/preflight-%s.json" % (out, name)))
    # Role tasks are named "<role> : <task>".
    tasks = {t["task"]["name"].split(" : ")[-1]: t["hosts"].get("localhost", {}) for p in run["plays"] for t in p["tasks"]}
    facts = tasks["Read the GPUs"]["ansible_facts"]["nvidia_gpu"]
    pre = tasks["Preflight | Check the host, the model and every role's inputs, before anything changes"]
    reports[name] = dict(rc=int(rc), seconds=float(secs), gpu_backend=facts["backend"], gpus=facts["count"],
                         gpu_names=[g["name"] for g in facts["gpus"]], driver_version=facts["driver_version"],
                         problems=pre.get("problems"), warnings=pre.get("preflight_warnings"), checked=pre.get("checked"))
    print("%-12s rc=%s %5.1f s  %d problem(s), %d warning(s)" % (name, rc, float(secs), len(pre.get("problems") or []),
                                                                 len(pre.get("preflight_warnings") or [])))
    for p in pre.get("problems") or []:
        print("    problem:", p)
    for w in pre.get("preflight_warnings") or []:
        print("    warning:", w)
    dims = (pre.get("checked") or {}).get("dimensions") or {}
    print("    tensor parallel %s; dimensions %s" % ((pre.get("checked") or {}).get("tensor_parallel_size"),
                                                   {k: (dims.get(k), src) for k, src in (dims.get("sources") or {}).items()}))
json.dump(reports, open(out + "/preflight-reports.json", "w"), indent=2, sort_keys=True)
PY
