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
suffix=${MOEOPS_NODE_SUFFIX:-}
outsider=moeops-ray-outsider$suffix
cleanup() { podman rm -f -t 0 "$outsider" >/dev/null 2>&1 || true; molecule destroy -s ray_cluster >/dev/null 2>&1 || true; }
trap cleanup EXIT
molecule destroy -s ray_cluster
molecule test -s ray_cluster --destroy never
echo "ray_cluster: two-node cluster verified after $((SECONDS - start)) s"
# The firewall (ray_cluster_firewall: true): from a container on the same network that is no member, the head's GCS
# port, its object manager, Ray Client's server (10001: `ray start --head` opens it whenever grpc imports, with the
# role's own arguments), a worker port and an ephemeral port time out (dropped); the member worker connects.
head=moeops-ray-head$suffix worker=moeops-ray-worker$suffix
podman run -d --rm --name "$outsider" --network "moeops-ray$suffix" localhost/moeops-node:bookworm sleep 900 >/dev/null
head_ip=$(podman exec "$head" python3 -c "import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.connect(('10.255.255.255', 1)); print(s.getsockname()[0])")
# Ray Client's server (10001) exists only where grpc imports in the venv (ray/scripts/scripts.py,
# get_ray_client_dependency_error); it is started after `ray status` already counts the nodes. Where grpc imports,
# wait for Ray's own (60 s at most); where it does not, Ray opens nothing there and a listener of this test stands in.
client_ports=""
if podman exec "$head" /opt/vllm/engine/bin/python -c "import grpc" 2>/dev/null; then
  echo "Ray Client: grpc imports in the head's venv, waiting for Ray's own server on 10001"
  for _ in $(seq 60); do
    podman exec "$head" python3 -c "import socket, sys; socket.create_connection((sys.argv[1], 10001), timeout=1).close()" \
      "$head_ip" 2>/dev/null && break
    sleep 1
  done
else
  echo "Ray Client: no grpc in the head's venv, so Ray opens no server on 10001; a listener of this test stands in"
  client_ports=", 10001"
fi
# Listeners on a worker port and on an ephemeral port (where NCCL's and gloo's sockets listen), as those would:
# an idle CPU-only Ray node has no worker process listening. They write a file once all of them listen, which the probes
# wait for (a fixed pause after `podman exec -d` is too short on a loaded machine).
worker_port=10500 ephemeral_port=40000
ready=/tmp/moeops-test-listeners.ready
podman exec "$head" rm -f "$ready"
podman exec -d "$head" python3 -c "
import socket, time
socks = []
for port in ($worker_port, $ephemeral_port$client_ports):
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(('0.0.0.0', port)); s.listen(8)
    socks.append(s)
open('$ready', 'w').close()
time.sleep(900)"
for _ in $(seq 60); do podman exec "$head" test -e "$ready" && break; sleep 0.5; done
podman exec "$head" test -e "$ready" || { echo "the test's listeners on the head never started"; exit 1; }
probe() {
  local from=$1; shift
  podman exec "$from" python3 -c "
import socket, sys
out = []
for port in sys.argv[2:]:
    try:
        socket.create_connection((sys.argv[1], int(port)), timeout=3).close()
        out.append('%s connected' % port)
    except OSError as exc:
        out.append('%s %s' % (port, exc))
print('; '.join(out))" "$head_ip" "$@"
}
from_outsider=$(probe "$outsider" 6379 8076 10001 "$worker_port" "$ephemeral_port")
from_worker=$(probe "$worker" 6379 8076 10001 "$worker_port" "$ephemeral_port")
echo "FIREWALL head $head_ip from the non-member: $from_outsider"
echo "FIREWALL head $head_ip from the member worker: $from_worker"
[ "$from_outsider" = "6379 timed out; 8076 timed out; 10001 timed out; $worker_port timed out; $ephemeral_port timed out" ] ||
  { echo "the firewall let a non-member in"; exit 1; }
[ "$from_worker" = "6379 connected; 8076 connected; 10001 connected; $worker_port connected; $ephemeral_port connected" ] ||
  { echo "the firewall shut a member out (10001: Ray Client's server, which Ray opens on the head)"; exit 1; }
# A port outside every range (22, nothing listens) is not dropped: the outsider gets the kernel's refusal at once.
outside=$(probe "$outsider" 22)
echo "FIREWALL head $head_ip port 22 from the non-member: $outside"
[[ $outside == *"refused"* ]] || { echo "the firewall dropped a port outside its ranges"; exit 1; }
podman exec "$head" nft list table inet moeops_ray | grep -F "elements = {" 
shrink=$SECONDS
ansible-playbook -i "$scenario/inventory-shrunk/hosts.yml" "$scenario/converge.yml"
ansible-playbook -i "$scenario/inventory-shrunk/hosts.yml" -e ray_test_expected_nodes=1 "$scenario/verify.yml"
# The retired worker is no member any more: the head now drops it too, and its own table is gone.
from_retired=$(probe "$worker" 6379)
echo "FIREWALL head $head_ip from the retired worker: $from_retired"
[ "$from_retired" = "6379 timed out" ] || { echo "the head still lets the retired worker in"; exit 1; }
if podman exec "$worker" nft list tables 2>/dev/null | grep -q moeops_ray; then echo "the retired worker kept its firewall"; exit 1; fi
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
# A worker range that holds the SSH port: the firewall would drop SSH from the controller (issue 28); privileged ports
# allowed, so that the range rule is the one that speaks (issue 41).
check_refused '{"ray_cluster_min_worker_port": 1, "ray_cluster_max_worker_port": 1024, "moeops_allow_privileged_ports": true}' \
  "ray_cluster: ray_cluster_min_worker_port..ray_cluster_max_worker_port (1-1024) contains the SSH port (ansible_port), 22"
rm -f "$out" "$gen"
echo "ray_cluster: four bad inputs refused on every host before any change; three runs in $((SECONDS - bad)) s"
