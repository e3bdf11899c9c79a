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
# Bad inputs of the multi-node playbook are refused by its first tasks, on every host, before anything changes:
# a newline in every string option of ray_cluster (generated from its argument spec, as the bad-inputs suite
# does for the single-node roles), then three hand-written ones.
bad=$SECONDS
out=$(mktemp)
gen=$(mktemp)
python3 tests/integration/bad-inputs/cases.py linebreaks ray_cluster > "$gen"
check_refused() {  # check_refused EXTRA_VARS_JSON EXPECTED...: the run fails on every host, naming each, changing nothing
  local vars=$1 rc=0; shift
  ANSIBLE_LOAD_CALLBACK_PLUGINS=1 ANSIBLE_STDOUT_CALLBACK=ansible.builtin.json \
    ansible-playbook -i "$scenario/inventory-shrunk/hosts.yml" playbooks/kimi_k25_multinode.yml \
    -e kimi_k25_multinode_install=false -e "$vars" > "$out" 2>&1 || rc=$?
  [ "$rc" -eq 2 ] || { echo "multinode with bad inputs: exit $rc, expected 2"; tail -30 "$out"; exit 1; }
  python3 - "$out" "$@" <<'PY'
import json, sys
run = json.load(open(sys.argv[1]))
said = {}
for play in run["plays"]:
    for task in play["tasks"]:
        for host, result in task["hosts"].items():
            # A loop's items carry their own msg (the json callback leaves out their failed key).
            for one in [result] + list(result.get("results") or []):
                if one.get("failed") or one.get("problems"):
                    said[host] = said.get(host, "") + " " + str(one.get("msg", ""))
hosts = sorted(run["stats"])
for host in hosts:
    missing = [w for w in sys.argv[2:] if w not in said.get(host, "")]
    assert not missing, "%s: not named %s; said %s" % (host, missing, said.get(host, "")[:3000])
    assert "ExecStartPre=" not in said[host], "%s: a refused value was echoed" % host
    assert run["stats"][host]["changed"] == 0, "%s changed" % host
print("refused on %s, each of the %d named, nothing changed" % (", ".join(hosts), len(sys.argv) - 2))
PY
}
mapfile -t expect < <(python3 -c 'import json,sys; print("\n".join(json.load(open(sys.argv[1]))["expect"]))' "$gen")
check_refused "$(python3 -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))["vars"]))' "$gen")" "${expect[@]}"
echo "ray_cluster: ${#expect[@]} generated line breaks (every string option) named on every host before any change"
check_refused '{"ray_cluster_environment": {"GLOO_X": "a\nExecStartPre=/bin/id"}, "ray_cluster_service_name": "ray x",
       "vllm_service_extra_args": ["--host", "0.0.0.0"]}' \
  "ray_cluster: ray_cluster_environment.GLOO_X contains a newline" \
  "ray_cluster: ray_cluster_service_name must be a systemd unit name" \
  "vllm_service: vllm_service_extra_args[0] --host: set vllm_service_host instead"
rm -f "$out" "$gen"
echo "ray_cluster: three bad inputs refused on every host before any change; both runs in $((SECONDS - bad)) s"
