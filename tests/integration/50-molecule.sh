#!/usr/bin/env bash
# Molecule: the deploy play on a Debian 12 node where vLLM's CPU build serves the tiny
# test model and a Debian 13 node with vLLM 0.33.0 and Kimi-K2.5 (check-mode converge,
# converge, testinfra, serving with the canary and the benchmark (62-benchmark.sh), settings,
# NCCL sweep, models, P2P gate).
# The Debian 12 nodes of every suite share one uv cache on this machine, so vLLM's CPU wheels are downloaded once
# per machine, not once per node; the Debian 13 node keeps its own (inventory/hosts.yml says why).
set -euo pipefail
start=$SECONDS
# tests/run sets MOEOPS_MONITORING_LIVE_NODE when 51-monitoring-live.sh runs after this: the nodes stay for it, and it
# destroys them.
report=$(mktemp -d)
trap 'rm -rf "$report"' EXIT
args=()
[ -z "${MOEOPS_MONITORING_LIVE_NODE:-}" ] || args=(--destroy never)
tests/integration/report/molecule-test "$report" "${args[@]}"
if [ -n "${MOEOPS_MONITORING_LIVE_NODE:-}" ]; then
  # 51-monitoring-live.sh needs the Debian 12 node alone: the Debian 13 one (vLLM 0.33.0's CUDA build, the largest
  # venv of the run) goes now, leaving its disk and memory to the suites beside 51 (its molecule destroy allows that).
  podman rm -f -t 0 "moeops-mol-trixie${MOEOPS_NODE_SUFFIX:-}" >/dev/null
  echo "molecule default's Debian 12 node kept for 51-monitoring-live.sh ($MOEOPS_MONITORING_LIVE_NODE)"
fi
echo "molecule test: $((SECONDS - start)) s"
