#!/usr/bin/env bash
# The installed artifact, used as a user uses it: from a directory outside the checkout, with no ansible.cfg,
# the collection found only in the collections path given as argument (ansible-galaxy installed the built
# tarball there; tests/run's artifact stage), other collections from the venv's ansible bundle.
#   0. every playbook the artifact ships passes --syntax-check, run by name (moeops.inference.NAME), with ansible-core
#      alone: no other collection on any path;
#   1-3. the gpu_facts module ad hoc: a snapshot, a second run with the same dump, this GPU-less machine;
#   4. the gpu_topology playbook by name with the seed snapshot.
# tests/run runs it once with each venv (the oldest and the newest supported Ansible) on PATH.
set -euo pipefail
installed=$(readlink -f "$1")
seed=$PWD/tests/fixtures/gpu/constructed/rtxpro6000-x8-2numa.json
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
py=$(command -v python3)
cd "$work"
unset ANSIBLE_CONFIG
export ANSIBLE_COLLECTIONS_PATH=$installed
echo "$(ansible --version | sed -n 1p) on Python $(python3 -V | cut -d' ' -f2), from $work"

# 0. The collection resolves to the installed copy, and every shipped playbook parses.
where=$(ansible-galaxy collection list moeops.inference --format json | python3 -c 'import json,sys; print(*json.load(sys.stdin))')
[ "$where" = "$installed/ansible_collections" ] || { echo "moeops.inference found in '$where', not in $installed"; exit 1; }
# With ansible-core alone: the venv's Ansible bundle (site-packages' ansible_collections) unseen, so that a module of
# another collection in any shipped role or playbook fails the parse (the collection declares no dependency).
others=$(ANSIBLE_COLLECTIONS_SCAN_SYS_PATH=false ansible-galaxy collection list --format json | python3 -c '
import json, sys
print(" ".join(sorted(n for found in json.load(sys.stdin).values() for n in found
                     if n != "moeops.inference" and not n.startswith("ansible._"))))')
[ -z "$others" ] || { echo "other collections visible with ansible-core alone: $others"; exit 1; }
n=0 names=""
for pb in "$installed"/ansible_collections/moeops/inference/playbooks/*.yml; do
  name=moeops.inference.$(basename "$pb" .yml)
  ANSIBLE_COLLECTIONS_SCAN_SYS_PATH=false ansible-playbook --syntax-check -i localhost, "$name" > "$work/syntax.txt" 2>&1 || {
    echo "--syntax-check $name (ansible-core alone) failed:"; cat "$work/syntax.txt"; exit 1; }
  n=$((n + 1)) names="$names ${name#moeops.inference.}"
done
[ "$n" -gt 0 ] || { echo "no playbook in the artifact"; exit 1; }
echo "syntax-check with ansible-core alone (no other collection): $n shipped playbooks by name:$names"

# 1. Ad-hoc module run, snapshot backend, JSON out through the json callback.
ANSIBLE_LOAD_CALLBACK_PLUGINS=1 ANSIBLE_STDOUT_CALLBACK=ansible.posix.json \
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
# (The json callback, not -o: ansible-core 2.21 deprecates -o for removal in 2.23.)
ANSIBLE_LOAD_CALLBACK_PLUGINS=1 ANSIBLE_STDOUT_CALLBACK=ansible.posix.json \
  ansible localhost -c local -e ansible_python_interpreter="$py" \
  -m moeops.inference.gpu_facts -a "backend=snapshot snapshot=$seed dump=$work/again.json" > "$work/second.json"
python3 -c "
import json, sys
r = json.load(open(sys.argv[1]))['plays'][0]['tasks'][0]['hosts']['localhost']
assert r['changed'] is False and r['dump'] == sys.argv[2], r
print('ad-hoc gpu_facts: second dump unchanged')" "$work/second.json" "$work/again.json"

# 3. No GPU on this machine: auto reports count 0 and backend none, required fails by name.
ANSIBLE_LOAD_CALLBACK_PLUGINS=1 ANSIBLE_STDOUT_CALLBACK=ansible.posix.json \
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

# 4. The topology playbook, by name, on this machine with the seed snapshot, prints the hand-tuned unit's variables.
ansible-playbook moeops.inference.gpu_topology -i localhost, -c local -e ansible_python_interpreter="$py" \
  -e gpu_facts_backend=snapshot -e gpu_facts_snapshot="$seed" > "$work/play.txt"
for want in 'NCCL_ALGO=Ring \[policy' 'NCCL_P2P_LEVEL=SYS \[policy' 'NCCL_PROTO=LL \[policy' 'tensor-parallel 8' 'custom all-reduce False'; do
  grep -q "$want" "$work/play.txt" || { echo "playbook output lacks: $want"; cat "$work/play.txt"; exit 1; }
done
grep -q 'failed=0' "$work/play.txt"
echo "moeops.inference.gpu_topology with the seed snapshot: SYS / LL / Ring, TP 8"

# 5. The role_plan action (each role's planning step), ad hoc from the installed collection, its input rules only
#    (plan=false): values as Ansible templates them (a template in -e), the raw type (a JSON boolean), a no_log
#    value never shown.
if ansible localhost -c local -e ansible_python_interpreter="$py" -m moeops.inference.role_plan -a "role=vllm_service plan=false" \
     -e '{"vllm_service_port": true, "vllm_service_api_key": "sk-not shown"}' -e 'vllm_hf_home={{ "cache" }}/hf' \
     > "$work/inputs.txt" 2>&1; then
  echo "role_plan passed bad inputs"; cat "$work/inputs.txt"; exit 1
fi
for want in "vllm_service: vllm_service_port must be a number, got the boolean true" \
            "vllm_service: vllm_hf_home must be an absolute path, got 'cache/hf'" \
            "vllm_service: vllm_service_api_key must not contain whitespace"; do
  grep -qF "$want" "$work/inputs.txt" || { echo "role_plan output lacks: $want"; cat "$work/inputs.txt"; exit 1; }
done
! grep -q "not shown" "$work/inputs.txt" || { echo "role_plan showed a no_log value"; exit 1; }
ansible localhost -c local -e ansible_python_interpreter="$py" -m moeops.inference.role_plan \
  -a "role=moeops.inference.vllm_service plan=false" -e vllm_service_port=8001 -e vllm_service_profile=kimi_k25 \
  > "$work/inputs-ok.txt"
grep -q '"vllm_service_port"' "$work/inputs-ok.txt"
echo "ad-hoc role_plan: three bad inputs named (a template, a boolean, a secret not shown); good ones pass"
# A default built from another default (ray_cluster_head_address from ray_cluster_head_host, from the group's first
# host) is templated through, as the role's own tasks see it (CI of stop 34 failed on this in 55-ray-cluster).
printf '[ray_cluster]\nnode-a ansible_connection=local\n' > "$work/ray.ini"
ansible node-a -i "$work/ray.ini" -e ansible_python_interpreter="$py" -e ray_cluster_node_address=192.0.2.2 \
  -m moeops.inference.role_plan -a "role=moeops.inference.ray_cluster plan=false" > "$work/ray-inputs.txt" 2>&1 \
  || { echo "role_plan refused ray_cluster's own defaults:"; cat "$work/ray-inputs.txt"; exit 1; }
grep -q '"ray_cluster_head_address": "node-a"' "$work/ray-inputs.txt" \
  || { echo "ray_cluster_head_address is not the group's first host:"; cat "$work/ray-inputs.txt"; exit 1; }
echo "ad-hoc role_plan: a default made of another default (Ray's head address) is templated through"

# 6. The installed collection's README. Its first lines are the source checkout's two commands (main job, tests),
#    said to need the checkout; the installed collection's commands use only what was installed: the sh block that
#    installs the tarball copies the example inventory as written, and each playbook it names parses with it; its
#    example playbook, run as it says (serve.yml -i lab), finds the copied inventory's host.
readme=$installed/ansible_collections/moeops/inference/README.md
python3 - "$readme" > "$work/first.sh" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
blocks = re.findall(r"```sh\n(.*?)```", text, re.S)
checkout = text[:text.index("```sh")]
assert len(text.encode()) <= 8192, "the README is %d bytes: a front door of at most 8 KB" % len(text.encode())
assert "./tests/run" in blocks[0] and "From a checkout of the source" in checkout, "the README does not open with the checkout's two commands, said to need the checkout"
print(next(b for b in blocks if "ansible-galaxy collection install" in b).replace("\\\n", " "))
PY
if grep -nE '\./scripts|tests/|sim_node|inventories/sim|\.venv' "$work/first.sh"; then
  echo "the installed README's first commands use files of the repository, not of the collection"; exit 1
fi
grep -E '^cp ' "$work/first.sh" > "$work/copy.sh"
(cd "$work" && bash "$work/copy.sh")
[ -f "$work/lab/hosts.yml" ] || { echo "the README's copy of the example inventory made no lab/hosts.yml"; exit 1; }
n=0
while read -r name; do
  (cd "$work" && ANSIBLE_COLLECTIONS_SCAN_SYS_PATH=false ansible-playbook --syntax-check -i lab "$name" > "$work/readme-syntax.txt" 2>&1) \
    || { echo "the README's $name does not parse with its inventory:"; cat "$work/readme-syntax.txt"; exit 1; }
  n=$((n + 1))
done < <(grep -oE 'ansible-playbook moeops\.inference\.[a-z0-9_]+' "$work/first.sh" | awk '{print $2}')
[ "$n" -ge 2 ] || { echo "the installed README's first commands name $n playbooks, expected the preflight and a deploy"; exit 1; }
echo "installed README: its first commands copy the example inventory and name $n playbooks that parse with it"
# Its example playbook, saved as it says (serve.yml), parses and finds the copied inventory's hosts.
python3 - "$readme" > "$work/serve.yml" <<'PY'
import re, sys
print(re.search(r"^## Example Playbook\n\n```yaml\n(.*?)^```$", open(sys.argv[1]).read(), re.M | re.S).group(1))
PY
grep -qF 'ansible-playbook serve.yml -i lab' "$readme" || { echo "the README no longer says how to run its example"; exit 1; }
(cd "$work" && ANSIBLE_COLLECTIONS_SCAN_SYS_PATH=false ansible-playbook serve.yml -i lab --list-hosts > "$work/serve.txt" 2>&1) \
  || { echo "the README's example playbook does not parse with its inventory:"; cat "$work/serve.txt"; exit 1; }
if ! grep -q 'hosts (1):' "$work/serve.txt" || ! grep -q 'gpu-ws-01' "$work/serve.txt"; then
  echo "the README's example playbook finds no host of the copied inventory:"; cat "$work/serve.txt"; exit 1
fi
echo "installed README: its example playbook, run as it says, plays on the copied inventory's host gpu-ws-01"

# 7. Every bool option of every role (read from the installed argument specs), given with -e as false, no, 0 and off
#    (strings, which Jinja takes as true), is false in the converted inputs of the planning step each role's check
#    runs (moeops.inference.role_plan, the real action); tests/unit/roles/test_converted_inputs.py proves that the
#    roles read only those. One run a word, every option of every role at once.
python3 - "$installed/ansible_collections/moeops/inference/roles" > "$work/bools.json" <<'PY'
import glob, json, os, sys, yaml
found = {}
for path in sorted(glob.glob(os.path.join(sys.argv[1], "*", "meta", "argument_specs.yml"))):
    role = path.split(os.sep)[-3]
    names = sorted({n for entry in yaml.safe_load(open(path))["argument_specs"].values()
                    for n, o in (entry.get("options") or {}).items() if o.get("type") == "bool"})
    if names:
        found[role] = names
print(json.dumps(found))
PY
cat > "$work/bools.yml" <<'YML'
- name: Every role's inputs, converted by the planning step each role's check runs
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Plan each role's inputs (no plan)
      moeops.inference.role_plan:
        role: "{{ item }}"
        plan: false
        fail_on_problems: false
      loop: "{{ moeops_roles }}"
YML
mapfile -t extra < <(python3 -c '
import json, sys
for name in sorted({n for names in json.load(open(sys.argv[1])).values() for n in names}):
    print(name)' "$work/bools.json")
for word in false no 0 off; do
  args=()
  for name in "${extra[@]}"; do args+=(-e "$name=$word"); done
  ANSIBLE_LOAD_CALLBACK_PLUGINS=1 ANSIBLE_STDOUT_CALLBACK=ansible.posix.json \
    ansible-playbook "$work/bools.yml" -i localhost, -c local -e ansible_python_interpreter="$py" \
    -e "{\"moeops_roles\": $(python3 -c 'import json,sys; print(json.dumps(sorted(json.load(open(sys.argv[1])))))' "$work/bools.json")}" \
    "${args[@]}" > "$work/bools-$word.json"
  python3 - "$work/bools.json" "$work/bools-$word.json" "$word" <<'PY'
import json, sys
want = json.load(open(sys.argv[1]))
results = json.load(open(sys.argv[2]))["plays"][0]["tasks"][0]["hosts"]["localhost"]["results"]
wrong, n = [], 0
for r in results:
    for name in want[r["item"]]:
        n += 1
        if r["inputs"].get(name) is not False:
            wrong.append("%s: %s=%r" % (r["item"], name, r["inputs"].get(name)))
        if any(name in p for p in r["problems"]):
            wrong.append("%s: refused %s" % (r["item"], name))
assert not wrong, "-e %s: %s" % (sys.argv[3], wrong)
print("-e NAME=%s: %d bool options of %d roles converted to false" % (sys.argv[3], n, len(results)))
PY
done
