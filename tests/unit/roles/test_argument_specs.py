# -*- coding: utf-8 -*-
"""Every role's defaults and meta/argument_specs.yml agree (as prometheus.prometheus keeps them),
every option is typed and described, and docs/role-variables.md and every role's README.md (its generated
block, between markers) are generated from the specs; each README's example uses the role with its own variables."""
from __future__ import annotations

import glob
import importlib.util
import os
import re
import shutil

import pytest
import yaml
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible_collections.moeops.inference.plugins.module_utils._policy import settings as vllm_settings

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
ROLES = sorted(os.path.basename(os.path.dirname(os.path.dirname(p)))
               for p in glob.glob(os.path.join(ROOT, "roles", "*", "meta", "argument_specs.yml")))
TYPES = {"str", "int", "float", "bool", "list", "dict", "path", "raw"}
# One name per thing: what several roles use is declared by each of them under one name, with one default.
SHARED = {"vllm_user", "vllm_group", "vllm_venv", "vllm_engine", "vllm_hf_home", "vllm_home", "vllm_ca_bundle", "vllm_uv_venv",
          "vllm_uv_cache_dir", "vllm_index_url", "vllm_flashinfer_kernels", "vllm_engines_dir",
          "vllm_allow_insecure_sources", "vllm_service_profile", "vllm_service_port", "gpu_facts_required",
          "moeops_allow_privileged_ports"}


def load(role, *parts):
    with open(os.path.join(ROOT, "roles", role, *parts)) as f:
        return yaml.safe_load(f) or {}


def options(role):
    return load(role, "meta", "argument_specs.yml")["argument_specs"]["main"]["options"]


def templated(value):
    return isinstance(value, str) and "{{" in value


def test_every_role_has_specs_defaults_and_a_preflight():
    dirs = sorted(d for d in os.listdir(os.path.join(ROOT, "roles")) if os.path.isdir(os.path.join(ROOT, "roles", d)))
    assert ROLES == dirs
    for role in ROLES:
        assert os.path.isfile(os.path.join(ROOT, "roles", role, "defaults", "main.yml")), role
        assert os.path.isfile(os.path.join(ROOT, "roles", role, "tasks", "check.yml")), role


@pytest.mark.parametrize("role", ROLES)
def test_every_default_has_a_spec_with_the_same_default(role):
    defaults, opts = load(role, "defaults", "main.yml"), options(role)
    for name, value in defaults.items():
        assert name in opts, "%s: default %s has no argument spec" % (role, name)
        if templated(value):
            # Computed at run time: the spec cannot state it, its description says how it is derived.
            assert "default" not in opts[name], "%s: %s is templated, the spec must not claim a default" % (role, name)
        else:
            assert opts[name].get("default") == value, "%s: %s defaults to %r, the spec says %r" % (
                role, name, value, opts[name].get("default"))


@pytest.mark.parametrize("role", ROLES)
def test_every_spec_option_is_defaulted_or_required(role):
    defaults, opts = load(role, "defaults", "main.yml"), options(role)
    for name, opt in opts.items():
        assert name.startswith(role + "_") or name in SHARED, "%s: %s lacks the role prefix" % (role, name)
        if opt.get("required"):
            assert name not in defaults, "%s: %s is required, a default would hide a missing value" % (role, name)
        else:
            assert name in defaults, "%s: %s is neither defaulted in defaults/main.yml nor required" % (role, name)


@pytest.mark.parametrize("name", sorted(SHARED))
def test_a_shared_name_has_one_default_and_type_in_every_role_that_declares_it(name):
    declared = {role: options(role)[name] for role in ROLES if name in options(role)}
    assert len(declared) >= 2, "%s is declared by %s only: not shared" % (name, sorted(declared))
    for what in ("default", "type", "no_log"):
        seen = {role: opt.get(what) for role, opt in declared.items()}
        assert len(set(map(repr, seen.values()))) == 1, "%s: %s differs between roles: %s" % (name, what, seen)
    for role in declared:
        assert load(role, "defaults", "main.yml")[name] == declared[role].get("default"), (role, name)


def test_no_role_mirrors_another_roles_variable_under_its_own_name():
    """The names this restructuring removed stay gone: each was a second spelling of a shared one."""
    gone = {"vllm_service_user", "vllm_service_group", "vllm_service_venv", "vllm_service_hf_home",
            "vllm_service_working_directory", "vllm_service_model", "model_weights_user", "model_weights_group",
            "model_weights_hf_home", "model_weights_venv", "model_weights_ca_bundle", "ray_cluster_venv",
            "ray_cluster_user", "ray_cluster_user_group", "ray_cluster_working_directory", "ray_cluster_ca_bundle",
            "preflight_hf_home", "preflight_model_profile", "preflight_gpu_facts"}
    for role in ROLES:
        assert not gone & set(options(role)), (role, sorted(gone & set(options(role))))
        assert not [o for o in options(role) if o.endswith("_gpu_facts")], role


@pytest.mark.parametrize("role", ROLES)
def test_every_role_has_a_check_entry_point_with_the_main_options(role):
    specs = load(role, "meta", "argument_specs.yml")["argument_specs"]
    assert "check" in specs, "%s has no check entry point" % role
    assert specs["check"]["options"] == specs["main"]["options"], role
    assert os.path.isfile(os.path.join(ROOT, "roles", role, "tasks", "check.yml")), role


TASK_KEYWORDS = {"name", "when", "register", "check_mode", "changed_when", "failed_when", "tags", "vars", "no_log",
                 "delegate_to", "run_once", "become", "args", "loop", "loop_control", "listen", "environment", "block",
                 "rescue", "always", "until", "retries", "delay", "notify", "ignore_errors"}
# What a check may do before it plans: read (facts, files, the GPUs, the tuning record, the node's name service),
# never derive or change.
READS = {"ansible.builtin.setup", "ansible.builtin.slurp", "ansible.builtin.stat", "moeops.inference.nccl_tune_info",
         "ansible.builtin.getent"}


@pytest.mark.parametrize("role", ROLES)
def test_every_check_plans_the_role_before_it_derives_anything(role):
    """Each check entry point plans its own role with the role_plan action (every input converted and checked, every
    rule of the role): before it, a check only reads; no set_fact, assert or template derives from an unchecked input."""
    tasks = load(role, "tasks", "check.yml")
    actions = [next((k for k in t if k not in TASK_KEYWORDS), "block") for t in tasks]
    planned = [i for i, (a, t) in enumerate(zip(actions, tasks))
               if a == "moeops.inference.role_plan" and t[a].get("role") == role]
    assert planned, (role, "no role_plan for the role itself")
    before = [(a, tasks[i].get(a)) for i, a in enumerate(actions[:planned[0]])]
    assert [b for b in before if b[0] not in READS and b != ("ansible.builtin.import_role",
                                                             {"name": "moeops.inference.gpu_facts"})] == [], role
    assert tasks[planned[0]].get("register") == "_" + role


@pytest.mark.parametrize("role", ROLES)
def test_no_check_asserts_what_the_plan_decides(role):
    """Every rule lives in the role's private module: a check has no assert of its own (a refusal that needs the node's
    state, such as the NCCL interface, is the only kind allowed, and names its reason)."""
    asserts = [t["name"] for t in load(role, "tasks", "check.yml") if "ansible.builtin.assert" in t]
    assert asserts == ALLOWED_CHECK_ASSERTS.get(role, []), role


# ray_cluster's: the cluster's addresses as this node resolves them, which needs every member's plan (their addresses)
# first, and comes before the NCCL interface (this node's interfaces), which an unresolvable address would fail too.
ALLOWED_CHECK_ASSERTS = {"ray_cluster": ["Check | Refuse a cluster address without an IPv4 address here",
                                         "Check | Refuse an NCCL interface that cannot be told"]}


# The preflight role sends role variables to its module, whose arguments show at -vvv; a secret must be no_log.
# The names that look like secrets are the settings report's (vllm_settings.SECRET_NAME_RE).
SECRET_NAME = vllm_settings.SECRET_NAME_RE


@pytest.mark.parametrize("role", ROLES)
def test_every_option_named_like_a_secret_is_no_log(role):
    leaky = [name for name, opt in options(role).items()
             if SECRET_NAME.search(name) and opt.get("type") != "path" and not opt.get("no_log")]
    assert leaky == [], "%s: %s look like secrets; give them no_log: true" % (role, leaky)


@pytest.mark.parametrize("role", ROLES)
def test_vars_hold_constants_only(role):
    path = os.path.join(ROOT, "roles", role, "vars", "main.yml")
    if not os.path.exists(path):
        return
    derived = [k for k, v in (load(role, "vars", "main.yml") or {}).items() if "{{" in repr(v)]
    assert derived == [], "%s: vars/main.yml derives %s; derive in a filter or module_utils" % (role, derived)


@pytest.mark.parametrize("role", ROLES)
def test_main_only_orchestrates(role):
    with open(os.path.join(ROOT, "roles", role, "tasks", "main.yml")) as f:
        assert len(f.read().splitlines()) <= 80, role


@pytest.mark.parametrize("role", ROLES)
def test_every_option_is_typed_and_described(role):
    for name, opt in options(role).items():
        assert opt.get("type") in TYPES, "%s: %s has no valid type" % (role, name)
        assert opt.get("description"), "%s: %s has no description" % (role, name)
        if opt["type"] == "list":
            assert opt.get("elements"), "%s: list %s needs elements" % (role, name)
        for choice in opt.get("choices", []):
            assert "default" not in opt or opt["default"] in opt["choices"], (role, name, choice)


@pytest.mark.parametrize("role", ROLES)
def test_the_defaults_pass_their_own_spec(role):
    defaults, opts = load(role, "defaults", "main.yml"), options(role)
    values = {k: v for k, v in defaults.items() if not templated(v)}
    required = {k: None for k, o in opts.items() if o.get("required")}
    result = ArgumentSpecValidator(opts).validate(dict(values, **{k: {"stand-in": 1} for k in required}))
    assert result.error_messages == [], (role, result.error_messages)


def _doc_module():
    spec = importlib.util.spec_from_file_location("role_variables_doc", os.path.join(ROOT, "scripts", "role_variables_doc.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


GEN = _doc_module()


def all_options(role):
    """Every option of every entry point of the role."""
    return {name for ep in GEN.entry_points(role).values() for name in ep.get("options") or {}}


def test_role_variables_doc_is_generated_from_the_specs():
    with open(os.path.join(ROOT, "docs", "role-variables.md")) as f:
        committed = f.read()
    assert committed == GEN.render(), "docs/role-variables.md is out of date: run .venv/bin/python scripts/role_variables_doc.py"
    assert GEN.check() == [], "out of date: run .venv/bin/python scripts/role_variables_doc.py"
    for role in ROLES:
        assert "## moeops.inference.%s" % role in committed
        for name in options(role):
            assert "| `%s` |" % name in committed


@pytest.mark.parametrize("role", ROLES)
def test_every_role_has_a_readme_with_its_variables(role):
    with open(os.path.join(ROOT, "roles", role, "README.md")) as f:
        readme = f.read()
    assert readme.startswith("# moeops.inference.%s\n" % role), role
    sections = [line for line in readme.splitlines() if line.startswith("## ")]
    assert sections[:4] == ["## Requirements", "## Role Variables", "## Dependencies", "## Example Playbook"], (role, sections)
    assert GEN.render_readme(role, readme) == readme, "roles/%s/README.md is out of date: run scripts/role_variables_doc.py" % role
    assert readme.index("## Role Variables") < readme.index(GEN.BEGIN) < readme.index(GEN.END) < readme.index("## Dependencies"), role
    block = readme.split(GEN.BEGIN)[1].split(GEN.END)[0]
    for entry_point in GEN.entry_points(role):
        assert "### Entry point `%s`" % entry_point in block, (role, entry_point)
    for name in options(role):
        assert "| `%s` |" % name in block, (role, name)


def _keys(node):
    if isinstance(node, dict):
        for key, value in node.items():
            yield key
            yield from _keys(value)
    elif isinstance(node, list):
        for item in node:
            yield from _keys(item)


def example_plays(readme):
    """The plays of the one ```yaml block under a README's "## Example Playbook"."""
    with open(os.path.join(ROOT, readme)) as f:
        examples = re.findall(r"^## Example Playbook\n\n```yaml\n(.*?)^```$", f.read(), re.M | re.S)
    assert len(examples) == 1, "%s: one ```yaml block under ## Example Playbook" % readme
    plays = yaml.safe_load(examples[0])
    assert isinstance(plays, list) and all("hosts" in play for play in plays), readme
    return plays


def inventory_groups():
    """The groups of the shipped example inventories (inventories/lab, lab-multinode; sim is the repository's)."""
    def groups(node):
        for name, group in ((node or {}).get("children") or {}).items():
            yield name
            yield from groups(group)
    found = set()
    for name in ("lab", "lab-multinode"):
        with open(os.path.join(ROOT, "inventories", name, "hosts.yml")) as f:
            found |= set(groups(yaml.safe_load(f)["all"]))
    return found


@pytest.mark.parametrize("readme", ["README.md"] + [os.path.join("roles", r, "README.md") for r in ROLES])
def test_every_readme_example_runs_on_a_group_of_the_example_inventories(readme):
    """Copied with the example inventory, an example play finds its hosts: vllm_servers, the group of inventories/lab
    and of every shipped playbook (not a group of some other inventory, such as gpu_servers)."""
    groups = inventory_groups()
    assert "vllm_servers" in groups
    for play in example_plays(readme):
        missing = [p for p in re.split(r"[:,]", play["hosts"]) if p.lstrip("!&") not in groups]
        assert not missing, "%s: hosts %s, no group of inventories/lab or lab-multinode" % (readme, missing)


@pytest.mark.parametrize("role", ROLES)
def test_every_readme_example_uses_the_role_with_its_own_variables(role):
    plays = example_plays(os.path.join("roles", role, "README.md"))
    entries = [entry for play in plays for entry in play.get("roles", [])]
    assert "moeops.inference.%s" % role in [e.get("role") if isinstance(e, dict) else e for e in entries], role
    # No invented variables: every key with a role's prefix is an option in the roles' specs.
    known = {name for other in ROLES for name in all_options(other)}
    prefixed = {key for key in _keys(plays) if isinstance(key, str) and key.startswith(tuple(r + "_" for r in ROLES))}
    assert prefixed <= known, "%s: the example sets %s, which no argument spec has" % (role, sorted(prefixed - known))
    # And the literal values it gives pass the role's spec.
    for entry in entries:
        if isinstance(entry, dict) and entry.get("role") == "moeops.inference.%s" % role:
            opts = options(role)
            given = {k: v for k, v in (entry.get("vars") or {}).items() if not templated(v)}
            stand_ins = {k: {"stand-in": 1} for k, o in opts.items() if o.get("required") and k not in given}
            result = ArgumentSpecValidator(opts).validate(dict(given, **stand_ins))
            assert result.error_messages == [], (role, result.error_messages)


def _copy_docs_tree(dest):
    for role in ROLES:
        for part in (("meta", "argument_specs.yml"), ("defaults", "main.yml"), ("README.md",)):
            os.makedirs(os.path.join(dest, "roles", role, *part[:-1]), exist_ok=True)
            shutil.copy(os.path.join(ROOT, "roles", role, *part), os.path.join(dest, "roles", role, *part))
    os.makedirs(os.path.join(dest, "docs"))
    shutil.copy(os.path.join(ROOT, "docs", "role-variables.md"), os.path.join(dest, "docs", "role-variables.md"))


def test_the_check_fails_on_a_stale_or_missing_readme_block(tmp_path, monkeypatch, capsys):
    root = str(tmp_path)
    _copy_docs_tree(root)
    assert GEN.check(root) == []
    first, second, third = ROLES[:3]
    stale = os.path.join(root, "roles", first, "README.md")
    with open(stale) as f:
        text = f.read()
    with open(stale, "w") as f:
        f.write(text.replace("| `%s` |" % sorted(options(first))[0], "| `renamed_variable` |"))
    unmarked = os.path.join(root, "roles", second, "README.md")
    with open(unmarked) as f:
        other = f.read()
    with open(unmarked, "w") as f:
        f.write(other.split(GEN.BEGIN)[0] + other.split(GEN.END)[1])
    os.remove(os.path.join(root, "roles", third, "README.md"))
    with open(os.path.join(root, "docs", "role-variables.md"), "a") as f:
        f.write("edited by hand\n")
    problems = GEN.check(root)
    assert sorted(p.split(":")[0] for p in problems) == sorted(
        [os.path.join("roles", r, "README.md") for r in (first, second, third)] + [os.path.join("docs", "role-variables.md")]), problems
    monkeypatch.setattr(GEN, "ROOT", root)
    assert GEN.main(["--check"]) == 1
    assert "roles/%s/README.md" % second in capsys.readouterr().err
    # Rewriting fixes the stale block and the doc; a README without its block (or none) still fails.
    assert GEN.main([]) == 1
    assert sorted(p.split(":")[0] for p in GEN.check(root)) == [os.path.join("roles", r, "README.md") for r in sorted((second, third))]
    with open(stale) as f:
        assert f.read() == text
