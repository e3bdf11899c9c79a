# -*- coding: utf-8 -*-
"""The P2P gate's rules (module_utils/p2p_gate.py) and the module over a launcher TEST DOUBLE (run_command
returns what nccl_tune_rank.py's --launch prints); the real ranks run in molecule's verify (gloo on CPU) and on
the device tool's H200 (tests/device/p2p_gate_on_device.sh)."""
from __future__ import annotations

import json

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.moeops.inference.plugins.module_utils._nccl import rank as nccl_tune_rank
from ansible_collections.moeops.inference.plugins.module_utils._nccl import p2p_gate as gate
from ansible_collections.moeops.inference.plugins.modules import p2p_gate as module
from conftest import ExitJson, FailJson


def line(record):
    return nccl_tune_rank.LINE_PREFIX + json.dumps(record)


def test_steps_on_gpus_copy_then_allreduce_at_decode_and_1mib():
    plan = gate.steps(8, 7168, "bfloat16", "nccl", 60, {"NCCL_P2P_LEVEL": "SYS"})
    assert [s["step"] for s in plan] == ["copy", "allreduce"]
    assert plan[1]["sizes"] == [{"name": "decode", "bytes": 14336, "elements": 7168},
                                {"name": "1MiB", "bytes": 1 << 20, "elements": 1 << 19}]
    assert all(s["env"] == {"NCCL_P2P_LEVEL": "SYS"} and s["timeout_s"] == 60 for s in plan)
    # A rank left waiting gives up before the launcher kills: only the one that never answered is still running.
    assert all(s["collective_timeout_s"] == 15 for s in plan)
    assert gate.steps(1, 7168, "bfloat16", "nccl", 60, {}) == []
    cpu = gate.steps(2, 64, "bfloat16", "gloo", 20, {}, hang_rank=1)
    assert [s["step"] for s in cpu] == ["allreduce"] and cpu[0]["device"] == "cpu" and cpu[0]["hang_rank"] == 1


def test_copy_outcome_names_the_pair_that_hung_or_came_back_wrong():
    started = [{"event": "start", "pair": [0, 1]}, {"event": "copy", "pair": [0, 1], "correct": True},
               {"event": "start", "pair": [0, 2]}]
    hung = gate.copy_outcome({"stuck": [0], "failure": "killed"}, started, 30)
    assert not hung["passed"] and hung["detail"] == "the copy GPU 0 -> GPU 2 did not finish within 30 s (killed)"
    wrong = gate.copy_outcome({"stuck": []}, [{"event": "copy", "pair": [1, 0], "correct": False}], 30)
    assert not wrong["passed"] and wrong["detail"] == "data arrived corrupted: GPU 1 -> GPU 0"
    fine = gate.copy_outcome({"stuck": []}, started[:2], 30)
    assert fine["passed"] and fine["detail"] == "1 pair(s) copied and verified"


def test_allreduce_outcome_names_the_rank_that_never_answered():
    out = gate.allreduce_outcome({"stuck": [1]}, {0: [{"event": "init"}]}, 2, 20)
    assert out == {"passed": False, "sizes": {},
                   "detail": "rank(s) 1 did not answer within 20 s (killed); the others waited in the collective"}
    timing = {"event": "timing", "size": "decode", "times_us": [40.5], "correct": True}
    ok = gate.allreduce_outcome({"stuck": []}, {0: [timing], 1: [dict(timing, times_us=[42.0])]}, 2, 20)
    assert ok["passed"] and ok["sizes"] == {"decode": 42.0}
    wrong = gate.allreduce_outcome({"stuck": []}, {0: [dict(timing, correct=False)], 1: [timing]}, 2, 20)
    assert wrong["detail"] == "rank 0: the all-reduce of decode gave a wrong sum"


def test_likely_cause_comes_from_the_pcie_host_findings(seed_host_facts):
    cause = gate.likely_cause(seed_host_facts)
    assert cause.startswith("likely cause, from the PCIe host findings: iommu: the IOMMU translates DMA")
    assert cause.endswith("remedy: the moeops.inference.pcie_host role with pcie_host_clear_acs, pcie_host_disable_hmm, "
                          "pcie_host_iommu_passthrough, pcie_host_port_pm_off (docs/pcie-host-facts.md)")
    # One cause per kind (the eight ACS bridges are one), so that HMM and port power management are named too.
    assert cause.count("; acs: bridge ") == 1 and "; hmm: " in cause and "; pcie_port_pm: " in cause
    assert "host section: not read" in gate.likely_cause({"count": 2})


@pytest.fixture
def launcher(monkeypatch):
    """TEST DOUBLE of the launcher: each call returns the next canned --launch record."""
    calls, replies = [], []

    def run_command(self, argv, **kwargs):
        calls.append(argv)
        return 0, line(replies.pop(0)) + "\n", ""
    monkeypatch.setattr(module.AnsibleModule, "run_command", run_command)
    return calls, replies


def run(args, expect=ExitJson):
    with patch_module_args(args):
        with pytest.raises(expect) as exc:
            module.main()
    return exc.value.args[0]


@pytest.mark.usefixtures("module_exits")
def test_one_gpu_has_nothing_to_prove(launcher):
    out = run({"gpu_facts": {"count": 1}, "hidden_size": 7168})
    assert out["passed"] and out["nothing_to_prove"] and out["message"] == "1 GPU: nothing to prove (no peer-to-peer traffic)"
    assert launcher[0] == []


@pytest.mark.usefixtures("module_exits")
def test_a_rank_that_never_answers_fails_the_gate_with_its_name_and_the_cause(launcher, seed_host_facts, tmp_path):
    calls, replies = launcher
    replies.append({"event": "launch", "failure": "ranks killed after 20s", "stuck": [1],
                    "ranks": {"0": {"stdout": line({"event": "init", "rank": 0})}, "1": {"stdout": ""}}})
    record = tmp_path / "gate.json"
    out = run({"gpu_facts": seed_host_facts, "hidden_size": 64, "backend": "gloo", "world_size": 2, "timeout": 20,
               "hang_rank": 1, "record": str(record)}, FailJson)
    assert out["msg"].startswith("P2P gate failed at all-reduce across 2 ranks: rank(s) 1 did not answer within 20 s")
    assert "likely cause, from the PCIe host findings: iommu" in out["msg"]
    assert out["passed"] is False and json.loads(record.read_text())["passed"] is False
    spec = json.loads(calls[0][-1])
    assert calls[0][-2] == "--launch" and spec["hang_rank"] == 1 and spec["world_size"] == 2


@pytest.mark.usefixtures("module_exits")
def test_both_steps_pass_on_gpus(launcher):
    calls, replies = launcher
    replies.append({"event": "launch", "failure": "", "stuck": [], "ranks": {"0": {"stdout": "\n".join(line(r) for r in (
        {"event": "start", "pair": [0, 1]}, {"event": "copy", "pair": [0, 1], "correct": True, "seconds": 0.01},
        {"event": "start", "pair": [1, 0]}, {"event": "copy", "pair": [1, 0], "correct": True, "seconds": 0.01}))}}})
    timing = [line({"event": "timing", "size": n, "times_us": [30.0], "correct": True}) for n in ("decode", "1MiB")]
    replies.append({"event": "launch", "failure": "", "stuck": [],
                    "ranks": {str(r): {"stdout": "\n".join(timing)} for r in (0, 1)}})
    out = run({"gpu_facts": {"count": 2}, "hidden_size": 7168, "environment": {"NCCL_PROTO": "LL"}})
    assert out["passed"] and [s["name"] for s in out["steps"]] == ["copy between every GPU pair", "all-reduce across 2 ranks"]
    assert out["message"].startswith("P2P gate passed in ")
    assert [json.loads(c[-1])["env"] for c in calls] == [{"NCCL_PROTO": "LL"}] * 2
