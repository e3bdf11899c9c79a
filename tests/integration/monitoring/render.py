# -*- coding: utf-8 -*-
"""Render the monitoring role's Prometheus files with the role's defaults (or -e NAME=JSON overrides), as the role
renders them on a node, into a directory - for promtool (tests/integration/63-monitoring.sh):

    python tests/integration/monitoring/render.py OUTDIR [-e monitoring_alert_waiting_requests=5 ...]

Writes OUTDIR/rules/moeops-alerts.yml, OUTDIR/scrape.yml, OUTDIR/prometheus-check.yml (a complete configuration
around the scrape jobs, for promtool check config) and OUTDIR/moeops-counters.csv. Templating is Ansible's own
(tests/unit/role_templating.py), the plan the role's check's (the role_plan step: plugins/module_utils/_common/plan.py
with the role's rules, plugins/module_utils/_roles/monitoring.py)."""
import json
import os
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "unit"))


def main(argv):
    from ansible.utils.collection_loader._collection_finder import _AnsibleCollectionFinder
    _AnsibleCollectionFinder(paths=[os.path.join(ROOT, "collections")])._install()
    import role_templating
    from ansible_collections.moeops.inference.plugins.module_utils._common import plan, specs

    out, overrides = argv[0], {}
    for i, arg in enumerate(argv):
        if arg == "-e":
            name, value = argv[i + 1].split("=", 1)
            overrides[name] = json.loads(value)
    variables = role_templating.role_vars("monitoring", ansible_managed="Ansible managed (rendered by render.py)",
                                          inventory_hostname="render", **overrides)
    v = {k: role_templating.render(val, variables) if isinstance(val, str) else val for k, val in variables.items()}
    spec = specs.role_options("monitoring")
    given = {k: val for k, val in v.items() if k in spec}
    planned = plan.plan_role("monitoring", spec, given, sorted(given), specs.spec_roles(), {})
    if planned["problems"]:
        sys.exit("render.py: %s" % "; ".join(planned["problems"]))
    planned["inputs"] = planned["values"]  # as the role_plan action registers it (_monitoring.inputs)
    variables["_monitoring"] = planned
    templates = os.path.join(ROOT, "roles", "monitoring", "templates")
    os.makedirs(os.path.join(out, "rules"), exist_ok=True)
    for src, dest in (("alerts.yml.j2", "rules/moeops-alerts.yml"), ("scrape.yml.j2", "scrape.yml"),
                      ("dcgm-counters.csv.j2", "moeops-counters.csv")):
        with open(os.path.join(templates, src)) as f:
            text = role_templating.render(f.read(), variables)
        with open(os.path.join(out, dest), "w") as f:
            f.write(text if text.endswith("\n") else text + "\n")
    # The shipped jobs inside a complete configuration, with the rules: what promtool check config takes.
    with open(os.path.join(out, "scrape.yml")) as f:
        jobs = f.read().split("scrape_configs:", 1)[1]
    with open(os.path.join(out, "prometheus-check.yml"), "w") as f:
        f.write("global:\n  scrape_interval: %s\n  evaluation_interval: %s\nrule_files:\n  - rules/moeops-alerts.yml\n"
                "scrape_configs:%s" % (v["monitoring_scrape_interval"], v["monitoring_scrape_interval"], jobs))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
