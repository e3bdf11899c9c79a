"""Compares the engine check's verdicts from the node (stdin: module vllm_engine_check's result as JSON) with the ones
recorded on the same vLLM under the same condition (argv[1]: tests/fixtures/vllm/engine-check-<version>[-no-kernels].json),
row by row: per profile and compute capability the status, the backend, the KV cache dtype, the quantization and the
tensor-parallel verdicts, each as module_utils/_engine/verdict.py reads the script's answer; and vLLM's own
has_flashinfer() (the condition: FlashInfer's kernels, or nvcc and ninja, where vLLM was asked).  Prints the node's table; exit status 1 on any
difference.  Runs on the controller with any Python (the checkout's collection is put on sys.path).
"""
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(ROOT, "collections"))

from ansible_collections.moeops.inference.plugins.module_utils._engine import verdict  # noqa: E402

COLUMNS = ("status", "backend", "kv", "quantization", "tensor_parallel")


def by_row(rows):
    return {(r["profile"], r["compute_capability"]): tuple(r.get(c) for c in COLUMNS) for r in rows}


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        recorded = verdict.interpret(json.load(f))
    node = json.load(sys.stdin)
    want, have = by_row(recorded["rows"]), by_row(node["rows"])
    print(node["table"])
    differences = ["%s on %s: recorded %s, node %s" % (k[0], k[1], want.get(k), have.get(k))
                   for k in sorted(set(want) | set(have)) if want.get(k) != have.get(k)]
    if node.get("vllm") != recorded.get("vllm"):
        differences.insert(0, "vLLM %s on the node, %s recorded" % (node.get("vllm"), recorded.get("vllm")))
    # The condition: whether vLLM had FlashInfer (its kernels, or nvcc and ninja) where it was asked.
    have_fi, want_fi = (node.get("flashinfer") or {}).get("has_flashinfer"), recorded["flashinfer"].get("has_flashinfer")
    if have_fi != want_fi:
        differences.insert(0, "has_flashinfer() %s on the node, %s recorded" % (have_fi, want_fi))
    for line in differences:
        print("DIFFERENT: " + line)
    print("%d rows, %d different" % (len(have), len(differences)))
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main())
