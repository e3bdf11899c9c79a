# -*- coding: utf-8 -*-
"""Shared fixtures of the unit tests, and the collection loader that lets plain `pytest tests/unit` import
`ansible_collections.moeops.inference...` from this checkout."""
from __future__ import annotations

import glob
import json
import os
import sys

import pytest
import yaml


def pytest_configure(config):
    """Install ansible-core's collection loader before any test module is imported, as `ansible-test units` does.

    pytest.ini puts collections/ (whose ansible_collections/moeops/inference links to the checkout) and tests/unit on
    sys.path. Without the loader, modules imported as a plain PEP 420 namespace first make a later
    init_plugin_loader() fail with "collection metadata was not loaded for collection moeops.inference", which
    breaks the filter_loader and Templar based tests. ansible-test's own plugin cannot be used: it insists that the
    test files live under the collections path. Test modules and this conftest keep pytest's assert rewriting."""
    from ansible.utils.collection_loader._collection_finder import (
        _AnsibleCollectionFinder, _AnsibleCollectionPkgLoaderBase)
    if any(type(h).__name__ == "_AnsibleCollectionFinder" for h in sys.meta_path):
        return
    hooks = [h for h in sys.meta_path if type(h).__name__ == "AssertionRewritingHook"]
    if hooks:
        hook, plain = hooks[0], _AnsibleCollectionPkgLoaderBase.exec_module

        def exec_module(self, module):
            name = getattr(self, "_package_to_load", "") or ""
            if not self._redirect_module and (name == "conftest" or name.startswith("test_")):
                return hook.exec_module(module)
            return plain(self, module)

        _AnsibleCollectionPkgLoaderBase.exec_module = exec_module
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    _AnsibleCollectionFinder(paths=[os.path.join(root, "collections")])._install()


FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "gpu")
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# The collection's model profiles: profiles/<name>.yml, each file the profile mapping itself.
PROFILES = os.path.join(REPO, "profiles")
# The roles that have argument specs, sorted.
SPEC_ROLES = sorted(p.split(os.sep)[-3] for p in glob.glob(os.path.join(REPO, "roles", "*", "meta", "argument_specs.yml")))


def load_json(*parts):
    with open(os.path.join(FIXTURES, *parts)) as f:
        return json.load(f)


def role_spec(role):
    """The options of a role's main entry point, from its meta/argument_specs.yml."""
    with open(os.path.join(REPO, "roles", role, "meta", "argument_specs.yml")) as f:
        return yaml.safe_load(f)["argument_specs"]["main"]["options"]


def role_defaults(role):
    """A role's defaults/main.yml, with the templated ones left out (a test sets what it needs)."""
    with open(os.path.join(REPO, "roles", role, "defaults", "main.yml")) as f:
        return {k: v for k, v in (yaml.safe_load(f) or {}).items() if not (isinstance(v, str) and "{{" in v)}


# The model the tests' deploys name: vllm_service_profile has no default (the roles refuse it unset), so a test that
# plans a role declaring it names one, Kimi-K2.5 unless it says otherwise (or passes a loaded profile in the context).
NAMED_PROFILE = "kimi_k25"


def role_inputs(role):
    """A role's defaults (role_defaults) with the model profile named, as every deploy names it: what a role sees in a
    play that sets nothing else."""
    values = role_defaults(role)
    if "vllm_service_profile" in values:
        values["vllm_service_profile"] = NAMED_PROFILE
    return values


def role_result(role, ctx, **values):
    """A role's plan as its check's role_plan step works it out: the role's defaults and the named profile
    (role_inputs), then `values`, in `ctx`."""
    from ansible_collections.moeops.inference.plugins.module_utils._common.plan import plan_role
    from ansible_collections.moeops.inference.plugins.module_utils._common.specs import spec_roles
    given = dict(role_inputs(role))
    if role == "vllm_service":  # templated defaults (vllm_service_name's), as the role renders them
        given.update(vllm_service_env_file="/etc/vllm/vllm.env", vllm_service_api_key_file="/etc/vllm/vllm.api-key")
    given.update(values)
    result = plan_role(role, role_spec(role), given, sorted(given), spec_roles(), ctx)
    result["inputs"] = result["values"]  # as the role_plan action registers it (_<role>.inputs)
    return result


def shipped_profile(name):
    """The model profile profiles/<name>.yml (the file is the mapping)."""
    with open(os.path.join(PROFILES, name + ".yml")) as f:
        return yaml.safe_load(f)


def constructed_names():
    return sorted(os.path.basename(p)[:-5] for p in glob.glob(os.path.join(FIXTURES, "constructed", "*.json")))


def real_snapshot_names():
    return sorted(os.path.basename(p)[:-5] for p in glob.glob(os.path.join(FIXTURES, "real", "*.snapshot.json")))


@pytest.fixture
def h200_capture():
    return load_json("real", "h200-x1-vm.json")


NET_FIXTURES = os.path.join(os.path.dirname(FIXTURES), "net")
_NET_TREES = {}


def net_tree(name):
    """A sysfs fixture tree as a directory (made once per test run, removed at exit).

    real/<name>: the packed capture real/<name>.tree.json; constructed/<name>: built from
    constructed/<name>.spec.json (a CONSTRUCTED test double). See tests/fixtures/net/capture.py.
    """
    if name not in _NET_TREES:
        import atexit
        import importlib.util
        import shutil
        import tempfile

        spec = importlib.util.spec_from_file_location("moeops_net_capture", os.path.join(NET_FIXTURES, "capture.py"))
        capture = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(capture)
        dest = tempfile.mkdtemp(prefix="moeops-sysfs-")
        atexit.register(shutil.rmtree, dest, True)
        kind, base = name.split("/", 1)
        if kind == "constructed":
            capture.build(load_json("..", "net", "constructed", base + ".spec.json"), dest)
        else:
            capture.unpack(load_json("..", "net", "real", base + ".tree.json"), dest)
        _NET_TREES[name] = dest
    return _NET_TREES[name]


class ExitJson(Exception):
    """A module's exit_json, raised so a test can read what it returned."""


class FailJson(Exception):
    """A module's fail_json, raised so a test can read its message."""


@pytest.fixture
def module_exits(monkeypatch):
    """Make AnsibleModule.exit_json/fail_json raise ExitJson/FailJson instead of exiting."""
    from ansible.module_utils import basic

    def exit_json(self, **kwargs):
        raise ExitJson(kwargs)

    def fail_json(self, **kwargs):
        raise FailJson(kwargs)
    monkeypatch.setattr(basic.AnsibleModule, "exit_json", exit_json)
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", fail_json)


@pytest.fixture
def refuse_open(monkeypatch):
    """`refuse_open(path)`: opening that one file raises EACCES, as a root-only file does for a user; every other
    open is the real one."""
    real_open = open

    def refuse(path):
        def refusing_open(file, *args, **kwargs):
            if str(file) == str(path):
                raise PermissionError(13, "Permission denied", str(file))
            return real_open(file, *args, **kwargs)
        monkeypatch.setattr("builtins.open", refusing_open)
    return refuse


@pytest.fixture
def seed_host_facts(tmp_path):
    """The seed snapshot's GPU facts with the host section read from its CONSTRUCTED PCIe tree
    (tests/fixtures/host/constructed/rtxpro6000-x8-2numa-as-shipped.spec.json, built with capture.py)."""
    import importlib.util
    from ansible_collections.moeops.inference.plugins.module_utils._facts import gpu_topology
    from ansible_collections.moeops.inference.plugins.module_utils._facts import pcie_host
    here = os.path.join(os.path.dirname(FIXTURES), "host")
    spec = importlib.util.spec_from_file_location("moeops_host_capture_conftest", os.path.join(here, "capture.py"))
    capture = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(capture)
    with open(os.path.join(here, "constructed", "rtxpro6000-x8-2numa-as-shipped.spec.json")) as f:
        root = capture.build(json.load(f), str(tmp_path / "host-root"))
    facts = gpu_topology.from_snapshot(load_json("constructed", "rtxpro6000-x8-2numa.json"), "seed")
    facts["host"] = pcie_host.read_host(root, facts["gpus"])
    facts["host_root"] = root  # for the tests that run the module over the same tree
    return facts
