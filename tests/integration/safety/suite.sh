#!/usr/bin/env bash
# tests/integration/safety/suite.sh PART: molecule scenario molecule/rollback (its verify.yml says what each file
# tests), with every line molecule and the suite printed searched for the secrets afterwards. PART:
#   safety   create, prepare, check, converge, the suite without the engine upgrade (SAFETY_SUITE=safety); the nodes
#            are kept (45-safety-molecule.sh)
#   upgrade  on the nodes `safety` kept: the engine upgrade alone (SAFETY_SUITE=upgrade), then destroy
#            (70-engine-upgrade.sh)
# tests/run sets MOEOPS_SAFETY_SPLIT when it runs both: `safety` beside other suites (the drains and the front wait on
# events) and `upgrade` with the machine to itself (its engine gate times two engines minutes apart). Without it,
# either part is the whole scenario: molecule test, the whole suite, destroy.
# The logs stay in tests/output/safety-logs (the upgrade's under upgrade/) until the next run that converges.
set -euo pipefail
part=${1:?usage: suite.sh safety|upgrade}
case "$part" in safety|upgrade) ;; *) echo "suite.sh: unknown part '$part' (safety or upgrade)"; exit 2 ;; esac
[ -n "${MOEOPS_SAFETY_SPLIT:-}" ] || part=whole
start=$SECONDS
logs=$PWD/tests/output/safety-logs
report=tests/integration/report/molecule-test
if [ "$part" = upgrade ]; then
  [ -s "$logs/secrets" ] || { echo "no secrets list in $logs: run the safety part first"; exit 1; }
  rm -rf "$logs/upgrade"
  mkdir -p "$logs/upgrade"
  cp "$logs/secrets" "$logs/upgrade/secrets"  # molecule-test leaves them out of what it prints on a failure
  trap 'molecule destroy -s rollback > "$logs/upgrade/destroy.log" 2>&1 || echo "molecule destroy -s rollback failed"' EXIT
  SAFETY_LOG_DIR=$logs/upgrade SAFETY_SUITE=upgrade MOEOPS_MOLECULE_COMMAND=verify "$report" "$logs/upgrade" -s rollback
else
  rm -rf "$logs"
  mkdir -p "$logs"
  if [ "$part" = safety ]; then
    SAFETY_LOG_DIR=$logs SAFETY_SUITE=safety "$report" "$logs" -s rollback --destroy never
    echo "molecule/rollback's nodes kept for the engine upgrade (70-engine-upgrade.sh)"
  else
    SAFETY_LOG_DIR=$logs SAFETY_SUITE=all "$report" "$logs" -s rollback
  fi
fi
[ -s "$logs/secrets" ] || { echo "the suite wrote no secrets list: it did not run to the end"; exit 1; }
found=$(grep -r -l -F -f "$logs/secrets" --include='*.log' "$logs" || true)
[ -z "$found" ] || { echo "a secret appears in the captured output: $found"; exit 1; }
echo "no secret in $(find "$logs" -name '*.log' -exec cat {} + | wc -l) lines of captured output"
echo "molecule/rollback, $part: $((SECONDS - start)) s"
