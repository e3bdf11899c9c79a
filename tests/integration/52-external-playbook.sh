#!/usr/bin/env bash
# The roles used as a user uses them: a project outside the checkout (a copy of
# tests/integration/targets/external_playbook/) whose playbook lists the roles with
# vllm_service_profile: glm5 and nothing else, run against the built tarball installed into an empty
# collections path (tests/run's artifact stage), on a fresh simulated node:
#   1. it converges the node;
#   2. `ansible-playbook moeops.inference.glm5` (the shipped playbook, by name: the same roles, the same profile)
#      on the same node then changes nothing, and the unit is byte-identical. That is also the second run that
#      shows the roles idempotent (a second run of the user's playbook would repeat it: CI's time is counted);
#   3. the same play with only moeops.inference.vllm_service (vLLM already there) converges, zero changes.
# The node is the harness's (playbooks/sim_node.yml from the checkout): GPUs replayed from a snapshot.
set -euo pipefail
start=$SECONDS
installed=$(readlink -f "${MOEOPS_INSTALLED:-tests/output/installed}")
[ -d "$installed/ansible_collections/moeops/inference" ] || { echo "no installed artifact in $installed"; exit 1; }
export MOEOPS_NODE_SUFFIX=${MOEOPS_NODE_SUFFIX:-}
name=moeops-external
node=$name$MOEOPS_NODE_SUFFIX
work=$(mktemp -d)
cleanup() { podman rm -f "$node" >/dev/null 2>&1 || true; rm -rf "$work"; }
trap cleanup EXIT
podman rm -f "$node" >/dev/null 2>&1 || true

# The user's project: their playbooks, their inventory (the simulated node's connection and GPU
# snapshot, as in inventories/sim), no ansible.cfg.
project=$work/project
mkdir -p "$project/group_vars"
cp tests/integration/targets/external_playbook/*.yml "$project/"
cp inventories/sim/group_vars/vllm_servers/sim.yml "$project/group_vars/all.yml"
cat > "$project/hosts.yml" <<YAML
all:
  children:
    gpu_servers:
      children:
        vllm_servers:
          hosts:
            $name: {sim_node_suite: bookworm}
YAML
echo "--- node $node"
ansible-playbook -i "$project/hosts.yml" playbooks/sim_node.yml > "$work/sim.log" || { tail -40 "$work/sim.log"; exit 1; }

unset ANSIBLE_CONFIG
export ANSIBLE_COLLECTIONS_PATH=$installed
# What a user would put in their own ansible.cfg for speed; nothing else is configured.
export ANSIBLE_PIPELINING=true
cd "$project"
where=$(ansible-galaxy collection list moeops.inference --format json | python3 -c 'import json,sys; print(*json.load(sys.stdin))')
[ "$where" = "$installed/ansible_collections" ] || { echo "moeops.inference found in '$where', not in $installed"; exit 1; }
echo "--- the user's playbook ($(wc -l < playbook.yml) lines), from $project, collection from $where:"
cat playbook.yml

changed() {  # the PLAY RECAP's changed= for the node
  sed -n "s/^$name *: .*changed=\([0-9]*\).*/\1/p" "$1" | tail -n1
}
run() {  # label, then ansible-playbook arguments
  local label=$1; shift
  local t0=$SECONDS
  ansible-playbook -i hosts.yml "$@" > "$work/$label.log" 2>&1 || { echo "$label failed:"; tail -40 "$work/$label.log"; exit 1; }
  echo "$label: changed=$(changed "$work/$label.log") in $((SECONDS - t0)) s"
}
unit_sum() { podman exec "$node" sha256sum /etc/systemd/system/vllm.service | cut -d' ' -f1; }

run converge playbook.yml
[ "$(changed "$work/converge.log")" -gt 0 ] || { echo "the first run changed nothing on a fresh node"; exit 1; }
grep -q "ExecStart=/opt/vllm/venv/bin/vllm serve nvidia/GLM-5-NVFP4" <(podman exec "$node" cat /etc/systemd/system/vllm.service) \
  || { echo "the unit does not serve the glm5 profile's model"; exit 1; }
external=$(unit_sum)

run shipped moeops.inference.glm5 -e moeops_hosts=gpu_servers
shipped=$(unit_sum)
[ "$external" = "$shipped" ] || { echo "unit differs: external playbook $external, moeops.inference.glm5 $shipped"; exit 1; }
[ "$(changed "$work/shipped.log")" -eq 0 ] || { echo "moeops.inference.glm5 changed the node:"; grep -B1 -E '^changed:' "$work/shipped.log" | head -20; exit 1; }
echo "unit sha256 $external: the same from the user's playbook and from moeops.inference.glm5"

run service_only service_only.yml
[ "$(changed "$work/service_only.log")" -eq 0 ] || { echo "vllm_service alone changed something"; grep -B1 -E '^changed:' "$work/service_only.log" | head -20; exit 1; }
[ "$(unit_sum)" = "$external" ] || { echo "vllm_service alone rendered another unit"; exit 1; }
echo "external playbook: passed in $((SECONDS - start)) s"
