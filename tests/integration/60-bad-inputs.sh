#!/usr/bin/env bash
# Bad inputs and preflight refusals on one systemd podman node (no vLLM needed on it):
#  - the deploy play (playbooks/deploy.yml) with each bad input of bad-inputs/cases.yml as one
#    inventory host, all pointing at the same node: each must be refused by preflight, before any
#    role runs, with a message naming the variable (checked);
#  - the cases that must pass with a warning only (P2P unsupported, a misspelt variable), through
#    playbooks/preflight.yml;
#  - bad inputs given with -e (strings from the command line) to a thin model playbook, and the
#    preflight tag;
#  - the accepted cases of cases.yml: each one's unit loaded into systemd and read back as intended (accepted.yml);
#  - the node is fingerprinted (files under /etc /opt /usr /var/lib /var/cache, packages, users,
#    units) before and after, and must be unchanged.
# Runs from the repository root with the tooling venv on PATH (tests/run sets that up).
set -euo pipefail
start=$SECONDS
here=$PWD/tests/integration/bad-inputs
inv=$here/inventory
export MOEOPS_NODE_SUFFIX=${MOEOPS_NODE_SUFFIX:-}
node=moeops-badinputs$MOEOPS_NODE_SUFFIX
fixdir=/etc/moeops/fixtures
work=$(mktemp -d)
cleanup() { podman rm -f -t 0 "$node" >/dev/null 2>&1 || true; rm -rf "$work"; }
trap cleanup EXIT
podman rm -f -t 0 "$node" >/dev/null 2>&1 || true

echo "--- node $node"
ansible-playbook -i "$inv" playbooks/sim_node.yml > "$work/sim.log" || { tail -40 "$work/sim.log"; exit 1; }
# The CONSTRUCTED GPU topologies, plus one derived here: the 8x RTX PRO 6000 seed with a driver
# (565) too old for Blackwell.
podman exec "$node" mkdir -p "$fixdir"
podman cp tests/fixtures/gpu/constructed/. "$node:$fixdir/"
python3 - tests/fixtures/gpu/constructed/rtxpro6000-x8-2numa.json "$work/rtxpro6000-x8-driver565.json" <<'PY'
import json, sys
snap = json.load(open(sys.argv[1]))
snap["driver_version"] = "565.57.01"
snap["description"] = "CONSTRUCTED (derived by tests/integration/60-bad-inputs.sh): " + snap["description"] + " Driver 565."
json.dump(snap, open(sys.argv[2], "w"), indent=1, sort_keys=True)
PY
podman cp "$work/rtxpro6000-x8-driver565.json" "$node:$fixdir/"

# Everything a run could change, file by file; /var/lib/systemd (timer stamps) and the journal change on
# their own, and /var/cache/vllm/uv is the host's uv cache mounted into every simulated node, which other
# nodes (a molecule run beside this one) write into.
listing() {
  podman exec "$node" sh -c 'find /etc /opt /usr /var/lib /var/cache /srv -xdev \( -path /var/lib/systemd \
         -o -path /var/cache/ldconfig -o -path /var/cache/vllm/uv \) -prune -o -printf "%p %y %s %m %u:%g %T@\n" 2>/dev/null | sort'
}
fingerprint() {
  listing | sha256sum
  podman exec "$node" sh -c '
    dpkg-query -W -f "\${Package} \${Version} \${Status}\n" | sha256sum
    getent passwd | sha256sum; getent group | sha256sum
    systemctl list-unit-files --no-legend | sha256sum'
  listing | wc -l
}
listing > "$work/before.list"
fingerprint > "$work/before"
echo "fingerprint before: $(head -c 16 "$work/before") ($(tail -n1 "$work/before") paths)"

python3 "$here/cases.py" inventory "$here/cases.yml" "$here" "$fixdir" "$node" "$work/cases.yml"
export ANSIBLE_LOAD_CALLBACK_PLUGINS=1
t0=$SECONDS
rc=0
ANSIBLE_STDOUT_CALLBACK=ansible.builtin.json ansible-playbook -i "$inv" -i "$work/cases.yml" playbooks/deploy.yml \
  -e moeops_hosts=cases_deploy:cases_generated -f 40 > "$work/deploy.json" 2> "$work/deploy.err" || rc=$?
[ "$rc" -eq 2 ] || { echo "deploy batch: exit $rc, expected 2 (hosts failed)"; tail -20 "$work/deploy.err"; exit 1; }
rc=0
ANSIBLE_STDOUT_CALLBACK=ansible.builtin.json ansible-playbook -i "$inv" -i "$work/cases.yml" playbooks/preflight.yml \
  -e moeops_hosts=cases_preflight -f 40 > "$work/preflight.json" 2> "$work/preflight.err" || rc=$?
[ "$rc" -eq 0 ] || { echo "preflight batch: exit $rc, expected 0"; tail -20 "$work/preflight.err"; exit 1; }
echo "--- two batches in $((SECONDS - t0)) s"
python3 "$here/cases.py" verify "$here/cases.yml" "$work/deploy.json" "$work/preflight.json"

# Bad inputs from the command line (-e gives strings) to a thin playbook, without tags: refused.
rc=0
ansible-playbook -i "$inv" playbooks/glm5.yml -e moeops_hosts=moeops-badinputs -e vllm_service_port=99999 \
  -e vllm_service_tensor_parallel_size=3 -e vllm_hf_home=cache/hf -e vllm_service_extra_args=--enforce-eager \
  > "$work/cli.txt" 2>&1 || rc=$?
[ "$rc" -eq 2 ] || { echo "-e run: exit $rc, expected 2"; tail -30 "$work/cli.txt"; exit 1; }
for want in "vllm_service_port must be a TCP port in 1-65535, got 99999" \
            "vllm: vllm_hf_home must be an absolute path, got 'cache/hf'" \
            "vllm_service: vllm_hf_home must be an absolute path, got 'cache/hf'" \
            "vllm_service_extra_args must be a list, got the string '--enforce-eager'; from the command line pass JSON"; do
  grep -qF "$want" "$work/cli.txt" || { echo "-e run lacks: $want"; cat "$work/cli.txt"; exit 1; }
done
grep -q 'changed=0' "$work/cli.txt"
echo "refused  -e vllm_service_port=99999 -e vllm_hf_home=cache/hf -e vllm_service_extra_args=--enforce-eager: all three named"
# The string "3" from the command line converted and checked against the model by vllm_service's plan (its fit rules,
# which run once every input of the role passed: alone here).
rc=0
ansible-playbook -i "$inv" playbooks/glm5.yml -e moeops_hosts=moeops-badinputs -e vllm_service_tensor_parallel_size=3 \
  > "$work/cli-tp.txt" 2>&1 || rc=$?
[ "$rc" -eq 2 ] || { echo "-e tensor parallel run: exit $rc, expected 2"; tail -30 "$work/cli-tp.txt"; exit 1; }
want="vllm_service: vllm_service_tensor_parallel_size 3 does not divide the model's 64 attention heads"
grep -qF "$want" "$work/cli-tp.txt" || { echo "-e tensor parallel run lacks: $want"; cat "$work/cli-tp.txt"; exit 1; }
grep -q 'changed=0' "$work/cli-tp.txt"
echo "refused  -e vllm_service_tensor_parallel_size=3: named, against the model's heads"

# The preflight tag on a thin playbook runs the checks (and the roles' own input checks) only.
ansible-playbook -i "$inv" playbooks/minimax_m25.yml --tags preflight -e moeops_hosts=moeops-badinputs \
  -e vllm_service_profile="$here/tiny_model.yml" > "$work/tag.txt" 2>&1 || { echo "--tags preflight failed"; tail -30 "$work/tag.txt"; exit 1; }
grep -q 'preflight passed: 8 GPU(s)' "$work/tag.txt" && grep -q 'changed=0.*failed=0' "$work/tag.txt"
echo "passed   minimax_m25.yml --tags preflight with a one-file profile: checks only, changed=0"

# (The zone id case as JSON: key=value splits at the spaces.)
# Issue 28: a Ray node address that is IPv6 or has no IPv4 address, and a scope id that carries an argument, refused by
# the ray_cluster role's check (once: by getent ahostsv4, after Ray was installed), on the node as a one-node cluster.
ray_refused() {  # ray_refused NAME EXPECTED ARGS...
  local name=$1 want=$2 rc=0; shift 2
  ansible-playbook -i "$inv" "$here/ray_check.yml" -e ray_cluster_group=vllm_servers "$@" > "$work/ray-$name.txt" 2>&1 || rc=$?
  [ "$rc" -eq 2 ] || { echo "ray check $name: exit $rc, expected 2"; tail -30 "$work/ray-$name.txt"; exit 1; }
  grep -qF "$want" "$work/ray-$name.txt" || { echo "ray check $name lacks: $want"; tail -30 "$work/ray-$name.txt"; exit 1; }
  ! grep -q "changed=[1-9]" "$work/ray-$name.txt" || { echo "ray check $name changed something"; exit 1; }
  echo "refused  ray_cluster check, $name: ${want:0:110}"
}
ray_refused ipv6-node-address "ray_cluster: ray_cluster_node_address must be an IPv4 address or a host name with one" \
  -e ray_cluster_node_address=fd00::5
ray_refused unresolvable-node-address \
  "ray_cluster: ray_cluster_node_address of moeops-badinputs ray-nowhere.invalid: no IPv4 address on moeops-badinputs (getent ahostsv4)" \
  -e ray_cluster_node_address=ray-nowhere.invalid
# Class 7: a worker port range that holds the SSH port (ansible_port, 22 here), which the firewall would drop (privileged
# ports allowed, so that the range rule is the one that speaks).
ray_refused worker-ports-holding-ssh \
  "ray_cluster: ray_cluster_min_worker_port..ray_cluster_max_worker_port (1-1024) contains the SSH port (ansible_port), 22" \
  -e ray_cluster_node_address=10.89.0.250 -e ray_cluster_min_worker_port=1 -e ray_cluster_max_worker_port=1024 \
  -e moeops_allow_privileged_ports=true
ray_refused scope-id-argument "ray_cluster: ray_cluster_dashboard_host must be an IP address or a host name without a zone id" \
  -e ray_cluster_node_address=10.89.0.250 -e '{"ray_cluster_dashboard_host": "::1%i --dashboard-host 0.0.0.0"}'

fingerprint > "$work/after"
if ! diff "$work/before" "$work/after"; then
  listing > "$work/after.list"
  diff "$work/before.list" "$work/after.list" | head -40
  echo "the node changed"; exit 1
fi
echo "fingerprint after:  $(head -c 16 "$work/after") (unchanged)"

# The accepted cases: each one's unit loaded into the node's systemd (under /run), verified with nothing printed,
# and read back over D-Bus exactly as the plan intends.
ANSIBLE_STDOUT_CALLBACK=ansible.builtin.json ansible-playbook -i "$inv" -i "$work/cases.yml" "$here/accepted.yml" -f 10 \
  > "$work/accepted.json" 2> "$work/accepted.err" || { echo "accepted cases:"; cat "$work/accepted.json" "$work/accepted.err" | tail -60; exit 1; }
python3 - "$here/cases.yml" "$work/accepted.json" <<'PY'
import json, sys, yaml
want = [c["host"] for c in yaml.safe_load(open(sys.argv[1]))["accepted"]]
said = {}
for task in json.load(open(sys.argv[2]))["plays"][0]["tasks"]:
    if task["task"]["name"] == "Show what systemd read":
        said = {h: r["msg"] for h, r in task["hosts"].items()}
missing = sorted(set(want) - set(said))
assert not missing, "accepted cases not read back: %s" % missing
for host in want:
    print("accepted " + said[host])
print("accepted %d cases: each unit verified silent by systemd-analyze, and read back by systemd exactly as intended" % len(want))
PY
echo "60-bad-inputs: $((SECONDS - start)) s"
