# -*- coding: utf-8 -*-
# Copyright: (c) 2026, moeops.inference contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""NCCL tuning sweep: plan, parse, select and store; probe the venv's PyTorch.

The module moeops.inference.nccl_tune launches the ranks (nccl_tune_rank.py,
one process a GPU) once per candidate environment; everything it decides
before and after that lives here so that it is unit-tested without GPUs.
The exceptions are rank_script, which writes the rank script to a temporary
directory, and probe, which runs that script's --probe through the command
runner it is given; nccl_tune and nccl_tune_info share both.

Protocol safety (NCCL environment-variable docs, NCCL_PROTO): LL128 "may cause
silent data corruption" on platforms where NCCL does not enable it by itself,
and NCCL enables it only on NVLink-connected GPUs of the architectures it was
validated on (src/graph/tuning.cc).  LL128 relies on a 128-byte store reaching
the other GPU whole and in order; NCCL's maintainers found that CPUs split it
into two 64-byte lines that may be reordered, which makes LL128 unsafe over
PATH_SYS (review of NVIDIA/nccl PR #2036, whose LL128 part was reverted for it;
NVIDIA/nccl issue #786).  So the planner offers LL128 only where every pair is
on NVLink; LL and Simple are safe everywhere.

Workloads (_policy/workload.py): the workload chooses the objective the
candidates are ranked by (workload_objective), the sizes a pick may never be
slower at (workload_guard), and, for throughput, the community's high-
concurrency candidates (P2P off, more channels, a larger buffer, more CUDA
connections).  A stored result belongs to one workload and one fingerprint.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import json
import os
import shutil
import statistics
import tempfile
from typing import Any, Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.moeops.inference.plugins.module_utils._nccl import rank as nccl_tune_rank
from ansible_collections.moeops.inference.plugins.module_utils._policy.workload import WORKLOADS
from ansible_collections.moeops.inference.plugins.module_utils._policy.workload import check as check_workload

# 2: one document a workload (its name in the file name and in `workload`); 1 (no workload) is still read, as the
# balanced workload when it was ranked with balanced's objective.
RESULT_SCHEMA_VERSION = 2
READABLE_SCHEMA_VERSIONS = (1, 2)
# Every line the rank script prints for the module starts with this.
LINE_PREFIX = "NCCL_TUNE "

DEFAULT_DECODE_BATCHES = (1, 8, 32, 128)
DEFAULT_PREFILL_TOKENS = (2048, 8192)
# Decode is what a serving box spends its time in; prefill counts, less.
DEFAULT_OBJECTIVE = {"decode": 0.8, "prefill": 0.2}
DEFAULT_ALGORITHMS = ("Ring", "Tree")
DEFAULT_CHANNELS = (None, 4, 8, 16)
ALL_PROTOCOLS = ("LL", "LL128", "Simple")
P2P_LEVELS = ("LOC", "NVL", "PIX", "PXB", "PHB", "SYS")
# Variables a candidate may set besides NCCL_*: CUDA's, which NCCL's community settings for high concurrency use.
EXTRA_VARIABLES = ("CUDA_DEVICE_MAX_CONNECTIONS",)
# Each workload's ranking weights, by size name (decode-N, prefill-N) or phase; see size_weights.
# latency: batch-1 decode; throughput: decode at 32 and 128 requests and the 8k-token cold prefill.
WORKLOAD_OBJECTIVES = {
    "latency": {"decode-1": 0.7, "decode": 0.2, "prefill": 0.1},
    "balanced": dict(DEFAULT_OBJECTIVE),
    "throughput": {"decode-32": 0.3, "decode-128": 0.3, "prefill-8192": 0.3, "decode": 0.05, "prefill": 0.05},
}
# Channel floors tried on top of the static policy (NCCL_MIN_NCHANNELS alone, so NCCL may use more). The community
# measured 22.2 GB/s all-reduce bus bandwidth with NCCL's 2 channels and 37.6 with NCCL_MIN_NCHANNELS=8 on 8x RTX PRO
# 6000, dual EPYC Turin, 32 MB (rtx6kpro optimization/nccl-tuning.md, "NCCL Channel Configuration").
DEFAULT_MIN_CHANNELS = (8, 16)
# The community's high-concurrency settings (rtx6kpro optimization/nccl-tuning.md, "High-Concurrency Configuration":
# MiniMax-M2.5 at 100 requests 5000 -> 10000 tok/s with P2P disabled; "NCCL_P2P_DISABLE=1 alone is not enough -- the
# channel and buffer settings are also required"), measured for the throughput workload only, never set unmeasured.
THROUGHPUT_CANDIDATES = (
    ("p2p-off", {"NCCL_P2P_DISABLE": "1"}, False),
    ("p2p-off/16-32ch/32MB/cdmc32", {"NCCL_P2P_DISABLE": "1", "NCCL_MIN_NCHANNELS": "16", "NCCL_MAX_NCHANNELS": "32",
                                     "NCCL_BUFFSIZE": "33554432", "CUDA_DEVICE_MAX_CONNECTIONS": "32"}, False),
    ("p2p-off/32-64ch/64MB/cdmc64", {"NCCL_P2P_DISABLE": "1", "NCCL_MIN_NCHANNELS": "32", "NCCL_MAX_NCHANNELS": "64",
                                     "NCCL_BUFFSIZE": "67108864", "CUDA_DEVICE_MAX_CONNECTIONS": "64"}, False),
    # The same channels and buffer with P2P left as the policy has it: is it P2P off, or the rest?
    ("policy/32-64ch/64MB/cdmc64", {"NCCL_MIN_NCHANNELS": "32", "NCCL_MAX_NCHANNELS": "64",
                                    "NCCL_BUFFSIZE": "67108864", "CUDA_DEVICE_MAX_CONNECTIONS": "64"}, True),
)


def workload_objective(workload: str, sizes: Sequence[Mapping[str, Any]]) -> Dict[str, float]:
    """The workload's ranking weights; every size it names must be among `sizes` (a ValueError says which is not)."""
    objective = dict(WORKLOAD_OBJECTIVES[check_workload(workload)])
    names = {s["name"] for s in sizes}
    phases = {s["phase"] for s in sizes}
    missing = sorted(k for k in objective if k not in names and k not in phases)
    if missing:
        raise ValueError("workload %s weighs %s, which the message sizes (%s) do not include: measure them "
                         "(decode_batches, prefill_tokens) or give an objective" % (
                             workload, ", ".join(missing), ", ".join(s["name"] for s in sizes)))
    return objective


def workload_guard(workload: str, sizes: Sequence[Mapping[str, Any]]) -> List[str]:
    """The sizes a pick may never be slower at than NCCL's defaults (beyond max_decode_regression): every decode
    size for latency and balanced; for throughput the sizes its objective names (decode at 32 and 128, the 8k
    prefill), so that a pick may give up single-stream speed, which throughput does not weigh."""
    check_workload(workload)
    if workload == "throughput":
        named = set(WORKLOAD_OBJECTIVES["throughput"])
        return [s["name"] for s in sizes if s["name"] in named]
    return [s["name"] for s in sizes if s["phase"] == "decode"]


# ------------------------------------------------------------------ message sizes

def message_sizes(
    hidden_size: int,
    dtype_bytes: int = 2,
    decode_batches: Sequence[int] = DEFAULT_DECODE_BATCHES,
    prefill_tokens: Sequence[int] = DEFAULT_PREFILL_TOKENS,
) -> List[Dict[str, Any]]:
    """The all-reduce payloads of one transformer layer's output: hidden x dtype x tokens."""
    if int(hidden_size) <= 0 or int(dtype_bytes) <= 0:
        raise ValueError("hidden_size and dtype_bytes must be positive, got %r and %r" % (hidden_size, dtype_bytes))
    sizes: List[Dict[str, Any]] = []
    for phase, counts in (("decode", decode_batches), ("prefill", prefill_tokens)):
        for tokens in counts:
            if int(tokens) <= 0:
                raise ValueError("%s token counts must be positive, got %r" % (phase, tokens))
            sizes.append({
                "name": "%s-%d" % (phase, int(tokens)),
                "phase": phase,
                "tokens": int(tokens),
                "bytes": int(hidden_size) * int(dtype_bytes) * int(tokens),
                "elements": int(hidden_size) * int(tokens),
            })
    names = [s["name"] for s in sizes]
    if len(set(names)) != len(names):
        raise ValueError("duplicate message sizes: %s" % ", ".join(names))
    if not sizes:
        raise ValueError("no message sizes: give decode_batches or prefill_tokens")
    return sizes


# ------------------------------------------------------------------ candidates

LL128_REASON = ("not every GPU pair is on NVLink: LL128 left out. NCCL enables it only over NVLink (src/graph/tuning.cc) "
                "and documents that forcing it elsewhere can corrupt data silently; its maintainers found it unsafe "
                "over PATH_SYS, where CPUs split a 128-byte store into two 64-byte lines that may be reordered "
                "(review of NVIDIA/nccl PR #2036)")


def safe_protocols(facts: Mapping[str, Any]) -> Tuple[List[str], str]:
    """Protocols the grid may force on this interconnect, and why."""
    interconnect = facts.get("interconnect") or {}
    if interconnect.get("nvlink_all"):
        return list(ALL_PROTOCOLS), "every GPU pair on NVLink: LL, LL128 and Simple are all safe to force"
    return ["LL", "Simple"], LL128_REASON


def lists_ll128(value: Any) -> bool:
    """Whether an NCCL_PROTO value turns LL128 on (a list that names it; ^ excludes what it lists)."""
    text = str(value or "").strip()
    return not text.startswith("^") and "ll128" in [p.strip().lower() for p in text.split(",")]


def p2p_levels_worth_trying(facts: Mapping[str, Any]) -> List[Optional[str]]:
    """None (NCCL's own cutoff, PXB) plus each level that reaches farther pairs whose NVML P2P is OK."""
    interconnect = facts.get("interconnect") or {}
    if interconnect.get("nvlink_all") or int(facts.get("count") or 0) < 2:
        return [None]
    levels: List[Optional[str]] = [None]
    far = set()
    for pair in facts.get("pairs") or []:
        p2p = pair.get("p2p") or {}
        if p2p.get("read") == "OK" and p2p.get("write") == "OK":
            path = pair.get("path") or ""
            if path in ("PHB", "NODE"):
                far.add("PHB")
            elif path == "SYS":
                far.update(("PHB", "SYS"))
    levels.extend(level for level in ("PHB", "SYS") if level in far)
    return levels


def _env_key(env: Mapping[str, str]) -> Tuple[Tuple[str, str], ...]:
    return tuple(sorted(env.items()))


def is_tunable(key: Any) -> bool:
    """A variable a candidate may set: NCCL_* or one of EXTRA_VARIABLES."""
    return isinstance(key, str) and (key.startswith("NCCL_") or key in EXTRA_VARIABLES)


def _check_env(name: str, env: Mapping[str, Any]) -> Dict[str, str]:
    out: Dict[str, str] = {}
    for key, value in env.items():
        if not is_tunable(key):
            raise ValueError("%s: variable names must start with NCCL_ (or be %s), got %r"
                             % (name, ", ".join(EXTRA_VARIABLES), key))
        if not isinstance(value, str):
            raise ValueError("%s: %s must be a string (quote it in YAML), got %r" % (name, key, value))
        out[key] = value
    return out


def plan_candidates(
    facts: Mapping[str, Any],
    policy_env: Mapping[str, str],
    pinned: Optional[Mapping[str, str]] = None,
    protocols: Optional[Sequence[str]] = None,
    algorithms: Optional[Sequence[str]] = None,
    channels: Optional[Sequence[Optional[int]]] = None,
    p2p_levels: Optional[Sequence[Optional[str]]] = None,
    max_candidates: int = 24,
    workload: str = "balanced",
    topology_file: Optional[str] = None,
    min_channels: Optional[Sequence[int]] = None,
) -> Dict[str, Any]:
    """Candidates in the order they are measured: NCCL's defaults, the static policy, the topology file (with the
    policy and alone), channel floors on the policy, the throughput workload's high-concurrency settings, then the
    grid.

    `pinned` variables are fixed in every candidate (they win over the policy
    and remove their dimension from the grid).  None in a grid list means
    "leave that variable unset"; an empty grid list means no grid.
    `topology_file` is the path of the NCCL topology file written from the
    facts (None: none).  `min_channels` are NCCL_MIN_NCHANNELS floors tried
    on the policy (default DEFAULT_MIN_CHANNELS).  Everything after the policy
    is cut at `max_candidates` in that order.  Returns {'candidates': [{name,
    origin, env}], 'notes': [..], 'grid_size': n}.
    """
    check_workload(workload)
    pinned_env = _check_env("pinned", pinned or {})
    policy = _check_env("policy_env", policy_env)
    notes: List[str] = []
    allowed, why = safe_protocols(facts)
    if protocols is None:
        protocols_list: List[Optional[str]] = list(allowed)
    else:
        unsafe = [p for p in protocols if p not in allowed]
        if unsafe:
            raise ValueError("protocols %s are not safe here (%s)" % (", ".join(map(str, unsafe)), why))
        protocols_list = list(protocols)
    if "NCCL_PROTO" in pinned_env and lists_ll128(pinned_env["NCCL_PROTO"]) and "LL128" not in allowed:
        raise ValueError("pinned NCCL_PROTO=%s turns LL128 on, which is not safe here (%s)"
                         % (pinned_env["NCCL_PROTO"], why))
    notes.append(why)
    algorithms_list: List[Optional[str]] = list(DEFAULT_ALGORITHMS if algorithms is None else algorithms)
    for algo in algorithms_list:
        if algo not in (None, "Ring", "Tree"):
            raise ValueError("algorithms: Ring or Tree (or null), got %r" % (algo,))
    channels_list: List[Optional[int]] = list(DEFAULT_CHANNELS if channels is None else channels)
    for ch in channels_list:
        if ch is not None and not (1 <= int(ch) <= 64):
            raise ValueError("channels: 1 to 64 (or null), got %r" % (ch,))
    floors = list(DEFAULT_MIN_CHANNELS if min_channels is None else min_channels)
    for ch in floors:
        if not (1 <= int(ch) <= 64):
            raise ValueError("min_channels: 1 to 64, got %r" % (ch,))
    levels_list: List[Optional[str]] = list(p2p_levels_worth_trying(facts) if p2p_levels is None else p2p_levels)
    for level in levels_list:
        if level is not None and level not in P2P_LEVELS:
            raise ValueError("p2p_levels: one of %s (or null), got %r" % (", ".join(P2P_LEVELS), level))
    if int(max_candidates) < 1:
        raise ValueError("max_candidates must be at least 1")

    def with_pins(env: Mapping[str, str]) -> Dict[str, str]:
        merged = dict(env)
        merged.update(pinned_env)
        return merged

    candidates: List[Dict[str, Any]] = []
    seen: Dict[Tuple[Tuple[str, str], ...], Dict[str, Any]] = {}

    def add(name: str, origin: str, env: Dict[str, str]) -> bool:
        key = _env_key(env)
        if key in seen:
            seen[key].setdefault("aliases", []).append(name)
            return False
        entry = {"name": name, "origin": origin, "env": env}
        seen[key] = entry
        candidates.append(entry)
        return True

    add("defaults", "defaults", with_pins({}))
    add("policy", "policy", with_pins(policy))
    # The focused candidates, in order, then the grid: (name, origin, env).
    focused: List[Tuple[str, str, Dict[str, str]]] = []
    if topology_file:
        focused.append(("policy+topo", "topology", with_pins(dict(policy, NCCL_TOPO_FILE=topology_file))))
        focused.append(("topo", "topology", with_pins({"NCCL_TOPO_FILE": topology_file})))
    for ch in floors:
        focused.append(("policy+min%dch" % int(ch), "channels", with_pins(dict(policy, NCCL_MIN_NCHANNELS=str(int(ch))))))
    nvlink_all = bool((facts.get("interconnect") or {}).get("nvlink_all"))
    if workload == "throughput" and not nvlink_all:
        for name, env, on_policy in THROUGHPUT_CANDIDATES:
            focused.append((name, "throughput", with_pins(dict(policy, **env) if on_policy else dict(env))))
    elif workload == "throughput":
        notes.append("every GPU pair on NVLink: the high-concurrency candidates (P2P off) are left out, NVLink P2P is "
                     "the fast path")
    grid: List[Dict[str, str]] = []
    # Channel counts outermost, protocol innermost: a grid cut by max_candidates
    # still covers every protocol, algorithm and P2P level.
    for ch in channels_list:
        for level in levels_list:
            for algo in algorithms_list:
                for proto in protocols_list:
                    env: Dict[str, str] = {}
                    if proto is not None:
                        env["NCCL_PROTO"] = str(proto)
                    if algo is not None:
                        env["NCCL_ALGO"] = str(algo)
                    if ch is not None:
                        env["NCCL_MIN_NCHANNELS"] = env["NCCL_MAX_NCHANNELS"] = str(int(ch))
                    if level is not None:
                        env["NCCL_P2P_LEVEL"] = str(level)
                    for var in pinned_env:
                        env.pop(var, None)
                    grid.append(with_pins(env))
    grid_keys = set()
    unique_grid = []
    for env in grid:
        if _env_key(env) not in grid_keys:
            grid_keys.add(_env_key(env))
            unique_grid.append(env)
    room = max(int(max_candidates) - len(candidates), 0)
    left_out: List[str] = []
    for name, origin, env in focused + [(candidate_name(e, pinned_env), "grid", e) for e in unique_grid]:
        if _env_key(env) in seen:
            add(name, origin, env)  # an alias of one already planned
        elif room == 0:
            left_out.append(name)
        elif add(name, origin, env):
            room -= 1
    measured_grid = sum(1 for c in candidates if c["origin"] == "grid")
    dropped_focused = [n for n in left_out if n in {f[0] for f in focused}]
    if dropped_focused:
        notes.append("max_candidates=%d left out %s" % (max_candidates, ", ".join(dropped_focused)))
    if len(left_out) > len(dropped_focused):
        notes.append("grid of %d points cut to %d by max_candidates=%d" % (len(unique_grid), measured_grid, max_candidates))
    return {"candidates": candidates, "notes": notes, "grid_size": len(unique_grid)}


def candidate_name(env: Mapping[str, str], pinned: Optional[Mapping[str, str]] = None) -> str:
    """Short readable name of a grid point: proto/algo/channels/p2p, pinned variables left out."""
    pinned = pinned or {}
    parts = []
    for var, label in (("NCCL_PROTO", ""), ("NCCL_ALGO", ""), ("NCCL_MAX_NCHANNELS", "ch"), ("NCCL_P2P_LEVEL", "p2p=")):
        if var in env and var not in pinned:
            parts.append("%s%s" % (label, env[var]) if label != "ch" else "%sch" % env[var])
    return "/".join(parts) or "defaults"


def budget_allows(elapsed_s: float, finished: int, budget_s: float) -> bool:
    """Whether to start another candidate: the mean time of those finished predicts the next one.

    The first candidate (NCCL's defaults, the baseline) always runs.
    """
    if finished <= 0:
        return True
    return elapsed_s + elapsed_s / finished <= budget_s


# ------------------------------------------------------------------ timing parser

def parse_rank_lines(text: str) -> List[Dict[str, Any]]:
    """The records one rank printed (lines starting with LINE_PREFIX); other output is NCCL's log or noise."""
    records = []
    for line in text.splitlines():
        if not line.startswith(LINE_PREFIX):
            continue
        try:
            record = json.loads(line[len(LINE_PREFIX):])
        except ValueError:
            continue
        if isinstance(record, dict):
            records.append(record)
    return records


# ------------------------------------------------------------------ the rank script on the node

RANK_SCRIPT_NAME = "nccl_tune_rank.py"


@contextlib.contextmanager
def rank_script(prefix: str = "nccl-tune-") -> Iterator[str]:
    """The rank script (nccl_tune_rank.py's source) in a fresh temporary directory; yields its path.

    The directory is removed on the way out, also when the module exits (exit_json and fail_json raise SystemExit).
    """
    workdir = tempfile.mkdtemp(prefix=prefix)
    try:
        path = os.path.join(workdir, RANK_SCRIPT_NAME)
        with open(path, "w", encoding="utf-8") as f:
            f.write(inspect.getsource(nccl_tune_rank))
        yield path
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def probe(
    run_command: Callable[[List[str]], Tuple[int, str, str]],
    python: str,
    script: str,
    tail: int = 2000,
) -> Tuple[Optional[Dict[str, Any]], str]:
    """Run `python script --probe` (the venv's PyTorch, no process group): (probe record, '') or (None, why not).

    `run_command(argv)` returns (rc, stdout, stderr), as AnsibleModule.run_command does. The record has
    torch, nccl_version (None for a build without NCCL), cuda_available and device_count. The reason ends with
    the last `tail` characters of what the probe printed. Whether a failed probe fails the module is for the
    caller to decide.
    """
    rc, out, err = run_command([python, script, "--probe"])
    if rc != 0:
        return None, "%s cannot import PyTorch (rc %d): %s" % (python, rc, (err or out).strip()[-tail:])
    records = [r for r in parse_rank_lines(out) if r.get("event") == "probe"]
    if not records:
        return None, "the PyTorch probe of %s printed no result: %s" % (python, (out or err).strip()[-tail:])
    return records[0], ""


def aggregate_timings(
    per_rank: Mapping[int, Sequence[Mapping[str, Any]]],
    world_size: int,
    sizes: Sequence[Mapping[str, Any]],
) -> Dict[str, Any]:
    """Per size, the median over iterations of the slowest rank's time (an all-reduce ends when its last rank does).

    Returns {'sizes': {name: {median_us, min_us, max_us, iterations}}, 'errors': [..], 'info': {..}}.
    """
    errors: List[str] = []
    info: Dict[str, Any] = {}
    timings: Dict[str, Dict[int, List[float]]] = {}
    for rank in range(int(world_size)):
        records = per_rank.get(rank)
        if not records:
            errors.append("rank %d printed no result" % rank)
            continue
        for record in records:
            event = record.get("event")
            if event == "init" and rank == 0:
                info = {k: v for k, v in record.items() if k not in ("event", "rank")}
            elif event == "error":
                errors.append("rank %d: %s" % (rank, record.get("message", "unknown error")))
            elif event == "timing":
                if record.get("correct") is False:
                    errors.append("rank %d: all-reduce of %s gave a wrong sum" % (rank, record.get("size")))
                timings.setdefault(str(record.get("size")), {})[rank] = [float(t) for t in record.get("times_us") or []]
    out: Dict[str, Dict[str, Any]] = {}
    for size in sizes:
        name = size["name"]
        ranks = timings.get(name, {})
        if len(ranks) != int(world_size):
            if not errors:
                errors.append("%s: timings from %d of %d ranks" % (name, len(ranks), world_size))
            continue
        lengths = {len(v) for v in ranks.values()}
        if len(lengths) != 1 or 0 in lengths:
            errors.append("%s: ranks timed different numbers of iterations %s" % (name, sorted(lengths)))
            continue
        slowest = [max(values) for values in zip(*ranks.values())]
        out[name] = {
            "median_us": round(statistics.median(slowest), 3),
            "min_us": round(min(slowest), 3),
            "max_us": round(max(slowest), 3),
            "iterations": len(slowest),
        }
    return {"sizes": out, "errors": errors, "info": info}


# ------------------------------------------------------------------ selection

def size_weights(sizes: Sequence[Mapping[str, Any]], objective: Mapping[str, Any]) -> Dict[str, float]:
    """Weight of each size: an objective key names a phase (split evenly over its sizes) or one size."""
    names = {s["name"] for s in sizes}
    phases = {s["phase"] for s in sizes}
    for key, value in objective.items():
        if key not in names and key not in phases:
            raise ValueError("objective: %r is neither a phase (%s) nor a size (%s)"
                             % (key, ", ".join(sorted(phases)), ", ".join(sorted(names))))
        if not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0:
            raise ValueError("objective: %s must be a number >= 0, got %r" % (key, value))
    weights: Dict[str, float] = {}
    for size in sizes:
        if size["name"] in objective:
            weights[size["name"]] = float(objective[size["name"]])
        elif size["phase"] in objective:
            same_phase = [s for s in sizes if s["phase"] == size["phase"] and s["name"] not in objective]
            weights[size["name"]] = float(objective[size["phase"]]) / len(same_phase)
        else:
            weights[size["name"]] = 0.0
    if sum(weights.values()) <= 0:
        raise ValueError("objective gives every size weight 0")
    return weights


def rank_candidates(
    measured: Sequence[Mapping[str, Any]],
    sizes: Sequence[Mapping[str, Any]],
    objective: Mapping[str, Any],
    max_decode_regression: float = 0.0,
    min_improvement: float = 0.0,
    guarded: Optional[Sequence[str]] = None,
) -> Dict[str, Any]:
    """Rank measured candidates by the weighted mean of their time ratio to NCCL's defaults (lower is better).

    `measured`: [{name, origin, env, sizes: {name: {median_us..}}, errors: [..]}].
    A candidate is eligible when it measured every size and is no slower than
    the defaults at any guarded size (beyond `max_decode_regression`, a
    fraction); `guarded` names those sizes (default: every decode size; the
    workload's are workload_guard's).  The defaults are always eligible, so the
    best is never worse than leaving NCCL alone at the guarded sizes.
    `min_improvement` (a fraction) is the score gain below which a candidate
    does not displace the defaults: timing noise alone must not change a
    deployment.
    """
    weights = size_weights(sizes, objective)
    guard = set(s["name"] for s in sizes if s["phase"] == "decode") if guarded is None else set(guarded)
    baseline = next((m for m in measured if m["origin"] == "defaults"), None)
    if baseline is None or baseline.get("errors") or len(baseline.get("sizes") or {}) != len(sizes):
        return {"ranking": [], "best": None, "weights": weights,
                "error": "NCCL's defaults did not measure every size, so nothing can be compared: %s"
                         % "; ".join((baseline or {}).get("errors") or ["not run"])}
    base = baseline["sizes"]
    rows = []
    for cand in measured:
        row: Dict[str, Any] = {"name": cand["name"], "origin": cand["origin"], "env": dict(cand["env"]),
                               "aliases": list(cand.get("aliases") or [])}
        got = cand.get("sizes") or {}
        if cand.get("errors") or len(got) != len(sizes):
            row.update(score=None, eligible=False, ratios={},
                       why=("; ".join(cand.get("errors") or []) or "not every size measured"))
            rows.append(row)
            continue
        ratios = {s["name"]: got[s["name"]]["median_us"] / base[s["name"]]["median_us"]
                  if base[s["name"]]["median_us"] > 0 else 1.0 for s in sizes}
        score = sum(weights[n] * r for n, r in ratios.items()) / sum(weights.values())
        slower = [s["name"] for s in sizes
                  if s["name"] in guard and ratios[s["name"]] > 1.0 + float(max_decode_regression)]
        small_gain = cand["origin"] != "defaults" and score > 1.0 - float(min_improvement)
        why = ("slower than the defaults at %s" % ", ".join(slower)) if slower else (
            "gain below min_improvement %.3f" % float(min_improvement) if small_gain else "")
        row.update(score=round(score, 4), ratios={k: round(v, 4) for k, v in ratios.items()},
                   eligible=cand["origin"] == "defaults" or not (slower or small_gain), why=why)
        rows.append(row)
    rows.sort(key=lambda r: (r["score"] is None, not r["eligible"], r["score"] if r["score"] is not None else 0.0,
                             r["origin"] != "defaults"))
    best = next(r for r in rows if r["eligible"])
    return {"ranking": rows, "best": best, "weights": weights, "guarded": [s["name"] for s in sizes if s["name"] in guard],
            "error": ""}


def ranked_table(ranking: Sequence[Mapping[str, Any]], measured: Sequence[Mapping[str, Any]],
                 sizes: Sequence[Mapping[str, Any]]) -> List[str]:
    """Readable table: rank, score, each size's median in microseconds with its ratio to the defaults."""
    medians = {m["name"]: m.get("sizes") or {} for m in measured}
    head = "%-4s %-34s %-7s %s" % ("#", "candidate", "score", "  ".join("%18s" % s["name"] for s in sizes))
    lines = [head]
    for i, row in enumerate(ranking, 1):
        cells = []
        for s in sizes:
            med = (medians.get(row["name"]) or {}).get(s["name"])
            if med is None:
                cells.append("%18s" % "-")
            else:
                cells.append("%18s" % ("%.1fus x%.2f" % (med["median_us"], row["ratios"].get(s["name"], 0.0))))
        score = "-" if row["score"] is None else "%.3f" % row["score"]
        mark = "" if row["eligible"] else " (not eligible: %s)" % row["why"]
        lines.append("%-4s %-34s %-7s %s%s" % (i, row["name"][:34], score, "  ".join(cells), mark))
    return lines


# ------------------------------------------------------------------ fingerprint and storage

def topology_fingerprint(facts: Mapping[str, Any]) -> str:
    """Hash of what NCCL's graph search sees: GPU models and bus ids, every pair's path and P2P status."""
    gpus = [[g.get("name"), g.get("pci_bus_id"), g.get("compute_capability"), g.get("numa_node")]
            for g in facts.get("gpus") or []]
    pairs = [[list(p.get("gpus") or []), p.get("path"), (p.get("p2p") or {}).get("read"),
              (p.get("p2p") or {}).get("write")] for p in facts.get("pairs") or []]
    blob = json.dumps({"count": int(facts.get("count") or 0), "gpus": gpus, "pairs": pairs}, sort_keys=True)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]


def fingerprint(facts: Mapping[str, Any], nccl_version: Optional[str], world_size: int) -> Dict[str, Any]:
    """The key a result is stored under: topology, driver, NCCL version and the number of ranks."""
    components = {
        "topology": topology_fingerprint(facts),
        "driver_version": facts.get("driver_version") or "none",
        "nccl_version": nccl_version or "none",
        "world_size": int(world_size),
    }
    digest = hashlib.sha256(json.dumps(components, sort_keys=True).encode("utf-8")).hexdigest()[:16]
    return {"id": digest, "components": components}


def result_file(store_dir: str, fingerprint_id: str, workload: Optional[str] = None) -> str:
    """Where the result of a fingerprint and workload is stored: <fingerprint>-<workload>.json (schema 1, before
    workloads: <fingerprint>.json, workload None)."""
    if workload is None:
        return "%s/%s.json" % (store_dir.rstrip("/"), fingerprint_id)
    return "%s/%s-%s.json" % (store_dir.rstrip("/"), fingerprint_id, check_workload(workload))


def build_document(
    fp: Mapping[str, Any],
    sizes: Sequence[Mapping[str, Any]],
    objective: Mapping[str, Any],
    pinned: Mapping[str, str],
    measured: Sequence[Mapping[str, Any]],
    selection: Mapping[str, Any],
    not_run: Sequence[str],
    settings: Mapping[str, Any],
    measured_at: str,
    host: str,
    workload: str = "balanced",
    topology_file: Optional[Mapping[str, Any]] = None,
) -> Dict[str, Any]:
    best = selection.get("best")
    return {
        "schema_version": RESULT_SCHEMA_VERSION,
        "workload": check_workload(workload),
        "fingerprint": fp["id"],
        "fingerprint_components": dict(fp["components"]),
        "measured_at": measured_at,
        "host": host,
        "settings": dict(settings),
        "sizes": [dict(s) for s in sizes],
        "objective": dict(objective),
        "weights": dict(selection.get("weights") or {}),
        "guarded": list(selection.get("guarded") or []),
        "pinned": dict(pinned),
        "topology_file": dict(topology_file) if topology_file else None,
        "candidates": [dict(m) for m in measured],
        "not_run": list(not_run),
        "ranking": [dict(r) for r in selection.get("ranking") or []],
        "best": None if best is None else {"name": best["name"], "origin": best["origin"], "env": dict(best["env"]),
                                           "score": best["score"], "ratios": dict(best["ratios"])},
        "error": selection.get("error") or "",
    }


def document_workload(doc: Mapping[str, Any]) -> Optional[str]:
    """The workload a stored document was ranked for: its `workload`; a schema 1 document (before workloads) counts
    as balanced when it was ranked with balanced's objective, else as none."""
    if doc.get("schema_version") == 1:
        return "balanced" if doc.get("objective") == WORKLOAD_OBJECTIVES["balanced"] else None
    return doc.get("workload") if doc.get("workload") in WORKLOADS else None


def document_problems(doc: Any, workload: Optional[str] = None) -> List[str]:
    """Why a stored document cannot feed the policy (for `workload`, when given); empty when it can."""
    if not isinstance(doc, dict):
        return ["not a JSON object"]
    problems = []
    if doc.get("schema_version") not in READABLE_SCHEMA_VERSIONS:
        problems.append("schema_version %r, this collection reads %s" % (
            doc.get("schema_version"), " and ".join(str(v) for v in READABLE_SCHEMA_VERSIONS)))
    elif workload is not None and document_workload(doc) != workload:
        problems.append("it was ranked for the %s workload, this deployment's is %s" % (
            document_workload(doc) or "objective %s (no named" % json.dumps(doc.get("objective"), sort_keys=True),
            workload))
    best = doc.get("best")
    if not isinstance(best, dict) or not isinstance(best.get("env"), dict):
        problems.append("no best environment (%s)" % (doc.get("error") or "the sweep selected none"))
    else:
        for key, value in best["env"].items():
            if not (is_tunable(key) and isinstance(value, str)):
                problems.append("best.env has %r=%r, expected NCCL_* (or %s) string values"
                                % (key, value, ", ".join(EXTRA_VARIABLES)))
    components = doc.get("fingerprint_components")
    if not isinstance(components, dict) or not components.get("topology"):
        problems.append("no fingerprint_components.topology")
    return problems


# What may change between a sweep and now while the box stays the same; such a result is stale, not another box's.
STALE_COMPONENTS = ("nccl_version", "driver_version")


def stale_against(doc: Mapping[str, Any], fp: Mapping[str, Any]) -> Dict[str, List[Any]]:
    """{component: [then, now]} where a stored document differs from the fingerprint now only in what an upgrade
    changes (the NCCL version, the driver); {} when it is of another topology or rank count, or not different."""
    then = doc.get("fingerprint_components") or {}
    now = fp.get("components") or {}
    if then.get("topology") != now.get("topology") or int(then.get("world_size") or 0) != int(now.get("world_size") or 0):
        return {}
    return {k: [then.get(k), now.get(k)] for k in STALE_COMPONENTS if then.get(k) != now.get(k)}


def stale_line(path: str, doc: Mapping[str, Any], differs: Mapping[str, Sequence[Any]]) -> str:
    """One sentence naming a stale result and what changed since it was measured."""
    what = {"nccl_version": "NCCL", "driver_version": "driver"}
    return ("NCCL sweep result %s (%s workload, measured %s) is STALE and not used: %s; the static policy applies "
            "until playbooks/nccl_tune.yml measures again" % (
                path, document_workload(doc) or "no", doc.get("measured_at", "?"),
                ", ".join("%s %s then, %s now" % (what.get(k, k), v[0], v[1]) for k, v in sorted(differs.items()))))


def tuning_summary(doc: Mapping[str, Any]) -> str:
    """One line naming a stored result, for the rule/reason of the settings it feeds."""
    best = doc["best"]
    comps = doc.get("fingerprint_components") or {}
    ratios = best.get("ratios") or {}
    decode = [v for k, v in sorted(ratios.items()) if k.startswith("decode-")]
    return ("NCCL sweep %s (%s workload, %s, %d ranks, NCCL %s, driver %s, backend %s, measured %s): best of %d "
            "candidates is %r, objective %.3f of NCCL's defaults%s" % (
                doc.get("fingerprint"), document_workload(doc) or "no", doc.get("host", "?"),
                int(comps.get("world_size") or 0),
                comps.get("nccl_version"), comps.get("driver_version"),
                (doc.get("settings") or {}).get("backend", "?"), doc.get("measured_at"),
                len(doc.get("candidates") or []), best.get("name"), float(best.get("score") or 0.0),
                ("; decode time ratios %s" % ", ".join("%.2f" % v for v in decode)) if decode else ""))


def stored_names(listing: Iterable[str]) -> List[str]:
    """Stored results among a directory's file names, without .json: <fingerprint>-<workload> and, from before
    workloads, <fingerprint>."""
    names = []
    for n in listing:
        if not n.endswith(".json"):
            continue
        stem = n[:-5]
        fp, _sep, workload = stem.partition("-")
        if len(fp) == 16 and all(c in "0123456789abcdef" for c in fp) and (not _sep or workload in WORKLOADS):
            names.append(stem)
    return sorted(names)


def select_result(stored: Sequence[str], read: Callable[[str], Tuple[Any, str]], store_dir: str,
                  fp: Mapping[str, Any], workload: str) -> Dict[str, Any]:
    """The stored result for this fingerprint and workload, or why there is none: {found, path, result, reason,
    stale: [{path, fingerprint, measured_at, differs, line}], other_workloads: [..]}.

    `stored` are stored_names() of `store_dir`; `read(path)` returns (document or None, why not). A result of
    the same box and rank count whose NCCL version or driver differs is STALE: reported, never used. A schema 1
    result (<fingerprint>.json) serves the balanced workload when it was ranked with balanced's objective.
    """
    check_workload(workload)
    out: Dict[str, Any] = {"found": False, "path": result_file(store_dir, fp["id"], workload), "result": None,
                           "reason": "", "stale": [], "other_workloads": []}
    out["other_workloads"] = sorted(n.partition("-")[2] for n in stored
                                    if n.startswith(fp["id"] + "-") and n.partition("-")[2] != workload)
    names = [fp["id"] + "-" + workload] + ([fp["id"]] if workload == "balanced" else [])
    for name in names:
        if name not in stored:
            continue
        path = "%s/%s.json" % (store_dir.rstrip("/"), name)
        doc, why = read(path)
        if why:
            out.update(path=path, reason="cannot read %s: %s" % (path, why))
            return out
        problems = document_problems(doc, workload)
        if problems:
            out.update(path=path, reason="%s is not usable: %s" % (path, "; ".join(problems)))
            return out
        out.update(found=True, path=path, result=doc)
        return out
    for name in stored:
        fid, _sep, wl = name.partition("-")
        if fid == fp["id"] or (wl or "balanced") != workload:
            continue
        path = "%s/%s.json" % (store_dir.rstrip("/"), name)
        doc, why = read(path)
        if why or not isinstance(doc, dict) or document_workload(doc) != workload:
            continue
        differs = stale_against(doc, fp)
        if differs:
            out["stale"].append({"path": path, "fingerprint": fid, "measured_at": doc.get("measured_at"),
                                 "differs": differs, "line": stale_line(path, doc, differs)})
    if out["stale"]:
        out["reason"] = "; ".join(s["line"] for s in out["stale"])
    else:
        out["reason"] = ("no %s result for this node's fingerprint %s (%s)%s; stored: %s" % (
            workload, fp["id"], json.dumps(fp["components"], sort_keys=True),
            (", but for the %s workload(s): measure this one with playbooks/nccl_tune.yml -e vllm_service_workload=%s"
             % (", ".join(out["other_workloads"]), workload)) if out["other_workloads"] else "",
            ", ".join(stored) or "none"))
    return out
