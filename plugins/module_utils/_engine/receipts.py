# -*- coding: utf-8 -*-
# Copyright: (c) 2026, moeops.inference contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""vLLM engines and their receipts: which venvs under the engines directory are complete, which one serves, which
ones a prune removes, and how a new engine's benchmark compares with the old one's. Private to the collection.

Each engine is a venv <dir>/<version>-<engine>-<lock hash, 12 hex>, built by the vllm role. Its LAST step writes
<venv>/moeops-receipt.json (RECEIPT_NAME), so a directory without a valid receipt is a failed or interrupted build
("incomplete"), never an engine to serve. The vllm_service role adds records to the receipt's `records` (SECTIONS)
with the vllm_engines module (step=update), and prunes old engines after a switch (step=prune).

Pure functions over documents and listings; the few that touch files are marked (scan, read_receipt).
"""

from __future__ import annotations

import os
import re
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.moeops.inference.plugins.module_utils._common import state_files
from ansible_collections.moeops.inference.plugins.module_utils._engine import benchmark as bench

FORMAT = 1
DEFAULT_DIR = "/opt/vllm/venvs"
RECEIPT_NAME = "moeops-receipt.json"
SECTIONS = ("engine_check", "canary", "benchmark", "switch")
DEFAULT_KEEP = 2
HEX64 = re.compile(r"^[0-9a-f]{64}$")
HEX12 = re.compile(r"^[0-9a-f]{12}$")
# UTC with a Z, so that the strings sort as the times do.
TIME_RE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$")
TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"

# The receipt's keys and the type each must have.
KEYS: Tuple[Tuple[str, type], ...] = (
    ("name", str), ("path", str), ("engine", str), ("package", str), ("version", str), ("python", str),
    ("lock_sha256", str), ("inputs_sha256", str), ("packages", list), ("overrides", list), ("excludes", list),
    ("built_at", str), ("built_by", str), ("records", dict),
)
KIND_WORDS = {str: "a non-empty string", list: "an array", dict: "an object"}


class ReceiptError(ValueError):
    """A receipt, record or request this module cannot use: said once, in words."""


# ------------------------------------------------------------------ one receipt

def receipt_path(venv: str) -> str:
    return os.path.join(venv, RECEIPT_NAME)


def receipt_problems(doc: Any, venv: str) -> List[str]:
    """Why `doc` is not the receipt of a complete engine at `venv` (empty when it is)."""
    if not isinstance(doc, Mapping):
        return ["the receipt is not a JSON object"]
    if doc.get("format") != FORMAT:
        return ["receipt format %r, this collection reads %d" % (doc.get("format"), FORMAT)]
    problems = []
    for key, kind in KEYS:
        if key not in doc:
            problems.append("no %s" % key)
        elif not isinstance(doc[key], kind) or (kind is str and not doc[key]):
            problems.append("%s is not %s" % (key, KIND_WORDS[kind]))
    if problems:
        return problems
    for key in ("lock_sha256", "inputs_sha256"):
        if not HEX64.match(doc[key]):
            problems.append("%s is not 64 lowercase hex digits" % key)
    if not TIME_RE.match(doc["built_at"]):
        problems.append("built_at %s is not a UTC time YYYY-MM-DDTHH:MM:SSZ" % doc["built_at"])
    prefix = "%s-%s-" % (doc["version"], doc["engine"])
    if not (doc["name"].startswith(prefix) and HEX12.match(doc["name"][len(prefix):])):
        problems.append("name %s is not <version>-<engine>-<12 hex> (%s<12 hex>)" % (doc["name"], prefix))
    if doc["name"] != os.path.basename(os.path.normpath(venv)):
        problems.append("name %s is not the directory's (%s)" % (doc["name"], os.path.basename(os.path.normpath(venv))))
    # A venv is not relocatable (its scripts name their interpreter by path): a moved or copied one does not run.
    if os.path.normpath(doc["path"]) != os.path.normpath(venv):
        problems.append("built at %s, not here (a venv does not work once moved)" % doc["path"])
    if not all(isinstance(p, str) for p in doc["packages"]):
        problems.append("packages are not all strings")
    for key, needs in (("overrides", "requirement"), ("excludes", "name")):
        if not all(isinstance(e, Mapping) and isinstance(e.get(needs), str) for e in doc[key]):
            problems.append("%s are not all objects with a %s" % (key, needs))
    return problems


def read_receipt(venv: str) -> Tuple[Optional[Dict[str, Any]], str]:
    """File IO. (receipt, '') or (None, why it is not a complete engine's)."""
    path = receipt_path(venv)
    if not os.path.lexists(path):
        return None, "no %s (a build that failed or was interrupted)" % RECEIPT_NAME
    doc, why = state_files.read_json_reason(path)
    if doc is None:
        return None, "%s unreadable: %s" % (RECEIPT_NAME, why)
    problems = receipt_problems(doc, venv)
    if problems:
        return None, "%s: %s" % (RECEIPT_NAME, "; ".join(problems))
    return doc, ""


def with_record(doc: Mapping[str, Any], section: str, record: Mapping[str, Any], at: str) -> Dict[str, Any]:
    """A copy of the receipt with records[section] = record + at (the other records kept)."""
    if section not in SECTIONS:
        raise ReceiptError("unknown record section %s: choose from %s" % (section, ", ".join(SECTIONS)))
    if not isinstance(record, Mapping):
        raise ReceiptError("a %s record must be an object" % section)
    if section == "benchmark":
        problems = benchmark_problems(record)
        if problems:
            raise ReceiptError("not a benchmark record: %s" % "; ".join(problems))
    out = dict(doc)
    records = dict(out.get("records") or {})
    records[section] = dict(record, at=at)
    out["records"] = records
    return out


# ------------------------------------------------------------------ the engines directory

def scan(directory: str) -> List[Tuple[str, Optional[Dict[str, Any]], str]]:
    """File IO. Every real subdirectory of `directory` (symlinks and files are not engines), sorted by name: (path,
    receipt or None, why not complete). A missing directory has none."""
    try:
        names = sorted(os.listdir(directory))
    except FileNotFoundError:
        return []
    out = []
    for name in names:
        path = os.path.join(directory, name)
        if os.path.islink(path) or not os.path.isdir(path):
            continue
        doc, why = read_receipt(path)
        out.append((path, doc, why))
    return out


def summary(path: str, doc: Optional[Mapping[str, Any]], why: str, serving: bool, outside: bool = False) -> Dict[str, Any]:
    """What info returns of one directory."""
    if doc is None:
        return {"path": path, "name": os.path.basename(os.path.normpath(path)), "complete": False, "why": why,
                "serving": serving, "outside": outside, "receipt": None}
    return {"path": path, "name": doc["name"], "complete": True, "serving": serving, "outside": outside,
            "receipt": receipt_path(path), "version": doc["version"], "engine": doc["engine"],
            "package": doc["package"], "lock_sha256": doc["lock_sha256"], "inputs_sha256": doc["inputs_sha256"],
            "built_at": doc["built_at"], "built_by": doc["built_by"], "python": doc["python"],
            "records": dict(doc["records"]), "overrides": list(doc["overrides"]), "excludes": list(doc["excludes"]),
            "packages_count": len(doc["packages"])}


def engines(entries: Sequence[Tuple[str, Optional[Mapping[str, Any]], str]], real: Mapping[str, str],
            serving: Optional[str], real_directory: str) -> List[Dict[str, Any]]:
    """Complete engines newest first (by built_at, then name), then incomplete directories by name. `real` maps each
    entry's path to its realpath; `serving` and `real_directory` are realpaths. A serving venv that is none of
    `entries` (outside the directory, such as a venv from before engines) is listed last, as outside, with why."""
    complete = [summary(p, d, w, real.get(p) == serving) for p, d, w in entries if d is not None]
    complete.sort(key=lambda e: (e["built_at"], e["name"]), reverse=True)
    incomplete = [summary(p, d, w, real.get(p) == serving) for p, d, w in entries if d is None]
    out = complete + incomplete
    if serving and not any(e["serving"] for e in out):
        why = ("outside %s: no receipt read (a venv from before engines)" % real_directory
               if os.path.dirname(serving) != real_directory else "not a directory")
        out.append(summary(serving, None, why, True, outside=True))
    return out


def find(listed: Sequence[Mapping[str, Any]], inputs_sha256: str) -> Optional[str]:
    """The newest complete engine built from these inputs (under the directory), or None."""
    return next((e["path"] for e in listed if e["complete"] and not e["outside"]
                 and e["inputs_sha256"] == inputs_sha256), None)


def _number(value: Any) -> str:
    return "-" if not isinstance(value, (int, float)) or isinstance(value, bool) else "%.4g" % value


def record_word(section: str, record: Any) -> str:
    """A record in a few words: its verdict or status, and a benchmark's latency and output rate per scenario."""
    if not isinstance(record, Mapping):
        return "%s unreadable" % section
    if section == "benchmark" and not benchmark_problems(record):
        parts = ["%s TTFT p50 %s ms, %s tok/s" % (s.get("name"), _number((s.get("metrics") or {}).get("ttft_p50_ms")),
                                                  _number((s.get("metrics") or {}).get("output_tok_s")))
                 for s in record["scenarios"]]
        return "benchmark " + ", ".join(parts)
    word = record.get("verdict") or record.get("status") or record.get("result")
    if word is None and isinstance(record.get("passed"), bool):
        word = "pass" if record["passed"] else "fail"
    return "%s %s" % (section, word if isinstance(word, str) and word else "recorded")


def line(engine: Mapping[str, Any]) -> str:
    """One engine for a report."""
    mark = "SERVING  " if engine["serving"] else ""
    if not engine["complete"]:
        return "%s  %sINCOMPLETE  %s" % (engine["path"] if engine["outside"] else engine["name"], mark, engine["why"])
    text = "%s  %s%s %s, %d packages, lock %s, built %s" % (
        engine["name"], mark, engine["package"], engine["version"], engine["packages_count"],
        engine["lock_sha256"][:12], engine["built_at"])
    if engine["overrides"] or engine["excludes"]:
        text += ", %d override(s), %d exclude(s)" % (len(engine["overrides"]), len(engine["excludes"]))
    words = [record_word(s, engine["records"][s]) for s in SECTIONS if s in engine["records"]]
    return text + "".join("; " + w for w in words)


# ------------------------------------------------------------------ prune

def prune_plan(listed: Sequence[Mapping[str, Any]], real: Mapping[str, str], keep: int,
               protect: Sequence[str]) -> Tuple[List[str], List[str]]:
    """(remove, kept): the `keep` newest complete engines, the serving one and those in `protect` (realpaths) are
    kept whatever their age; every other directory listed under the engines directory goes, incomplete ones too."""
    if not isinstance(keep, int) or isinstance(keep, bool) or keep < 1:
        raise ReceiptError("keep must be a whole number of at least 1, got %r" % (keep,))
    newest = [e["path"] for e in listed if e["complete"] and not e["outside"]][:keep]
    remove, kept = [], []
    for e in listed:
        if e["outside"]:
            continue
        if e["serving"] or e["path"] in newest or real.get(e["path"]) in protect:
            kept.append(e["path"])
        else:
            remove.append(e["path"])
    return remove, kept


def cache_of(caches: Optional[str], engine: str) -> Optional[str]:
    """The cache directory of an engine (<caches>/<engine's directory name>), None without a caches directory. Only a
    name directly under it: an engine path never leads elsewhere."""
    if not caches:
        return None
    name = os.path.basename(os.path.normpath(engine))
    if name in ("", ".", ".."):
        return None
    return os.path.join(caches, name)


# ------------------------------------------------------------------ benchmarks

def benchmark_problems(record: Any) -> List[str]:
    """Why `record` is not a benchmark record compare can read (benchmark.py's schema, at least one scenario with a
    name, a workload and metrics). Engines are compared across vLLM versions, so no fingerprint is required."""
    if not isinstance(record, Mapping):
        return ["not a JSON object"]
    problems = []
    if record.get("schema_version") != bench.SCHEMA_VERSION:
        problems.append("schema_version %r, this collection reads %d" % (record.get("schema_version"), bench.SCHEMA_VERSION))
    scenarios = record.get("scenarios")
    if not isinstance(scenarios, list) or not scenarios:
        problems.append("no scenarios")
    elif not all(isinstance(s, Mapping) and isinstance(s.get("name"), str) and isinstance(s.get("workload"), Mapping)
                 and isinstance(s.get("metrics"), Mapping) for s in scenarios):
        problems.append("a scenario without name, workload or metrics")
    return problems


def benchmark_record(results: Sequence[Mapping[str, Any]], name: str, at: str) -> Dict[str, Any]:
    """A benchmark record (benchmark.build_record, without fingerprint, comparison or floors) of vllm_benchmark's
    step=run results: each with `scenario` (its workload) and `metrics`; skipped and failed runs are left out."""
    scenarios = []
    for item in results:
        if not isinstance(item, Mapping) or item.get("skipped") or item.get("failed") or "metrics" not in item:
            continue
        plan = item.get("scenario")
        if not isinstance(plan, Mapping) or not plan.get("name") or not isinstance(item["metrics"], Mapping):
            raise ReceiptError("a benchmark result without its scenario or metrics")
        scenarios.append({"name": plan["name"], "workload": bench.workload(plan), "what": plan.get("what", ""),
                          "metrics": dict(item["metrics"])})
    if not scenarios:
        raise ReceiptError("no benchmark result to record (every run failed or was skipped)")
    return bench.build_record(name, at, "", {}, scenarios, {}, [])


def compare(new: Mapping[str, Any], baseline: Optional[Mapping[str, Any]], baseline_name: Optional[str], warn: float,
            fail: float, gate_metrics: Sequence[str] = bench.METRIC_KEYS) -> Dict[str, Any]:
    """The new engine's benchmark record against the baseline engine's (None: nothing to compare with), by
    benchmark.compare: its comparison, lines and verdict."""
    problems = benchmark_problems(new)
    if problems:
        raise ReceiptError("the new engine's benchmark record: %s" % "; ".join(problems))
    earlier: List[Tuple[str, Any]] = []
    if baseline is not None:
        problems = benchmark_problems(baseline)
        if problems:
            raise ReceiptError("the baseline engine's benchmark record: %s" % "; ".join(problems))
        earlier = [(baseline_name or "baseline", baseline)]
    try:
        comparison = bench.compare(new["scenarios"], earlier, warn, fail, gate_metrics)
    except bench.BenchmarkError as exc:
        raise ReceiptError(str(exc)) from exc
    return {"verdict": comparison["verdict"], "comparison": comparison,
            "comparison_lines": bench.comparison_lines(comparison), "baseline_name": baseline_name if earlier else None}
