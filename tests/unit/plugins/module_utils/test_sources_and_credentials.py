# -*- coding: utf-8 -*-
"""Package indexes and weights mirrors (issue 41, class 4 and part of 5): https only unless vllm_allow_insecure_sources
(then a warning), a URL's credentials masked in every message and outcome line, a URL that a program would read as
an option refused, and the canary timeout above zero. Through the role_plan code, against the roles' real specs."""

from __future__ import annotations

import os

import pytest
import yaml

from ansible_collections.moeops.inference.plugins.module_utils._common import inputs, urls
from ansible_collections.moeops.inference.plugins.module_utils._common.plan import plan_role
from ansible_collections.moeops.inference.plugins.module_utils._common.specs import spec_roles
from ansible_collections.moeops.inference.plugins.module_utils._policy import settings
from conftest import role_result, role_spec

ROOT = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..")
PASSWORD = "pw-0xSECRET"


def checked(role, **values):
    if role in ("vllm_service", "model_weights"):
        values.setdefault("vllm_service_profile", "kimi_k25")
    return plan_role(role, role_spec(role), values, sorted(values), spec_roles(), {}, plan=False)["problems"]


@pytest.mark.parametrize("text, shown", [
    ("https://user:%s@pypi.example/simple" % PASSWORD, "https://****@pypi.example/simple"),
    ("from http://u:p@ss@mirror.example/x and rsync://bob:%s@m.example/models" % PASSWORD,
     "from http://****@mirror.example/x and rsync://****@m.example/models"),
    ("HTTPS://A:B@C.example/", "HTTPS://****@C.example/"),
    ("https://pypi.example/simple", "https://pypi.example/simple"),
    ("https://pypi.example/a@b?x=y@z", "https://pypi.example/a@b?x=y@z"),  # an @ in the path or query is no userinfo
    ("mirror.example::models", "mirror.example::models"),
])
def test_the_userinfo_of_a_url_is_masked(text, shown):
    assert urls.mask_userinfo(text) == shown


@pytest.mark.parametrize("role, values, name", [
    ("vllm", {"vllm_index_url": "http://pypi.example/simple"}, "vllm_index_url"),
    ("vllm", {"vllm_flashinfer_index_url": "http://flashinfer.example/whl"}, "vllm_flashinfer_index_url"),
    ("ray_cluster", {"vllm_index_url": "http://pypi.example/simple"}, "vllm_index_url"),
    ("model_weights", {"model_weights_source": "http", "model_weights_mirror_url": "http://m.example/k/"},
     "model_weights_mirror_url"),
    ("model_weights", {"model_weights_source": "rsync", "model_weights_mirror_url": "rsync://m.example/models/k"},
     "model_weights_mirror_url"),
    ("model_weights", {"model_weights_source": "rsync", "model_weights_mirror_url": "m.example::models/k"},
     "model_weights_mirror_url"),
    ("model_weights", {"model_weights_source": "hf", "model_weights_hf_endpoint": "http://hub.example"},
     "model_weights_hf_endpoint"),
])
def test_a_source_without_tls_is_refused_unless_the_switch_is_set(role, values, name):
    found = checked(role, **values)
    assert [p for p in found if p.startswith("%s: %s must be an https:// URL" % (role, name))
            and "set vllm_allow_insecure_sources to true" in p], found
    result = role_result(role, {"gpus": {"count": 0}}, vllm_allow_insecure_sources=True, **values)
    assert not [p for p in result["problems"] if "https://" in p], result["problems"]
    assert [w for w in result["warnings"] if w.startswith("%s: %s " % (role, name)) and "is not https" in w
            and "(vllm_allow_insecure_sources is true)" in w], result["warnings"]


def test_the_switch_is_a_converted_boolean():
    """-e vllm_allow_insecure_sources=false is the string "false": the spec converts it, so it refuses."""
    assert [p for p in checked("vllm", vllm_index_url="http://pypi.example/simple", vllm_allow_insecure_sources="false")
            if "must be an https:// URL" in p]
    assert checked("vllm", vllm_index_url="http://pypi.example/simple", vllm_allow_insecure_sources="true") == []


def test_https_sources_and_unused_ones_pass():
    assert checked("vllm", vllm_index_url="https://pypi.example/simple") == []
    assert checked("vllm", vllm_index_url="file:///srv/wheels/simple") == []  # a local index crosses no network
    assert checked("vllm", vllm_index_url="/srv/wheels/simple") == []
    assert checked("vllm", vllm_engine="cpu", vllm_flashinfer_index_url="http://unused.example/whl") == []
    assert checked("vllm", vllm_flashinfer_kernels=False, vllm_flashinfer_index_url="http://unused.example/whl") == []
    assert checked("model_weights", model_weights_source="none", model_weights_mirror_url="http://unused.example") == []
    assert checked("model_weights", model_weights_source="http", model_weights_mirror_url="https://m.example/k/") == []


@pytest.mark.parametrize("role, values, name", [
    ("vllm", {"vllm_index_url": "--extra-index-url=https://evil.example/simple"}, "vllm_index_url"),
    ("vllm", {"vllm_flashinfer_index_url": "-ihttps://evil.example/whl"}, "vllm_flashinfer_index_url"),
    ("ray_cluster", {"vllm_index_url": "--index-strategy=unsafe-best-match"}, "vllm_index_url"),
    ("model_weights", {"model_weights_source": "rsync", "model_weights_mirror_url": "-e/tmp/x"}, "model_weights_mirror_url"),
    ("nvidia_driver", {"nvidia_driver_cuda_keyring_url": "--force-all"}, "nvidia_driver_cuda_keyring_url"),
])
def test_a_url_that_a_program_reads_as_an_option_is_refused(role, values, name):
    found = checked(role, **values)
    assert "%s: %s must be a URL or an absolute path, not something that starts with '-' (the program it is passed to " \
           "would read it as an option), got %r" % (role, name, values[name]) in found, found


def test_every_url_option_is_covered_by_the_dash_rule():
    """The rule goes by the name: every option of every role whose name ends in _url."""
    names = sorted({n for role in spec_roles() for n in role_spec(role) if n.endswith("_url")})
    assert "vllm_flashinfer_index_url" in names and "model_weights_mirror_url" in names
    assert inputs.url_option_problems({n: "-x" for n in names}) == [
        "%s must be a URL or an absolute path, not something that starts with '-' (the program it is passed to would "
        "read it as an option), got '-x'" % n for n in names]


@pytest.mark.parametrize("timeout, refused", [(0, True), (-5, True), (1, False), (120, False)])
def test_the_canary_timeout_is_above_zero(timeout, refused):
    found = [p for p in checked("vllm_service", vllm_service_canary_timeout=timeout) if "canary_timeout" in p]
    assert found == (["vllm_service: vllm_service_canary_timeout must be a positive number of seconds (0 fails every "
                      "canary, which rolls back a good deploy), got %d" % timeout] if refused else [])


def _credential(name):
    """A URL with a password for option `name`, of the kind the option takes."""
    if name == "model_weights_mirror_url":
        return "rsync://mirror:%s@mirror.example/models/k" % PASSWORD
    return "https://mirror:%s@%s.example/path/" % (PASSWORD, name.replace("_", "-"))


URL_OPTIONS = sorted((role, name) for role in spec_roles() for name in role_spec(role)
                     if name.endswith("_url") or name == "model_weights_hf_endpoint")


@pytest.mark.parametrize("insecure", [False, True])
@pytest.mark.parametrize("role", sorted({r for r, _n in URL_OPTIONS}))
def test_no_message_or_outcome_shows_a_urls_password(role, insecure):
    """Every role's plan with a password in every URL option it has: no problem, warning or outcome line shows it.
    With the switch set the plans run through (outcome lines that name the URL); without it, the refusals quote it."""
    values = {name: _credential(name) for r, name in URL_OPTIONS if r == role}
    if role == "model_weights":
        values.update(model_weights_source="rsync", vllm_service_profile="kimi_k25")
    if role == "nvidia_driver":
        values.update(nvidia_driver_source="mirror", nvidia_driver_mirror_signed_by="/etc/apt/keyrings/lab.gpg")
    values["vllm_allow_insecure_sources"] = insecure
    values = {k: v for k, v in values.items() if k in role_spec(role)}
    result = role_result(role, {"gpus": {"count": 0}}, **values)
    said = result["problems"] + result["warnings"] + [result["outcome"]]
    assert not [s for s in said if PASSWORD in s], said
    if role in ("vllm", "model_weights"):  # the URL itself is shown, masked: the mask ran, not the URL's absence
        assert "****@" in " ".join(said), said


def test_the_settings_report_masks_a_urls_credentials_and_compares_what_is_left():
    url = "http://proxy:%s@proxy.example:3128" % PASSWORD
    row = settings._row("environment", "HTTPS_PROXY", settings.mask_environment({"HTTPS_PROXY": url})["HTTPS_PROXY"],
                        url, {})
    assert row["deployed"] == row["desired"] == "http://****@proxy.example:3128" and not row["drift"]
    other = settings._row("environment", "HTTPS_PROXY", url, url.replace("proxy.example", "other.example"), {})
    assert other["drift"] and PASSWORD not in str(other)
    assert settings.mask_argv(["vllm", "serve", "--config-url", url]) == [
        "vllm", "serve", "--config-url", "http://****@proxy.example:3128"]


def _issue_41_cases():
    with open(os.path.join(ROOT, "tests", "integration", "bad-inputs", "cases.yml")) as f:
        deploy = yaml.safe_load(f)["deploy"]
    hosts = ("inputs-spellings-sources-timeouts", "inputs-extra-args-underscore-secret")
    return [one for case in deploy if case["host"] in hosts for one in case["inputs"]]


@pytest.mark.parametrize("case", _issue_41_cases(), ids=lambda c: c["name"])
def test_the_bad_inputs_suites_issue_41_cases_hold_at_plan_level(case):
    """What tests/integration/60-bad-inputs.sh expects of preflight for these cases, from the roles' rules (the
    suite itself needs a podman node)."""
    said = []
    for role in spec_roles():
        values = {k: v for k, v in case["vars"].items() if k in role_spec(role)}
        if values:
            said += checked(role, **values)
    text = " ".join(said)
    assert all(e in text for e in case["expect"]), (case["expect"], said)
    assert "notshown" not in text
