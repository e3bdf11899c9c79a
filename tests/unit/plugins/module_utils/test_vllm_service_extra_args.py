# -*- coding: utf-8 -*-
"""vllm_service_extra_args judged the way vLLM reads them: the shipped option table (_roles/vllm_service/serve_table.py)
is the recording of vLLM 0.33.0's own parser (tests/fixtures/vllm/serve-options-0.33.0.json), the reader
(serve_args.py) agrees with what that parser did on every recorded probe, and the role refuses an option by the dest
it sets, whatever the spelling."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from ansible_collections.moeops.inference.plugins.module_utils._common.plan import plan_role
from ansible_collections.moeops.inference.plugins.module_utils._common.specs import spec_roles
from ansible_collections.moeops.inference.plugins.module_utils._roles.vllm_service import inputs as rules
from ansible_collections.moeops.inference.plugins.module_utils._roles.vllm_service import serve_args, serve_table
from conftest import role_spec

ROOT = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..")
FIXTURES = os.path.join(ROOT, "tests", "fixtures", "vllm")
RECORDING = os.path.join(FIXTURES, "serve-options-0.33.0.json")
SHIPPED = os.path.join(ROOT, "plugins", "module_utils", "_roles", "vllm_service", "serve_table.py")

with open(RECORDING) as f:
    RECORDED = json.load(f)


def problems(args):
    values = {"vllm_service_profile": "kimi_k25", "vllm_service_extra_args": args}
    return plan_role("vllm_service", role_spec("vllm_service"), values, sorted(values), spec_roles(), {},
                     plan=False)["problems"]


def test_the_shipped_table_is_the_recording():
    assert RECORDED["vllm"] == serve_table.VLLM_VERSION == "0.33.0"
    assert (RECORDED["wheel"], RECORDED["sha256"]) == (serve_table.WHEEL, serve_table.WHEEL_SHA256)
    assert RECORDED["allow_abbrev"] is serve_table.ALLOW_ABBREV is True and RECORDED["prefix_chars"] == "-"
    assert serve_table.OPTIONS == {k: (v["dest"], v["nargs"]) for k, v in RECORDED["options"].items()}
    assert len(serve_table.OPTIONS) > 400 and serve_table.OPTIONS["--host"] == ("host", None)


def test_the_shipped_table_is_what_the_generator_writes():
    out = subprocess.run([sys.executable, os.path.join(FIXTURES, "serve_table.py"), RECORDING], check=True,
                         stdout=subprocess.PIPE, universal_newlines=True).stdout
    with open(SHIPPED) as f:
        assert f.read() == out


@pytest.mark.parametrize("probe", RECORDED["probes"], ids=lambda p: " ".join(p["args"]))
def test_the_reader_agrees_with_vllms_parser(probe):
    """What vLLM's parser set (the dests that changed) or that it refused, for each recorded probe."""
    found = serve_args.read(probe["args"])
    errors = [f for f in found if f["error"]]
    if "error" in probe:
        assert errors, (probe, found)
    else:
        assert not errors, (probe, found)
        assert sorted(f["dest"] for f in found) == probe["dests"]


def test_every_refused_dest_is_one_vllm_has():
    dests = {dest for dest, _nargs in serve_table.OPTIONS.values()}
    assert set(rules.DEDICATED_ARGS) <= dests and set(rules.REFUSED_ARGS) <= dests


DEDICATED = "set %s instead (given here, it would silently override the role's own value)"


@pytest.mark.parametrize("args, message", [
    (["--hos", "0.0.0.0"], "[0] --hos (vLLM reads it as --host): " + DEDICATED % "vllm_service_host"),
    (["--ho", "0.0.0.0"], "[0] --ho (vLLM reads it as --host): " + DEDICATED % "vllm_service_host"),
    (["--enforce-eager", "--host=0.0.0.0"], "[1] --host: " + DEDICATED % "vllm_service_host"),
    (["--hos.x=1"], "[0] --hos.x (vLLM reads it as --host): " + DEDICATED % "vllm_service_host"),
    (["--api_key", "sk-secret"], "[0] --api_key (vLLM reads it as --api-key): " + DEDICATED % "vllm_service_api_key"
     + "; the value is not shown"),
    (["--api-k=sk-secret"], "[0] --api-k (vLLM reads it as --api-key): " + DEDICATED % "vllm_service_api_key"
     + "; the value is not shown"),
    (["--por", "9000"], "[0] --por (vLLM reads it as --port): " + DEDICATED % "vllm_service_port"),
    (["--tensor_parallel_size=2"], "[0] --tensor_parallel_size (vLLM reads it as --tensor-parallel-size): "
     + DEDICATED % "vllm_service_tensor_parallel_size"),
    (["--max-model", "100"], "[0] --max-model (vLLM reads it as --max-model-len): "
     + DEDICATED % "vllm_service_max_model_len"),
    (["--config", "/etc/x.yaml"], "[0] --config is refused: vLLM reads further options from "
     "that file, which no rule here sees (--host and --api-key among them); give them in vllm_service_extra_args"),
    (["--conf", "/etc/x.yaml"], "[0] --conf is ambiguous in vLLM 0.33.0: it could be --config, --config-format "
     "(argparse refuses it)"),
    (["--grpc-port", "9001"], "[0] --grpc-port is refused: vLLM would open a second listener on that port, outside "
     "vllm_service_host and the front"),
    (["-h"], "[0] -h is refused: vLLM prints its help and exits: the service never starts"),
    (["--h", "x"], "[0] --h is ambiguous in vLLM 0.33.0: it could be --h11-max-header-count, "
     "--h11-max-incomplete-event-size, --headless, --help, --hf-config-path, --hf-overrides, --hf-token, --host "
     "(argparse refuses it)"),
    (["--no-such-option"], "[0] --no-such-option is not an option of vLLM 0.33.0's `vllm serve` (unrecognized arguments)"),
    (["--no-such=sk-secret"], "[0] --no-such is not an option of vLLM 0.33.0's `vllm serve` (unrecognized arguments)"),
    (["--max-num-seqs"], "[0] --max-num-seqs: vLLM refuses it: expected one argument"),
    (["--enforce-eager=yes"], "[0] --enforce-eager: vLLM refuses it: takes no value (argparse: ignored explicit "
     "argument)"),
    (["--enforce-eager", "sk-secret"], "[1] is a value that belongs to no option: vLLM refuses it (unrecognized "
     "arguments); the value is not shown"),
])
def test_extra_args_are_judged_as_vllm_reads_them(args, message):
    got = problems(args)
    assert got == ["vllm_service: vllm_service_extra_args" + message]
    assert "sk-secret" not in got[0]


@pytest.mark.parametrize("args", [
    ["--max-num-seqs", "64"], ["--max_num_seqs=64"], ["-O3"], ["--enforce-eager", "--enable-prefix-caching"],
    ["--no-enable-prefix-caching"], ["--mm-encoder-tp-mode", "data"], ["--max-num-batched-tokens", "8192"],
    ["--kv-cache-dtype", "fp8"],
    ["--allowed-media-domains", "a.example", "b.example", "--enforce-eager"],
])
def test_ordinary_extra_args_pass(args):
    assert problems(args) == []
