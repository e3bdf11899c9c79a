#!/usr/bin/env bash
# Molecule scenario molecule/rollback: the vllm_service role's safety on two Debian 12 nodes where the real
# engine serves (vLLM's CPU build, the tiny test model): check mode and diff on fresh and converged nodes, the
# hardened unit and its systemd-analyze security exposure, secrets, the /health wait and the canary, the API front
# probed route by route from the other node, draining restarts (KillMode), rollback with serial 1.
# Afterwards every line molecule and the suite printed is searched for the secrets.
set -euo pipefail
start=$SECONDS
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
export SAFETY_LOG_DIR=$logs
export MOEOPS_JUNIT_XML=$logs/junit.xml
rc=0
molecule test -s rollback 2>&1 | tee "$logs/molecule.log" || rc=$?
if [ "$rc" -ne 0 ]; then
  echo "===== why molecule rollback failed (its tests' report, then Ansible's failures) ====="
  # The suite writes its secrets list only at its end: drop any line with one, when there is a list.
  python3 tests/integration/report/junit_failures.py "$MOEOPS_JUNIT_XML" "$logs/molecule.log" |
    if [ -s "$logs/secrets" ]; then grep -v -F -f "$logs/secrets"; else cat; fi
  exit "$rc"
fi
[ -s "$logs/secrets" ] || { echo "the suite wrote no secrets list: it did not run to the end"; exit 1; }
if grep -F -f "$logs/secrets" "$logs"/*.log >/dev/null; then
  echo "a secret appears in the captured output:"; grep -l -F -f "$logs/secrets" "$logs"/*.log; exit 1
fi
echo "no secret in $(cat "$logs"/*.log | wc -l) lines of captured output"
echo "molecule test -s rollback: $((SECONDS - start)) s"
