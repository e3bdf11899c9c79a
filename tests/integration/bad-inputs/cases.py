# -*- coding: utf-8 -*-
"""tests/integration/60-bad-inputs.sh's helper: writes the cases' inventory, then checks the
ansible-playbook JSON output against cases.yml.

    python3 cases.py inventory CASES HERE FIXDIR NODE OUT_INVENTORY
    python3 cases.py verify CASES DEPLOY_JSON PREFLIGHT_JSON
    python3 cases.py linebreaks ROLE...   (every string option of those roles with a newline, and the message
                                          each must get, as JSON {"vars", "expect"})

Besides the hand-written cases, `generated` hosts are derived from the roles' argument specs: every option that can
carry a string (str, path, raw, list, dict) gets a value with a newline on one host, a carriage return on another.
"""
from __future__ import annotations

import json
import os
import sys

import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
BREAKERS = {"newline": ("\n", "a newline (\\n)"), "return": ("\r", "a carriage return (\\r)")}
# Where each role's inputs are refused in a deploy: preflight's and gpu_facts' own options by their role's first
# check task (Ansible validates their choices before that, so choice options are left to the hand-written cases);
# the roles of preflight_roles by the preflight module, all at once.
OWN_CHECK_ROLES = ("preflight", "gpu_facts")
MODULE_ROLES = ("nvidia_driver", "nvidia_persistenced", "vllm", "model_weights", "vllm_service")

# The preflight role's tasks (roles/preflight/tasks): every role planned, the report of everything together, the stop.
PLANS_TASK = "Preflight | Plan every role with all of its rules, as each does alone"
REPORT_TASK = "Preflight | Report everything together"
STOP_TASK = "Preflight | Stop here with every problem, before anything changes"
# Tasks a host may have run when preflight refused it, or in preflight_only: reading only (the roles'
# check entry points and the vllm_service plan they work out; the node fingerprint proves it).
# Every secret a case puts somewhere holds this; no message may show it.
SECRET_MARK = "notshown"
READ_ONLY_TASKS = ("Gathering Facts", "Read the GPUs", "Load the model profile", "Preflight | ", "Check | ", "Plan | ",
                   "Validating arguments against arg spec")


def role_options(role):
    with open(os.path.join(ROOT, "roles", role, "meta", "argument_specs.yml")) as f:
        return yaml.safe_load(f)["argument_specs"]["main"]["options"]


def line_breaking(opt, breaker):
    """A value of the option's own type with `breaker` where the role would write it out, and the place in the
    option that the message names; None for types that cannot carry a string."""
    kind = opt.get("type", "str")
    text = "LL" + breaker + "ExecStartPre=/bin/sh -c id"
    if kind in ("str", "raw"):
        return text, ""
    if kind == "path":
        return "/opt/x" + breaker + "ExecStartPre=+/bin/id", ""
    if kind == "list":  # after the default's items, if any: preflight_roles must still name roles up to it
        items = list(opt.get("default") or ["ok"])
        return items + [text], "[%d]" % len(items)
    if kind == "dict":
        return {"NCCL_PROTO": text}, ".NCCL_PROTO"
    return None


def linebreak_vars(roles, breaker, skip=(), skip_choices=False):
    """The variables (name: value) and the expected messages (one per role that declares the name)."""
    variables, expect = {}, []
    for role in roles:
        for name, opt in sorted(role_options(role).items()):
            made = line_breaking(opt, breaker)
            if made is None or name in skip or (skip_choices and opt.get("choices")):
                continue
            variables[name] = made[0]
            expect.append("%s: %s%s contains " % (role, name, made[1]))
    return variables, expect


def generated_cases():
    """One host per breaker and per place of refusal (see OWN_CHECK_ROLES)."""
    cases = []
    module_skip = {n for r in OWN_CHECK_ROLES for n in role_options(r)}
    for label, (breaker, what) in sorted(BREAKERS.items()):
        for roles, skip, choices in [((r,), (), True) for r in OWN_CHECK_ROLES] + [(MODULE_ROLES, module_skip, False)]:
            variables, expect = linebreak_vars(roles, breaker, skip, choices)
            cases.append({"host": "generated-%s-%s" % (label, roles[0] if len(roles) == 1 else "roles"),
                          "vars": variables, "expect": [e + what for e in expect]})
    return cases


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
    children["cases_generated"] = {"hosts": {c["host"]: dict(c["vars"], ansible_host=node) for c in generated_cases()}}
    children["cases_accepted"] = {"hosts": {c["host"]: dict(c["vars"], ansible_host=node) for c in cases["accepted"]}}
    inv = {"all": {"children": {"vllm_servers": {"children": children}}}}
    with open(out, "w") as f:
        yaml.safe_dump(inv, f, default_flow_style=False)
    print("%d bad inputs on %d hosts, %d warnings on %d host(s)" % (
        sum(len(c["inputs"]) for c in cases["deploy"]), len(cases["deploy"]),
        sum(len(c["inputs"]) for c in cases["preflight"]), len(cases["preflight"])))
    print("generated from the argument specs: %d line-breaking values on %d hosts"
          % (sum(len(c["vars"]) for c in generated_cases()), len(generated_cases())))


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
            reports = [r for n, r in tasks if n == REPORT_TASK]
            if not reports:
                failures.append("%s: the preflight report was not made" % host)
                continue
            report = reports[0]["ansible_facts"]["preflight_report"]
            stops = [r for n, r in tasks if n == STOP_TASK]
            plans = [r for n, r in tasks if n == PLANS_TASK]
            # As the preflight module once returned it: failed, msg (every problem), problems, warnings, constraints.
            result = {"failed": bool(stops and stops[0].get("failed")), "msg": stops[0].get("msg", "") if stops else "",
                      "problems": report["problems"], "preflight_warnings": report["preflight_warnings"],
                      "checked": {"constraints": [
                          c for one in (plans[0].get("results") if plans else []) if one.get("item") == "vllm_service"
                          for c in ((one.get("plan") or {}).get("model_settings") or {}).get("applied") or []]}}
            if stats.get(host, {}).get("changed", 0):
                failures.append("%s: %d task(s) reported a change" % (host, stats[host]["changed"]))
            ran = [n for n, r in tasks if not r.get("skipped")]
            if batch == "deploy":
                if not result.get("failed"):
                    failures.append("%s: preflight passed, it must refuse (problems: %s)" % (host, result.get("problems")))
                    continue
                if SECRET_MARK in result.get("msg", ""):
                    failures.append("%s: a secret was shown in the refusal" % host)
                shown = [w for w in case.get("never", []) if w in result.get("msg", "")]
                if shown:
                    failures.append("%s: the refusal shows what it must not: %s" % (host, shown))
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
                if SECRET_MARK in warnings:
                    failures.append("%s: a secret was shown in a warning" % host)
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
    by_host, stats = results_by_host(deploy_json)
    generated = 0
    for case in generated_cases():
        host = case["host"]
        tasks = by_host.get(host, [])
        said = " ".join(r.get("msg", "") for n, r in tasks if r.get("failed"))
        missing = [e for e in case["expect"] if e not in said]
        if not said:
            failures.append("%s: nothing refused it" % host)
        elif missing:
            failures.append("%s: %d of %d not refused by name: %s; said: %s"
                            % (host, len(missing), len(case["expect"]), missing, said[:2000]))
        if stats.get(host, {}).get("changed", 0):
            failures.append("%s: %d task(s) reported a change" % (host, stats[host]["changed"]))
        after = [n for n, r in tasks if not r.get("skipped") and not n.startswith(READ_ONLY_TASKS)]
        if after:
            failures.append("%s: tasks ran after the refusal: %s" % (host, after))
        echoed = [part for part in said.split(" | ") if "ExecStartPre" in part]
        if echoed:
            failures.append("%s: a refused value was echoed: %s" % (host, echoed))
        generated += len(case["expect"]) - len(missing)
        print("refused  %-36s %d option(s), each named: %s" % (host, len(case["expect"]) - len(missing),
                                                               ", ".join(sorted(case["vars"]))))
    for failure in failures:
        print("FAIL " + failure)
    print("%d bad inputs refused with their message, %d generated line breaks refused by name, %d passed with their "
          "warning, %d failure(s)" % (len(refused), generated, len(warned), len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    if sys.argv[1] == "inventory":
        inventory(*sys.argv[2:7])
    elif sys.argv[1] == "linebreaks":
        variables, expect = linebreak_vars(sys.argv[2:], "\n")
        print(json.dumps({"vars": variables, "expect": [e + BREAKERS["newline"][1] for e in expect]}))
    else:
        sys.exit(verify(*sys.argv[2:5]))
