# -*- coding: utf-8 -*-
"""Write a FABRICATED benchmark record beside a real one, for 62-benchmark.sh: a copy of the real record with every
throughput divided by THROUGHPUT_DIV and every latency multiplied by LATENCY_MUL, named
<real record's time>-FABRICATED-<label>.json (after the real one, in the same fingerprint's directory) and marked
"fabricated" inside, so that the gate never takes it for a baseline. Prints the new file's path.

    fabricate.py REAL_RECORD LABEL THROUGHPUT_DIV LATENCY_MUL
"""
import json
import os
import sys

# The record's metrics (module_utils/_engine/benchmark.py, BETTER): higher is better for these, lower for the others.
THROUGHPUTS = ("output_tok_s", "request_per_s", "total_tok_s", "decode_tok_s")
LATENCIES = ("ttft_p50_ms", "ttft_p99_ms", "itl_p50_ms", "itl_p99_ms", "tpot_p50_ms", "tpot_p99_ms", "e2el_p50_ms",
             "e2el_p99_ms")


def main(real, label, throughput_div, latency_mul):
    with open(real, encoding="utf-8") as f:
        doc = json.load(f)
    for entry in doc["scenarios"]:
        metrics = entry["metrics"]
        for key in THROUGHPUTS:
            if metrics.get(key) is not None:
                metrics[key] = metrics[key] / throughput_div
        for key in LATENCIES:
            if metrics.get(key) is not None:
                metrics[key] = metrics[key] * latency_mul
    name = "%s-FABRICATED-%s" % (doc["name"], label)
    doc["name"] = name
    doc["fabricated"] = ("written by tests/integration/62-benchmark.sh from %s: throughputs divided by %s, latencies "
                         "multiplied by %s" % (os.path.basename(real), throughput_div, latency_mul))
    doc.pop("comparison", None)
    path = os.path.join(os.path.dirname(real), name + ".json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=2, sort_keys=True)
    print(path)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4]))
