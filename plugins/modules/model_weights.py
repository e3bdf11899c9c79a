#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, moeops.inference contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: model_weights
short_description: Stage a model's safetensors weights and verify that they are complete
version_added: 0.2.0
description:
  - Makes sure a model directory that vLLM can load is on the node and complete, downloading it from a Hugging Face
    repository (with C(huggingface_hub)), an HTTP mirror or an rsync mirror, or checking a local path.
  - Complete means - C(config.json) is there; the safetensors index (or a single C(model.safetensors)) is there and
    every shard it lists exists; every C(.safetensors) file is exactly as long as its own header says; and every file
    the source announced exists with the size the source announced.
  - Where the expected sizes come from - O(source=hf) the Hub's tree listing of the pinned commit
    (C(/api/models/REPO/tree/COMMIT)); O(source=http) the mirror's C(moeops-weights-manifest.json); O(source=rsync)
    C(rsync --list-only); O(source=local) only the index and the safetensors headers.
  - After a verified download a staging record (O(record)) keeps the source, the pin and the expected sizes, so a
    later run checks the files against it and downloads nothing when they are complete.
  - For O(source=local) it also checks, as O(owner), that every file can be read.
  - Downloads run as O(owner) in a child process; the token reaches it only through its C(HF_TOKEN) environment
    variable, never its arguments. Run it with C(async) and poll M(moeops.inference.model_weights_progress) for the
    bytes done.
author:
  - moeops.inference contributors (@moeops)
requirements:
  - C(huggingface_hub) in the interpreter O(python) for O(source=hf) (the vLLM venv has it).
  - C(setpriv) (util-linux) on the node, to run the download as O(owner).
  - C(rsync) on the node for O(source=rsync).
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: Checks the files and reports C(changed) when a download would happen; downloads nothing.
  diff_mode:
    support: none
  platform:
    platforms: posix
options:
  source:
    description: Where the weights come from.
    type: str
    choices: [hf, local, http, rsync]
    required: true
  repo_id:
    description: Hugging Face repository id (C(org/name)); required with O(source=hf).
    type: str
  revision:
    description:
      - Branch, tag or commit to pin for O(source=hf); null means C(main).
      - It is resolved to a commit once; the staging record keeps that commit, so an unpinned model is not re-checked
        against the Hub on later runs (pin a commit to move, or set O(refresh=true)).
    type: str
  token:
    description: Hugging Face token for gated or private repositories; passed to the download only through C(HF_TOKEN).
    type: str
  endpoint:
    description: Hub endpoint (C(HF_ENDPOINT)), for a Hub mirror; null means huggingface_hub's default.
    type: str
  hf_home:
    description: The Hugging Face cache (C(HF_HOME)) the vLLM unit uses; O(source=hf) downloads into it.
    type: path
    default: /var/cache/vllm/huggingface
  python:
    description: Interpreter with huggingface_hub for O(source=hf), and the one running the HTTP download.
    type: path
    default: /opt/vllm/engine/bin/python
  path:
    description: The model directory for O(source=local).
    type: path
  url:
    description:
      - Mirror for O(source=http) (base URL of the model directory, serving C(moeops-weights-manifest.json)) or
        O(source=rsync) (C(rsync://host/module/path) or C(host:path)).
    type: str
  dest:
    description: Directory the mirror's files go to (O(source=http) and O(source=rsync)); created, owned by O(owner).
    type: path
  owner:
    description: The user downloads run as and that owns the files (the vLLM service user).
    type: str
    default: vllm
  group:
    description: Group of the downloaded files.
    type: str
    default: vllm
  record:
    description: Absolute path of the staging record (JSON, root-owned) for this model.
    type: path
    required: true
  progress_file:
    description: Absolute path where the download's state and expected total are kept for M(moeops.inference.model_weights_progress).
    type: path
  fetch:
    description: V(false) only checks and reports (never downloads); V(true) downloads what is missing.
    type: bool
    default: true
  refresh:
    description: Ignore the staging record and resolve and check against the source again (huggingface_hub and rsync
      still skip files that are there).
    type: bool
    default: false
  allow_patterns:
    description: Only the repository files matching these globs (O(source=hf)); empty means all.
    type: list
    elements: str
    default: []
  ignore_patterns:
    description: Repository files not to download (O(source=hf)).
    type: list
    elements: str
    default: []
  max_workers:
    description: Parallel file downloads of huggingface_hub.
    type: int
    default: 8
  ca_bundle:
    description: CA bundle for HTTPS (C(SSL_CERT_FILE) of the download), for example behind a TLS-intercepting proxy.
    type: path
  timeout:
    description: Seconds without data before an HTTP request gives up.
    type: int
    default: 60
notes:
  - Resuming is the source's own - huggingface_hub resumes its C(.incomplete) blobs, the HTTP download its C(.part)
    files, rsync keeps partial files in C(.rsync-partial).
seealso:
  - module: moeops.inference.model_weights_progress
"""

EXAMPLES = r"""
- name: Check whether Kimi-K2.5 is staged (no download)
  moeops.inference.model_weights:
    source: hf
    repo_id: moonshotai/Kimi-K2.5
    record: /var/lib/moeops/model_weights/kimi-k2.5-int4.json
    fetch: false
  register: staged

- name: Download it as the vllm user in the background
  moeops.inference.model_weights:
    source: hf
    repo_id: moonshotai/Kimi-K2.5
    revision: 0123456789abcdef0123456789abcdef01234567
    token: "{{ hf_token }}"
    record: /var/lib/moeops/model_weights/kimi-k2.5-int4.json
    progress_file: /var/lib/moeops/model_weights/kimi-k2.5-int4.progress.json
  no_log: true
  async: 86400
  poll: 0
  when: not staged.complete

- name: Stage from the lab's HTTP mirror
  moeops.inference.model_weights:
    source: http
    url: http://mirror.lab/models/Kimi-K2.5/
    dest: /var/cache/vllm/models/kimi-k2.5-int4
    record: /var/lib/moeops/model_weights/kimi-k2.5-int4.json
"""

RETURN = r"""
complete:
  description: Whether the model directory is complete (after the download, if one ran).
  returned: always
  type: bool
path:
  description: The directory vLLM should load (for O(source=hf) the snapshot of the pinned commit); null if unknown yet.
  returned: always
  type: str
  sample: /var/cache/vllm/huggingface/hub/models--moonshotai--Kimi-K2.5/snapshots/0123456789abcdef0123456789abcdef01234567
commit:
  description: The commit the O(source=hf) snapshot is of.
  returned: when known
  type: str
problems:
  description: Why the directory is not complete, one line each.
  returned: always
  type: list
  elements: str
  sample: ["missing: model-00002-of-00064.safetensors"]
missing:
  description: Files the index, config or source lists that are absent.
  returned: always
  type: list
  elements: str
wrong_size:
  description: Files whose size differs from what their header or the source says (path, size, expected, source).
  returned: always
  type: list
  elements: dict
expected_sizes_from:
  description: Where the expected sizes came from.
  returned: always
  type: str
  sample: hub tree listing
downloaded:
  description: Whether a download ran.
  returned: always
  type: bool
bytes_fetched:
  description: Bytes added on disk by the download (0 when none ran).
  returned: always
  type: int
total_bytes:
  description: Bytes of the model directory.
  returned: always
  type: int
files:
  description: Number of files in the model directory.
  returned: always
  type: int
config:
  description: The model's C(config.json) (empty when the directory is not complete).
  returned: always
  type: dict
unchecked:
  description: What check mode on a fresh node could not check for a local path (the service user's reading).
  returned: when O(source=local) in check mode before the service user and the venv exist
  type: str
  version_added: 0.6.0
"""

import json
import os
import pwd
import grp
import time

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.urls import open_url
from ansible_collections.moeops.inference.plugins.module_utils._weights import model_weights as mw
from ansible_collections.moeops.inference.plugins.module_utils._weights.fetch import (
    HF_FETCH_PROGRAM, HTTP_FETCH_PROGRAM, LOCAL_READ_PROGRAM)
from ansible_collections.moeops.inference.plugins.module_utils._common import state_files, urls

SOURCE_SIZES = {"hf": "hub tree listing", "http": "mirror manifest (" + mw.MIRROR_MANIFEST_NAME + ")",
                "rsync": "rsync --list-only", "local": "safetensors headers and index only"}


# How the record and the progress file have always been written: one-space indent, no trailing newline.
JSON_FORMAT = {"indent": 1, "newline": False}


def _fail(module, msg, **result):
    """fail_json with the credentials of any URL in the message masked (a mirror URL may carry them)."""
    module.fail_json(msg=urls.mask_userinfo(msg), **result)


def _location(p):
    """Where the weights come from, as shown and recorded: a mirror URL's credentials masked (urls.mask_userinfo)."""
    return urls.mask_userinfo({"hf": p["repo_id"], "local": p["path"], "http": p["url"], "rsync": p["url"]}[p["source"]])


def _child_env(p):
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": p["_home"],
           "HF_HOME": p["hf_home"], "HF_HUB_DISABLE_TELEMETRY": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1"}
    if p["token"]:
        env["HF_TOKEN"] = p["token"]
    if p["endpoint"]:
        env["HF_ENDPOINT"] = p["endpoint"]
    if p["ca_bundle"]:
        env["SSL_CERT_FILE"] = p["ca_bundle"]
    return env


def _as_owner(p, argv):
    """argv run as the owner: setpriv (util-linux) drops to its uid and gid with no supplementary groups."""
    return ["setpriv", "--reuid=%d" % p["_uid"], "--regid=%d" % p["_gid"], "--clear-groups", "--"] + argv


def _run_child(module, p, argv, request, progress_state=None):
    """Runs argv as the owner with the request on stdin; returns its last JSON line (its 'done' event)."""
    rc, out, err = module.run_command(_as_owner(p, argv), data=json.dumps(request) if request is not None else None,
                                      environ_update=_child_env(p), cwd=p["_home"])
    if rc != 0:
        if progress_state is not None:
            progress_state.update(state="failed", finished=time.time())
            state_files.write_json(p["progress_file"], progress_state, **JSON_FORMAT)
        tail = (err or out)[-3000:].strip()
        if p["token"]:
            tail = tail.replace(p["token"], "********")
        _fail(module, "the %s download failed (exit %d), last output: %s" % (p["source"], rc, tail),
              complete=False, downloaded=True)
    events = []
    for line in out.splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict):
            events.append(event)
    return events[-1] if events else {}


def _download(module, p, argv, request, measure, total):
    """The download itself, with the progress file that model_weights_progress reads; returns bytes fetched."""
    baseline = mw.bytes_on_disk(measure) if os.path.isdir(measure) else 0
    state = {"state": "running", "pid": os.getpid(), "started": time.time(), "baseline": baseline,
             "total": total or None, "measure": measure, "source": p["source"], "location": _location(p)}
    if p["progress_file"]:
        state_files.write_json(p["progress_file"], state, **JSON_FORMAT)
    done = _run_child(module, p, argv, request, state if p["progress_file"] else None)
    if p["progress_file"]:
        state.update(state="verifying", finished=time.time())
        state_files.write_json(p["progress_file"], state, **JSON_FORMAT)
    return done, (mw.bytes_on_disk(measure) if os.path.isdir(measure) else 0) - baseline


def _mirror_sizes(module, p):
    if p["source"] == "http":
        url = p["url"].rstrip("/") + "/" + mw.MIRROR_MANIFEST_NAME
        try:
            text = open_url(url, timeout=p["timeout"], ca_path=p["ca_bundle"]).read().decode("utf-8")
            return mw.parse_mirror_manifest(text)
        except mw.WeightsError as exc:
            _fail(module, "%s: %s" % (url, exc))
        except Exception as exc:  # pylint: disable=broad-except
            _fail(module, "cannot read the mirror manifest %s: %s" % (url, exc))
    rc, out, err = module.run_command(["rsync", "--list-only", "--recursive", p["url"].rstrip("/") + "/"])
    if rc != 0:
        _fail(module, "rsync --list-only %s failed (exit %d): %s" % (p["url"], rc, err.strip()))
    try:
        return mw.parse_rsync_listing(out)
    except mw.WeightsError as exc:
        _fail(module, "%s: %s" % (p["url"], exc))


def _fetch(module, p):
    """Downloads from the source; returns (directory, {path: size}, commit, bytes fetched)."""
    if p["source"] == "hf":
        request = {k: p[k] for k in ("repo_id", "revision", "allow_patterns", "ignore_patterns", "max_workers")}
        plan = _run_child(module, p, [p["python"], "-c", HF_FETCH_PROGRAM], dict(request, step="plan"))
        request.update(step="download", commit=plan.get("commit"), files=plan.get("files") or {})
        done, fetched = _download(module, p, [p["python"], "-c", HF_FETCH_PROGRAM], request,
                                  os.path.join(mw.hf_repo_folder(p["hf_home"], p["repo_id"]), "blobs"),
                                  sum(request["files"].values()))
        return done.get("path"), request["files"], plan.get("commit"), fetched
    sizes = _mirror_sizes(module, p)
    if p["source"] == "http":
        request = {"url": p["url"], "dest": p["dest"], "files": sizes, "timeout": p["timeout"]}
        argv = [p["python"], "-c", HTTP_FETCH_PROGRAM]
    else:
        request = None
        argv = ["rsync", "--recursive", "--links", "--times", "--partial", "--partial-dir=.rsync-partial",
                "--chmod=D0755,F0644", p["url"].rstrip("/") + "/", p["dest"].rstrip("/") + "/"]
    done, fetched = _download(module, p, argv, request, p["dest"], sum(sizes.values()))
    return p["dest"], sizes, None, fetched


def main():
    module = AnsibleModule(
        argument_spec=dict(
            source=dict(type="str", required=True, choices=["hf", "local", "http", "rsync"]),
            repo_id=dict(type="str"),
            revision=dict(type="str"),
            token=dict(type="str", no_log=True),
            endpoint=dict(type="str"),
            hf_home=dict(type="path", default="/var/cache/vllm/huggingface"),
            python=dict(type="path", default="/opt/vllm/engine/bin/python"),
            path=dict(type="path"),
            url=dict(type="str"),
            dest=dict(type="path"),
            owner=dict(type="str", default="vllm"),
            group=dict(type="str", default="vllm"),
            record=dict(type="path", required=True),
            progress_file=dict(type="path"),
            fetch=dict(type="bool", default=True),
            refresh=dict(type="bool", default=False),
            allow_patterns=dict(type="list", elements="str", default=[]),
            ignore_patterns=dict(type="list", elements="str", default=[]),
            max_workers=dict(type="int", default=8),
            ca_bundle=dict(type="path"),
            timeout=dict(type="int", default=60),
        ),
        required_if=[("source", "hf", ["repo_id"]), ("source", "local", ["path"]),
                     ("source", "http", ["url", "dest"]), ("source", "rsync", ["url", "dest"])],
        supports_check_mode=True,
    )
    p = dict(module.params)
    # The result's invocation (shown at -vvv, kept in async result files) carries the mirror URL with its credentials
    # masked; the download itself uses it as given.
    module.params["url"] = urls.mask_userinfo(module.params["url"])
    try:
        p["_home"] = pwd.getpwnam(p["owner"]).pw_dir
        p["_uid"] = pwd.getpwnam(p["owner"]).pw_uid
        p["_gid"] = grp.getgrnam(p["group"]).gr_gid
    except KeyError as exc:
        if not module.check_mode:
            module.fail_json(msg="owner %s or group %s does not exist on the node: %s" % (p["owner"], p["group"], exc))
        # Check mode on a fresh node: the vllm role creates the service user in the same run.
        p.update(_home="/", _uid=None, _gid=None)
    if not os.path.isdir(p["_home"]):
        p["_home"] = "/"
    identity = mw.source_identity(p["source"], _location(p), p["revision"],
                                  p["allow_patterns"] + ["!" + x for x in p["ignore_patterns"]])
    result = dict(changed=False, downloaded=False, bytes_fetched=0, commit=None, config={},
                  expected_sizes_from=SOURCE_SIZES[p["source"]])

    # 1. What is there already.
    if p["source"] == "local":
        path, expected = p["path"], None
    else:
        record = None if p["refresh"] else state_files.read_json(p["record"])
        if mw.record_matches(record, identity):
            path, expected = record["path"], record["files"]
            result["commit"] = record.get("commit")
        else:
            path, expected = (p["dest"] if p["source"] != "hf" else None), None
    check = mw.check_completeness(path, expected) if path and (expected is not None or p["source"] == "local") else None
    if check is None:
        check = {"complete": False, "problems": ["not staged yet from %s %s" % (p["source"], _location(p))],
                 "shards": [], "missing": [], "wrong_size": [], "total_bytes": 0, "files": 0}

    # 2. Download what is missing (never for a local path).
    if not check["complete"] and p["source"] != "local" and p["fetch"]:
        result["changed"] = True
        if module.check_mode:
            module.exit_json(path=path, **dict(result, **check))
        if p["dest"]:
            if not os.path.isdir(p["dest"]):
                os.makedirs(p["dest"], mode=0o755)
            os.chown(p["dest"], p["_uid"], p["_gid"])
        path, expected, commit, fetched = _fetch(module, p)
        result.update(downloaded=True, bytes_fetched=max(fetched, 0), commit=commit)
        if not path:
            module.fail_json(msg="the download finished without naming the model directory", **result)
        check = mw.check_completeness(path, expected)
        if check["complete"]:
            record = dict(identity, path=path, files=expected, commit=commit, staged=time.time())
            state_files.write_json(p["record"], record, **JSON_FORMAT)
        if p["progress_file"]:
            state = state_files.read_json(p["progress_file"]) or {}
            state.update(state="done" if check["complete"] else "failed", finished=time.time())
            state_files.write_json(p["progress_file"], state, **JSON_FORMAT)

    if p["source"] == "local" and check["complete"] and module.check_mode and (
            p["_uid"] is None or not os.path.exists(p["python"])):
        # Check mode on a fresh node: neither the service user nor the venv that reads as it exists yet.
        result["unchecked"] = "whether %s can read the files: the service user or %s does not exist yet" % (
            p["owner"], p["python"])
    elif p["source"] == "local" and check["complete"]:
        # Checked as root above; vLLM reads as the service user.
        done = _run_child(module, p, [p["python"], "-c", LOCAL_READ_PROGRAM], {"path": path})
        if done.get("unreadable"):
            check = dict(check, complete=False,
                         problems=["%s cannot read %s" % (p["owner"], f) for f in done["unreadable"]])
    result.update(check, path=path)
    if check["complete"]:
        try:
            result["config"] = mw.load_config(path)
        except mw.WeightsError as exc:
            module.fail_json(msg=str(exc), **result)
    elif p["fetch"] or p["source"] == "local":
        module.fail_json(msg="model weights in %s are not complete (expected sizes from %s): %s" % (
            path, SOURCE_SIZES[p["source"]], "; ".join(check["problems"])), **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
