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
validated on.  So the grid offers LL128 only where every pair is on NVLink;
LL and Simple are safe everywhere.
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

RESULT_SCHEMA_VERSION = 1
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

def safe_protocols(facts: Mapping[str, Any]) -> Tuple[List[str], str]:
    """Protocols the grid may force on this interconnect, and why."""
    interconnect = facts.get("interconnect") or {}
    if interconnect.get("nvlink_all"):
        return list(ALL_PROTOCOLS), "every GPU pair on NVLink: LL, LL128 and Simple are all safe to force"
    return ["LL", "Simple"], ("not every GPU pair is on NVLink: LL128 left out, NCCL documents that forcing it where "
                              "NCCL does not enable it can corrupt data silently")


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


def _check_env(name: str, env: Mapping[str, Any]) -> Dict[str, str]:
    out: Dict[str, str] = {}
    for key, value in env.items():
        if not isinstance(key, str) or not key.startswith("NCCL_"):
            raise ValueError("%s: variable names must start with NCCL_, got %r" % (name, key))
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
) -> Dict[str, Any]:
    """Candidates in the order they are measured: NCCL's defaults, the static policy, then the grid.

    `pinned` variables are fixed in every candidate (they win over the policy
    and remove their dimension from the grid).  None in a grid list means
    "leave that variable unset".  Returns {'candidates': [{name, origin, env}],
    'notes': [..], 'grid_size': n}.
    """
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
    notes.append(why)
    algorithms_list: List[Optional[str]] = list(DEFAULT_ALGORITHMS if algorithms is None else algorithms)
    for algo in algorithms_list:
        if algo not in (None, "Ring", "Tree"):
            raise ValueError("algorithms: Ring or Tree (or null), got %r" % (algo,))
    channels_list: List[Optional[int]] = list(DEFAULT_CHANNELS if channels is None else channels)
    for ch in channels_list:
        if ch is not None and not (1 <= int(ch) <= 64):
            raise ValueError("channels: 1 to 64 (or null), got %r" % (ch,))
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

    def add(name: str, origin: str, env: Dict[str, str]) -> None:
        key = _env_key(env)
        if key in seen:
            seen[key].setdefault("aliases", []).append(name)
            return
        entry = {"name": name, "origin": origin, "env": env}
        seen[key] = entry
        candidates.append(entry)

    add("defaults", "defaults", with_pins({}))
    add("policy", "policy", with_pins(policy))
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
    for env in unique_grid:
        if room == 0:
            break
        before = len(candidates)
        add(candidate_name(env, pinned_env), "grid", env)
        if len(candidates) > before:
            room -= 1
    measured_grid = sum(1 for c in candidates if c["origin"] == "grid")
    dropped = len([e for e in unique_grid if _env_key(e) not in seen])
    if dropped:
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
) -> Dict[str, Any]:
    """Rank measured candidates by the weighted mean of their time ratio to NCCL's defaults (lower is better).

    `measured`: [{name, origin, env, sizes: {name: {median_us..}}, errors: [..]}].
    A candidate is eligible when it measured every size and is no slower than
    the defaults at any decode size (beyond `max_decode_regression`, a
    fraction).  The defaults are always eligible, so the best is never worse
    than leaving NCCL alone where decode is concerned.  `min_improvement` (a
    fraction) is the score gain below which a candidate does not displace the
    defaults: timing noise alone must not change a deployment.
    """
    weights = size_weights(sizes, objective)
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
                  if s["phase"] == "decode" and ratios[s["name"]] > 1.0 + float(max_decode_regression)]
        small_gain = cand["origin"] != "defaults" and score > 1.0 - float(min_improvement)
        why = ("slower than the defaults at %s" % ", ".join(slower)) if slower else (
            "gain below min_improvement %.3f" % float(min_improvement) if small_gain else "")
        row.update(score=round(score, 4), ratios={k: round(v, 4) for k, v in ratios.items()},
                   eligible=cand["origin"] == "defaults" or not (slower or small_gain), why=why)
        rows.append(row)
    rows.sort(key=lambda r: (r["score"] is None, not r["eligible"], r["score"] if r["score"] is not None else 0.0,
                             r["origin"] != "defaults"))
    best = next(r for r in rows if r["eligible"])
    return {"ranking": rows, "best": best, "weights": weights, "error": ""}


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


def result_file(store_dir: str, fingerprint_id: str) -> str:
    return "%s/%s.json" % (store_dir.rstrip("/"), fingerprint_id)


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
) -> Dict[str, Any]:
    best = selection.get("best")
    return {
        "schema_version": RESULT_SCHEMA_VERSION,
        "fingerprint": fp["id"],
        "fingerprint_components": dict(fp["components"]),
        "measured_at": measured_at,
        "host": host,
        "settings": dict(settings),
        "sizes": [dict(s) for s in sizes],
        "objective": dict(objective),
        "weights": dict(selection.get("weights") or {}),
        "pinned": dict(pinned),
        "candidates": [dict(m) for m in measured],
        "not_run": list(not_run),
        "ranking": [dict(r) for r in selection.get("ranking") or []],
        "best": None if best is None else {"name": best["name"], "origin": best["origin"], "env": dict(best["env"]),
                                           "score": best["score"], "ratios": dict(best["ratios"])},
        "error": selection.get("error") or "",
    }


def document_problems(doc: Any) -> List[str]:
    """Why a stored document cannot feed the policy; empty when it can."""
    if not isinstance(doc, dict):
        return ["not a JSON object"]
    problems = []
    if doc.get("schema_version") != RESULT_SCHEMA_VERSION:
        problems.append("schema_version %r, this collection reads %d" % (doc.get("schema_version"), RESULT_SCHEMA_VERSION))
    best = doc.get("best")
    if not isinstance(best, dict) or not isinstance(best.get("env"), dict):
        problems.append("no best environment (%s)" % (doc.get("error") or "the sweep selected none"))
    else:
        for key, value in best["env"].items():
            if not (isinstance(key, str) and key.startswith("NCCL_") and isinstance(value, str)):
                problems.append("best.env has %r=%r, expected NCCL_* string values" % (key, value))
    components = doc.get("fingerprint_components")
    if not isinstance(components, dict) or not components.get("topology"):
        problems.append("no fingerprint_components.topology")
    return problems


def tuning_summary(doc: Mapping[str, Any]) -> str:
    """One line naming a stored result, for the rule/reason of the settings it feeds."""
    best = doc["best"]
    comps = doc.get("fingerprint_components") or {}
    ratios = best.get("ratios") or {}
    decode = [v for k, v in sorted(ratios.items()) if k.startswith("decode-")]
    return ("NCCL sweep %s (%s, %d ranks, NCCL %s, driver %s, backend %s, measured %s): best of %d candidates is %r, "
            "objective %.3f of NCCL's defaults%s" % (
                doc.get("fingerprint"), doc.get("host", "?"), int(comps.get("world_size") or 0),
                comps.get("nccl_version"), comps.get("driver_version"),
                (doc.get("settings") or {}).get("backend", "?"), doc.get("measured_at"),
                len(doc.get("candidates") or []), best.get("name"), float(best.get("score") or 0.0),
                ("; decode time ratios %s" % ", ".join("%.2f" % v for v in decode)) if decode else ""))


def stored_names(listing: Iterable[str]) -> List[str]:
    """Fingerprint ids among a directory's file names."""
    return sorted(n[:-5] for n in listing if n.endswith(".json") and len(n) == 21)
