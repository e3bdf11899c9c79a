#!/usr/bin/env bash
# tests/integration/safety/suite.sh MODE: molecule scenario molecule/rollback (its verify.yml says what each file
# tests), with every line molecule and the suite printed searched for the secrets afterwards. MODE:
#   whole    molecule test: create, prepare, check, converge, the whole suite, destroy
#   safety   the same up to the suite without the engine upgrade (SAFETY_SUITE=safety); the nodes are kept
#   upgrade  on the nodes a `safety` run kept: the engine upgrade alone (SAFETY_SUITE=upgrade), then destroy
# tests/run runs `safety` beside other suites (45-safety-molecule.sh: the drains and the front wait on events) and
# `upgrade` with the machine to itself (70-engine-upgrade.sh: its engine gate times two engines minutes apart).
# The logs stay in tests/output/safety-logs (the upgrade's under upgrade/) until the next `whole` or `safety` run.
set -euo pipefail
mode=${1:?usage: suite.sh whole|safety|upgrade}
logs=$PWD/tests/output/safety-logs
report=tests/integration/report/molecule-test
case "$mode" in
  whole|safety)
    rm -rf "$logs"
    mkdir -p "$logs"
    export SAFETY_LOG_DIR=$logs SAFETY_SUITE=all
    args=(-s rollback)
    [ "$mode" = whole ] || { SAFETY_SUITE=safety; args+=(--destroy never); }
    "$report" "$logs" "${args[@]}"
    [ "$mode" = whole ] || echo "molecule/rollback's nodes kept for the engine upgrade (70-engine-upgrade.sh)"
    ;;
  upgrade)
    [ -s "$logs/secrets" ] || { echo "no secrets list in $logs: run suite.sh safety first"; exit 1; }
    rm -rf "$logs/upgrade"
    mkdir -p "$logs/upgrade"
    cp "$logs/secrets" "$logs/upgrade/secrets"  # molecule-test leaves them out of what it prints on a failure
    trap 'molecule destroy -s rollback > "$logs/upgrade/destroy.log" 2>&1 || echo "molecule destroy -s rollback failed"' EXIT
    SAFETY_LOG_DIR=$logs/upgrade SAFETY_SUITE=upgrade MOEOPS_MOLECULE_COMMAND=verify \
      "$report" "$logs/upgrade" -s rollback
    ;;
  *) echo "suite.sh: unknown mode '$mode' (whole, safety or upgrade)"; exit 2 ;;
esac
[ -s "$logs/secrets" ] || { echo "the suite wrote no secrets list: it did not run to the end"; exit 1; }
found=$(grep -r -l -F -f "$logs/secrets" --include='*.log' "$logs" || true)
[ -z "$found" ] || { echo "a secret appears in the captured output: $found"; exit 1; }
echo "no secret in $(find "$logs" -name '*.log' -exec cat {} + | wc -l) lines of captured output"
