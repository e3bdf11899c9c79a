#!/usr/bin/env bash
# Runs playbooks/preflight.yml for real on a GPU machine lent by the device tool: the facts come from
# NVML (gpu_facts backend auto), the checks from the preflight module, through ansible-core carried as
# wheels (scripts/device-wheels, docs/dev/device.md; tests/device/carry_ansible.sh sets it up).  The machine
# has no systemd and no sudo: only the read-only preflight can run there, as root, with become off.
# Cases: the three shipped profiles (Kimi-K2.5 a second time with the nvidia_smi backend), and a profile
# written for the test (tests/integration/bad-inputs/tiny_model.yml) over a tiny local weights
# directory, which must pass with its dimensions read from that directory's config.json.
# Usage (repo root): OUT=/some/dir bash tests/device/preflight_on_device.sh
# $OUT gets preflight-reports.json (per case the play's rc and the preflight task's problems, warnings
# and checked) and preflight-device.tgz (each run's json-callback output and stderr).
set -euo pipefail
: "${OUT:?set OUT}"
FINAL=$OUT
OUT=$(mktemp -d)
trap 'cp "$OUT/preflight-reports.json" "$FINAL/" 2>/dev/null || true; tar -C "$OUT" -czf "$FINAL/preflight-device.tgz" .' EXIT
# shellcheck source=tests/device/carry_ansible.sh
. tests/device/carry_ansible.sh ansible.posix.json
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
preflight kimi_k25 -e vllm_service_profile=kimi_k25
# The same check with the facts read through nvidia-smi instead of NVML: the answer must not change.
preflight kimi_k25_nvidia_smi -e vllm_service_profile=kimi_k25 -e gpu_facts_backend=nvidia_smi
preflight glm5 -e vllm_service_profile=glm5
preflight minimax_m25 -e vllm_service_profile=minimax_m25
preflight tiny_local -e vllm_service_profile="$PWD/tests/integration/bad-inputs/tiny_model.yml" \
  -e model_weights_source=local -e model_weights_local_path="$tiny"

python3 - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
reports = {}
for line in open(out + "/preflight-runs.txt"):
    name, rc, secs = line.split()
    run = json.load(open("%s/preflight-%s.json" % (out, name)))
    # Role tasks are named "<role> : <task>"; a task that runs more than once (the gpu_facts role, included by
    # every role's check, reads only the first time) keeps its first result that ran.
    tasks, ran = {}, []
    for t in (t for p in run["plays"] for t in p["tasks"]):
        task, result = t["task"]["name"].split(" : ")[-1], t["hosts"].get("localhost", {})
        if not result.get("skipped"):
            tasks.setdefault(task, result)
            ran.append(t["task"]["name"])
    facts = tasks["Read the GPUs"]["ansible_facts"]["nvidia_gpu"]
    pre = tasks["Preflight | Check the host, the model and every role's inputs, before anything changes"]
    # Which roles' check entry points ran after the report (only when preflight found no problem).
    checks = sorted({n.split(" : ")[0].split(".")[-1] for n in ran if " : Check | " in n} - {"preflight"})
    reports[name] = dict(rc=int(rc), seconds=float(secs), gpu_backend=facts["backend"], gpus=facts["count"],
                         from_hardware=facts.get("from_hardware"), role_checks_run=checks,
                         gpu_names=[g["name"] for g in facts["gpus"]], driver_version=facts["driver_version"],
                         problems=pre.get("problems"), warnings=pre.get("preflight_warnings"), checked=pre.get("checked"))
    report = reports[name]
    print("%-12s rc=%s %5.1f s  %d problem(s), %d warning(s); GPUs from hardware: %s; check entry points run: %s"
          % (name, rc, float(secs), len(report["problems"] or []), len(report["warnings"] or []),
             report["from_hardware"], ", ".join(checks) or "none"))
    for p in report["problems"] or []:
        print("    problem:", p)
    for w in report["warnings"] or []:
        print("    warning:", w)
    checked = report["checked"] or {}
    dims = checked.get("dimensions") or {}
    print("    tensor parallel %s; dimensions %s" % (checked.get("tensor_parallel_size"),
                                                   {k: (dims.get(k), src) for k, src in (dims.get("sources") or {}).items()}))
json.dump(reports, open(out + "/preflight-reports.json", "w"), indent=2, sort_keys=True)
PY
