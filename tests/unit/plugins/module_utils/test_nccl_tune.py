# -*- coding: utf-8 -*-
from __future__ import annotations

import json
import os

import pytest

from ansible_collections.moeops.inference.plugins.module_utils._facts import gpu_topology as topo
from ansible_collections.moeops.inference.plugins.module_utils._policy import nccl_policy
from ansible_collections.moeops.inference.plugins.module_utils._nccl import tune
from ansible_collections.moeops.inference.plugins.module_utils._nccl import rank as nccl_tune_rank
from conftest import FIXTURES, load_json


def facts(name="rtxpro6000-x8-2numa"):
    return topo.from_snapshot(load_json("constructed", name + ".json"), name)


def sizes():
    return tune.message_sizes(7168)


# ------------------------------------------------------------------ sizes

def test_message_sizes_are_the_model_all_reduce_payloads():
    got = {s["name"]: s["bytes"] for s in sizes()}
    assert got == {"decode-1": 14336, "decode-8": 114688, "decode-32": 458752, "decode-128": 1835008,
                   "prefill-2048": 29360128, "prefill-8192": 117440512}
    assert {s["phase"] for s in sizes()} == {"decode", "prefill"}
    assert sizes()[0]["elements"] == 7168


@pytest.mark.parametrize("args", [(0,), (7168, 0), (7168, 2, [0]), (7168, 2, [1, 1]), (7168, 2, [], [])])
def test_message_sizes_refuse_nonsense(args):
    with pytest.raises(ValueError):
        tune.message_sizes(*args)


# ------------------------------------------------------------------ planner

def test_plan_pcie_box_defaults_policy_then_grid_with_pins_everywhere():
    f = facts()
    policy = nccl_policy.nccl_env(f)
    plan = tune.plan_candidates(f, policy, {"NCCL_NVLS_ENABLE": "0"})
    cands = plan["candidates"]
    assert [c["name"] for c in cands[:2]] == ["defaults", "policy"]
    assert cands[0]["env"] == {"NCCL_NVLS_ENABLE": "0"}
    assert cands[1]["env"] == dict(policy, NCCL_NVLS_ENABLE="0")
    assert all(c["env"]["NCCL_NVLS_ENABLE"] == "0" for c in cands)
    protos = {c["env"].get("NCCL_PROTO") for c in cands}
    assert "LL128" not in protos and {"LL", "Simple"} <= protos  # PCIe: LL128 is not safe to force
    assert {c["env"].get("NCCL_P2P_LEVEL") for c in cands} == {None, "PHB", "SYS"}  # NODE and SYS pairs, P2P OK
    assert {c["env"].get("NCCL_ALGO") for c in cands} == {None, "Ring", "Tree"}
    assert {c["env"].get("NCCL_MAX_NCHANNELS") for c in cands} == {None, "4"}  # the cut falls on channel counts
    # Before the grid: the channel floors on the policy (no topology file given, balanced: no throughput set).
    assert [c["name"] for c in cands[2:4]] == ["policy+min8ch", "policy+min16ch"]
    assert cands[2]["env"] == dict(policy, NCCL_NVLS_ENABLE="0", NCCL_MIN_NCHANNELS="8")
    # 2 protocols x 2 algorithms x 4 channel settings x 3 levels = 48, cut to 24 in all.
    assert plan["grid_size"] == 48 and len(cands) == 24
    assert any("cut to 20" in n for n in plan["notes"])
    keys = [json.dumps(c["env"], sort_keys=True) for c in cands]
    assert len(set(keys)) == len(keys)


def test_plan_policy_point_in_grid_is_measured_once():
    f = facts()
    plan = tune.plan_candidates(f, nccl_policy.nccl_env(f), {}, channels=[None], max_candidates=100, min_channels=[])
    policy = [c for c in plan["candidates"] if c["name"] == "policy"][0]
    assert policy["aliases"] == ["LL/Ring/p2p=SYS"]
    assert len(plan["candidates"]) == 1 + 2 * 2 * 3  # defaults + grid (policy is one of its points)


def test_plan_nvlink_box_offers_ll128_and_no_p2p_level():
    f = facts("h100sxm-x8-nvswitch")
    plan = tune.plan_candidates(f, nccl_policy.nccl_env(f), {}, max_candidates=100)
    assert {c["env"].get("NCCL_PROTO") for c in plan["candidates"]} == {None, "LL", "LL128", "Simple"}
    assert all("NCCL_P2P_LEVEL" not in c["env"] for c in plan["candidates"])
    # NVSwitch: the policy sets nothing, so it is the defaults.
    assert plan["candidates"][0]["aliases"] == ["policy"]


def test_plan_pinned_variable_removes_its_dimension():
    f = facts()
    plan = tune.plan_candidates(f, nccl_policy.nccl_env(f), {"NCCL_PROTO": "Simple"}, max_candidates=100)
    assert {c["env"]["NCCL_PROTO"] for c in plan["candidates"]} == {"Simple"}
    assert plan["grid_size"] == 2 * 4 * 3


def test_plan_channels_set_min_and_max():
    f = facts()
    plan = tune.plan_candidates(f, {}, {}, protocols=["LL"], algorithms=["Ring"], channels=[8], p2p_levels=[None],
                                min_channels=[])
    assert plan["candidates"][1]["env"] == {"NCCL_PROTO": "LL", "NCCL_ALGO": "Ring",
                                            "NCCL_MIN_NCHANNELS": "8", "NCCL_MAX_NCHANNELS": "8"}
    assert plan["candidates"][1]["name"] == "LL/Ring/8ch"


@pytest.mark.parametrize("kwargs,match", [
    ({"protocols": ["LL128"]}, "not safe here"),
    ({"algorithms": ["CollnetDirect"]}, "Ring or Tree"),
    ({"channels": [65]}, "1 to 64"),
    ({"p2p_levels": ["FAR"]}, "p2p_levels"),
    ({"pinned": {"NCCL_NVLS_ENABLE": 0}}, "must be a string"),
    ({"pinned": {"CUDA_VISIBLE_DEVICES": "0"}}, "start with NCCL_ \\(or be CUDA_DEVICE_MAX_CONNECTIONS\\)"),
    ({"pinned": {"NCCL_PROTO": "LL,LL128,Simple"}}, "turns LL128 on, which is not safe here"),
    ({"min_channels": [0]}, "min_channels: 1 to 64"),
    ({"workload": "fast"}, "workload: one of latency, balanced, throughput"),
    ({"max_candidates": 0}, "at least 1"),
])
def test_plan_refuses_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        tune.plan_candidates(facts(), {}, **kwargs)


# ------------------------------------------------------------------ budget

def test_budget_always_runs_the_baseline_then_predicts_from_the_mean():
    assert tune.budget_allows(0.0, 0, 1)
    assert tune.budget_allows(500.0, 0, 10)  # no candidate finished yet: the defaults run regardless
    assert tune.budget_allows(20.0, 2, 30)  # 20 + 10 <= 30
    assert not tune.budget_allows(21.0, 2, 30)


# ------------------------------------------------------------------ parser

RANK_OUTPUT = """\
NCCL INFO something from NCCL
NCCL_TUNE {"event": "init", "rank": %(rank)d, "world_size": 2, "nccl_version": "2.27.3", "gpu": "H200"}
NCCL_TUNE {"event": "timing", "rank": %(rank)d, "size": "decode-1", "times_us": %(a)s, "correct": true}
NCCL_TUNE not json
NCCL_TUNE {"event": "timing", "rank": %(rank)d, "size": "prefill-64", "times_us": %(b)s, "correct": true}
"""


def two_sizes():
    return tune.message_sizes(64, decode_batches=[1], prefill_tokens=[64])


def test_parser_takes_its_lines_and_the_slowest_rank_per_iteration():
    out = {0: RANK_OUTPUT % {"rank": 0, "a": [10, 30, 20], "b": [100, 100, 100]},
           1: RANK_OUTPUT % {"rank": 1, "a": [12, 11, 25], "b": [90, 300, 95]}}
    per_rank = {r: tune.parse_rank_lines(t) for r, t in out.items()}
    assert len(per_rank[0]) == 3
    agg = tune.aggregate_timings(per_rank, 2, two_sizes())
    assert agg["errors"] == []
    # Per iteration max over ranks: [12, 30, 25] -> median 25; [100, 300, 100] -> 100.
    assert agg["sizes"]["decode-1"] == {"median_us": 25.0, "min_us": 12.0, "max_us": 30.0, "iterations": 3}
    assert agg["sizes"]["prefill-64"]["median_us"] == 100.0
    assert agg["info"] == {"world_size": 2, "nccl_version": "2.27.3", "gpu": "H200"}


def test_parser_reports_missing_rank_wrong_sum_and_rank_errors():
    good = RANK_OUTPUT % {"rank": 0, "a": [1, 2, 3], "b": [1, 2, 3]}
    agg = tune.aggregate_timings({0: tune.parse_rank_lines(good)}, 2, two_sizes())
    assert agg["errors"] == ["rank 1 printed no result"] and agg["sizes"] == {}
    bad = good.replace('"correct": true}', '"correct": false}', 1)
    err = 'NCCL_TUNE {"event": "error", "rank": 1, "message": "DistBackendError: NCCL error"}'
    agg = tune.aggregate_timings({0: tune.parse_rank_lines(bad), 1: tune.parse_rank_lines(err)}, 2, two_sizes())
    assert "rank 0: all-reduce of decode-1 gave a wrong sum" in agg["errors"]
    assert "rank 1: DistBackendError: NCCL error" in agg["errors"]
    short = RANK_OUTPUT % {"rank": 1, "a": [1, 2], "b": [1, 2, 3]}
    agg = tune.aggregate_timings({0: tune.parse_rank_lines(good), 1: tune.parse_rank_lines(short)}, 2, two_sizes())
    assert agg["errors"] == ["decode-1: ranks timed different numbers of iterations [2, 3]"]


def test_rank_script_prints_what_the_parser_reads(capsys):
    nccl_tune_rank.emit({"event": "timing", "rank": 0, "size": "decode-1", "times_us": [1.5], "correct": True})
    assert tune.parse_rank_lines(capsys.readouterr().out)[0]["times_us"] == [1.5]
    assert nccl_tune_rank.LINE_PREFIX == tune.LINE_PREFIX


def test_rank_script_usage_error():
    assert nccl_tune_rank.main(["x"]) == 2


# ------------------------------------------------------------------ selection

def measured(name, origin, medians, errors=()):
    return {"name": name, "origin": origin, "env": {"NCCL_X": name},
            "sizes": {k: {"median_us": v} for k, v in medians.items()}, "errors": list(errors)}


SIZES3 = tune.message_sizes(64, decode_batches=[1, 8], prefill_tokens=[64])


def test_weights_split_phases_or_name_sizes():
    assert tune.size_weights(SIZES3, {"decode": 0.8, "prefill": 0.2}) == {"decode-1": 0.4, "decode-8": 0.4,
                                                                          "prefill-64": 0.2}
    assert tune.size_weights(SIZES3, {"decode-1": 1}) == {"decode-1": 1.0, "decode-8": 0.0, "prefill-64": 0.0}
    assert tune.size_weights(SIZES3, {"decode": 1, "decode-1": 3}) == {"decode-1": 3.0, "decode-8": 1.0,
                                                                       "prefill-64": 0.0}
    for bad in ({"decode-2": 1}, {"decode": -1}, {"decode": True}, {"prefill": 0}):
        with pytest.raises(ValueError):
            tune.size_weights(SIZES3, bad)


def test_ranking_by_decode_weighted_ratio_and_never_slower_at_decode():
    runs = [
        measured("defaults", "defaults", {"decode-1": 100, "decode-8": 100, "prefill-64": 1000}),
        measured("policy", "policy", {"decode-1": 80, "decode-8": 90, "prefill-64": 1000}),
        # Best score (prefill halves) but slower at decode-8: not eligible.
        measured("fast-prefill", "grid", {"decode-1": 70, "decode-8": 101, "prefill-64": 200}),
        measured("broken", "grid", {}, errors=["rank 1 exited 1: NCCL error"]),
    ]
    sel = tune.rank_candidates(runs, SIZES3, {"decode": 0.8, "prefill": 0.2})
    names = [r["name"] for r in sel["ranking"]]
    assert names == ["policy", "defaults", "fast-prefill", "broken"]
    assert sel["best"]["name"] == "policy"
    assert sel["best"]["score"] == pytest.approx((0.4 * 0.8 + 0.4 * 0.9 + 0.2 * 1.0))
    assert sel["ranking"][2]["why"] == "slower than the defaults at decode-8"
    assert sel["ranking"][3]["score"] is None and "NCCL error" in sel["ranking"][3]["why"]
    # Prefill-only objective with a regression allowance lets it win.
    sel = tune.rank_candidates(runs, SIZES3, {"prefill": 1}, max_decode_regression=0.05)
    assert sel["best"]["name"] == "fast-prefill"


def test_ranking_keeps_defaults_when_nothing_beats_them():
    runs = [measured("defaults", "defaults", {"decode-1": 100, "decode-8": 100, "prefill-64": 1000}),
            measured("slow", "grid", {"decode-1": 150, "decode-8": 110, "prefill-64": 900})]
    sel = tune.rank_candidates(runs, SIZES3, tune.DEFAULT_OBJECTIVE)
    assert sel["best"]["name"] == "defaults" and sel["best"]["score"] == 1.0


def test_ranking_without_a_baseline_is_an_error():
    runs = [measured("defaults", "defaults", {}, errors=["ranks killed after 300s"]),
            measured("policy", "policy", {"decode-1": 1, "decode-8": 1, "prefill-64": 1})]
    sel = tune.rank_candidates(runs, SIZES3, tune.DEFAULT_OBJECTIVE)
    assert sel["best"] is None and "ranks killed" in sel["error"]


def test_table_lists_every_candidate_with_ratios():
    runs = [measured("defaults", "defaults", {"decode-1": 100, "decode-8": 100, "prefill-64": 1000}),
            measured("policy", "policy", {"decode-1": 50, "decode-8": 100, "prefill-64": 1000})]
    sel = tune.rank_candidates(runs, SIZES3, tune.DEFAULT_OBJECTIVE)
    table = tune.ranked_table(sel["ranking"], runs, SIZES3)
    assert len(table) == 3 and "decode-1" in table[0]
    assert table[1].split()[:3] == ["1", "policy", "0.800"] and "50.0us x0.50" in table[1]


# ------------------------------------------------------------------ fingerprint and storage

def test_fingerprint_changes_with_topology_driver_nccl_and_ranks():
    f = facts()
    base = tune.fingerprint(f, "2.27.3", 8)
    assert base == tune.fingerprint(facts(), "2.27.3", 8)
    assert len(base["id"]) == 16 and base["components"]["driver_version"] == "580.95.05"
    assert tune.fingerprint(f, "2.27.5", 8)["id"] != base["id"]
    assert tune.fingerprint(f, "2.27.3", 4)["id"] != base["id"]
    assert tune.fingerprint(dict(f, driver_version="580.105.08"), "2.27.3", 8)["id"] != base["id"]
    moved = json.loads(json.dumps(f))
    moved["pairs"][0]["p2p"]["read"] = "CNS"
    assert tune.topology_fingerprint(moved) != tune.topology_fingerprint(f)
    assert tune.result_file("/var/lib/x/", base["id"]) == "/var/lib/x/%s.json" % base["id"]
    assert tune.stored_names([base["id"] + ".json", "sweep.log", ".tmp-abc", "x.json"]) == [base["id"]]


def document(f=None, best_env=None):
    f = f or facts()
    runs = [measured("defaults", "defaults", {"decode-1": 100, "decode-8": 100, "prefill-64": 1000}),
            measured("policy", "policy", {"decode-1": 80, "decode-8": 90, "prefill-64": 1000})]
    runs[1]["env"] = best_env if best_env is not None else {"NCCL_PROTO": "Simple", "NCCL_NVLS_ENABLE": "0"}
    sel = tune.rank_candidates(runs, SIZES3, tune.DEFAULT_OBJECTIVE)
    return tune.build_document(tune.fingerprint(f, "2.27.3", 8), SIZES3, tune.DEFAULT_OBJECTIVE,
                               {"NCCL_NVLS_ENABLE": "0"}, runs, sel, [], {"backend": "nccl"},
                               "2026-12-02T20:00:00Z", "lab3")


def test_document_roundtrips_and_is_usable():
    doc = json.loads(json.dumps(document()))
    assert tune.document_problems(doc) == []
    assert doc["best"]["env"] == {"NCCL_PROTO": "Simple", "NCCL_NVLS_ENABLE": "0"}
    assert "best of 2 candidates is 'policy'" in tune.tuning_summary(doc)
    assert "decode time ratios 0.80, 0.90" in tune.tuning_summary(doc)


def test_document_problems():
    assert tune.document_problems([]) == ["not a JSON object"]
    doc = document()
    doc["schema_version"] = 9
    doc["best"] = None
    doc["error"] = "NCCL's defaults did not measure"
    problems = tune.document_problems(doc)
    assert problems[0] == "schema_version 9, this collection reads 1 and 2"
    assert "NCCL's defaults did not measure" in problems[1]
    doc = document(best_env={"NCCL_PROTO": 1})
    assert "expected NCCL_* (or CUDA_DEVICE_MAX_CONNECTIONS) string values" in tune.document_problems(doc)[0]


# ------------------------------------------------------------------ policy precedence

def test_policy_prefers_tuning_and_inventory_wins():
    f = facts()
    doc = document()
    result = nccl_policy.nccl_policy(f, {"NCCL_NVLS_ENABLE": "1"}, tuning=doc)
    s = result["settings"]
    # The measured environment replaces the static one wholesale: LL/Ring/SYS gone.
    assert set(s) == {"NCCL_PROTO", "NCCL_NVLS_ENABLE"}
    assert s["NCCL_PROTO"]["source"] == "tuning" and s["NCCL_PROTO"]["value"] == "Simple"
    assert s["NCCL_PROTO"]["rule"] == "nccl_tune:" + doc["fingerprint"]
    assert "lab3" in s["NCCL_PROTO"]["reason"]
    assert s["NCCL_NVLS_ENABLE"] == {"value": "1", "source": "inventory", "rule": "inventory", "reason": "set in inventory"}
    assert any(n.startswith("NCCL_ALGO removed by NCCL tuning result") for n in result["notes"])
    assert result["report"][0].startswith("NCCL_NVLS_ENABLE=1 [inventory: inventory]")


def test_policy_removal_override_names_the_tuning_source():
    result = nccl_policy.nccl_policy(facts(), {"NCCL_PROTO": None}, tuning=document())
    assert "NCCL_PROTO" not in result["env"]
    assert "NCCL_PROTO removed by inventory override (tuning would set Simple)." in result["notes"]


def test_policy_ignores_a_result_from_another_topology():
    other = document(facts("l40s-x8-2switch-2numa"))
    result = nccl_policy.nccl_policy(facts(), None, tuning=other)
    assert result["env"] == {"NCCL_ALGO": "Ring", "NCCL_P2P_LEVEL": "SYS", "NCCL_PROTO": "LL"}
    assert "measured on another topology" in result["warnings"][-1]


def test_policy_old_signature_unchanged():
    assert nccl_policy.nccl_env(facts()) == nccl_policy.nccl_policy(facts(), None, None)["env"]
    assert nccl_policy.nccl_env(facts(), {"NCCL_PROTO": "Simple"})["NCCL_PROTO"] == "Simple"


# ------------------------------------------------------------------ the device run (1x H200, NCCL 2.28.9)

def device_result():
    with open(os.path.join(os.path.dirname(FIXTURES), "nccl_tune", "h200-x1-device", "result.json")) as f:
        return json.load(f)


def test_device_result_is_a_usable_document_for_the_captured_h200():
    """Raw output of tests/device/nccl_tune_on_device.sh: 1 rank, so its ranking is noise, but its shape is real."""
    doc = device_result()
    assert tune.document_problems(doc) == []
    assert doc["settings"]["backend"] == "nccl" and doc["settings"]["gpu"] == "NVIDIA H200"
    assert [s["bytes"] for s in doc["sizes"]] == [s["bytes"] for s in sizes()]
    assert len(doc["candidates"]) == 17 and not any(c["errors"] for c in doc["candidates"])
    assert all(c["env"]["NCCL_NVLS_ENABLE"] == "0" for c in doc["candidates"])
    # The pick is never slower than the defaults at a decode size.
    assert all(v <= 1.0 for k, v in doc["best"]["ratios"].items() if k.startswith("decode-"))
    # Re-ranking the stored measurements reproduces the stored pick.
    sel = tune.rank_candidates(doc["candidates"], doc["sizes"], doc["objective"])
    assert sel["best"]["name"] == doc["best"]["name"]
    # The GPU snapshot captured on the same kind of machine in another session has the same fingerprint.
    f = topo.from_snapshot(load_json("real", "h200-x1-device.nvml.snapshot.json"), "h200")
    assert tune.fingerprint(f, "2.28.9", 1)["id"] == doc["fingerprint"]
    policy = nccl_policy.nccl_policy(f, None, tuning=doc)
    assert policy["env"] == doc["best"]["env"]
    assert {s["source"] for s in policy["settings"].values()} == {"tuning"}


def test_a_gain_within_noise_keeps_the_defaults():
    runs = [measured("defaults", "defaults", {"decode-1": 100, "decode-8": 100, "prefill-64": 1000}),
            measured("noise", "grid", {"decode-1": 99, "decode-8": 99, "prefill-64": 990})]
    assert tune.rank_candidates(runs, SIZES3, tune.DEFAULT_OBJECTIVE)["best"]["name"] == "noise"
    sel = tune.rank_candidates(runs, SIZES3, tune.DEFAULT_OBJECTIVE, min_improvement=0.02)
    assert sel["best"]["name"] == "defaults"
    assert sel["ranking"][1]["why"] == "gain below min_improvement 0.020"


def test_launcher_starts_every_rank_and_reports_their_failures(capsys):
    """The real launcher, real processes; PyTorch is absent from this venv, so each rank reports that."""
    try:
        import torch  # noqa: F401  pylint: disable=unused-import
        pytest.skip("PyTorch is installed here; the molecule verify step runs the ranks for real")
    except ImportError:
        pass
    spec = {"backend": "gloo", "device": "cpu", "dtype": "bfloat16", "inner": 1, "warmup": 0, "iterations": 1,
            "timeout_s": 60, "sizes": two_sizes(), "world_size": 2, "env": {"NCCL_NVLS_ENABLE": "0"}}
    assert nccl_tune_rank.launch(spec) == 0
    record = [r for r in tune.parse_rank_lines(capsys.readouterr().out) if r["event"] == "launch"][0]
    assert sorted(record["ranks"]) == ["0", "1"]
    assert record["failure"].startswith("rank 0 exited 1: ")
    per_rank = {int(k): tune.parse_rank_lines(v["stdout"]) for k, v in record["ranks"].items()}
    agg = tune.aggregate_timings(per_rank, 2, two_sizes())
    assert agg["errors"][:2] == ["rank 0: ModuleNotFoundError: No module named 'torch'",
                                 "rank 1: ModuleNotFoundError: No module named 'torch'"]


# ------------------------------------------------------------------ probe and rank script (nccl_tune, nccl_tune_info)

class FakeRun:
    """TEST DOUBLE for AnsibleModule.run_command: records each argv, answers (rc, stdout, stderr)."""

    def __init__(self, rc, out, err=""):
        self.answer = (rc, out, err)
        self.calls = []

    def __call__(self, argv):
        self.calls.append(list(argv))
        return self.answer


PROBE = {"event": "probe", "torch": "2.9.0+cu128", "nccl_version": "2.27.3", "cuda_available": True,
         "device_count": 8}


def test_probe_returns_the_probe_record():
    run = FakeRun(0, "a warning\n" + tune.LINE_PREFIX + json.dumps({"event": "other"}) + "\n"
                  + tune.LINE_PREFIX + json.dumps(PROBE) + "\n")
    assert tune.probe(run, "/venv/bin/python", "/tmp/x/nccl_tune_rank.py") == (PROBE, "")
    assert run.calls == [["/venv/bin/python", "/tmp/x/nccl_tune_rank.py", "--probe"]]


def test_probe_that_fails_says_why_with_the_tail_of_its_output():
    err = "Traceback (most recent call last):\n" + "x" * 3000 + "\nModuleNotFoundError: No module named 'torch'\n"
    record, why = tune.probe(FakeRun(1, "", err), "/venv/bin/python", "s.py")
    assert record is None
    assert why.startswith("/venv/bin/python cannot import PyTorch (rc 1): ")
    assert why.endswith("ModuleNotFoundError: No module named 'torch'")
    assert len(why) == len("/venv/bin/python cannot import PyTorch (rc 1): ") + 2000
    # nccl_tune_info keeps its reason short; stdout stands in when stderr is empty.
    record, why = tune.probe(FakeRun(139, "segfault in libcuda\n"), "/py", "s.py", tail=5)
    assert record is None and why == "/py cannot import PyTorch (rc 139): bcuda"
    # A probe record printed before a non-zero exit does not count.
    assert tune.probe(FakeRun(1, tune.LINE_PREFIX + json.dumps(PROBE)), "/py", "s.py")[0] is None


def test_probe_that_prints_no_record_says_so():
    record, why = tune.probe(FakeRun(0, "NCCL_TUNE not json\nhello\n"), "/py", "s.py")
    assert record is None
    assert why == "the PyTorch probe of /py printed no result: NCCL_TUNE not json\nhello"
    assert tune.probe(FakeRun(0, ""), "/py", "s.py")[1] == "the PyTorch probe of /py printed no result: "


def test_rank_script_is_the_harness_source_in_a_temp_dir_removed_after():
    with tune.rank_script("nccl-tune-test-") as script:
        assert os.path.basename(script) == "nccl_tune_rank.py"
        assert os.path.basename(os.path.dirname(script)).startswith("nccl-tune-test-")
        with open(script) as f:
            assert f.read() == open(nccl_tune_rank.__file__).read()
    assert not os.path.exists(os.path.dirname(script))
    # exit_json/fail_json raise SystemExit inside the block: the directory goes all the same.
    with pytest.raises(SystemExit):
        with tune.rank_script() as script:
            raise SystemExit(0)
    assert not os.path.exists(os.path.dirname(script))


def test_probe_runs_the_real_script():
    """The real rank script and a real Python (this one): PyTorch is absent here, so the probe says so."""
    import subprocess
    import sys

    def run_command(argv):
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
        return proc.returncode, proc.stdout, proc.stderr

    with tune.rank_script() as script:
        record, why = tune.probe(run_command, sys.executable, script)
    try:
        import torch  # noqa: F401  pylint: disable=unused-import
    except ImportError:
        assert record is None
        assert why.startswith("%s cannot import PyTorch (rc 1): " % sys.executable)
        assert why.endswith("No module named 'torch'")
    else:
        assert why == "" and set(record) == set(PROBE)
