#!/usr/bin/env bash
# The monitoring role's Prometheus files, with promtool (Debian's prometheus package; scripts/setup installs it):
# the alert rules rendered with the role's defaults pass `promtool check rules`; the shipped scrape jobs inside a whole
# configuration pass `promtool check config`; every alert's unit test passes `promtool test rules`
# (tests/integration/monitoring/alerts.test.yml); the textfile writer's output for the REAL facts of the simulated node
# passes `promtool check metrics`; and every metric name of the rules and the dashboard is one the engines really
# expose (tests/unit/roles/test_monitoring_names.py). No node is needed.
# Runs from the repository root with the tooling venv on PATH (tests/run sets that up).
set -euo pipefail
start=$SECONDS
here=$PWD/tests/integration/monitoring
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
trap 'echo "63-monitoring: failed at line $LINENO: $BASH_COMMAND"' ERR
command -v promtool >/dev/null || { echo "63-monitoring: promtool is missing (apt-get install prometheus; scripts/setup)"; exit 1; }
promtool --version 2>&1 | head -n 1

python "$here/render.py" "$work"
promtool check rules "$work/rules/moeops-alerts.yml"
(cd "$work" && promtool check config prometheus-check.yml 2>&1 | grep -v 'WARNING: file "/etc/prometheus/moeops/')
cp "$here/alerts.test.yml" "$work/"
(cd "$work" && promtool test rules alerts.test.yml)
echo "alerts with a unit test: $(grep -c '^      - alert:' "$work/rules/moeops-alerts.yml") rules, $(grep -c '^  - name:' "$here/alerts.test.yml") tests"

# The writer's metrics for the recorded facts (sim-drifted.json: a P2P gate, a hand-edited NCCL_PROTO, a canary).
python - "$work" <<'EOF'
import json, os, sys
sys.path.insert(0, "tests/unit")
from ansible.utils.collection_loader._collection_finder import _AnsibleCollectionFinder
_AnsibleCollectionFinder(paths=[os.path.abspath("collections")])._install()
from ansible_collections.moeops.inference.plugins.module_utils._roles import monitoring
doc = json.load(open("tests/fixtures/monitoring/sim-drifted.json"))
canary = json.load(open("tests/fixtures/monitoring/sim-canary.json"))["canary"]
json.dump(monitoring.textfile_facts(doc["info"], doc["report"], canary), open(os.path.join(sys.argv[1], "facts.json"), "w"))
EOF
python roles/monitoring/files/moeops_textfile.py "$work/facts.json" "$work/moeops.prom"
promtool check metrics < "$work/moeops.prom"
echo "textfile metrics: promtool check metrics passed"

python -m pytest -q -p no:cacheprovider tests/unit/roles/test_monitoring_names.py
echo "63-monitoring: $((SECONDS - start)) s"
