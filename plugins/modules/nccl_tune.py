#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, moeops.inference contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: nccl_tune
short_description: Measure all-reduce latency per candidate NCCL environment and store the best
version_added: 0.2.0
description:
  - Runs an all-reduce benchmark on the managed node, one process a GPU over O(world_size) GPUs as tensor parallel
    uses them, with PyTorch from the vLLM venv (O(python)), once for each candidate NCCL environment.
  - Candidates, in measurement order - NCCL's defaults; the static policy's environment for O(workload) (the
    C(moeops.inference.nccl_env) filter applied to O(gpu_facts)); the NCCL topology file written from O(gpu_facts)
    (C(NCCL_TOPO_FILE)) with the policy and alone (O(topology_file)); the policy with each channel floor of
    O(min_channels); for the V(throughput) workload the community's high-concurrency settings (C(NCCL_P2P_DISABLE=1)
    alone, and with 16-32 or 32-64 channels, a 32 or 64 MB C(NCCL_BUFFSIZE) and C(CUDA_DEVICE_MAX_CONNECTIONS) 32 or 64;
    the policy with the larger of those); then a bounded grid of protocol, algorithm, channel count and P2P level.
    O(pinned) variables are set in every candidate. LL128 is offered only where every GPU pair is on NVLink.
  - Message sizes are those of the model's all-reduce, hidden size times O(dtype_bytes) times the tokens in flight,
    for O(decode_batches) and O(prefill_tokens).
  - Each size gets O(warmup) untimed and O(iterations) timed iterations of O(inner) back-to-back all-reduces; the
    result is the median over iterations of the slowest rank. A wrong all-reduce sum disqualifies a candidate.
  - Candidates are ranked by the weighted mean of their time ratio to NCCL's defaults (O(objective), by default the
    workload's); the best is the lowest that is no slower than the defaults at any size the workload guards (every
    decode size for V(latency) and V(balanced); decode at 32 and 128 and the 8192-token prefill for V(throughput)).
    The result is stored in O(store_dir) as C(<fingerprint>-<workload>.json), keyed by a fingerprint of the topology,
    the driver, the NCCL version and O(world_size), one a workload.
  - The C(moeops.inference.vllm_service) role renders a stored result for the node's fingerprint and its
    C(vllm_service_workload) in preference to the static policy; inventory overrides still win.
  - Progress (one line a candidate) is appended to C(<store_dir>/sweep.log) while the sweep runs.
author:
  - moeops.inference contributors (@moeops)
requirements:
  - PyTorch in the Python given by O(python) (the vLLM venv has it), with CUDA and NCCL for O(backend=nccl).
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: In check mode the module plans the candidates and reports whether it would measure, and runs nothing.
  diff_mode:
    support: none
  platform:
    platforms: posix
options:
  python:
    description: Absolute path of the Python that has PyTorch, normally the vLLM venv's.
    type: path
    default: /opt/vllm/engine/bin/python
  gpu_facts:
    description: The C(nvidia_gpu) facts from M(moeops.inference.gpu_facts), for the fingerprint, the policy and the safe protocols.
    type: dict
    required: true
  hidden_size:
    description: The model's hidden size (7168 for Kimi-K2.5).
    type: int
    required: true
  dtype_bytes:
    description: Bytes per element of the activations that are all-reduced (2 for bf16).
    type: int
    default: 2
  decode_batches:
    description: Decode batch sizes, one token a sequence.
    type: list
    elements: int
    default: [1, 8, 32, 128]
  prefill_tokens:
    description: Prefill chunk sizes in tokens.
    type: list
    elements: int
    default: [2048, 8192]
  world_size:
    description: Number of ranks, one a GPU; defaults to the GPU count in O(gpu_facts). Required with O(backend=gloo).
    type: int
  workload:
    description:
      - What the result is for, as the vllm_service role's C(vllm_service_workload). It chooses the static policy
        candidate, the default O(objective), the sizes a pick may never be slower at, and whether the
        high-concurrency candidates are measured (V(throughput)).
      - V(latency) weighs batch-1 decode (C({decode-1 0.7, decode 0.2, prefill 0.1})); V(balanced) decode first
        (C({decode 0.8, prefill 0.2})); V(throughput) decode at 32 and 128 and the 8192-token prefill
        (C({decode-32 0.3, decode-128 0.3, prefill-8192 0.3, decode 0.05, prefill 0.05})). The sizes a workload names
        must be measured (O(decode_batches), O(prefill_tokens)) unless O(objective) is given.
    type: str
    choices: [latency, balanced, throughput]
    default: balanced
    version_added: 0.8.0
  topology_file:
    description:
      - Write the NCCL topology file from O(gpu_facts) to C(<store_dir>/topology/) and measure it as two candidates,
        with the static policy and alone (C(NCCL_TOPO_FILE)). Skipped when the facts place no GPU (no C(host) section).
    type: bool
    default: true
    version_added: 0.8.0
  min_channels:
    description: C(NCCL_MIN_NCHANNELS) floors tried on top of the static policy, one candidate each (empty for none).
    type: list
    elements: int
    default: [8, 16]
    version_added: 0.8.0
  backend:
    description:
      - V(nccl) measures NCCL on the GPUs.
      - V(gloo) runs the same harness on CPU processes with PyTorch's gloo backend. The NCCL variables have no
        effect then; it exists to test the harness where there are no GPUs, and its result says so.
    type: str
    choices: [nccl, gloo]
    default: nccl
  pinned:
    description: NCCL variables fixed in every candidate, for example C(NCCL_NVLS_ENABLE=0). String values.
    type: dict
    default: {}
  policy_overrides:
    description:
      - Inventory overrides for the static policy candidate (as C(vllm_service_nccl_overrides)); a string sets, null removes.
      - The policy candidate is the static policy only when this is empty.
    type: dict
    default: {}
  protocols:
    description: Protocols of the grid; default the ones safe on this interconnect (LL128 only where every pair is on NVLink).
    type: list
    elements: str
  algorithms:
    description: Algorithms of the grid (an empty list of protocols, algorithms, channels or P2P levels - no grid).
    type: list
    elements: str
    default: [Ring, Tree]
  channels:
    description:
      - Channel counts of the grid, set as both C(NCCL_MIN_NCHANNELS) and C(NCCL_MAX_NCHANNELS). V(0) leaves them unset.
    type: list
    elements: int
    default: [0, 4, 8, 16]
  p2p_levels:
    description:
      - P2P levels of the grid; V(default) leaves C(NCCL_P2P_LEVEL) unset. Default NCCL's cutoff plus each level that
        reaches farther GPU pairs whose NVML P2P status is OK.
    type: list
    elements: str
  max_candidates:
    description: Most candidates measured, the defaults and the policy included.
    type: int
    default: 24
  warmup:
    description: Untimed iterations per size.
    type: int
    default: 5
  iterations:
    description: Timed iterations per size; the median is reported.
    type: int
    default: 20
  inner:
    description: All-reduces per timed iteration (their mean time is one sample).
    type: int
    default: 10
  time_budget:
    description:
      - Seconds for the whole sweep. No candidate is started that would likely end past it; those not run are listed.
      - The defaults are always measured.
    type: int
    default: 900
  candidate_timeout:
    description: Seconds one candidate may take (all ranks) before it is killed and counted as failed.
    type: int
    default: 300
  objective:
    description:
      - Weights of the ranking; a key is a phase (V(decode), V(prefill)), split evenly over its sizes, or one size
        such as V(decode-1). Default the O(workload)'s.
    type: dict
  max_decode_regression:
    description:
      - How much slower than NCCL's defaults, as a fraction, a pick may be at a size the workload guards (0 - never
        slower).
    type: float
    default: 0.0
  min_improvement:
    description:
      - Score gain over NCCL's defaults, as a fraction, below which a candidate is not picked (the defaults are).
        Keeps timing noise from changing a deployment.
    type: float
    default: 0.02
  store_dir:
    description: Absolute directory where results are stored.
    type: path
    default: /var/lib/moeops/nccl-tuning
  force:
    description: Measure even when a result for this fingerprint is stored.
    type: bool
    default: false
  nccl_debug:
    description:
      - When set (for example V(INFO)), C(NCCL_DEBUG) for the ranks with C(NCCL_DEBUG_SUBSYS=INIT,TUNING); rank 0's NCCL
        lines are returned in RV(nccl_log).
    type: str
    default: ""
notes:
  - A result keeps its place only for the same topology, driver, NCCL version and rank count, and serves one
    workload; anything else gets a new fingerprint and the role falls back to the static policy until it is measured
    (M(moeops.inference.nccl_tune_info) reports a result of the same box with another NCCL version or driver as
    stale).
  - The sweep occupies every GPU; run it while vLLM is stopped.
  - Run it with C(async) to keep the connection out of a long sweep; C(tail -f <store_dir>/sweep.log) shows progress.
seealso:
  - name: NCCL environment variables
    description: What each swept variable does.
    link: https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html
"""

EXAMPLES = r"""
- name: Sweep NCCL settings for Kimi-K2.5 (hidden 7168) with NVLink multicast off
  moeops.inference.nccl_tune:
    gpu_facts: "{{ ansible_facts.nvidia_gpu }}"
    hidden_size: 7168
    pinned:
      NCCL_NVLS_ENABLE: "0"
    time_budget: 1200
  async: 1500
  poll: 15
  register: sweep

- name: Show the ranking
  ansible.builtin.debug:
    var: sweep.table

- name: Sweep for many concurrent requests (P2P off, more channels, larger buffers among the candidates)
  moeops.inference.nccl_tune:
    gpu_facts: "{{ ansible_facts.nvidia_gpu }}"
    hidden_size: 7168
    workload: throughput
  async: 1500
  poll: 15

- name: Weight batch-1 decode alone
  moeops.inference.nccl_tune:
    gpu_facts: "{{ ansible_facts.nvidia_gpu }}"
    hidden_size: 7168
    workload: latency
    objective: {decode-1: 1}
    force: true
"""

RETURN = r"""
fingerprint:
  description: Id the result is stored under, and what it hashes.
  returned: always
  type: dict
  sample: {id: 3f2a9c1b0d4e5f67, components: {topology: 0a1b2c3d4e5f6071, driver_version: "580.95.05",
           nccl_version: "2.27.3", world_size: 8}}
stored_path:
  description: The stored result file.
  returned: always
  type: str
  sample: /var/lib/moeops/nccl-tuning/3f2a9c1b0d4e5f67-balanced.json
measured:
  description: Whether this run measured (false when a stored result was reused, and in check mode).
  returned: always
  type: bool
result:
  description:
    - The stored document, C(schema_version) 2. Keys C(workload), C(candidates) (each with per-size C(median_us),
      C(min_us), C(max_us), C(iterations)), C(ranking), C(best) (name, env, score, ratios), C(sizes), C(objective),
      C(weights), C(guarded) (the sizes a pick may not be slower at), C(pinned), C(topology_file) (path, sha256, GPUs
      written; null when none), C(not_run), C(settings), C(measured_at), C(host), C(error).
  returned: unless in check mode with nothing stored
  type: dict
best:
  description: The best candidate's environment (pinned variables included); empty when nothing could be ranked.
  returned: always
  type: dict
  sample: {NCCL_NVLS_ENABLE: "0", NCCL_PROTO: LL, NCCL_ALGO: Ring}
table:
  description: The ranking as text lines, each size's median and its ratio to NCCL's defaults.
  returned: always
  type: list
  elements: str
candidates:
  description: The planned candidates, in measurement order (name, origin, env).
  returned: always
  type: list
  elements: dict
progress:
  description: One line per candidate as it finished, as in C(sweep.log).
  returned: always
  type: list
  elements: str
nccl_log:
  description: Rank 0's NCCL log lines for each candidate (only with O(nccl_debug)).
  returned: when O(nccl_debug) is set
  type: dict
"""

import hashlib
import json
import os
import socket
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.moeops.inference.plugins.module_utils._policy import nccl_policy
from ansible_collections.moeops.inference.plugins.module_utils._nccl import topology
from ansible_collections.moeops.inference.plugins.module_utils._nccl import tune
from ansible_collections.moeops.inference.plugins.module_utils._common import state_files


def topology_candidate(facts, store_dir):
    """The topology file for the facts: (path, {path, sha256, gpus_written, gpus_left_out}, text) or (None, None, '')
    when it places no GPU. Named by its content, so a stored result that picked it keeps pointing at the same file."""
    made = topology.nccl_topology(facts)
    if not made["gpus_written"]:
        return None, None, ""
    digest = hashlib.sha256(made["xml"].encode("utf-8")).hexdigest()
    path = os.path.join(store_dir, "topology", "nccl-topo-%s.xml" % digest[:16])
    return path, {"path": path, "sha256": digest, "gpus_written": len(made["gpus_written"]),
                  "gpus_left_out": len(made["gpus_left_out"])}, made["xml"]


def write_topology(path, text):
    """Write the file once (world-readable: the service user reads it); an existing one has the same content."""
    if os.path.exists(path):
        return
    os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.chmod(tmp, 0o644)
    os.rename(tmp, path)


def launch(module, python, script, spec):
    """Run one candidate through the harness's launcher: {rank: stdout}, {rank: stderr}, failure or ''."""
    rc, out, err = module.run_command([python, script, "--launch", json.dumps(spec)])
    records = [r for r in tune.parse_rank_lines(out) if r.get("event") == "launch"]
    if rc != 0 or not records:
        return {}, {}, "launcher failed (rc %d): %s" % (rc, (err or out).strip()[-1000:])
    ranks = records[0].get("ranks") or {}
    stdout = {int(k): v.get("stdout", "") for k, v in ranks.items()}
    stderr = {int(k): v.get("stderr", "") for k, v in ranks.items()}
    return stdout, stderr, records[0].get("failure", "")


def main():
    module = AnsibleModule(
        argument_spec=dict(
            python=dict(type="path", default="/opt/vllm/engine/bin/python"),
            gpu_facts=dict(type="dict", required=True),
            hidden_size=dict(type="int", required=True),
            dtype_bytes=dict(type="int", default=2),
            decode_batches=dict(type="list", elements="int", default=list(tune.DEFAULT_DECODE_BATCHES)),
            prefill_tokens=dict(type="list", elements="int", default=list(tune.DEFAULT_PREFILL_TOKENS), no_log=False),
            world_size=dict(type="int"),
            workload=dict(type="str", default="balanced", choices=list(tune.WORKLOADS)),
            topology_file=dict(type="bool", default=True),
            min_channels=dict(type="list", elements="int", default=list(tune.DEFAULT_MIN_CHANNELS)),
            backend=dict(type="str", default="nccl", choices=["nccl", "gloo"]),
            pinned=dict(type="dict", default={}),
            policy_overrides=dict(type="dict", default={}),
            protocols=dict(type="list", elements="str"),
            algorithms=dict(type="list", elements="str", default=list(tune.DEFAULT_ALGORITHMS)),
            channels=dict(type="list", elements="int", default=[0, 4, 8, 16]),
            p2p_levels=dict(type="list", elements="str"),
            max_candidates=dict(type="int", default=24),
            warmup=dict(type="int", default=5),
            iterations=dict(type="int", default=20),
            inner=dict(type="int", default=10),
            time_budget=dict(type="int", default=900),
            candidate_timeout=dict(type="int", default=300),
            objective=dict(type="dict"),
            max_decode_regression=dict(type="float", default=0.0),
            min_improvement=dict(type="float", default=0.02),
            store_dir=dict(type="path", default="/var/lib/moeops/nccl-tuning"),
            force=dict(type="bool", default=False),
            nccl_debug=dict(type="str", default=""),
        ),
        required_if=[("backend", "gloo", ["world_size"])],
        supports_check_mode=True,
    )
    p = module.params
    for key in ("python", "store_dir"):
        if not os.path.isabs(p[key]):
            module.fail_json(msg="%s must be an absolute path, got %s" % (key, p[key]))
    for key in ("warmup", "iterations", "inner", "time_budget", "candidate_timeout"):
        if p[key] < (0 if key == "warmup" else 1):
            module.fail_json(msg="%s must be positive, got %d" % (key, p[key]))
    facts = p["gpu_facts"]
    world_size = p["world_size"] or int(facts.get("count") or 0)
    if world_size < 1:
        module.fail_json(msg="no GPU in gpu_facts and no world_size: nothing to measure")
    if p["backend"] == "nccl" and int(facts.get("count") or 0) and world_size > int(facts["count"]):
        module.fail_json(msg="world_size %d is more than the %d GPU(s) in gpu_facts" % (world_size, facts["count"]))
    workload = p["workload"]
    topo_path, topo_info, topo_text = (topology_candidate(facts, p["store_dir"]) if p["topology_file"]
                                       else (None, None, ""))
    try:
        sizes = tune.message_sizes(p["hidden_size"], p["dtype_bytes"], p["decode_batches"], p["prefill_tokens"])
        objective = p["objective"] if p["objective"] is not None else tune.workload_objective(workload, sizes)
        tune.size_weights(sizes, objective)
        guarded = tune.workload_guard(workload, sizes)
        policy_env = nccl_policy.nccl_policy(facts, p["policy_overrides"], workload=workload)["env"]
        plan = tune.plan_candidates(
            facts, policy_env, p["pinned"],
            protocols=p["protocols"],
            algorithms=p["algorithms"],
            channels=[c or None for c in p["channels"]],
            p2p_levels=None if p["p2p_levels"] is None else [None if lv == "default" else lv for lv in p["p2p_levels"]],
            max_candidates=p["max_candidates"],
            workload=workload,
            topology_file=topo_path,
            min_channels=p["min_channels"])
    except (TypeError, ValueError) as exc:
        module.fail_json(msg=str(exc))
    if p["topology_file"] and topo_path is None:
        plan["notes"].append("no topology file: the facts place no GPU (a host section is needed)")
    if not os.access(p["python"], os.X_OK):
        if module.check_mode:
            module.exit_json(changed=True, measured=False, fingerprint={}, stored_path="", best={}, table=[],
                             candidates=plan["candidates"], progress=[],
                             msg="%s does not exist yet: the sweep would run after the venv is installed" % p["python"])
        module.fail_json(msg="%s is not an executable Python (is the vLLM venv installed?)" % p["python"])

    with tune.rank_script("nccl-tune-") as script:
        probe, why = tune.probe(module.run_command, p["python"], script)
        if probe is None:
            module.fail_json(msg=why)
        if p["backend"] == "nccl" and probe.get("device_count", 0) < world_size:
            module.fail_json(msg="PyTorch in %s sees %d GPU(s), the sweep needs %d (cuda_available %s)"
                             % (p["python"], probe.get("device_count", 0), world_size, probe.get("cuda_available")))
        fp = tune.fingerprint(facts, probe.get("nccl_version"), world_size)
        path = tune.result_file(p["store_dir"], fp["id"], workload)
        stored = state_files.read_json(path)
        if stored is not None and not p["force"]:
            module.exit_json(changed=False, measured=False, fingerprint=fp, stored_path=path, result=stored,
                             best=(stored.get("best") or {}).get("env") or {},
                             table=tune.ranked_table(stored.get("ranking") or [], stored.get("candidates") or [],
                                                     stored.get("sizes") or []),
                             candidates=plan["candidates"], progress=[])
        if module.check_mode:
            module.exit_json(changed=True, measured=False, fingerprint=fp, stored_path=path, best={}, table=[],
                             candidates=plan["candidates"], progress=[])

        os.makedirs(p["store_dir"], mode=0o755, exist_ok=True)
        if topo_path:
            write_topology(topo_path, topo_text)
        log_path = os.path.join(p["store_dir"], "sweep.log")
        spec = {"backend": p["backend"], "device": "cuda" if p["backend"] == "nccl" else "cpu",
                "dtype": "bfloat16" if p["dtype_bytes"] == 2 else ("float32" if p["dtype_bytes"] == 4 else "uint8"),
                "warmup": p["warmup"], "iterations": p["iterations"], "inner": p["inner"],
                "timeout_s": p["candidate_timeout"], "sizes": sizes}
        if p["dtype_bytes"] not in (1, 2, 4):
            module.fail_json(msg="dtype_bytes must be 1, 2 or 4, got %d" % p["dtype_bytes"])
        started = time.monotonic()
        measured, progress, not_run, nccl_log, info = [], [], [], {}, {}
        total = len(plan["candidates"])
        with open(log_path, "a") as log:
            log.write("# sweep %s, workload %s: %d candidates, %d ranks, backend %s, budget %ds\n"
                      % (fp["id"], workload, total, world_size, p["backend"], p["time_budget"]))
            log.flush()
            for i, cand in enumerate(plan["candidates"], 1):
                elapsed = time.monotonic() - started
                if not tune.budget_allows(elapsed, len(measured), p["time_budget"]):
                    not_run.append(cand["name"])
                    continue
                timeout = min(p["candidate_timeout"], max(p["time_budget"] - elapsed, 1)) if measured \
                    else p["candidate_timeout"]
                t0 = time.monotonic()
                stdout, stderr, failure = launch(module, p["python"], script,
                                                 dict(spec, env=cand["env"], world_size=world_size,
                                                      timeout_s=int(timeout), nccl_debug=p["nccl_debug"]))
                per_rank = {rank: tune.parse_rank_lines(text) for rank, text in stdout.items()}
                agg = tune.aggregate_timings(per_rank, world_size, sizes)
                errors = ([failure] if failure else []) + agg["errors"]
                info = info or agg["info"]
                entry = dict(cand, sizes=agg["sizes"], errors=errors, seconds=round(time.monotonic() - t0, 2))
                measured.append(entry)
                if p["nccl_debug"]:
                    # NCCL logs to stdout unless NCCL_DEBUG_FILE says otherwise.
                    nccl_log[cand["name"]] = [ln for ln in (stdout.get(0, "") + stderr.get(0, "")).splitlines()
                                              if " NCCL " in ln and "Channel " not in ln][:200]
                line = "[%d/%d] %-30s %5.1fs %s" % (
                    i, total, cand["name"], entry["seconds"],
                    "FAILED: " + "; ".join(errors) if errors else
                    " ".join("%s=%.1fus" % (s["name"], agg["sizes"][s["name"]]["median_us"]) for s in sizes))
                progress.append(line)
                log.write(line + "\n")
                log.flush()
        selection = tune.rank_candidates(measured, sizes, objective, p["max_decode_regression"],
                                         p["min_improvement"], guarded)
        settings = {k: p[k] for k in ("backend", "warmup", "iterations", "inner", "time_budget", "hidden_size",
                                      "dtype_bytes", "max_decode_regression", "min_improvement")}
        settings.update(torch=probe.get("torch"), elapsed_s=round(time.monotonic() - started, 1),
                        gpu=info.get("gpu"), plan_notes=plan["notes"], grid_size=plan["grid_size"])
        doc = tune.build_document(fp, sizes, objective, p["pinned"], measured, selection, not_run, settings,
                                  time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), socket.gethostname(),
                                  workload, topo_info)
        table = tune.ranked_table(selection["ranking"], measured, sizes)
        if selection["best"] is None:
            module.fail_json(msg=selection["error"], progress=progress, fingerprint=fp,
                             nccl_log=nccl_log, result=doc)
        state_files.write_json(path, doc)
        result = dict(changed=True, measured=True, fingerprint=fp, stored_path=path, result=doc,
                      best=selection["best"]["env"], table=table, candidates=plan["candidates"], progress=progress)
        if p["nccl_debug"]:
            result["nccl_log"] = nccl_log
        module.exit_json(**result)


if __name__ == "__main__":
    main()
