#!/usr/bin/env bash
# Below the supported range: the installed artifact under ansible-core 2.18 alone (.venv-below, no other collection),
# from a directory outside the checkout. The collection must refuse it clearly, first, naming the range, before it
# checks or changes anything:
#   1. the preflight playbook by name (what every deploy runs first) on this machine, GPUs from the seed snapshot;
#   2. a role used alone in a playbook of the user's (vllm_service's check entry point, whose first step reads the GPUs).
# tests/run runs it with .venv-below on PATH (stage below:refused).
set -euo pipefail
installed=$(readlink -f "$1")
seed=$PWD/tests/fixtures/gpu/constructed/rtxpro6000-x8-2numa.json
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
py=$(command -v python3)
cd "$work"
unset ANSIBLE_CONFIG
export ANSIBLE_COLLECTIONS_PATH=$installed ANSIBLE_COLLECTIONS_SCAN_SYS_PATH=false
version=$(ansible --version | sed -n '1s/.*core \([0-9.]*\).*/\1/p')
case $version in 2.18.*) ;; *) echo "expected ansible-core 2.18 on PATH, got '$version'"; exit 1 ;; esac
want="moeops.inference needs ansible-core 2.19 to 2.21 (meta/runtime.yml: requires_ansible >=2.19.0); this controller runs ansible-core $version, which is not supported"

# refused FILE WHAT: the run failed on the refusal, it was the only failure, and it came before any other check.
refused() {
  grep -qF "$want" "$1" || { echo "$2: no clear refusal of ansible-core $version:"; tail -40 "$1"; exit 1; }
  grep -q 'changed=0 .*failed=1' "$1" || { echo "$2: expected one failure and no change:"; tail -20 "$1"; exit 1; }
  ! grep -q "vllm_service_tensor_parallel_size\|expected a mapping or nothing" "$1" \
    || { echo "$2: a confusing error came with or before the refusal:"; tail -40 "$1"; exit 1; }
  echo "refused  $2 on ansible-core $version: $(grep -oF "$want" "$1" | head -n1 | cut -c1-90)..."
}

rc=0
ansible-playbook moeops.inference.preflight -i localhost, -c local -e ansible_python_interpreter="$py" \
  -e moeops_hosts=localhost -e gpu_facts_backend=snapshot -e gpu_facts_snapshot="$seed" > "$work/preflight.txt" 2>&1 || rc=$?
[ "$rc" -eq 2 ] || { echo "preflight on $version: exit $rc, expected 2"; tail -30 "$work/preflight.txt"; exit 1; }
refused "$work/preflight.txt" "moeops.inference.preflight"

cat > "$work/role_alone.yml" <<'YML'
- name: A role of the collection in a playbook of the user's
  hosts: localhost
  gather_facts: false
  tasks:
    - name: The service role's check entry point
      ansible.builtin.import_role:
        name: moeops.inference.vllm_service
        tasks_from: check
YML
rc=0
ansible-playbook "$work/role_alone.yml" -i localhost, -c local -e ansible_python_interpreter="$py" \
  -e gpu_facts_backend=snapshot -e gpu_facts_snapshot="$seed" > "$work/role.txt" 2>&1 || rc=$?
[ "$rc" -eq 2 ] || { echo "vllm_service check on $version: exit $rc, expected 2"; tail -30 "$work/role.txt"; exit 1; }
refused "$work/role.txt" "vllm_service (tasks_from: check) alone"
