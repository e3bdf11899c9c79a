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
