# -*- coding: utf-8 -*-
"""nccl_tune_info over a store of results (the NCCL version given, so no PyTorch is started): one result a workload
and fingerprint, a stale one reported with what changed, a result whose topology file is gone not used; nccl_tune's
plan in check mode for each workload, with the topology file it would write."""
from __future__ import annotations

import json
import os
import sys

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.moeops.inference.plugins.modules import nccl_tune, nccl_tune_info
from ansible_collections.moeops.inference.plugins.module_utils._nccl import tune
from conftest import ExitJson, FailJson

pytestmark = pytest.mark.usefixtures("module_exits")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "module_utils"))
from test_workloads import doc_for, facts  # noqa: E402  pylint: disable=wrong-import-position


def run(module, args, expect=ExitJson):
    with patch_module_args(args):
        with pytest.raises(expect) as exc:
            module.main()
    return exc.value.args[0]


def store(tmp_path, *docs):
    for doc in docs:
        name = doc["fingerprint"] + ("-" + doc["workload"] if doc.get("workload") else "")
        (tmp_path / (name + ".json")).write_text(json.dumps(doc))
    (tmp_path / "sweep.log").write_text("")
    return str(tmp_path)


def info(tmp_path, workload, nccl="2.30.7", gpu_facts=None):
    return run(nccl_tune_info, {"gpu_facts": gpu_facts or facts(), "world_size": 8, "nccl_version": nccl,
                                "workload": workload, "store_dir": str(tmp_path)})


def test_info_finds_the_result_of_the_workload_and_only_that(tmp_path):
    f = facts()
    store(tmp_path, doc_for(f, "throughput"), doc_for(f, "latency"))
    got = info(tmp_path, "throughput")
    assert got["found"] and got["result"]["workload"] == "throughput" and got["reason"] == ""
    assert got["stored_path"].endswith("-throughput.json") and got["other_workloads"] == ["latency"]
    got = info(tmp_path, "balanced")
    assert not got["found"] and got["result"] is None and got["stale"] == []
    assert "no balanced result for this node's fingerprint" in got["reason"]
    assert "but for the latency, throughput workload(s)" in got["reason"]


def test_info_reports_a_result_of_another_nccl_version_as_stale(tmp_path):
    f = facts()
    store(tmp_path, doc_for(f, "balanced", nccl="2.28.9"))
    got = info(tmp_path, "balanced", nccl="2.30.7")
    assert not got["found"] and got["result"] is None
    assert len(got["stale"]) == 1 and got["stale"][0]["differs"] == {"nccl_version": ["2.28.9", "2.30.7"]}
    assert "is STALE and not used: NCCL 2.28.9 then, 2.30.7 now" in got["reason"]
    # The same result is current for the NCCL it was measured with.
    assert info(tmp_path, "balanced", nccl="2.28.9")["found"]


def test_info_refuses_a_result_whose_topology_file_is_gone(tmp_path):
    f = facts()
    topo_file = tmp_path / "topology" / "nccl-topo-0123456789abcdef.xml"
    store(tmp_path, doc_for(f, "balanced", best={"NCCL_TOPO_FILE": str(topo_file)}))
    got = info(tmp_path, "balanced")
    assert not got["found"] and "NCCL_TOPO_FILE=%s, which does not exist" % topo_file in got["reason"]
    topo_file.parent.mkdir()
    topo_file.write_text("<system/>")
    assert info(tmp_path, "balanced")["found"]


def test_info_reads_a_result_from_before_workloads_as_balanced(tmp_path):
    f = facts()
    legacy = dict(doc_for(f, "balanced"), schema_version=1)
    del legacy["workload"]
    store(tmp_path, legacy)
    assert info(tmp_path, "balanced")["found"]
    assert not info(tmp_path, "latency")["found"]


@pytest.mark.parametrize("workload,origins", [
    ("latency", {"defaults", "policy", "topology", "channels", "grid"}),
    ("throughput", {"defaults", "policy", "topology", "channels", "throughput", "grid"}),
])
def test_sweep_plan_in_check_mode_per_workload(tmp_path, seed_host_facts, workload, origins):
    host_facts = {k: v for k, v in seed_host_facts.items() if k != "host_root"}
    got = run(nccl_tune, {"gpu_facts": host_facts, "hidden_size": 7168, "workload": workload,
                          "python": str(tmp_path / "no-venv" / "bin" / "python"), "store_dir": str(tmp_path),
                          "_ansible_check_mode": True})
    assert not got["measured"] and "does not exist yet" in got["msg"]
    assert {c["origin"] for c in got["candidates"]} == origins
    topo_env = [c["env"]["NCCL_TOPO_FILE"] for c in got["candidates"] if c["origin"] == "topology"]
    assert len(topo_env) == 2 and topo_env[0].startswith(str(tmp_path / "topology" / "nccl-topo-"))
    assert not (tmp_path / "topology").exists()  # check mode writes nothing


def test_sweep_refuses_a_workload_whose_sizes_are_not_measured(tmp_path):
    got = run(nccl_tune, {"gpu_facts": facts(), "hidden_size": 64, "workload": "throughput", "decode_batches": [1],
                          "prefill_tokens": [64], "backend": "gloo", "world_size": 2, "store_dir": str(tmp_path)},
              FailJson)
    assert got["msg"].startswith("workload throughput weighs decode-128, decode-32, prefill-8192")
    assert tune.WORKLOADS == ("latency", "balanced", "throughput")
