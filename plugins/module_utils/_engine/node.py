# -*- coding: utf-8 -*-
# Copyright: (c) 2026, moeops.inference contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The engine check on the managed node: what module vllm_engine_check does, apart from Ansible's argument handling.

It builds the request for _engine/check.py from the profiles as the unit would run them (verdict.build_request, with
the KV cache dtype the unit's command line gives vLLM: model_profile.kv_cache_dtype_in_effect), runs that script with
the vLLM venv's Python, and turns its answer into problems, notes and table rows (verdict.interpret).

The answer is kept in a record named by a digest of the request, the script and the venv's installed distributions:
the same question to the same installed vLLM gets it back without importing vLLM again (that costs 15 s to a minute),
and any change to the venv, the script or the profile asks again.  The imported modules' bytecode is kept beside the
records, never in the venv.  Standard library only; runs on the node.
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import inspect
import json
import os
import shutil
import tempfile
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.moeops.inference.plugins.module_utils._common import state_files
from ansible_collections.moeops.inference.plugins.module_utils._engine import check as check_script
from ansible_collections.moeops.inference.plugins.module_utils._engine import verdict
from ansible_collections.moeops.inference.plugins.module_utils._policy import model_profile

SCRIPT_NAME = "moeops_engine_check.py"
RECORD_SCHEMA = 1
# The script's environment on top of the unit's: no GPU is ever touched (a backend module that allocates on import then
# counts as not importable, as it does without a driver) and nothing is downloaded.
ENVIRONMENT = {"CUDA_VISIBLE_DEVICES": "", "HF_HUB_OFFLINE": "1"}
# systemd's default PATH for a service without Environment=PATH: what vllm.service runs vLLM with.  vLLM's answers
# depend on it (FlashInfer is off unless its kernels are installed or nvcc and ninja are on PATH), so the script is
# asked with it, never with the module's own PATH.
SYSTEMD_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin"
# Started through env -i: nothing of the module's environment (a login shell's PATH, CUDA_HOME, VLLM_*) reaches vLLM.
ENV_COMMAND = "/usr/bin/env"
# Where the imported modules' bytecode goes, under the records' directory: never into the venv.  Importing vLLM took
# 44 s with the bytecode written and 17 s with it there, against 56 s without it (2 busy cores, vLLM 0.33.0).
BYTECODE_DIR = "bytecode"

RunCommand = Callable[..., Tuple[int, str, str]]


def request_for(profiles: Sequence[Mapping[str, Any]], ccs: Sequence[str],
                tensor_parallel_sizes: Optional[Sequence[int]], extra_args: Sequence[str]) -> Dict[str, Any]:
    """The request: each profile ({name, profile, file, config}) on each of `ccs` it admits, each capability as a host
    of only that capability runs it (its constraints applied), with the KV cache dtype the unit's command line would
    give vLLM (`extra_args`: vllm_service_extra_args), at `tensor_parallel_sizes` (else the profile's or 1, 2, 4, 8)."""
    by_name = {str(p["name"]): (str(p.get("file") or p["name"]), p["profile"]) for p in profiles}
    configs = {str(p["name"]): p["config"] for p in profiles if p.get("config")}
    request = verdict.build_request(by_name, configs, [str(c) for c in ccs])
    for spec in request["profiles"]:
        profile = by_name[spec["profile"]][1]
        for check in spec["checks"]:
            check["kv_cache_dtype"], check["kv_cache_dtype_key"] = model_profile.kv_cache_dtype_in_effect(
                profile, [check["compute_capability"]], extra_args)
            if tensor_parallel_sizes:
                check["tensor_parallel_sizes"] = [int(t) for t in tensor_parallel_sizes]
    return request


def venv_distributions(python: str) -> List[str]:
    """The *.dist-info names in the site-packages of the venv `python` belongs to (<venv>/bin/python): every installed
    distribution and its version.  Empty when `python` is not a venv's."""
    venv = os.path.dirname(os.path.dirname(python))
    return sorted(os.path.basename(p) for p in glob.glob(os.path.join(venv, "lib", "python3*", "site-packages",
                                                                      "*.dist-info")))


def record_name(python: str, request: Mapping[str, Any], distributions: Sequence[str],
                unit_environment: Optional[Mapping[str, str]] = None) -> str:
    """The record's file name: a digest of everything the answer depends on (the unit's environment too)."""
    digest = hashlib.sha256(json.dumps({
        "schema": RECORD_SCHEMA, "python": python, "distributions": list(distributions), "request": request,
        "environment": dict(unit_environment or {}),
        "script": hashlib.sha256(inspect.getsource(check_script).encode("utf-8")).hexdigest(),
    }, sort_keys=True).encode("utf-8")).hexdigest()
    return "engine-check-%s.json" % digest[:32]


@contextlib.contextmanager
def script_file() -> Iterator[str]:
    """_engine/check.py's source in a fresh temporary directory (removed on the way out, also when the module exits)."""
    workdir = tempfile.mkdtemp(prefix="moeops-engine-check-")
    try:
        path = os.path.join(workdir, SCRIPT_NAME)
        with open(path, "w", encoding="utf-8") as f:
            f.write(inspect.getsource(check_script))
        yield path
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def unit_environment(given: Optional[Mapping[str, Any]]) -> Dict[str, str]:
    """The environment vllm.service gives vLLM: its Environment= values (`given`, the module's `environment`) over
    systemd's default PATH."""
    env = {"PATH": SYSTEMD_PATH}
    env.update((str(k), str(v)) for k, v in (given or {}).items())
    return env


def environment(bytecode_dir: Optional[str], unit_env: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
    """The script's whole environment: the unit's (`unit_env`, else systemd's PATH alone), ENVIRONMENT, and the
    bytecode in `bytecode_dir` (None: written nowhere)."""
    env = unit_environment(unit_env)
    env.update(ENVIRONMENT)
    if bytecode_dir:
        # Empty counts as unset for Python: a PYTHONDONTWRITEBYTECODE inherited from the caller would keep none.
        env.update(PYTHONPYCACHEPREFIX=bytecode_dir, PYTHONDONTWRITEBYTECODE="")
    else:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def command(python: str, path: str, env: Mapping[str, str]) -> List[str]:
    """The script's argv: through `env -i`, so that its environment is exactly `env`.  The unit's Environment= values
    show in the argv for the check's seconds; the unit file itself is world-readable, and secrets are not among them
    (they are in the unit's EnvironmentFile)."""
    return [ENV_COMMAND, "-i"] + ["%s=%s" % item for item in sorted(env.items())] + [python, path]


def ask_engine(run_command: RunCommand, python: str, request: Mapping[str, Any],
               bytecode_dir: Optional[str] = None, unit_env: Optional[Mapping[str, str]] = None) -> Dict[str, Any]:
    """Runs the script with `python` on `request` in the unit's environment: its record, or {'error': ...} with the
    end of what it printed.  `run_command` is AnsibleModule.run_command."""
    with script_file() as path:
        rc, out, err = run_command(command(python, path, environment(bytecode_dir, unit_env)),
                                   data=json.dumps(request, sort_keys=True), cwd=os.path.dirname(path))
    output = verdict.parse_output(out)
    if output.get("error") and rc != 3:  # 3: the script named the missing vLLM symbols itself
        output["error"] = "%s (exit status %s%s)" % (output["error"], rc, "; stderr: " + err.strip()[-600:]
                                                     if (err or "").strip() else "")
    return output


def engine_check(params: Mapping[str, Any], run_command: RunCommand, check_mode: bool) -> Dict[str, Any]:
    """Everything module vllm_engine_check returns, with 'failed' and 'msg'.  `params` are its options."""
    python = params["python"]
    request = request_for(params["profiles"], params["compute_capabilities"], params.get("tensor_parallel_sizes"),
                          params.get("extra_args") or [])
    result: Dict[str, Any] = {"changed": False, "failed": False, "msg": "", "checked": False, "cached": False,
                              "record": "", "vllm": None, "problems": [], "notes": [], "rows": [], "table": "",
                              "request": request, "flashinfer": {}}
    if not any(spec["checks"] for spec in request["profiles"]):
        result["notes"] = ["not checked by the engine: no profile admits compute capability %s (min_compute_capability)"
                           % ", ".join(map(str, params["compute_capabilities"]))]
        result["msg"] = result["notes"][0]
        return result
    if not os.access(python, os.X_OK):
        why = "%s does not exist or cannot be run: the vllm role installs the vLLM venv first" % python
        if check_mode:  # a fresh node in check mode: the venv is not there yet, nothing to ask
            result["notes"] = ["not checked by the engine: %s (check mode)" % why]
            result["msg"] = result["notes"][0]
        else:
            result.update(failed=True, msg="the engine check did not run: " + why, problems=[why])
        return result
    distributions = venv_distributions(python)
    unit_env = unit_environment(params.get("environment"))
    cache_dir = params.get("cache_dir") if params.get("cache") else None
    # Without the venv's distribution list the digest could not see an upgrade: no record then.
    path = (os.path.join(cache_dir, record_name(python, request, distributions, unit_env))
            if cache_dir and distributions else "")
    output = None
    if path:
        doc = state_files.read_json(path)
        if isinstance(doc, dict) and isinstance(doc.get("output"), dict):
            output, result["cached"] = doc["output"], True
    if output is None:
        keep = bool(cache_dir) and not check_mode
        if keep and not os.path.isdir(cache_dir):
            os.makedirs(cache_dir, mode=0o755)
        output = ask_engine(run_command, python, request, os.path.join(cache_dir, BYTECODE_DIR) if keep else None,
                            unit_env)
        if path and keep and not output.get("error"):
            state_files.write_json(path, {"python": python, "vllm": output.get("vllm"), "output": output})
    result["record"] = path
    found = verdict.interpret(output)
    result["flashinfer"] = found.get("flashinfer") or {}
    result.update(checked=not output.get("error"), vllm=found.get("vllm"), problems=found["problems"],
                  notes=found["notes"], rows=found["rows"], table=verdict.table(found) if found["rows"] else "")
    if output.get("missing"):
        result["missing"] = list(output["missing"])
    if found["problems"]:
        result.update(failed=True, msg="vLLM %s refuses what this deploy would run: %s" % (
            found.get("vllm") or "(unknown version)", "; ".join(found["problems"])))
    else:
        result["msg"] = "vLLM %s takes it: %s" % (found.get("vllm"), "; ".join(
            "%s on %s: %s, KV %s" % (r["profile"], r["compute_capability"], r["backend"], r["kv"]) for r in found["rows"]))
    return result
