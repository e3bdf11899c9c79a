# -*- coding: utf-8 -*-
"""vllm_service_workload: what latency, balanced and throughput choose - the sweep's objective and guard, its
candidates (the topology file, channel floors, the high-concurrency set), one stored result per workload and
fingerprint with stale ones reported, the static NCCL fallback, vLLM's --performance-mode and the queue cap."""
from __future__ import annotations

import copy
import json

import pytest

from ansible_collections.moeops.inference.plugins.module_utils._facts import gpu_topology as topo
from ansible_collections.moeops.inference.plugins.module_utils._nccl import tune
from ansible_collections.moeops.inference.plugins.module_utils._policy import nccl_policy
from ansible_collections.moeops.inference.plugins.module_utils._policy import settings as vllm_settings
from ansible_collections.moeops.inference.plugins.module_utils._policy import workload
from conftest import load_json

SIZES = tune.message_sizes(7168)  # decode 1, 8, 32, 128; prefill 2048, 8192
TOPO = "/var/lib/moeops/nccl-tuning/topology/nccl-topo-0123456789abcdef.xml"


def facts(name="rtxpro6000-x8-2numa"):
    return topo.from_snapshot(load_json("constructed", name + ".json"), name)


# ------------------------------------------------------------------ objective and guard

def test_each_workload_weighs_what_it_serves():
    w = {name: tune.size_weights(SIZES, tune.workload_objective(name, SIZES)) for name in tune.WORKLOADS}
    assert w["balanced"] == tune.size_weights(SIZES, tune.DEFAULT_OBJECTIVE)
    assert w["latency"]["decode-1"] == pytest.approx(0.7)
    assert max(w["latency"], key=w["latency"].get) == "decode-1"
    assert w["throughput"]["decode-32"] == w["throughput"]["decode-128"] == w["throughput"]["prefill-8192"] == 0.3
    assert w["throughput"]["decode-1"] == pytest.approx(0.025) and w["throughput"]["prefill-2048"] == 0.05
    for name in tune.WORKLOADS:
        assert sum(w[name].values()) == pytest.approx(1.0)


def test_a_workload_refuses_sizes_that_lack_what_it_weighs():
    small = tune.message_sizes(64, decode_batches=[1, 8], prefill_tokens=[64])
    assert tune.workload_objective("latency", small) == {"decode-1": 0.7, "decode": 0.2, "prefill": 0.1}
    with pytest.raises(ValueError, match="workload throughput weighs decode-128, decode-32, prefill-8192"):
        tune.workload_objective("throughput", small)
    with pytest.raises(ValueError, match="workload: one of"):
        tune.workload_objective("fast", SIZES)


def test_the_guard_lets_throughput_give_up_single_stream_speed():
    assert tune.workload_guard("balanced", SIZES) == tune.workload_guard("latency", SIZES) == [
        "decode-1", "decode-8", "decode-32", "decode-128"]
    assert tune.workload_guard("throughput", SIZES) == ["decode-32", "decode-128", "prefill-8192"]


def run(name, origin, ratios):
    base = {"decode-1": 20.0, "decode-8": 22.0, "decode-32": 40.0, "decode-128": 90.0, "prefill-2048": 900.0,
            "prefill-8192": 3500.0}
    return {"name": name, "origin": origin, "env": {"NCCL_X": name},
            "sizes": {k: {"median_us": v * ratios.get(k, 1.0)} for k, v in base.items()}, "errors": []}


# The community's shape: P2P off is slower for one stream (90 -> 70 tok/s) and faster under load (5000 -> 10000).
P2P_OFF = {"decode-1": 1.3, "decode-8": 1.1, "decode-32": 0.7, "decode-128": 0.55, "prefill-2048": 0.8,
           "prefill-8192": 0.7}
LL_RING = {"decode-1": 0.6, "decode-8": 0.7, "decode-32": 0.98, "decode-128": 0.99, "prefill-2048": 1.2,
           "prefill-8192": 1.3}


@pytest.mark.parametrize("name,best", [("latency", "policy"), ("balanced", "policy"), ("throughput", "p2p-off")])
def test_the_same_measurements_pick_per_workload(name, best):
    runs = [run("defaults", "defaults", {}), run("policy", "policy", LL_RING), run("p2p-off", "throughput", P2P_OFF)]
    sel = tune.rank_candidates(runs, SIZES, tune.workload_objective(name, SIZES), 0.0, 0.02,
                               tune.workload_guard(name, SIZES))
    assert sel["best"]["name"] == best
    rows = {r["name"]: r for r in sel["ranking"]}
    if name != "throughput":
        # Slower for one stream: never a latency or balanced pick.
        assert rows["p2p-off"]["why"] == "slower than the defaults at decode-1, decode-8"
    else:
        # LL/Ring is slower at the long prefill: not a throughput pick.
        assert rows["policy"]["why"] == "slower than the defaults at prefill-8192"
    assert sel["guarded"] == tune.workload_guard(name, SIZES)


# ------------------------------------------------------------------ candidates

def names(plan):
    return [c["name"] for c in plan["candidates"]]


def test_the_topology_file_channel_floors_and_throughput_set_come_before_the_grid():
    f = facts()
    for name in ("latency", "balanced"):
        plan = tune.plan_candidates(f, nccl_policy.nccl_env(f, workload=name), {}, workload=name, topology_file=TOPO)
        assert names(plan)[:6] == ["defaults", "policy", "policy+topo", "topo", "policy+min8ch", "policy+min16ch"]
        assert not [c for c in plan["candidates"] if c["origin"] == "throughput"]
    policy = nccl_policy.nccl_env(f, workload="throughput")
    assert policy == {"NCCL_P2P_LEVEL": "SYS"}
    plan = tune.plan_candidates(f, policy, {"NCCL_NVLS_ENABLE": "0"}, workload="throughput", topology_file=TOPO)
    cands = {c["name"]: c for c in plan["candidates"]}
    assert names(plan)[:10] == ["defaults", "policy", "policy+topo", "topo", "policy+min8ch", "policy+min16ch",
                                "p2p-off", "p2p-off/16-32ch/32MB/cdmc32", "p2p-off/32-64ch/64MB/cdmc64",
                                "policy/32-64ch/64MB/cdmc64"]
    assert cands["topo"]["env"] == {"NCCL_TOPO_FILE": TOPO, "NCCL_NVLS_ENABLE": "0"}
    assert cands["policy+topo"]["env"] == {"NCCL_TOPO_FILE": TOPO, "NCCL_P2P_LEVEL": "SYS", "NCCL_NVLS_ENABLE": "0"}
    assert cands["policy+min8ch"]["env"] == {"NCCL_MIN_NCHANNELS": "8", "NCCL_P2P_LEVEL": "SYS", "NCCL_NVLS_ENABLE": "0"}
    # The community's high-concurrency settings as written (P2P off is not combined with the policy's P2P level).
    assert cands["p2p-off"]["env"] == {"NCCL_P2P_DISABLE": "1", "NCCL_NVLS_ENABLE": "0"}
    assert cands["p2p-off/32-64ch/64MB/cdmc64"]["env"] == {
        "NCCL_P2P_DISABLE": "1", "NCCL_MIN_NCHANNELS": "32", "NCCL_MAX_NCHANNELS": "64", "NCCL_BUFFSIZE": "67108864",
        "CUDA_DEVICE_MAX_CONNECTIONS": "64", "NCCL_NVLS_ENABLE": "0"}
    assert cands["policy/32-64ch/64MB/cdmc64"]["env"]["NCCL_P2P_LEVEL"] == "SYS"
    assert "NCCL_P2P_DISABLE" not in cands["policy/32-64ch/64MB/cdmc64"]["env"]
    assert len(plan["candidates"]) == 24 and any("grid of 48 points cut to 14" in n for n in plan["notes"])


def test_no_topology_file_no_floors_no_grid():
    f = facts()
    plan = tune.plan_candidates(f, nccl_policy.nccl_env(f), {}, protocols=[], min_channels=[])
    assert names(plan) == ["defaults", "policy"] and plan["grid_size"] == 0


def test_max_candidates_cuts_the_grid_first_and_names_what_it_leaves_out():
    f = facts()
    plan = tune.plan_candidates(f, nccl_policy.nccl_env(f, workload="throughput"), {}, workload="throughput",
                                topology_file=TOPO, max_candidates=5)
    assert names(plan) == ["defaults", "policy", "policy+topo", "topo", "policy+min8ch"]
    assert any(n.startswith("max_candidates=5 left out policy+min16ch, p2p-off, ") for n in plan["notes"])


def test_nvlink_boxes_get_no_p2p_off_candidates_and_ll128_stays_off_pcie():
    f = facts("h100sxm-x8-nvswitch")
    plan = tune.plan_candidates(f, {}, {}, workload="throughput", max_candidates=100)
    assert not [c for c in plan["candidates"] if c["origin"] == "throughput"]
    assert any("P2P is the fast path" in n for n in plan["notes"])
    seed = tune.plan_candidates(facts(), {}, {}, max_candidates=1000)
    assert not [c for c in seed["candidates"] if "LL128" in c["env"].get("NCCL_PROTO", "")]
    assert "review of NVIDIA/nccl PR #2036" in seed["notes"][0] and "src/graph/tuning.cc" in seed["notes"][0]


@pytest.mark.parametrize("value,on", [("LL128", True), ("LL,LL128,Simple", True), ("ll128", True),
                                      ("^LL128", False), ("LL", False), ("Simple", False), ("", False)])
def test_which_protocol_values_turn_ll128_on(value, on):
    assert tune.lists_ll128(value) is on


# ------------------------------------------------------------------ storage: one result a workload and fingerprint

def doc_for(f, name, nccl="2.30.7", driver=None, best=None, objective=None):
    fp = tune.fingerprint(dict(f, driver_version=driver or f["driver_version"]), nccl, 8)
    runs = [run("defaults", "defaults", {}), run("policy", "policy", LL_RING)]
    runs[1]["env"] = best or {"NCCL_PROTO": "LL"}
    obj = objective or tune.workload_objective(name, SIZES)
    sel = tune.rank_candidates(runs, SIZES, obj, 0.0, 0.02, tune.workload_guard(name, SIZES))
    return tune.build_document(fp, SIZES, obj, {}, runs, sel, [], {"backend": "nccl"}, "2026-12-05T10:00:00Z",
                               "lab3", name, {"path": TOPO, "sha256": "0" * 64, "gpus_written": 8, "gpus_left_out": 0})


class Store(object):
    """A result directory in memory: stored_names() of it and a reader for select_result."""

    def __init__(self, docs):
        self.docs = {"/s/%s.json" % n: d for n, d in docs.items()}

    def names(self):
        return tune.stored_names([p.rsplit("/", 1)[1] for p in self.docs] + ["sweep.log", "topology"])

    def read(self, path):
        return (copy.deepcopy(self.docs[path]), "") if path in self.docs else (None, "No such file")


def test_documents_are_stored_per_workload_and_schema_1_is_read_as_balanced():
    f = facts()
    doc = doc_for(f, "throughput")
    assert doc["schema_version"] == 2 and doc["workload"] == "throughput"
    assert doc["guarded"] == ["decode-32", "decode-128", "prefill-8192"] and doc["topology_file"]["path"] == TOPO
    assert tune.result_file("/s", doc["fingerprint"], "throughput") == "/s/%s-throughput.json" % doc["fingerprint"]
    assert tune.document_problems(doc, "throughput") == []
    assert tune.document_problems(doc, "latency") == ["it was ranked for the throughput workload, this deployment's "
                                                      "is latency"]
    legacy = dict(doc_for(f, "balanced"), schema_version=1)
    del legacy["workload"]
    assert tune.document_workload(legacy) == "balanced" and tune.document_problems(legacy, "balanced") == []
    custom = dict(legacy, objective={"decode-1": 1})
    assert tune.document_workload(custom) is None
    assert "objective {\"decode-1\": 1} (no named workload" in tune.document_problems(custom, "balanced")[0]
    listing = ["0123456789abcdef-throughput.json", "0123456789abcdef.json", "0123456789abcdef-x.json", "sweep.log",
               "0123456789ABCDEF.json"]
    assert tune.stored_names(listing) == ["0123456789abcdef", "0123456789abcdef-throughput"]


def test_select_finds_the_workload_and_reports_a_stale_nccl_version():
    f = facts()
    now = tune.fingerprint(f, "2.30.7", 8)
    mine = doc_for(f, "throughput")
    old = doc_for(f, "latency", nccl="2.28.9")
    store = Store({mine["fingerprint"] + "-throughput": mine, old["fingerprint"] + "-latency": old})
    got = tune.select_result(store.names(), store.read, "/s", now, "throughput")
    assert got["found"] and got["result"]["workload"] == "throughput" and got["reason"] == ""
    got = tune.select_result(store.names(), store.read, "/s", now, "latency")
    assert not got["found"] and got["result"] is None
    assert got["other_workloads"] == ["throughput"]
    assert [s["differs"] for s in got["stale"]] == [{"nccl_version": ["2.28.9", "2.30.7"]}]
    assert got["reason"] == got["stale"][0]["line"]
    assert "is STALE and not used: NCCL 2.28.9 then, 2.30.7 now" in got["reason"]
    assert "(latency workload, measured 2026-12-05T10:00:00Z)" in got["reason"]
    # balanced: nothing of this box, a pointer to the other workload's result.
    got = tune.select_result(store.names(), store.read, "/s", now, "balanced")
    assert not got["found"] and not got["stale"]
    assert "but for the throughput workload(s): measure this one with playbooks/nccl_tune.yml" in got["reason"]


def test_a_driver_upgrade_is_stale_another_box_is_not_and_a_legacy_result_serves_balanced():
    f = facts()
    now = tune.fingerprint(f, "2.30.7", 8)
    driver = doc_for(f, "balanced", driver="570.86.15")
    other_box = doc_for(facts("l40s-x8-2switch-2numa"), "balanced", nccl="2.28.9")
    store = Store({driver["fingerprint"] + "-balanced": driver, other_box["fingerprint"] + "-balanced": other_box})
    got = tune.select_result(store.names(), store.read, "/s", now, "balanced")
    assert [s["differs"] for s in got["stale"]] == [{"driver_version": ["570.86.15", "580.95.05"]}]
    legacy = dict(doc_for(f, "balanced"), schema_version=1)
    del legacy["workload"]
    store = Store({legacy["fingerprint"]: legacy})
    got = tune.select_result(store.names(), store.read, "/s", now, "balanced")
    assert got["found"] and got["path"] == "/s/%s.json" % legacy["fingerprint"]
    assert not tune.select_result(store.names(), store.read, "/s", now, "latency")["found"]


def test_a_stale_result_reaches_the_policy_as_a_warning_and_changes_nothing():
    f = facts()
    line = "NCCL sweep result /s/x-balanced.json (balanced workload, measured then) is STALE and not used: NCCL ..."
    result = nccl_policy.nccl_policy(f, stale=[line])
    assert result["env"] == nccl_policy.nccl_env(f) and line in result["warnings"]


# ------------------------------------------------------------------ the static policy

def test_static_rules_per_workload_each_with_its_reason():
    f = facts()
    bal, lat, thr = (nccl_policy.nccl_policy(f, workload=w) for w in ("balanced", "latency", "throughput"))
    assert bal["env"] == lat["env"] == {"NCCL_ALGO": "Ring", "NCCL_P2P_LEVEL": "SYS", "NCCL_PROTO": "LL"}
    assert bal["settings"]["NCCL_PROTO"]["reason"] == nccl_policy.PCIE_LATENCY_REASON  # unchanged: same unit
    assert lat["settings"]["NCCL_PROTO"]["reason"].startswith("workload latency (single-stream decode")
    assert thr["env"] == {"NCCL_P2P_LEVEL": "SYS"} and thr["workload"] == "throughput"
    note = [n for n in thr["notes"] if n.startswith("NCCL_PROTO, NCCL_ALGO unset")][0]
    assert "998 tok/s, Simple 1,109 and NCCL's own choice 1,003" in note
    assert "vllm-communicators-kimi-glm-2026-05-07.md" in note
    # 2 PCIe GPUs and NVLink boxes: no protocol rule in any workload.
    for name in ("rtxpro6000-x2-1numa", "h100sxm-x8-nvswitch"):
        assert nccl_policy.nccl_env(facts(name), workload="throughput") == nccl_policy.nccl_env(facts(name))


def test_the_topology_file_is_generated_and_shown_not_applied(seed_host_facts):
    f = seed_host_facts
    result = nccl_policy.nccl_policy(f)
    t = result["topology_file"]
    assert t["generated"] and not t["applied"] and t["gpus_written"] == 8 and t["cpu_nodes"] == 2
    assert "NCCL_TOPO_FILE" not in result["env"]
    assert t["xml"].splitlines()[1] == '<system version="1" name="moeops.inference">'
    assert t["why"].startswith("not applied: nothing measured it on this box") and "AMD_BW" in t["why"]
    assert any(n.startswith("NCCL_TOPO_FILE unset; a topology file (8 GPU(s), 2 CPU node(s)) is generated") for n in
               result["notes"])
    # Facts without the PCIe tree place no GPU: shown as not generated.
    bare = nccl_policy.nccl_policy(facts())["topology_file"]
    assert not bare["generated"] and bare["why"].startswith("not generated")
    # One GPU, or all on NVLink: none.
    assert nccl_policy.nccl_policy(facts("h100sxm-x8-nvswitch"))["topology_file"] is None


def test_a_measurement_that_picked_the_file_applies_it(seed_host_facts):
    f = seed_host_facts
    doc = doc_for(f, "balanced", best={"NCCL_TOPO_FILE": TOPO, "NCCL_P2P_LEVEL": "SYS"})
    result = nccl_policy.nccl_policy(f, tuning=doc)
    assert result["env"] == {"NCCL_TOPO_FILE": TOPO, "NCCL_P2P_LEVEL": "SYS"}
    t = result["topology_file"]
    assert t["applied"] and t["why"].startswith("NCCL_TOPO_FILE=%s set by tuning (nccl_tune:" % TOPO)
    # A result for another workload is not used.
    other = nccl_policy.nccl_policy(f, tuning=doc, workload="latency")
    assert "NCCL_TOPO_FILE" not in other["env"] and "ranked for the balanced workload" in other["warnings"][-1]


def test_an_override_that_turns_ll128_on_off_nvlink_is_warned_with_the_maintainers_reason():
    result = nccl_policy.nccl_policy(facts(), {"NCCL_PROTO": "LL,LL128,Simple"})
    assert result["env"]["NCCL_PROTO"] == "LL,LL128,Simple"
    assert "turns LL128 on" in result["warnings"][-1] and "PR #2036" in result["warnings"][-1]
    assert not nccl_policy.nccl_policy(facts("h100sxm-x8-nvswitch"), {"NCCL_PROTO": "LL128"})["warnings"]


# ------------------------------------------------------------------ vLLM

def test_vllm_arguments_per_workload():
    f = facts()
    bal = workload.vllm_plan("balanced", None, f, "cuda", 8)
    assert bal["args"] == [] and bal["queue_cap"]["value"] is None and bal["performance_mode"] == "balanced"
    lat = workload.vllm_plan("latency", None, f, "cuda", 8)
    assert lat["args"] == ["--performance-mode", "interactivity"]
    assert lat["sources"]["--performance-mode"]["rule"] == "vllm_service_workload"
    thr = workload.vllm_plan("throughput", None, f, "cuda", 8)
    assert thr["args"] == ["--performance-mode", "throughput", "--max-num-queued-reqs", "4096"]
    assert thr["max_num_seqs"]["value"] == 2048
    assert "doubled by --performance-mode throughput" in thr["max_num_seqs"]["reason"]
    assert "HTTP 503" in thr["queue_cap"]["reason"]
    with pytest.raises(ValueError, match="workload: one of"):
        workload.vllm_plan("fast", None, f, "cuda", 8)


@pytest.mark.parametrize("mib,name,cc,seqs", [
    (97887, "NVIDIA RTX PRO 6000 Blackwell Workstation Edition", "12.0", 1024),
    (183359, "NVIDIA B200", "10.0", 1024),
    (81559, "NVIDIA A100-SXM4-80GB", "8.0", 256),
    (124546, "NVIDIA GB10", "12.1", 256),
    (46068, "NVIDIA L40S", "8.9", 256),
])
def test_max_num_seqs_as_vllm_0_33_chooses_it(mib, name, cc, seqs):
    f = {"gpus": [{"memory_total_mib": mib, "name": name, "compute_capability": cc}]}
    assert workload.vllm_max_num_seqs(f, "cuda", 1, None)["value"] == seqs
    assert workload.vllm_max_num_seqs(f, "cuda", 1, "throughput")["value"] == 2 * seqs


def test_max_num_seqs_on_the_cpu_build_and_from_the_arguments():
    assert workload.vllm_max_num_seqs({}, "cpu", 1, "throughput")["value"] == 256
    got = workload.vllm_max_num_seqs(facts(), "cuda", 8, "throughput", ["--max-num-seqs", "64", "--max-num-seqs=96"])
    assert got == {"value": 96, "reason": "--max-num-seqs 96 in the arguments"}
    assert workload.vllm_plan("throughput", None, facts(), "cuda", 8, ["--max-num-seqs", "64"])["args"][-1] == "128"


def test_the_queue_cap_from_the_inventory_wins_and_0_means_none():
    f = facts()
    assert workload.vllm_plan("throughput", 0, f, "cuda", 8)["args"] == ["--performance-mode", "throughput"]
    assert workload.vllm_plan("balanced", 32, f, "cuda", 8)["args"] == ["--max-num-queued-reqs", "32"]


# ------------------------------------------------------------------ the settings report

def test_the_settings_report_shows_the_workload_and_the_topology_file(seed_host_facts):
    f = seed_host_facts
    nccl = json.loads(json.dumps(nccl_policy.nccl_policy(f, workload="throughput")))
    served = workload.vllm_plan("throughput", None, f, "cuda", 8)
    desired = {"unit_text": "[Service]\nExecStart=/opt/vllm/venv/bin/vllm serve m --performance-mode throughput "
                            "--max-num-queued-reqs 4096\n",
               "nccl": nccl, "workload": served,
               "sources": {"args": served["sources"], "environment": {}}}
    report = vllm_settings.build_report("lab3", desired, {"unit": {"deployed": False}}, f)
    status = report["status_lines"]
    assert "workload workload throughput (vllm_service_workload): aggregate tokens/s at high concurrency (32 to 128 " \
           "requests) and cold prefill" in status
    assert "workload NCCL: the static rules for the throughput workload (no sweep result used)" in status
    assert any(s.startswith("workload --max-num-queued-reqs 4096: workload throughput") for s in status)
    assert "topology NCCL topology file from the facts, NOT APPLIED:" in status
    assert 'topology | <system version="1" name="moeops.inference">' in status
    assert report["workload"]["queue_cap"]["value"] == 4096 and report["nccl_topology"]["applied"] is False
    row = [r for r in report["rows"] if r["name"] == "--max-num-queued-reqs"][0]
    assert (row["desired"], row["source"], row["rule"]) == ("4096", "variable", "vllm_service_workload")
    assert "HTTP 503" in row["reason"]
    assert any("variable:vllm_service_workload [" in line and "--performance-mode" in line for line in report["lines"])
