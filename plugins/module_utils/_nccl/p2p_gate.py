# -*- coding: utf-8 -*-
# Copyright: (c) 2026, moeops.inference contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The P2P gate's rules: what it runs before vLLM starts, and how it reads what the ranks printed.

On PCIe-only boxes NCCL can hang at the first all-reduce while NVML reports P2P OK (vLLM #33041, NCCL #2079,
NCCL #1999); vLLM's own P2P check is skipped by default and comes after NCCL's warm-up. The gate proves P2P
first, in the vLLM venv's own PyTorch and NCCL, with the unit's NCCL environment:
  1. a copy from every GPU to every other, verified byte for byte (one process);
  2. an all-reduce across all the GPUs at the model's decode message size (hidden size x dtype bytes) and at
     1 MiB, verified (one rank a GPU).
Each step runs under a hard timeout in nccl_tune_rank.py's launcher, which kills what has not finished and says
which rank that was. Pure: no I/O here; the module runs the steps.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence

from ansible_collections.moeops.inference.plugins.module_utils._policy import pcie_findings

DTYPES = {"bfloat16": 2, "float16": 2, "float32": 4}
ONE_MIB = 1 << 20
COPY_BYTES = 64 << 20
# The pcie_host role's switch for the remedy of each PCIe host check, for the failure message.
REMEDY_SWITCH = {
    "iommu": "pcie_host_iommu_passthrough",
    "acs": "pcie_host_clear_acs",
    "hmm": "pcie_host_disable_hmm",
    "pcie_port_pm": "pcie_host_port_pm_off",
}


def sizes(hidden_size: int, dtype: str) -> List[Dict[str, Any]]:
    """The all-reduce sizes: one decode step's message (a token's hidden state) and 1 MiB."""
    width = DTYPES[dtype]
    decode = int(hidden_size) * width
    return [{"name": "decode", "bytes": decode, "elements": max(decode // width, 1)},
            {"name": "1MiB", "bytes": ONE_MIB, "elements": ONE_MIB // width}]


def steps(world_size: int, hidden_size: int, dtype: str, backend: str, timeout: int,
          environment: Mapping[str, str], hang_rank: Optional[int] = None) -> List[Dict[str, Any]]:
    """The launcher specs of the gate's steps; [] when there is nothing to prove (fewer than two GPUs)."""
    if world_size < 2:
        return []
    on_gpu = backend == "nccl"
    # The ranks' own collective timeout ends well before the launcher's deadline (a quarter of it: importing PyTorch
    # and starting CUDA take seconds on a loaded machine before a rank's clock starts): a rank left waiting for a
    # peer exits, and the one that never answered is the one still running at the deadline, which is named.
    common = {"world_size": world_size, "timeout_s": timeout, "collective_timeout_s": max(timeout // 4, 5),
              "env": dict(environment)}
    out = []
    if on_gpu:  # gloo runs on CPU ranks: there is no GPU copy to prove
        out.append(dict(common, step="copy", name="copy between every GPU pair", copy_bytes=COPY_BYTES))
    allreduce = dict(common, step="allreduce", name="all-reduce across %d ranks" % world_size, backend=backend,
                     device="cuda" if on_gpu else "cpu", dtype=dtype if on_gpu else "float32",
                     sizes=sizes(hidden_size, dtype if on_gpu else "float32"), warmup=0, iterations=1, inner=1)
    if hang_rank is not None:
        allreduce["hang_rank"] = int(hang_rank)
    out.append(allreduce)
    return out


def copy_outcome(launch: Mapping[str, Any], records: Sequence[Mapping[str, Any]], timeout: int) -> Dict[str, Any]:
    """The copy step from the launcher's record and the copy process's records: passed, detail, pairs."""
    copies = [r for r in records if r.get("event") == "copy"]
    started = [tuple(r["pair"]) for r in records if r.get("event") == "start"]
    done = {tuple(r["pair"]) for r in copies}
    bad = ["GPU %d -> GPU %d" % tuple(r["pair"]) for r in copies if not r.get("correct")]
    pairs = [{"pair": r["pair"], "seconds": r.get("seconds"), "correct": r.get("correct"),
              "peer_access": r.get("peer_access")} for r in copies]
    if launch.get("stuck"):
        hung = [p for p in started if p not in done]
        where = "the copy GPU %d -> GPU %d" % hung[-1] if hung else "the copy process, before its first pair"
        return {"passed": False, "detail": "%s did not finish within %d s (killed)" % (where, timeout), "pairs": pairs}
    if bad:
        return {"passed": False, "detail": "data arrived corrupted: %s" % ", ".join(bad), "pairs": pairs}
    if launch.get("failure"):
        return {"passed": False, "detail": str(launch["failure"]), "pairs": pairs}
    return {"passed": True, "detail": "%d pair(s) copied and verified" % len(copies), "pairs": pairs}


def allreduce_outcome(launch: Mapping[str, Any], per_rank: Mapping[int, Sequence[Mapping[str, Any]]],
                      world_size: int, timeout: int) -> Dict[str, Any]:
    """The all-reduce step: passed, detail, and the slowest rank's time per size."""
    stuck = list(launch.get("stuck") or [])
    if stuck:
        return {"passed": False, "sizes": {},
                "detail": "rank(s) %s did not answer within %d s (killed); the others waited in the collective"
                          % (", ".join(str(r) for r in stuck), timeout)}
    errors, times = [], {}  # type: List[str], Dict[str, float]
    for rank in range(world_size):
        records = per_rank.get(rank) or []
        if not records:
            errors.append("rank %d printed no result" % rank)
        for r in records:
            if r.get("event") == "error":
                errors.append("rank %d: %s" % (rank, r.get("message")))
            elif r.get("event") == "timing":
                if r.get("correct") is False:
                    errors.append("rank %d: the all-reduce of %s gave a wrong sum" % (rank, r.get("size")))
                us = max(float(t) for t in r.get("times_us") or [0.0])
                times[str(r.get("size"))] = max(times.get(str(r.get("size")), 0.0), us)
    if launch.get("failure") and not errors:
        errors.append(str(launch["failure"]))
    if errors:
        return {"passed": False, "sizes": times, "detail": "; ".join(errors)}
    return {"passed": True, "sizes": times,
            "detail": "verified at %s" % ", ".join("%s (%.0f us)" % (k, v) for k, v in sorted(times.items()))}


def likely_cause(gpu_facts: Mapping[str, Any]) -> str:
    """What the PCIe host findings say could cause a failure, with the pcie_host role's switch for each."""
    found = [f for f in pcie_findings.grouped(pcie_findings.facts_findings(gpu_facts)) if f["result"] != "ok"]
    if not found:
        return ("no PCIe host finding points at a cause (gpu_facts' host section: %s); check the BIOS's IOMMU and "
                "ACS settings and NCCL_DEBUG=INFO" % ("read" if gpu_facts.get("host") else "not read"))
    checks = sorted({f["check"] for f in found})
    switches = sorted({REMEDY_SWITCH[c] for c in checks if c in REMEDY_SWITCH})
    return "likely cause, from the PCIe host findings: %s%s" % (
        "; ".join("%s: %s" % (f["check"], f["reason"].split(". Source")[0]) for f in found[:4]),
        "; remedy: the moeops.inference.pcie_host role with %s (docs/pcie-host-facts.md)" % ", ".join(switches)
        if switches else "")
