#!/usr/bin/env bash
# playbooks/benchmark.yml for real on a node where vLLM serves (vLLM's CPU build and the tiny test model: the main
# job's node, or molecule default's sim_cpu), then its regression gate both ways on records FABRICATED from the real
# one (tests/integration/benchmark/fabricate.py, each named and marked so):
#   1. the three scenarios at small lengths: `vllm bench serve` from the node's venv against vLLM's own port; the
#      record (fingerprint, three scenarios with their metrics, the table, no baseline yet), the printed table, and
#      the API key in no file or line the run wrote (when the unit has one);
#   2. a copy with every throughput divided by 1.5 compared with the real record: the play must fail, naming the
#      regression (33.3% > 25%);
#   3. a copy 15% worse (throughputs x 0.85, latencies x 1.15): a warning, the play passes.
# The records go to a store of their own (BENCH_STORE, emptied first and removed at the end unless BENCH_KEEP is set;
# the fabricated records are removed as soon as they were compared), so that earlier runs on the node, whose numbers
# vary with the machine's load, are never compared: the real run has no baseline and gates nothing. Nothing else on
# the node is changed.
#
# CI runs it: molecule default's verify (molecule/default/verify_serving.yml) runs it on sim_cpu, keeping the real
# record for the settings report (BENCH_KEEP=1). By hand, on any node that serves:
#   bash tests/integration/62-benchmark.sh INVENTORY HOST [ansible-playbook arguments...]
#   MOEOPS_NODE_SUFFIX=-bench bash tests/integration/62-benchmark.sh inventories/sim moeops-sim
#   bash tests/integration/62-benchmark.sh molecule/default/inventory moeops-mol-bookworm   (molecule default, converged)
# Not executable on purpose: tests/run runs every executable script here as a stage of its own, and this one needs a
# node that serves (molecule default's stage, 50-molecule.sh, runs it there).
# Extra arguments go to every ansible-playbook call (e.g. -e vllm_service_host=0.0.0.0 when the node was deployed
# so: the benchmark reads the unit, but the NCCL variables' sources come from what a deploy would render).
# Needs a deployed, running vLLM with --max-model-len of at least 1056 (the cold prefill runs 1024 + 16 tokens here).
# Runs from the repository root with the tooling venv on PATH (tests/run sets that up), or with ANSIBLE_BIN_DIR.
set -euo pipefail
start=$SECONDS
[ $# -ge 2 ] || { sed -n '2,26p' "$0"; exit 2; }
inv=$1 host=$2
shift 2
bin=${ANSIBLE_BIN_DIR:-$(dirname "$(command -v ansible-playbook)")}
store=${BENCH_STORE:-/var/lib/moeops/benchmarks-it62}
work=$(mktemp -d)
here=$PWD/tests/integration/benchmark
adhoc() { "$bin/ansible" -i "$inv" "$host" -b "$@"; }
# BENCH_LOG_DIR: keep the playbook logs and the real record there.
cleanup() {
  [ -n "${BENCH_KEEP:-}" ] || adhoc -m ansible.builtin.file -a "path=$store state=absent" >/dev/null 2>&1 || true
  [ -z "${BENCH_LOG_DIR:-}" ] || { mkdir -p "$BENCH_LOG_DIR"; cp "$work"/*.log "$work"/*.json "$BENCH_LOG_DIR"/ 2>/dev/null || true; }
  rm -rf "$work"
}
trap cleanup EXIT
trap 'echo "62-benchmark: failed at line $LINENO: $BASH_COMMAND"' ERR
bench() {  # bench LOG [arguments]: the benchmark playbook against the node; its exit status
  local log=$1; shift
  set +e
  "$bin/ansible-playbook" -i "$inv" playbooks/benchmark.yml -e "moeops_hosts=$host" -e "benchmark_store=$store" \
    "$@" > "$work/$log" 2>&1
  local rc=$?
  set -e
  return $rc
}
adhoc -m ansible.builtin.file -a "path=$store state=absent" > /dev/null

# 1. For real, small: 8 prompts one at a time and 32 at 8 at a time of 64 in / 32 out, one prompt of 1024.
small=(-e benchmark_input_len=64 -e benchmark_output_len=32 -e benchmark_latency_prompts=8
       -e benchmark_throughput_prompts=32 -e benchmark_throughput_concurrency=8 -e benchmark_prefill_input_len=1024)
t0=$SECONDS
bench real.log "${small[@]}" "$@" || { tail -40 "$work/real.log"; exit 1; }
echo "real run: $((SECONDS - t0)) s"
for item in "latency: 8 prompt(s), 1 at a time, 64 in / 32 out" "throughput: 32 prompt(s), 8 at a time, 64 in / 32 out" \
            "cold_prefill: 1 prompt(s), 1 at a time, 1024 in / 16 out"; do
  grep -qF "(item=$item)" "$work/real.log" || { echo "no progress line for $item"; exit 1; }
done
record=$(grep -o "record $store/[0-9a-f]\{16\}/[0-9TZ]*\.json" "$work/real.log" | head -n1 | cut -d' ' -f2)
[ -n "$record" ] || { echo "no record path in the output"; tail -40 "$work/real.log"; exit 1; }
# What the play showed: the record, the fingerprint, the table, the comparison and the community floors.
sed -n '/^TASK \[Show the fingerprint/,/^TASK \[Fail/p' "$work/real.log" | sed '1,/^    msg: |-$/d;/^TASK/d;s/^        //' | sed '$d'
grep -qE '^ +scenario +output tok/s +TTFT p50 ms +TTFT p99 ms +ITL p50 ms +ITL p99 ms +req/s$' "$work/real.log"
for s in latency throughput cold_prefill; do
  grep -qE "^ +$s( +[0-9.]+){6}$" "$work/real.log" || { echo "no table row for $s"; exit 1; }
done
grep -q 'comparison (warn above 10%, fail above 25%): NO_BASELINE' "$work/real.log"

# The record, read back from the node and checked field by field.
adhoc -m ansible.builtin.fetch -a "src=$record dest=$work/record.json flat=true" > /dev/null
python3 - "$work/record.json" "$record" <<'EOF'
import json, os, sys
doc = json.load(open(sys.argv[1]))
fp = doc["fingerprint"]
assert os.path.basename(os.path.dirname(sys.argv[2])) == fp["id"], "the directory is not the fingerprint"
assert os.path.basename(sys.argv[2]) == doc["name"] + ".json"
c = fp["components"]
for key in ("vllm_version", "engine", "driver_version", "cuda_version", "nccl_version", "nccl_environment", "topology",
            "profile", "collection_version", "p2p_gate", "serve_args", "version_sources"):
    assert key in c, key
for name, entry in c["nccl_environment"].items():
    assert entry["source"] and entry["value"], (name, entry)
assert [s["name"] for s in doc["scenarios"]] == ["latency", "throughput", "cold_prefill"]
for s in doc["scenarios"]:
    m = s["metrics"]
    assert m["completed"] == s["workload"]["num_prompts"] and m["failed"] == 0, s["name"]
    assert all(m[k] > 0 for k in ("output_tok_s", "ttft_p50_ms", "ttft_p99_ms", "itl_p50_ms", "itl_p99_ms", "request_per_s"))
    assert s["command"][1:3] == ["bench", "serve"] and "--save-result" in s["command"]
assert doc["comparison"]["verdict"] == "no_baseline" and len(doc["table"]) == 4
print("record %s: fingerprint %s (%s, %s, driver %s, CUDA %s, NCCL %s, %s, %s, profile %s, collection %s); "
      "API key used: %s" % (doc["name"], fp["id"], c["vllm_package"], c["engine"], c["driver_version"],
                            c["cuda_version"], c["nccl_version"], c["gpus"], c["topology"], c["profile"],
                            c["collection_version"], [s["api_key_used"] for s in doc["scenarios"]]))
EOF
# The key (when the unit has one) is in neither the record nor anything the run printed: both are searched on the
# node, where the key is, and only the count comes back.
adhoc -m ansible.builtin.copy -a "src=$work/real.log dest=$store/.it62-real.log mode=0600" > /dev/null
found=$(adhoc -m ansible.builtin.shell -a "set -a; . /etc/vllm/vllm.env 2>/dev/null; [ -n \"\${VLLM_API_KEY:-}\" ] || { echo nokey; exit 0; }; grep -lF -- \"\$VLLM_API_KEY\" $record $store/.it62-real.log | wc -l" | tail -n1)
case $found in
  nokey) echo "the unit has no API key: none to look for" ;;
  0) echo "the API key is in neither the record nor the output" ;;
  *) echo "the API key appears in $found file(s)"; exit 1 ;;
esac
adhoc -m ansible.builtin.file -a "path=$store/.it62-real.log state=absent" > /dev/null

# 2. Throughputs divided by 1.5: the gate must fail.
t1=$SECONDS
slow=$(adhoc -m ansible.builtin.script -a "$here/fabricate.py $record throughput-div-1.5 1.5 1 executable=/usr/bin/python3" \
       | grep -o "$store/[^\" ]*FABRICATED-throughput-div-1.5.json" | head -n1)
[ -n "$slow" ] || { echo "the fabricated record was not written"; exit 1; }
if bench slow.log -e "benchmark_compare=$slow" "$@"; then
  echo "a record with throughputs divided by 1.5 passed the gate"; tail -40 "$work/slow.log"; exit 1
fi
grep -q "(FABRICATED: written by tests/integration/62-benchmark.sh" "$work/slow.log"
grep -q 'BENCHMARK REGRESSION on .* above 25%: latency output tok/s .* FAIL (regression 33.3% > 25%)' "$work/slow.log" \
  || { tail -40 "$work/slow.log"; exit 1; }
grep -E '(FAIL|WARN|ok)( \(regression|$)' "$work/slow.log" | sed 's/^ *//' | head -n 12
sed -n '/^fatal: /,/^$/p' "$work/slow.log"
adhoc -m ansible.builtin.file -a "path=$slow state=absent" > /dev/null

# 3. 15% worse everywhere: a warning only.
bit=$(adhoc -m ansible.builtin.script -a "$here/fabricate.py $record 15-percent-worse 1.1764705882352942 1.15 executable=/usr/bin/python3" \
      | grep -o "$store/[^\" ]*FABRICATED-15-percent-worse.json" | head -n1)
bench bit.log -e "benchmark_compare=$bit" "$@" || { echo "a record 15% worse failed the gate"; tail -40 "$work/bit.log"; exit 1; }
grep -q 'comparison (warn above 10%, fail above 25%): WARN' "$work/bit.log"
grep -q '\[WARNING\]: benchmark regression above 10% (below 25%) in 18 metric(s): latency output tok/s -15.0%' "$work/bit.log"
if grep -q ' FAIL ' "$work/bit.log"; then echo "a record 15% worse shows a failure"; exit 1; fi
grep -E 'WARN \(regression' "$work/bit.log" | sed 's/^ *//' | head -n 6
grep 'benchmark verdict' "$work/bit.log" | sed 's/^ *//'
adhoc -m ansible.builtin.file -a "path=$bit state=absent" > /dev/null
echo "the gate both ways: $((SECONDS - t1)) s"
echo "62-benchmark: $((SECONDS - start)) s"
