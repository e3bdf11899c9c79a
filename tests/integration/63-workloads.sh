#!/usr/bin/env bash
# Each workload (vllm_service_workload) deployed for real on a node where vLLM serves (vLLM's CPU build and the tiny
# test model: the main job's node, or molecule default's sim_cpu), then playbooks/benchmark.yml against it:
#   1. for latency, balanced and throughput: the deploy playbook with that workload (vLLM restarts with the new
#      unit, /health and the canary pass), the command line systemd loaded (--performance-mode, the queue cap), the
#      settings report's workload lines, and the benchmark's three scenarios at small lengths, with their table;
#   2. the queue cap's 503: the throughput workload with vllm_service_max_queued_requests=1, then 4 requests at once
#      straight at vLLM's port: at least one answered 200 and at least one 503 from vLLM ("The engine is currently
#      busy");
#   3. the node back to the balanced workload (its unit byte for byte as before the run).
# This shows the wiring on a real engine, not what a workload is worth: a 1.4 M-parameter model on 2 shared CPU
# cores, whose numbers move by half between runs with the machine's load (docs/benchmark.md), and no NCCL at all.
#
#   bash tests/integration/63-workloads.sh INVENTORY HOST [ansible-playbook arguments...]
#   MOEOPS_NODE_SUFFIX=-h32 bash tests/integration/63-workloads.sh inventories/sim moeops-sim
# Not executable on purpose, like 62-benchmark.sh: tests/run runs every executable script here, and this one needs a
# node that serves. WORKLOADS_LOG_DIR keeps the logs, the benchmark records and the settings reports.
set -euo pipefail
start=$SECONDS
[ $# -ge 2 ] || { sed -n '2,18p' "$0"; exit 2; }
inv=$1 host=$2
shift 2
bin=${ANSIBLE_BIN_DIR:-$(dirname "$(command -v ansible-playbook)")}
store=${BENCH_STORE:-/var/lib/moeops/benchmarks-it63}
work=$(mktemp -d)
adhoc() { "$bin/ansible" -i "$inv" "$host" -b "$@"; }
cleanup() {
  adhoc -m ansible.builtin.file -a "path=$store state=absent" >/dev/null 2>&1 || true
  [ -z "${WORKLOADS_LOG_DIR:-}" ] || { mkdir -p "$WORKLOADS_LOG_DIR"; cp "$work"/* "$WORKLOADS_LOG_DIR"/ 2>/dev/null || true; }
  rm -rf "$work"
}
trap cleanup EXIT
trap 'echo "63-workloads: failed at line $LINENO: $BASH_COMMAND"' ERR
play() {  # play LOG PLAYBOOK [arguments]: a playbook against the node, its log kept; its exit status
  local log=$1 playbook=$2; shift 2
  set +e
  "$bin/ansible-playbook" -i "$inv" "playbooks/$playbook" -e "moeops_hosts=$host" "$@" > "$work/$log" 2>&1
  local rc=$?
  set -e
  return $rc
}
unit_sum() { adhoc -m ansible.builtin.stat -a "path=/etc/systemd/system/vllm.service checksum_algorithm=sha256" \
  | grep -o '"checksum": "[0-9a-f]*"'; }
exec_start() {  # the command line systemd loaded, one word a line
  adhoc -m moeops.inference.vllm_service_info -a "name=vllm http=false" | sed '1s/^[^{]*//' \
    | python3 -c 'import json,sys; print("\n".join(json.load(sys.stdin)["loaded"]["exec_start"]))'
}
small=(-e benchmark_input_len=64 -e benchmark_output_len=32 -e benchmark_latency_prompts=8
       -e benchmark_throughput_prompts=32 -e benchmark_throughput_concurrency=8 -e benchmark_prefill_input_len=1024
       -e "benchmark_store=$store")
adhoc -m ansible.builtin.file -a "path=$store state=absent" > /dev/null
before=$(unit_sum)

# 1. Each workload, deployed and benchmarked.
for w in latency balanced throughput; do
  t0=$SECONDS
  play "deploy-$w.log" deploy.yml -e "vllm_service_workload=$w" "$@" || { tail -40 "$work/deploy-$w.log"; exit 1; }
  deployed=$((SECONDS - t0))
  argv=$(exec_start)
  case $w in
    latency) want_mode=interactivity; want_cap="" ;;
    balanced) want_mode=""; want_cap="" ;;
    throughput) want_mode=throughput; want_cap=$(grep -A1 -x -- --max-num-queued-reqs <<<"$argv" | tail -n1) ;;
  esac
  got_mode=$(grep -A1 -x -- --performance-mode <<<"$argv" | tail -n1 || true)
  [ "$got_mode" = "$want_mode" ] || { echo "$w: --performance-mode '$got_mode', expected '$want_mode'"; exit 1; }
  if [ "$w" = throughput ]; then
    [ -n "$want_cap" ] || { echo "throughput: no --max-num-queued-reqs in the unit"; exit 1; }
  elif grep -qx -- --max-num-queued-reqs <<<"$argv"; then
    echo "$w: a queue cap it should not have"; exit 1
  fi
  play "settings-$w.log" settings.yml -e "vllm_service_workload=$w" -e "settings_report_file=$work/settings-$w.json" "$@" \
    || { tail -40 "$work/settings-$w.log"; exit 1; }
  python3 - "$work/settings-$w.json" "$host" "$w" <<'EOF'
import json, sys
doc = json.load(open(sys.argv[1]))
host = [h for h in doc["hosts"] if h.startswith(sys.argv[2])][0]
report, w = doc["hosts"][host], sys.argv[3]
assert not report["drift"], report["drift_names"]
assert report["workload"]["workload"] == w, report["workload"]
lines = [s for s in report["status_lines"] if s.startswith("workload ")]
assert lines[0].startswith("workload workload %s (vllm_service_workload)" % w), lines
print("\n".join("  " + s for s in lines))
EOF
  t1=$SECONDS
  play "bench-$w.log" benchmark.yml "${small[@]}" -e "vllm_service_workload=$w" "$@" \
    || { tail -40 "$work/bench-$w.log"; exit 1; }
  echo "$w: deployed in $deployed s, benchmark $((SECONDS - t1)) s; vllm serve ... ${got_mode:+--performance-mode $got_mode}${want_cap:+ --max-num-queued-reqs $want_cap}"
  sed -n '/^ *scenario  *output tok\/s/,/^ *cold_prefill /p' "$work/bench-$w.log" | sed 's/^ *//'
  record=$(grep -o "record $store/[0-9a-f]\{16\}/[0-9TZ]*\.json" "$work/bench-$w.log" | head -n1 | cut -d' ' -f2)
  adhoc -m ansible.builtin.fetch -a "src=$record dest=$work/record-$w.json flat=true" > /dev/null
done
python3 - "$work" <<'EOF'
import json, os, sys
docs = {w: json.load(open(os.path.join(sys.argv[1], "record-%s.json" % w))) for w in ("latency", "balanced", "throughput")}
fps = {w: d["fingerprint"]["id"] for w, d in docs.items()}
# The workload changes the unit's vllm serve arguments, so each has a fingerprint (and a history) of its own.
assert len(set(fps.values())) == 3, fps
for w, d in docs.items():
    assert all(s["metrics"]["failed"] == 0 for s in d["scenarios"]), w
print("benchmark fingerprints: " + ", ".join("%s %s" % kv for kv in fps.items()))
EOF

# 2. The queue cap answers 503: one request in flight at most, four sent at once.
t0=$SECONDS
play deploy-cap1.log deploy.yml -e vllm_service_workload=throughput -e vllm_service_max_queued_requests=1 "$@" \
  || { tail -40 "$work/deploy-cap1.log"; exit 1; }
grep -A1 -x -- --max-num-queued-reqs <<<"$(exec_start)" | tail -n1 | grep -qx 1
# The command runs on the node: its $ are for the node's shell.
# shellcheck disable=SC2016
codes=$(adhoc -m ansible.builtin.shell -a 'set -a; . /etc/vllm/vllm.env 2>/dev/null || true; set +a
  port=$(systemctl show -p ExecStart vllm | grep -o -- "--port [0-9]*" | head -n1 | cut -d" " -f2)
  model=$(systemctl show -p ExecStart vllm | grep -o -- "--served-model-name [^ ;]*" | head -n1 | cut -d" " -f2)
  for i in 1 2 3 4; do
    curl -s -o /tmp/it63-$i.json -w "%{http_code}\n" -H "Content-Type: application/json" \
      ${VLLM_API_KEY:+-H "Authorization: Bearer $VLLM_API_KEY"} \
      -d "{\"model\": \"$model\", \"prompt\": \"hello\", \"max_tokens\": 400, \"ignore_eos\": true}" \
      http://127.0.0.1:$port/v1/completions &
  done; wait; grep -h -o "The engine is currently busy[^\"]*" /tmp/it63-*.json | head -n1; rm -f /tmp/it63-*.json' | tail -n +2)
echo "4 requests at once with --max-num-queued-reqs 1 ($((SECONDS - t0)) s with the deploy): $(tr '\n' ' ' <<<"$codes")"
grep -qx 200 <<<"$codes" || { echo "no request was served"; exit 1; }
grep -qx 503 <<<"$codes" || { echo "no request was refused with 503"; exit 1; }
grep -q "The engine is currently busy" <<<"$codes" || { echo "the 503 was not vLLM's queue cap"; exit 1; }

# 3. Back to the balanced workload, the unit as it was.
play deploy-back.log deploy.yml "$@" || { tail -40 "$work/deploy-back.log"; exit 1; }
[ "$(unit_sum)" = "$before" ] || { echo "the unit is not back as it was"; exit 1; }
echo "63-workloads: $((SECONDS - start)) s"
