#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, moeops.inference contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: vllm_benchmark
short_description: Benchmark a deployed vLLM with vLLM's own client, keep the record, gate regressions
version_added: 0.7.0
description:
  - Runs C(vllm bench serve) from the node's vLLM venv against vLLM's own port on loopback (the unit's C(--host) and
    C(--port); behind an API front that is the backend port, since the front does not pass C(/tokenize), which the
    client uses). One scenario a call (O(step=run)), so a loop shows each scenario as it finishes.
  - Scenarios, each with a fixed seed and the random dataset at exact lengths (EOS ignored) - C(latency) (16 prompts,
    one at a time), C(throughput) (256 prompts, 32 at a time), both O(input_len) in and O(output_len) out; and
    C(cold_prefill) (one prompt of O(prefill_input_len) tokens, no warm-up, a cache salt so that no prefix cache
    answers it). The client's result JSON (C(--save-result)) is parsed, not its text table.
  - The API key is read on the node from the unit's environment file (C(VLLM_API_KEY)) and handed to the client in
    its environment as C(OPENAI_API_KEY); it is never in the command line, the result or a message.
  - O(step=record) keeps one JSON record a run under C(<store>/<fingerprint>/<timestamp>.json) (every record is
    kept). The fingerprint - vLLM's version and engine, the driver, CUDA and NCCL versions, the unit's environment
    (each NCCL variable with where its value comes from) and C(vllm serve) arguments, the interconnect class and GPUs,
    the model profile, this collection's version and the P2P gate's result - is what must be equal for two runs to
    be compared. Each scenario is compared with the newest earlier record of the same fingerprint that ran the same
    workload; a regression above O(warn_regression) warns, above O(fail_regression) fails (lower is better for
    latencies, higher for throughputs).
  - The community's numbers for Kimi-K2.5 and Kimi-K2.6 on 8x RTX PRO 6000 are warn-only floors, applied only when
    the profile name, the GPUs and the workload match (C(plugins/module_utils/_engine/benchmark.py), each with its source).
  - O(step=compare) compares a stored record with its baseline again and writes nothing.
author:
  - moeops.inference contributors (@moeops)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: partial
    details:
      - In check mode nothing is run or written. O(step=run) returns the scenario and the command it would run;
        O(step=record) returns the fingerprint (CUDA and NCCL versions of a CUDA engine not read) and the directory
        it would write to; O(step=compare) runs as usual, since it only reads.
  diff_mode:
    support: none
  platform:
    platforms: posix
options:
  step:
    description:
      - C(run) one scenario, C(record) the results of the runs, or C(compare) a stored record with its baseline.
    type: str
    choices: [run, record, compare]
    default: run
  service:
    description:
      - The result of M(moeops.inference.vllm_service_info) for the unit to benchmark. O(step=run) takes vLLM's
        address, the served name, the tokenizer, the venv, the service user, the environment file with the API key
        and C(HF_HOME) from it; O(step=record) the fingerprint.
    type: dict
    default: {}
  scenario:
    description: The scenario O(step=run) runs.
    type: str
    choices: [latency, throughput, cold_prefill]
    default: latency
  input_len:
    description: Prompt tokens of C(latency) and C(throughput).
    type: int
    default: 1024
  output_len:
    description: Output tokens of C(latency) and C(throughput).
    type: int
    default: 256
  prefill_input_len:
    description: Prompt tokens of C(cold_prefill).
    type: int
    default: 8192
  prefill_output_len:
    description: Output tokens of C(cold_prefill).
    type: int
    default: 16
  num_prompts:
    description: Prompts of the scenario; the scenario's own (16, 256, 1) when not given.
    type: int
  max_concurrency:
    description: Requests at once; the scenario's own (1, 32, 1) when not given.
    type: int
  seed:
    description: The random dataset's seed; the scenario's own fixed seed (301, 302, 303) when not given.
    type: int
  num_warmups:
    description: Requests sent before the measurement; the scenario's own (1, 1, 0) when not given.
    type: int
  url:
    description: vLLM's base URL, without C(/v1), over the one read from O(service).
    type: str
  model:
    description: The served model name, over the one read from O(service).
    type: str
  tokenizer:
    description: The tokenizer (a path or a Hugging Face id), over the one read from O(service).
    type: str
  venv:
    description: The vLLM venv whose C(vllm) and C(python) are run, over the one read from O(service).
    type: path
  user:
    description:
      - Run the client as this user, through C(setpriv); default the unit's C(User=). Empty runs it as the module's user.
    type: str
  api_key_file:
    description:
      - An environment file (C(KEY=VALUE) lines, as systemd reads them) whose C(VLLM_API_KEY) is the API key; default
        the unit's C(EnvironmentFile=) that sets it. No key is sent when neither exists.
    type: path
  environment:
    description: More environment variables for the client.
    type: dict
    default: {}
  cache_salt:
    description:
      - vLLM's C(cache_salt) for every request of the scenario, so that no prefix cached by an earlier run of the same
        seed answers. Default a new salt every call; empty sends none.
    type: str
  timeout:
    description: Seconds a scenario may take before it is stopped.
    type: int
    default: 3600
  results:
    description: The results of the O(step=run) calls to record (a registered loop's C(results)).
    type: list
    elements: dict
    default: []
  gpu_facts:
    description: The GPU facts (C(ansible_facts.nvidia_gpu) of M(moeops.inference.gpu_facts)) for the fingerprint.
    type: dict
    default: {}
  nccl_sources:
    description:
      - Where each environment variable of the unit the vllm_service role renders now comes from (C(sources.environment)
        of its C(vllm_service_desired) fact, tasks_from C(desired)).
    type: dict
    default: {}
  nccl_desired:
    description: The NCCL environment the vllm_service role renders now (C(vllm_service_desired.nccl.env)).
    type: dict
    default: {}
  profile:
    description: The model profile's name, for the fingerprint and the community floors.
    type: str
    default: ""
  collection_version:
    description: This collection's version (C(galaxy.yml) or C(MANIFEST.json)), for the fingerprint.
    type: str
    default: ""
  host:
    description: The host name written in the record; default the node's.
    type: str
  store:
    description: Where records are kept, one directory a fingerprint.
    type: path
    default: /var/lib/moeops/benchmarks
  record:
    description: The stored record O(step=compare) compares with the earlier records of its directory.
    type: path
  warn_regression:
    description: A regression above this fraction of the baseline warns.
    type: float
    default: 0.10
  fail_regression:
    description: A regression above this fraction of the baseline fails.
    type: float
    default: 0.25
  gate_metrics:
    description: The metrics the gate compares.
    type: list
    elements: str
    default: [output_tok_s, ttft_p50_ms, ttft_p99_ms, itl_p50_ms, itl_p99_ms, request_per_s]
  fail_on_regression:
    description: Fail (after writing the record) when a regression is above O(fail_regression).
    type: bool
    default: true
requirements:
  - C(setpriv) (util-linux) and C(timeout) (coreutils) on the node.
notes:
  - Run it with C(become), so that the root-only environment file can be read and records written.
  - A record holds the client's result without its per-request lists, the metrics under the table's names, the
    command, the fingerprint, the comparison and the floors.
seealso:
  - module: moeops.inference.vllm_service_info
  - name: vLLM's benchmark CLI
    description: C(vllm bench serve) and its options.
    link: https://docs.vllm.ai/en/latest/cli/bench/serve.html
"""

EXAMPLES = r"""
- name: Read the deployed vLLM
  moeops.inference.vllm_service_info:
  become: true
  register: deployed

- name: Run the scenarios, one a task
  moeops.inference.vllm_benchmark:
    service: "{{ deployed }}"
    scenario: "{{ item }}"
    input_len: 1024
    output_len: 256
  loop: [latency, throughput, cold_prefill]
  become: true
  register: runs

- name: Keep the record and compare it with the previous one
  moeops.inference.vllm_benchmark:
    step: record
    service: "{{ deployed }}"
    results: "{{ runs.results }}"
    gpu_facts: "{{ ansible_facts.nvidia_gpu }}"
    profile: kimi-k2.5-int4
    collection_version: 0.1.0
  become: true

- name: Compare a stored record with its baseline again, with a tighter gate
  moeops.inference.vllm_benchmark:
    step: compare
    record: /var/lib/moeops/benchmarks/3f2a9c0d1e4b5a6f/20261204T093000Z.json
    fail_regression: 0.15
  become: true
"""

RETURN = r"""
scenario:
  description: The scenario's workload (C(name), C(input_len), C(output_len), C(num_prompts), C(max_concurrency),
    C(seed), C(num_warmups), C(what)).
  returned: step is run
  type: dict
line:
  description: The scenario in one line.
  returned: step is run
  type: str
  sample: "latency: 16 prompts, 1 at a time, 1024 in / 256 out, seed 301"
command:
  description: The C(vllm bench serve) command line (run, or in check mode to be run); never holds the API key.
  returned: step is run
  type: list
  elements: str
url:
  description: vLLM's address the client used.
  returned: step is run
  type: str
  sample: http://127.0.0.1:8001
api_key_used:
  description: Whether an API key was handed to the client (its value is never returned).
  returned: step is run
  type: bool
metrics:
  description:
    - The result under the record's names - C(output_tok_s), C(ttft_p50_ms), C(ttft_p99_ms), C(itl_p50_ms),
      C(itl_p99_ms), C(request_per_s) (the table's), and C(tpot_p50_ms), C(tpot_p99_ms), C(e2el_p50_ms),
      C(e2el_p99_ms), C(total_tok_s), C(duration_s), C(completed), C(failed), C(input_tokens), C(output_tokens),
      C(decode_tok_s) (concurrent streams x 1000 / TPOT p50).
  returned: step is run and not check mode
  type: dict
result:
  description: The client's result JSON without its per-request lists.
  returned: step is run and not check mode
  type: dict
elapsed_s:
  description: Seconds the client ran.
  returned: step is run and not check mode
  type: float
bench_warnings:
  description: The client's own warning lines (for example a C(/tokenize) it could not reach).
  returned: step is run and not check mode
  type: list
  elements: str
path:
  description: The record written (O(step=record)) or compared (O(step=compare)); in check mode the directory.
  returned: step is record or compare
  type: str
  sample: /var/lib/moeops/benchmarks/3f2a9c0d1e4b5a6f/20261204T093000Z.json
fingerprint:
  description: C(id) (16 hex digits, the directory's name) and C(components), with C(version_sources) and each NCCL
    variable's C(source), C(rule) and C(reason).
  returned: step is record or compare
  type: dict
fingerprint_lines:
  description: The fingerprint in three lines.
  returned: step is record or compare
  type: list
  elements: str
table:
  description: The table, one row a scenario - output tok/s, TTFT p50 and p99, ITL p50 and p99 (ms), requests/s.
  returned: step is record or compare and not check mode
  type: list
  elements: str
comparison:
  description:
    - C(verdict) (C(no_baseline), C(pass), C(warn), C(fail)), C(rows) (one a scenario and gated metric, with
      C(baseline), C(old), C(new), C(change), C(regression), C(status)) and C(scenarios) (C(status), C(baseline)
      and the records C(passed_over), each scenario).
  returned: step is record or compare and not check mode
  type: dict
comparison_lines:
  description: The comparison, one line a compared metric.
  returned: step is record or compare and not check mode
  type: list
  elements: str
verdict:
  description: The gate's verdict - C(no_baseline), C(pass), C(warn) or C(fail).
  returned: step is record or compare and not check mode
  type: str
floors:
  description: Each community number - C(id), C(status) (C(not_applicable) with C(why), C(ok), C(below)), C(value),
    C(measured_here), C(source), C(line).
  returned: step is record or compare and not check mode
  type: list
  elements: dict
record:
  description: The record as written.
  returned: step is record and not check mode
  type: dict
fabricated:
  description: The compared record's C(fabricated) note (a record a test made), null for a real one.
  returned: step is compare
  type: str
msg:
  description: In check mode, what a run would write.
  returned: step is record and check mode
  type: str
"""

import json
import os
import pwd
import shutil
import socket
import tempfile
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.moeops.inference.plugins.module_utils._engine import benchmark as bench
from ansible_collections.moeops.inference.plugins.module_utils._common import state_files

# Printed by the probe on its last line: the venv's PyTorch and the CUDA and NCCL it carries (no GPU needed).
PROBE = r"""
import json
out = {}
try:
    import torch
    out["torch"] = torch.__version__
    out["cuda"] = torch.version.cuda
    try:
        version = torch.cuda.nccl.version()
        out["nccl"] = ".".join(str(v) for v in version) if isinstance(version, tuple) else str(version)
    except Exception as exc:
        out["nccl"] = None
        out["nccl_error"] = "%s: %s" % (type(exc).__name__, exc)
except Exception as exc:
    out["error"] = "%s: %s" % (type(exc).__name__, exc)
print(json.dumps(out))
"""


def _prefix(module, user):
    """setpriv to the user (the service user), and their home; nothing when empty or when not root."""
    if not user or os.geteuid() != 0:
        return [], None, ""
    try:
        account = pwd.getpwnam(user)
    except KeyError:
        module.fail_json(msg="vllm_benchmark: user %s does not exist" % user)
    return (["setpriv", "--reuid", str(account.pw_uid), "--regid", str(account.pw_gid), "--init-groups", "--"],
            account, account.pw_dir)


def _tail(text, size=3000):
    text = (text or "").strip()
    return text[-size:]


def run_step(module, p):
    try:
        target = bench.target(p["service"]) if p["service"] else {}
    except bench.BenchmarkError as exc:
        module.fail_json(msg="vllm_benchmark: %s" % exc)
    try:
        plan = bench.scenario_plan(p["scenario"], p["input_len"], p["output_len"], p["num_prompts"],
                                   p["max_concurrency"], p["seed"], p["num_warmups"], p["prefill_input_len"],
                                   p["prefill_output_len"])
    except bench.BenchmarkError as exc:
        module.fail_json(msg="vllm_benchmark: %s" % exc)
    url = p["url"] or target.get("url")
    model = p["model"] or target.get("model")
    if not url or not model:
        module.fail_json(msg="vllm_benchmark: give service (a vllm_service_info result) or url and model")
    tokenizer = p["tokenizer"] or target.get("tokenizer") or model
    venv = p["venv"] or target.get("venv") or "/opt/vllm/engine"
    user = p["user"] if p["user"] is not None else target.get("user", "")
    key_file = p["api_key_file"] or target.get("api_key_file") or ""
    salt = p["cache_salt"] if p["cache_salt"] is not None else "moeops-bench-%d-%s" % (time.time_ns(), plan["name"])
    problems = bench.plan_problems(plan, target.get("max_model_len"))
    if problems:
        module.fail_json(msg="vllm_benchmark: %s" % "; ".join(problems), scenario=plan)
    if target and target.get("state") != "running":
        module.fail_json(msg="vllm_benchmark: vLLM is not running (%s): %s" % (target.get("state"), target.get("state_line")),
                         scenario=plan)
    vllm = os.path.join(venv, "bin", "vllm")
    result = dict(changed=False, scenario=plan, line=bench.describe(plan), url=url, api_key_used=False)
    if module.check_mode:
        result["command"] = bench.bench_argv(vllm, plan, url, model, tokenizer, "<temporary directory>", "result.json",
                                             salt, target.get("trust_remote_code", False), target.get("tokenizer_mode", ""))
        module.exit_json(**result)

    key = ""
    if key_file:
        try:
            with open(key_file, "r", encoding="utf-8") as handle:
                key = bench.api_key_from_env_file(handle.read())
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            module.fail_json(msg="vllm_benchmark: cannot read the API key from %s: %s" % (key_file, exc), scenario=plan)
    if key:
        module.no_log_values.add(key)
    result["api_key_used"] = bool(key)
    prefix, account, home = _prefix(module, user)
    work = tempfile.mkdtemp(prefix="moeops-bench-")
    try:
        if account is not None:
            os.chown(work, account.pw_uid, account.pw_gid)
        argv = bench.bench_argv(vllm, plan, url, model, tokenizer, work, "result.json", salt,
                                target.get("trust_remote_code", False), target.get("tokenizer_mode", ""))
        result["command"] = argv
        env = bench.bench_environment(key, target.get("hf_home", ""), home, p["environment"])
        began = time.monotonic()
        rc, out, err = module.run_command(prefix + ["timeout", "--kill-after=30", str(p["timeout"])] + argv,
                                          environ_update=env, cwd=work)
        result["elapsed_s"] = round(time.monotonic() - began, 3)
        result["bench_warnings"] = bench.bench_warnings(out + "\n" + err)
        if rc != 0:
            why = "stopped after %d s (timeout)" % p["timeout"] if rc in (124, 137) else "rc %d" % rc
            module.fail_json(msg="vllm_benchmark: %s: vllm bench serve %s: %s" % (plan["name"], why, _tail(err or out)),
                             **result)
        raw, why = state_files.read_json_reason(os.path.join(work, "result.json"))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if raw is None:
        module.fail_json(msg="vllm_benchmark: %s: no result JSON (%s); the client printed: %s" % (plan["name"], why, _tail(out)),
                         **result)
    try:
        result["metrics"] = bench.metrics_of(raw)
    except bench.BenchmarkError as exc:
        module.fail_json(msg="vllm_benchmark: %s: %s" % (plan["name"], exc), **result)
    result["result"] = bench.result_summary(raw)
    failed = result["metrics"]["failed"] or 0
    if failed:
        module.fail_json(msg="vllm_benchmark: %s: %d of %d requests failed" % (plan["name"], failed, plan["num_prompts"]),
                         **result)
    for line in result["bench_warnings"]:
        module.warn("%s: vllm bench serve: %s" % (plan["name"], line))
    module.exit_json(**result)


def probe(module, venv, user):
    prefix, _account, home = _prefix(module, user)
    python = os.path.join(venv, "bin", "python")
    if not os.path.exists(python):
        return None, "%s does not exist" % python
    rc, out, err = module.run_command(prefix + ["timeout", "300", python, "-c", PROBE],
                                      environ_update={"HOME": home} if home else None, cwd="/")
    lines = [line for line in out.splitlines() if line.startswith("{")]
    if rc != 0 or not lines:
        return None, "%s could not be asked (rc %d): %s" % (python, rc, _tail(err or out, 500))
    try:
        return json.loads(lines[-1]), ""
    except ValueError:
        return None, "the probe printed %s" % _tail(out, 200)


def _earlier(directory, before):
    """(name, document) of the records in `directory` older than `before`, oldest first."""
    try:
        names = bench.sorted_names(os.listdir(directory))
    except OSError:
        return []
    order = bench.sorted_names(names + [before]) if before not in names else names
    earlier = order[:order.index(before)]
    return [(n, state_files.read_json(os.path.join(directory, n))) for n in earlier]


def _outcome(module, p, scenarios, directory, name, fp, profile, gpus):
    comparison = bench.compare(scenarios, _earlier(directory, name), p["warn_regression"], p["fail_regression"],
                               p["gate_metrics"])
    floors = bench.floor_checks(profile, gpus, scenarios)
    return comparison, floors, dict(table=bench.table_lines(scenarios), comparison=comparison,
                                    comparison_lines=bench.comparison_lines(comparison), verdict=comparison["verdict"],
                                    floors=floors, fingerprint=fp, fingerprint_lines=bench.fingerprint_lines(fp))


def _finish(module, result, floors):
    for floor in floors:
        if floor["status"] == "below":
            module.warn("community floor: %s" % floor["line"])
    warned = [row for row in result["comparison"]["rows"] if row["status"] == "warn"]
    if warned:
        module.warn("benchmark regression above %d%% (below %d%%) in %d metric(s): %s" % (
            round(100 * module.params["warn_regression"]), round(100 * module.params["fail_regression"]), len(warned),
            ", ".join("%s %s %+.1f%%" % (row["scenario"], row["title"], 100 * row["change"]) for row in warned)))
    if result["verdict"] == "fail" and module.params["fail_on_regression"]:
        failed = [" ".join(line.split()) for line in result["comparison_lines"] if " FAIL " in line]
        module.fail_json(msg="benchmark regression above %d%%: %s" % (round(100 * module.params["fail_regression"]),
                                                                      "; ".join(failed)), **result)
    module.exit_json(**result)


def record_step(module, p):
    scenarios = []
    for item in p["results"]:
        if item.get("skipped") or item.get("failed") or "metrics" not in item:
            continue
        scenarios.append({"name": item["scenario"]["name"], "workload": bench.workload(item["scenario"]),
                          "what": item["scenario"].get("what", ""), "metrics": item["metrics"],
                          "result": item.get("result") or {}, "command": item.get("command") or [],
                          "elapsed_s": item.get("elapsed_s"), "api_key_used": bool(item.get("api_key_used")),
                          "bench_warnings": item.get("bench_warnings") or []})
    service = p["service"]
    try:
        target = bench.target(service)
    except bench.BenchmarkError as exc:
        module.fail_json(msg="vllm_benchmark: %s" % exc)
    venv = p["venv"] or target["venv"] or "/opt/vllm/engine"
    user = p["user"] if p["user"] is not None else target.get("user", "")
    engine = (service.get("vllm") or {}).get("engine")
    if module.check_mode:
        found, why = None, "check mode: PyTorch not read"
    else:
        found, why = probe(module, venv, user)
    components = bench.fingerprint_components(service, p["gpu_facts"], found, p["nccl_sources"], p["nccl_desired"],
                                              p["profile"], p["collection_version"], why)
    fp = bench.fingerprint(components)
    directory = os.path.join(p["store"], fp["id"])
    if module.check_mode:
        planned = [item["scenario"]["name"] for item in p["results"] if isinstance(item.get("scenario"), dict)]
        module.exit_json(changed=True, path=directory, fingerprint=fp, fingerprint_lines=bench.fingerprint_lines(fp),
                         msg="check mode: nothing was run; a run would write a record of %s in %s%s" % (
                             ", ".join(planned) or "the scenarios run", directory,
                             "" if engine == "cpu" else " (its CUDA and NCCL versions are not read in check mode)"))
    if not scenarios:
        module.fail_json(msg="vllm_benchmark: no scenario result to record (every run failed or was skipped)")
    now = time.time()
    stamp = time.strftime(bench.NAME_TIME_FORMAT, time.gmtime(now))
    name = bench.record_name(stamp)
    n = 1
    while os.path.exists(os.path.join(directory, name)):
        n += 1
        name = bench.record_name(stamp, "-%d" % n)
    comparison, floors, result = _outcome(module, p, scenarios, directory, name, fp, components["profile"],
                                          components["gpus"])
    doc = bench.build_record(name[:-5], time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now)),
                             p["host"] or socket.gethostname(), fp, scenarios, comparison, floors)
    try:
        os.makedirs(directory, mode=0o755, exist_ok=True)
        state_files.write_json(os.path.join(directory, name), doc, mode=0o644, move=module.atomic_move)
    except (OSError, TypeError, ValueError) as exc:
        module.fail_json(msg="vllm_benchmark: cannot write %s: %s" % (os.path.join(directory, name), exc))
    result.update(changed=True, path=os.path.join(directory, name), record=doc)
    _finish(module, result, floors)


def compare_step(module, p):
    if not p["record"]:
        module.fail_json(msg="vllm_benchmark: step=compare needs record (a stored record's path)")
    doc, why = state_files.read_json_reason(p["record"])
    problems = [why] if doc is None else bench.record_problems(doc)
    if problems:
        module.fail_json(msg="vllm_benchmark: %s is not a benchmark record: %s" % (p["record"], "; ".join(problems)))
    directory, name = os.path.split(os.path.abspath(p["record"]))
    if not bench.is_record_name(name):
        module.fail_json(msg="vllm_benchmark: %s: a record's name starts with its time, YYYYMMDDTHHMMSSZ" % name)
    fp = doc["fingerprint"]
    components = fp.get("components") or {}
    _comparison, floors, result = _outcome(module, p, doc["scenarios"], directory, name, fp,
                                           components.get("profile", ""), components.get("gpus", ""))
    result.update(changed=False, path=os.path.abspath(p["record"]), fabricated=doc.get("fabricated"))
    _finish(module, result, floors)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            step=dict(type="str", choices=["run", "record", "compare"], default="run"),
            service=dict(type="dict", default={}),
            scenario=dict(type="str", choices=list(bench.SCENARIO_ORDER), default="latency"),
            input_len=dict(type="int", default=bench.DEFAULT_INPUT_LEN),
            output_len=dict(type="int", default=bench.DEFAULT_OUTPUT_LEN),
            prefill_input_len=dict(type="int", default=bench.SCENARIOS["cold_prefill"]["input_len"]),
            prefill_output_len=dict(type="int", default=bench.SCENARIOS["cold_prefill"]["output_len"]),
            num_prompts=dict(type="int"),
            max_concurrency=dict(type="int"),
            seed=dict(type="int"),
            num_warmups=dict(type="int"),
            url=dict(type="str"),
            model=dict(type="str"),
            tokenizer=dict(type="str", no_log=False),
            venv=dict(type="path"),
            user=dict(type="str"),
            api_key_file=dict(type="path"),
            environment=dict(type="dict", default={}),
            cache_salt=dict(type="str"),
            timeout=dict(type="int", default=3600),
            results=dict(type="list", elements="dict", default=[]),
            gpu_facts=dict(type="dict", default={}),
            nccl_sources=dict(type="dict", default={}),
            nccl_desired=dict(type="dict", default={}),
            profile=dict(type="str", default=""),
            collection_version=dict(type="str", default=""),
            host=dict(type="str"),
            store=dict(type="path", default=bench.DEFAULT_STORE),
            record=dict(type="path"),
            warn_regression=dict(type="float", default=bench.DEFAULT_WARN),
            fail_regression=dict(type="float", default=bench.DEFAULT_FAIL),
            gate_metrics=dict(type="list", elements="str", default=list(bench.METRIC_KEYS)),
            fail_on_regression=dict(type="bool", default=True),
        ),
        supports_check_mode=True,
    )
    p = module.params
    if not 0 <= p["warn_regression"] <= p["fail_regression"]:
        module.fail_json(msg="vllm_benchmark: need 0 <= warn_regression <= fail_regression, got %s and %s"
                         % (p["warn_regression"], p["fail_regression"]))
    unknown = [m for m in p["gate_metrics"] if m not in bench.BETTER]
    if unknown:
        module.fail_json(msg="vllm_benchmark: unknown gate_metrics %s; known: %s" % (", ".join(unknown), ", ".join(sorted(bench.BETTER))))
    {"run": run_step, "record": record_step, "compare": compare_step}[p["step"]](module, p)


if __name__ == "__main__":
    main()
