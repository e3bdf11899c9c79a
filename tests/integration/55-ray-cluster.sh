#!/usr/bin/env bash
# Molecule scenario ray_cluster: a Ray head and a worker (CPU only) in two
# systemd podman nodes on a podman network the scenario creates; converge,
# idempotence, verify (ray status: 2 alive nodes; NCCL environment in the Ray
# units; multi-node vLLM unit with pipeline-parallel 2, systemd-analyze verify).
# Then the worker is taken out of the inventory (moved to ray_cluster_retired),
# a converge runs, and the cluster must have shrunk to 1 node.
set -euo pipefail
cd "$(dirname "$0")/../.."
start=$SECONDS
scenario=molecule/ray_cluster
export ANSIBLE_CONFIG=$PWD/ansible.cfg ANSIBLE_COLLECTIONS_PATH=$PWD/collections
cleanup() { molecule destroy -s ray_cluster >/dev/null 2>&1 || true; }
trap cleanup EXIT
molecule destroy -s ray_cluster
molecule test -s ray_cluster --destroy never
echo "ray_cluster: two-node cluster verified after $((SECONDS - start)) s"
shrink=$SECONDS
ansible-playbook -i "$scenario/inventory-shrunk/hosts.yml" "$scenario/converge.yml"
ansible-playbook -i "$scenario/inventory-shrunk/hosts.yml" -e ray_test_expected_nodes=1 "$scenario/verify.yml"
echo "ray_cluster: shrunk to 1 node in $((SECONDS - shrink)) s; total $((SECONDS - start)) s"
# Bad inputs of the multi-node playbook are refused by its first tasks, on every host, before anything changes.
bad=$SECONDS
out=$(mktemp)
rc=0
ansible-playbook -i "$scenario/inventory-shrunk/hosts.yml" playbooks/kimi_k25_multinode.yml -e kimi_k25_multinode_install=false \
  -e '{"ray_cluster_environment": {"GLOO_X": "a\nExecStartPre=/bin/id"}, "ray_cluster_service_name": "ray x",
       "vllm_service_extra_args": ["--host", "0.0.0.0"]}' > "$out" 2>&1 || rc=$?
[ "$rc" -eq 2 ] || { echo "multinode with bad inputs: exit $rc, expected 2"; tail -30 "$out"; exit 1; }
for want in "ray_cluster: ray_cluster_environment.GLOO_X contains a newline" \
            "ray_cluster: ray_cluster_service_name must be a systemd unit name" \
            "vllm_service: vllm_service_extra_args[0] --host: set vllm_service_host instead"; do
  grep -qF "$want" "$out" || { echo "multinode bad inputs: lacks $want"; cat "$out"; exit 1; }
done
grep -E '^[a-z0-9-]+ +: ok=' "$out"
! grep -E '^[a-z0-9-]+ +: ok=' "$out" | grep -qv 'changed=0' || { echo "a host changed"; exit 1; }
rm -f "$out"
echo "ray_cluster: three bad inputs refused on every host before any change, in $((SECONDS - bad)) s"
