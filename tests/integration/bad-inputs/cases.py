# -*- coding: utf-8 -*-
"""tests/integration/60-bad-inputs.sh's helper: writes the cases' inventory, then checks the
ansible-playbook JSON output against cases.yml.

    python3 cases.py inventory CASES HERE FIXDIR NODE OUT_INVENTORY
    python3 cases.py verify CASES DEPLOY_JSON PREFLIGHT_JSON
"""
from __future__ import annotations

import json
import sys

import yaml

PREFLIGHT_TASK = "Preflight | Check the host, the model and every role's inputs, before anything changes"
# Tasks a host may have run when preflight refused it, or in preflight_only: reading only (the roles'
# check entry points and the vllm_service plan they work out; the node fingerprint proves it).
READ_ONLY_TASKS = ("Gathering Facts", "Read the GPUs", "Load the model profile", "Preflight | ", "Check | ", "Plan | ",
                   "Validating arguments against arg spec")


def load_cases(path):
    with open(path) as f:
        return yaml.safe_load(f)


def substitute(value, here, fixdir):
    if isinstance(value, str):
        return value.replace("@HERE@", here).replace("@FIX@", fixdir)
    if isinstance(value, dict):
        return {k: substitute(v, here, fixdir) for k, v in value.items()}
    if isinstance(value, list):
        return [substitute(v, here, fixdir) for v in value]
    return value


def inventory(cases_path, here, fixdir, node, out):
    cases = load_cases(cases_path)
    children = {}
    for batch in ("deploy", "preflight"):
        hosts = {}
        for case in cases[batch]:
            merged = {}
            for one in case["inputs"]:
                merged.update(one.get("vars") or {})
            hosts[case["host"]] = dict(substitute(merged, here, fixdir), ansible_host=node)
        children["cases_" + batch] = {"hosts": hosts}
    inv = {"all": {"children": {"vllm_servers": {"children": children}}}}
    with open(out, "w") as f:
        yaml.safe_dump(inv, f, default_flow_style=False)
    print("%d bad inputs on %d hosts, %d warnings on %d host(s)" % (
        sum(len(c["inputs"]) for c in cases["deploy"]), len(cases["deploy"]),
        sum(len(c["inputs"]) for c in cases["preflight"]), len(cases["preflight"])))


def results_by_host(path):
    with open(path) as f:
        run = json.load(f)
    by_host = {}
    for play in run["plays"]:
        for task in play["tasks"]:
            name = task["task"]["name"].split(" : ", 1)[-1]
            for host, result in task["hosts"].items():
                by_host.setdefault(host, []).append((name, result))
    return by_host, run["stats"]


def verify(cases_path, deploy_json, preflight_json):
    cases = load_cases(cases_path)
    failures, refused, warned = [], [], []
    for batch, path in (("deploy", deploy_json), ("preflight", preflight_json)):
        by_host, stats = results_by_host(path)
        for case in cases[batch]:
            host = case["host"]
            tasks = by_host.get(host, [])
            checks = [r for n, r in tasks if n == PREFLIGHT_TASK]
            if not checks:
                failures.append("%s: the preflight check did not run" % host)
                continue
            result = checks[0]
            if stats.get(host, {}).get("changed", 0):
                failures.append("%s: %d task(s) reported a change" % (host, stats[host]["changed"]))
            ran = [n for n, r in tasks if not r.get("skipped")]
            if batch == "deploy":
                if not result.get("failed"):
                    failures.append("%s: preflight passed, it must refuse (problems: %s)" % (host, result.get("problems")))
                    continue
                for one in case["inputs"]:
                    missing = [e for e in one["expect"] if e not in result.get("msg", "")]
                    if missing:
                        failures.append("%s %s: the message lacks %s; it was: %s"
                                        % (host, one["name"], missing, result.get("msg")))
                    else:
                        refused.append(one["name"])
                        print("refused  %-36s %s" % (one["name"], one["expect"][0][:100]))
                if "only" in case and len(result.get("problems", [])) != case["only"]:
                    failures.append("%s: %d problem(s), expected %d: %s"
                                    % (host, len(result.get("problems", [])), case["only"], result.get("problems", result.get("msg"))))
                applied = " ".join((result.get("checked") or {}).get("constraints") or [])
                for want in case.get("constraints", []):
                    if want not in applied:
                        failures.append("%s: constraint %r not reported (got %r)" % (host, want, applied))
                after = [n for n in ran if not n.startswith(READ_ONLY_TASKS)]
                if after:
                    failures.append("%s: tasks ran after the refusal: %s" % (host, after))
            else:
                if result.get("failed"):
                    failures.append("%s: preflight refused, it must pass: %s" % (host, result.get("msg")))
                    continue
                warnings = " ".join(result.get("preflight_warnings") or [])
                for one in case["inputs"]:
                    missing = [w for w in one["warn"] if w not in warnings]
                    if missing:
                        failures.append("%s %s: warning lacks %s; warnings: %s" % (host, one["name"], missing, warnings))
                    else:
                        warned.append(one["name"])
                        print("warned   %-36s %s" % (one["name"], one["warn"][0][:100]))
                after = [n for n in ran if not n.startswith(READ_ONLY_TASKS)]
                if after:
                    failures.append("%s: tasks ran after preflight_only: %s" % (host, after))
    for failure in failures:
        print("FAIL " + failure)
    print("%d bad inputs refused with their message, %d passed with their warning, %d failure(s)"
          % (len(refused), len(warned), len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    if sys.argv[1] == "inventory":
        inventory(*sys.argv[2:7])
    else:
        sys.exit(verify(*sys.argv[2:5]))
