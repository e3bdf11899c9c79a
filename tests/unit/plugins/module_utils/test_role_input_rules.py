# -*- coding: utf-8 -*-
"""The roles' input rules (the generic ones in plugins/module_utils/_common/inputs.py, each role's own in
_roles/<role>), through the role_plan action's code with planning off, against the roles' real argument specs."""

from __future__ import annotations

import os

import pytest
import yaml

from ansible_collections.moeops.inference.plugins.module_utils._common.plan import plan_role, redact
from ansible_collections.moeops.inference.plugins.module_utils._common.specs import spec_roles
from ansible_collections.moeops.inference.plugins.module_utils._roles.vllm_service.inputs import HARDENING_DIRECTIVES
from conftest import role_spec as spec

ROOT = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..")


def problems(role, **values):
    if "vllm_service_profile" in spec(role):  # the one value every deploy must give: there is no default model
        values.setdefault("vllm_service_profile", "kimi_k25")
    return plan_role(role, spec(role), values, sorted(values), spec_roles(), {}, plan=False)["problems"]


@pytest.mark.parametrize("role, name, value", [
    ("vllm_service", "vllm_user", "root"),
    ("vllm_service", "vllm_user", ""),
    ("vllm_service", "vllm_group", "root"),
    ("vllm", "vllm_user", "root"),
    ("vllm", "vllm_user", "Vllm"),
    ("vllm", "vllm_group", "0"),
    ("model_weights", "vllm_user", "root"),
    ("nvidia_persistenced", "nvidia_persistenced_user", "root"),
    ("ray_cluster", "vllm_user", "root"),
])
def test_accounts_are_unprivileged_names(role, name, value):
    assert problems(role, **{name: value}) == [
        "%s: %s must be an unprivileged account name (lower case, starting with a letter, as adduser allows; "
        "not root), got %r" % (role, name, value)]


def test_a_normal_account_passes():
    assert problems("vllm", vllm_user="vllm", vllm_group="vllm") == []
    assert problems("nvidia_persistenced", nvidia_persistenced_user="nvidia-persistenced") == []


@pytest.mark.parametrize("directive", ["User", "Group", "ExecStartPre", "ExecStart", "Environment", "EnvironmentFile",
                                       "NotADirective"])
def test_hardening_overrides_take_sandboxing_directives_only(directive):
    got = problems("vllm_service", vllm_service_hardening_overrides={directive: "root", "ProtectHome": False})
    assert got == ["vllm_service: vllm_service_hardening_overrides.%s is not a sandboxing directive this variable may "
                   "set (allowed: systemd.exec sandboxing and resource directives, docs/role-variables.md); User, "
                   "Group, Exec*, Environment* and others are refused" % directive]


def test_every_default_hardening_directive_may_be_overridden():
    with open(os.path.join(ROOT, "roles", "vllm_service", "defaults", "main.yml")) as f:
        defaults = yaml.safe_load(f)["vllm_service_hardening"]
    assert problems("vllm_service", vllm_service_hardening_overrides=dict.fromkeys(defaults)) == []


@pytest.mark.parametrize("args, flag, variable", [
    (["--host", "0.0.0.0"], "--host", "vllm_service_host"),
    (["--enforce-eager", "--port=9000"], "--port", "vllm_service_port"),
    (["--tensor-parallel-size", "4"], "--tensor-parallel-size", "vllm_service_tensor_parallel_size"),
    (["-tp", "4"], "-tp", "vllm_service_tensor_parallel_size"),
    (["--model", "/srv/other"], "--model", "the model profile's source (or vllm_service_model_path)"),
    (["--performance-mode", "throughput"], "--performance-mode",
     "vllm_service_workload (latency: interactivity, throughput: throughput)"),
    (["--max-num-queued-reqs=64"], "--max-num-queued-reqs", "vllm_service_max_queued_requests"),
])
def test_extra_args_that_have_a_variable_are_refused(args, flag, variable):
    index = [a.split("=")[0] for a in args].index(flag)
    got = problems("vllm_service", vllm_service_extra_args=args)
    assert got == ["vllm_service: vllm_service_extra_args[%d] %s: set %s instead (given here, it would silently "
                   "override the role's own value)" % (index, flag, variable)]


def test_a_secret_in_extra_args_is_refused_without_showing_it():
    got = problems("vllm_service", vllm_service_extra_args=["--api-key=sk-verysecret", "--hf-token", "hf_abc"])
    assert len(got) == 2 and all("the value is not shown" in p for p in got)
    assert "verysecret" not in " ".join(got) and "hf_abc" not in " ".join(got)
    assert problems("vllm_service", vllm_service_extra_args=["--enforce-eager", "--enable-prefix-caching"]) == []


@pytest.mark.parametrize("role, name, var", [
    ("vllm_service", "vllm_service_environment", "HF_TOKEN"),
    ("vllm_service", "vllm_service_environment", "OPENAI_API_KEY"),
    ("vllm_service", "vllm_service_environment", "WANDB_SECRET"),
    ("vllm_service", "vllm_service_environment", "DB_PASSWORD_FILE"),
    ("ray_cluster", "ray_cluster_environment", "AWS_SECRET_ACCESS_KEY"),
])
def test_secret_named_environment_is_refused(role, name, var):
    assert problems(role, **{name: {var: "x"}}) == [
        "%s: %s.%s looks like a secret and would be written to the world-readable unit: set secrets with "
        "vllm_service_hf_token or vllm_service_api_key (they go to the root-only env file)" % (role, name, var)]


def test_ordinary_environment_passes():
    assert problems("vllm_service", vllm_service_environment={"NCCL_DEBUG": "INFO", "http_proxy": "http://p:3128"}) == []


@pytest.mark.parametrize("name, value, message", [
    ("vllm_service_port", True, "vllm_service_port must be a number, got the boolean true"),
    ("vllm_service_port", "1e4", "vllm_service_port"),
    # The port type sees the converted value (-e gives the string).
    ("vllm_service_port", "99999", "vllm_service_port must be a TCP port in 1-65535, got 99999"),
    ("vllm_service_extra_args", "--enforce-eager",
     "vllm_service_extra_args must be a list, got the string '--enforce-eager'; from the command line pass JSON: "
     "-e '{\"vllm_service_extra_args\": [\"...\"]}'"),
    ("vllm_service_nccl_overrides", "NCCL_PROTO=LL", "vllm_service_nccl_overrides must be a dict, got the string"),
    ("vllm_hf_home", "~/hf", "vllm_hf_home must be an absolute path, got '~/hf'"),
    ("vllm_hf_home", "/var/cache/../hf/",
     "vllm_hf_home must be a normalised absolute path (no '..', '.' or '//'), got "
     "'/var/cache/../hf/'; use '/var/hf'"),
    ("vllm_hf_home", "/var//hf", "got '/var//hf'; use '/var/hf'"),
    # CacheDirectory=my hf would be two directories.
    ("vllm_hf_home", "/var/cache/my hf",
     "vllm_hf_home must be an absolute path without whitespace (systemd reads path lists split on spaces)"),
    ("vllm_home", "/srv/vllm\thome", "vllm_home must be an absolute path without whitespace"),
    ("vllm_service_gpu_memory_utilization", 0, "vllm_service_gpu_memory_utilization must be above 0 and at most 1"),
    ("vllm_service_gpu_memory_utilization", 1.5, "got 1.5"),
    ("vllm_service_gpu_memory_utilization", -0.5, "got -0.5"),
    ("vllm_service_max_model_len", 0, "vllm_service_max_model_len must be a positive number of tokens"),
    ("vllm_service_restart_sec", -5, "vllm_service_restart_sec must be 0 or more seconds"),
    ("vllm_service_health_timeout", 10 ** 15, "vllm_service_health_timeout must be a positive number of seconds below"),
    ("vllm_service_health_timeout", 0, "vllm_service_health_timeout must be a positive number of seconds below"),
    ("vllm_service_workload", "fast", "vllm_service_workload"),
    ("vllm_service_max_queued_requests", -1,
     "vllm_service_max_queued_requests must be 0 (no cap) or a positive number of requests (null: the workload's)"),
])
def test_values_the_role_would_convert_or_drop_are_refused(name, value, message):
    got = problems("vllm_service", **{name: value})
    assert len(got) == 1 and message in got[0], got


@pytest.mark.parametrize("name, value", [
    ("vllm_service_port", 8000), ("vllm_service_port", "8000"), ("vllm_service_gpu_memory_utilization", 1),
    ("vllm_service_gpu_memory_utilization", "0.9"), ("vllm_service_restart_sec", 0), ("vllm_service_health_timeout", None),
    ("vllm_hf_home", "/var/cache/vllm/huggingface"), ("vllm_hf_home", "/var/cache/vllm/"),
    ("vllm_service_extra_args", []),
    ("vllm_service_nccl_overrides", {"NCCL_PROTO": None}),
    ("vllm_service_workload", "throughput"), ("vllm_service_max_queued_requests", 0),
    ("vllm_service_max_queued_requests", None), ("vllm_service_max_queued_requests", "256"),
])
def test_good_values_pass(name, value):
    assert problems("vllm_service", **{name: value}) == []


def test_the_documented_hardening_directives_are_the_accepted_ones():
    described = " ".join(spec("vllm_service")["vllm_service_hardening_overrides"]["description"])
    listed = described.split("namely ", 1)[1]
    assert sorted(n.strip(" .") for n in listed.replace("C(", "").replace(")", "").split(",")) == sorted(
        HARDENING_DIRECTIVES)


# --- the rules the roles' own asserts held before they moved here (one layer: spec + semantic check) ----

@pytest.mark.parametrize("role, values, needle", [
    ("nvidia_driver", {"nvidia_driver_branch": 58}, "nvidia_driver_branch must be a driver branch such as 580, got '58'"),
    ("nvidia_driver", {"nvidia_driver_source": "mirror", "nvidia_driver_mirror_url": "ftp://m/",
                       "nvidia_driver_mirror_signed_by": "/k.gpg"}, "needs nvidia_driver_mirror_url (an http, https or file URL)"),
    ("nvidia_driver", {"nvidia_driver_source": "mirror", "nvidia_driver_mirror_url": "https://m/"},
     "needs nvidia_driver_mirror_signed_by (the absolute path of the mirror's keyring)"),
    ("nvidia_persistenced", {"nvidia_persistenced_package": ""}, "nvidia_persistenced_package must name a package"),
    ("vllm", {"vllm_version": "latest"}, "vllm_version must be an exact vLLM version such as 0.33.0, got 'latest'"),
    ("vllm", {"vllm_uv_version": "0.13"}, None),
    ("vllm", {"vllm_uv_version": "0.13.x"}, "vllm_uv_version must be an exact uv version"),
    ("vllm", {"vllm_venv": "/opt/v", "vllm_uv_venv": "/opt/v"}, "vllm_venv and vllm_uv_venv must be two different directories"),
    ("vllm", {"vllm_extra_packages": ["flashinfer-python==0.2.5", "deepgemm"]},
     "vllm_extra_packages must be pinned as name==version (or name[extra]==version), got ['deepgemm']"),
    ("model_weights", {"model_weights_source": "local"}, "model_weights_source local needs model_weights_local_path"),
    ("model_weights", {"model_weights_source": "http"}, "model_weights_source http needs model_weights_mirror_url"),
    ("model_weights", {"model_weights_source": "http", "model_weights_mirror_url": "rsync://m/x"},
     "needs an http:// or https:// model_weights_mirror_url"),
    ("model_weights", {"model_weights_source": "rsync", "model_weights_mirror_url": "https://m/x"},
     "needs an rsync:// model_weights_mirror_url"),
    ("model_weights", {"model_weights_max_workers": 0}, "model_weights_max_workers must be a positive number"),
    ("model_weights", {"model_weights_poll_interval": -1}, "model_weights_poll_interval must be a positive number"),
    ("ray_cluster", {"ray_cluster_service_name": "ray service"}, "ray_cluster_service_name must be a systemd unit name"),
    ("ray_cluster", {"ray_cluster_ray_extras": ["default", "Bad Extra"]}, "ray_cluster_ray_extras must be Ray extras"),
    ("ray_cluster", {"ray_cluster_join_timeout": 0}, "ray_cluster_join_timeout must be a positive number of seconds"),
    ("ray_cluster", {"ray_cluster_temp_dir": "ray"}, "ray_cluster_temp_dir must be an absolute path, got 'ray'"),
    ("vllm_service", {"vllm_service_name": "vllm.service"}, None),
    ("vllm_service", {"vllm_service_name": "vllm service"}, "vllm_service_name must be a systemd unit name"),
    ("vllm_service", {"vllm_service_max_exposure": 11}, "vllm_service_max_exposure must be between 0 and 10"),
    ("vllm_service", {"vllm_service_health_poll_interval": 0}, "vllm_service_health_poll_interval must be a positive"),
])
def test_each_roles_semantic_rules(role, values, needle):
    found = problems(role, **values)
    if needle is None:
        assert found == [], found
    else:
        assert [p for p in found if p.startswith(role + ": ") and needle in p], found


def test_the_shipped_defaults_pass_every_roles_rules():
    for role in ("nvidia_driver", "nvidia_persistenced", "vllm", "model_weights", "ray_cluster", "vllm_service"):
        with open(os.path.join(ROOT, "roles", role, "defaults", "main.yml")) as f:
            defaults = {k: v for k, v in (yaml.safe_load(f) or {}).items() if "{{" not in str(v)}
        if "vllm_service_profile" in defaults:  # null: the one value a deploy must give (tested below)
            defaults["vllm_service_profile"] = "kimi_k25"
        assert problems(role, **defaults) == [], role


SHIPPED = sorted(f[:-4] for f in os.listdir(os.path.join(ROOT, "profiles")) if f.endswith(".yml"))


@pytest.mark.parametrize("value", [None, "", "  "])
def test_no_profile_is_refused_by_the_roles_that_load_it_listing_the_shipped_ones(value):
    """No default model: unset (the roles' default, null), empty or blank, the roles that load the profile refuse it
    with one message naming every profiles/*.yml and the path form; the others do not read it."""
    said = ("vllm_service_profile: not set, and moeops.inference deploys no model by default; set vllm_service_profile "
            "(in the inventory, or -e vllm_service_profile=NAME) to the name of a profile shipped with the collection "
            "(%s) or the absolute path of a profile file on the controller" % ", ".join(SHIPPED))
    for role in spec_roles():
        if "vllm_service_profile" not in spec(role):
            continue
        with open(os.path.join(ROOT, "roles", role, "defaults", "main.yml")) as f:
            defaults = {k: v for k, v in (yaml.safe_load(f) or {}).items() if "{{" not in str(v)}
        assert defaults["vllm_service_profile"] is None, role
        defaults["vllm_service_profile"] = value
        expected = ["%s: %s" % (role, said)] if role in ("vllm_service", "model_weights") else []
        assert problems(role, **defaults) == expected, role


def test_a_secret_is_checked_but_never_quoted():
    def found(**values):
        return problems("vllm_service", **values)  # plan_role redacts
    assert found(vllm_service_profile="kimi_k25", vllm_service_api_key="s3cr3t value") == [
        "vllm_service: vllm_service_api_key must not contain whitespace"]
    said = found(vllm_service_profile="kimi_k25", vllm_service_hf_token="hf_x\nExecStartPre=id")
    assert said and all("hf_x" not in p and "ExecStartPre" not in p for p in said), said
    # redact itself: the no_log option's value, quoted or bare, becomes asterisks; other values stay.
    assert redact(["a: got 'sk-1'", "b sk-1 c", "port 8000"], {"k": {"no_log": True}, "p": {}},
                  {"k": "sk-1", "p": "8000"}) == ["a: got '********'", "b ******** c", "port 8000"]


def test_the_hardening_allowlist_is_documented_as_it_is():
    with open(os.path.join(ROOT, "docs", "hardening.md")) as f:
        doc = f.read()
    listed = doc.split("<!-- hardening allowlist -->")[1].split("<!-- end hardening allowlist -->")[0]
    assert sorted(n.strip().strip("`") for n in listed.split(",")) == sorted(HARDENING_DIRECTIVES)


@pytest.mark.parametrize("role, name, value, ok", [
    ("vllm_service", "vllm_service_host", "0.0.0.0", True), ("vllm_service", "vllm_service_host", "::", True),
    ("vllm_service", "vllm_service_host", "gpu-01.lab.example", True), ("vllm_service", "vllm_service_host", "", True),
    ("vllm_service", "vllm_service_host", "0.0.0.0 --api-key x", False),
    ("vllm_service", "vllm_service_host", "host_name", False), ("vllm_service", "vllm_service_host", "-h", False),
    ("ray_cluster", "ray_cluster_head_address", "10.0.0.1", True),
    ("ray_cluster", "ray_cluster_head_address", "10.0.0.1:6379", False),
    ("ray_cluster", "ray_cluster_node_address", "", False),
])
def test_hosts_are_ip_addresses_or_host_names(role, name, value, ok):
    got = problems(role, **{name: value})
    assert (got == []) == ok, got
    if not ok:
        empty = " (empty: every address)" if name == "vllm_service_host" else ""
        assert got == ["%s: %s must be an IP address or a host name%s, got %r" % (role, name, empty, value)]


@pytest.mark.parametrize("values, message", [
    ({"vllm_service_front_routes": ["GET /v1/models", "GET /x; include /etc/passwd"]},
     "vllm_service_front_routes[1] must be 'METHOD /path'"),
    ({"vllm_service_front_routes": ["GET /v1/{x}/{"]}, "vllm_service_front_routes[0] must be 'METHOD /path'"),
    ({"vllm_service_front_metrics_cidrs": ["10.0.0.0/8", "all"]},
     "vllm_service_front_metrics_cidrs[1] must be a network such as 10.0.0.0/8"),
    ({"vllm_service_front_tls_key": "/etc/k.pem"}, "are given together or not at all"),
    ({"vllm_service_port": 8000, "vllm_service_backend_port": 8000}, "vllm_service_backend_port must differ"),
    ({"vllm_service_shutdown_timeout": -1}, "vllm_service_shutdown_timeout must be 0 or more seconds"),
    ({"vllm_service_front_retry_after": 0}, "vllm_service_front_retry_after must be a positive number"),
])
def test_front_inputs_that_would_reach_nginx_are_refused_before_anything_changes(values, message):
    found = problems("vllm_service", **values)
    assert any(message in p for p in found), found


def test_front_defaults_pass():
    assert problems("vllm_service", vllm_service_host="0.0.0.0", vllm_service_front_metrics_cidrs=["10.0.0.0/8"],
                    vllm_service_front_tls_cert="/etc/c.pem", vllm_service_front_tls_key="/etc/k.pem") == []


# --- issue 28 ------------------------------------------------------------------------------------------------------

from ansible_collections.moeops.inference.plugins.module_utils._common import inputs  # noqa: E402
from ansible_collections.moeops.inference.plugins.module_utils._common import specs  # noqa: E402
from ansible_collections.moeops.inference.plugins.module_utils._policy import api_front  # noqa: E402


@pytest.mark.parametrize("host, loopback", [
    ("127.0.0.1", True), ("127.255.3.4", True), ("::1", True), ("0:0:0:0:0:0:0:1", True), ("::1%lo", True),
    ("localhost", True),
    # Class 4: a name is a name, whatever it starts with; it may resolve anywhere.
    ("127.attacker.example", False), ("127.0.0.1.nip.io", False), ("localhost.", False), ("localhost.example", False),
    ("LOCALHOST", False), ("::ffff:127.0.0.1", False), ("0.0.0.0", False), ("::", False), ("", False),
    ("10.0.0.1", False),
])
def test_loopback_is_a_literal_address_or_exactly_localhost(host, loopback):
    assert inputs.is_loopback(host) is loopback
    assert api_front.is_loopback(host) is loopback  # the front asks the one rule


def test_a_name_that_starts_with_127_gets_a_front_and_an_api_key():
    from conftest import load_json, role_result
    from ansible_collections.moeops.inference.plugins.module_utils._facts import gpu_topology as topo
    gpus = topo.from_snapshot(load_json("constructed", "rtxpro6000-x8-2numa.json"), "rtxpro6000-x8-2numa")
    plan = role_result("vllm_service", {"gpus": gpus}, vllm_service_host="127.attacker.example")["plan"]
    assert plan["front"]["enabled"] and plan["generate_api_key"] and not plan["loopback"]
    assert "--host" in plan["args"] and plan["args"][plan["args"].index("--host") + 1] == "127.0.0.1"


ZONED = ["::1%i --dashboard-host 0.0.0.0", "fe80::1%eth0;", "fe80::1%", "fe80::1%..", "fe80::1%a/b",
         "fe80::1%abcdefghijklmnop", "fe80::1%$(id)", "fe80::%x any", "fe80::1%eth0", "fe80::1%2", "::1%lo"]


@pytest.mark.parametrize("role, name, what", [
    ("vllm_service", "vllm_service_host", "an IP address or a host name"),
    ("ray_cluster", "ray_cluster_head_address", "an IP address or a host name"),
    ("ray_cluster", "ray_cluster_dashboard_host", "an IP address or a host name"),
    ("monitoring", "monitoring_listen", "an IP address of this node")])
@pytest.mark.parametrize("value", ZONED)
def test_an_address_with_a_zone_id_is_refused(role, name, what, value):
    """Classes 5 and 41.1: ipaddress takes any text after the '%'; it reached Ray's argv, nginx's configuration and
    (monitoring) IPAddressAllow= as `any`. Interface names are not known when the roles plan: every zone id is
    refused, also one that names an interface."""
    assert problems(role, **{name: value}) == [
        "%s: %s must be %s without a zone id ('%%' and an interface after an IPv6 address): the roles cannot check the "
        "interface when they plan, and none needs a link-local address, got %r" % (role, name, what, value)]


@pytest.mark.parametrize("value, address", [("127.1", "127.0.0.1"), ("0x7f000001", "127.0.0.1"),
                                            ("2130706433", "127.0.0.1"), ("10.1", "10.0.0.1")])
def test_a_name_the_resolver_reads_as_an_ipv4_address_is_refused(value, address):
    assert problems("vllm_service", vllm_service_host=value) == [
        "vllm_service: vllm_service_host must be an IP address or a host name; %r is read by the resolver as the IPv4 "
        "address %s: write that address" % (value, address)]


@pytest.mark.parametrize("role, name", [("vllm_service", "vllm_service_front_metrics_cidrs"),
                                        ("monitoring", "monitoring_allow")])
@pytest.mark.parametrize("cidr", ["::1%i/128", "fe80::%eth0/64", "10.0.0.0/8%x", "fe80::%x any /64"])
def test_a_network_never_carries_a_zone_id(role, name, cidr):
    """Class 41.1: `fe80::%x any /64` in monitoring_allow reached IPAddressAllow= as `any` (0.0.0.0/0 ::/0)."""
    values = {name: [cidr], "monitoring_listen": "10.0.0.5"} if role == "monitoring" else {name: [cidr]}
    assert problems(role, **values) == [
        "%s: %s[0] must be a network such as 10.0.0.0/8 or an address without a zone id ('%%' and an interface): the "
        "roles cannot check the interface when they plan, got %r" % (role, name, cidr)]


@pytest.mark.parametrize("name", ["ray_cluster_node_address", "ray_cluster_head_address"])
@pytest.mark.parametrize("value", ["::1", "fd00::5", "fe80::1"])
def test_ray_refuses_an_ipv6_cluster_address_in_its_check(name, value):
    """The late refusal (getent ahostsv4, after Ray was installed) is the input rule now."""
    assert problems("ray_cluster", **{name: value}) == [
        "ray_cluster: %s must be an IPv4 address or a host name with one: the role reaches the cluster over IPv4 (each "
        "node resolves the others with getent ahostsv4, and NCCL's and gloo's interface is the one holding this IPv4 "
        "address), got the IPv6 address %r" % (name, value)]


@pytest.mark.parametrize("port, host", [(65535, "0.0.0.0"), ("65535", "10.0.0.5"), (65535, "gpu-01.lab.example")])
def test_port_65535_behind_a_front_is_refused_by_the_users_port(port, host):
    found = problems("vllm_service", vllm_service_port=port, vllm_service_host=host)
    assert found == ["vllm_service: vllm_service_port 65535 leaves no port for vLLM behind the front: vllm_service_host "
                     "%s is not loopback, so the front listens on vllm_service_port and vLLM on "
                     "vllm_service_backend_port, which is null (the port + 1, beyond 65535); set "
                     "vllm_service_backend_port, or a lower vllm_service_port" % host]
    assert "65536" not in found[0]


def test_port_65535_passes_on_loopback_or_with_a_backend_port():
    assert problems("vllm_service", vllm_service_port=65535) == []
    assert problems("vllm_service", vllm_service_port=65535, vllm_service_host="0.0.0.0",
                    vllm_service_backend_port=8001) == []


@pytest.mark.parametrize("role", ["vllm_service", "ray_cluster"])
def test_nccl_overrides_take_nccls_own_upper_case_names(role):
    """Decided for issue 28: NCCL reads NCCL_PROTO, never nccl_proto, so a lower-case key was a silent no-op."""
    name = role + "_nccl_overrides"
    found = problems(role, **{name: {"nccl_proto": "LL", "Nccl_Algo": None, "CUDA_VISIBLE_DEVICES": "0",
                                     "NCCL_P2P_LEVEL": "SYS", "NCCL_NVLS_ENABLE": None}})
    env = role + "_environment"
    assert found == [
        "%s: %s key 'CUDA_VISIBLE_DEVICES' is not an NCCL variable: NCCL reads only upper-case NCCL_* names; other "
        "variables go in %s" % (role, name, env),
        "%s: %s key 'Nccl_Algo' is not an NCCL variable: NCCL reads only upper-case NCCL_* names (did you mean "
        "NCCL_ALGO?); other variables go in %s" % (role, name, env),
        "%s: %s key 'nccl_proto' is not an NCCL variable: NCCL reads only upper-case NCCL_* names (did you mean "
        "NCCL_PROTO?); other variables go in %s" % (role, name, env)]


@pytest.mark.parametrize("value", ["maybe", "sometimes", "", "[true]"])
def test_a_string_for_a_bool_names_the_variable(value):
    """pcie_host_clear_acs: 'maybe' once met Ansible's conditional-type error, with no variable named."""
    found = problems("pcie_host", pcie_host_clear_acs=value)
    assert len(found) == 1 and found[0].startswith("pcie_host: ") and "pcie_host_clear_acs" in found[0], found


@pytest.mark.parametrize("running, refused", [("2.18.19", True), ("2.17.0", True), ("2.19.0", False),
                                              ("2.19.0rc1", False), ("2.21.5", False), ("2.22.0.dev0", False)])
def test_ansible_core_below_the_range_is_refused(running, refused):
    problem = specs.ansible_version_problem(running)
    assert bool(problem) is refused
    if refused:
        assert problem.startswith("moeops.inference needs ansible-core 2.19 to 2.21 (meta/runtime.yml: requires_ansible "
                                  ">=2.19.0); this controller runs ansible-core %s, which is not supported" % running)


def test_the_oldest_supported_ansible_is_meta_runtimes():
    with open(specs.RUNTIME_FILE) as f:
        assert ">=%s" % specs.oldest_ansible() in yaml.safe_load(f)["requires_ansible"]


@pytest.mark.parametrize("name, entry, message", [
    ("vllm_service_front_routes", "POST /{route}", "a {parameter} in the first two segments matches every route under it"),
    ("vllm_service_front_routes", "GET /v1/{x}", "a {parameter} in the first two segments"),
    ("vllm_service_front_routes", "GET /docs", "/docs is outside the prefixes where vLLM asks for the API key"),
    ("vllm_service_front_routes", "POST /tokenize", "list it in vllm_service_front_unsafe_routes if that is meant"),
    ("vllm_service_front_unsafe_routes", "GET /{x}", "a {parameter}"),
    ("vllm_service_front_unsafe_routes", "GET /metricsx", "vLLM serves its metrics on every path that starts with /metrics"),
])
def test_a_catch_all_or_unguarded_route_is_refused_naming_the_entry(name, entry, message):
    """Class 3: `POST /{route}` in the allowlist opened /invocations, /tokenize, /docs ... without a key."""
    found = problems("vllm_service", vllm_service_host="0.0.0.0", **{name: ["GET /v1/models", entry]})
    assert any(p.startswith("vllm_service: %s[1] %r is refused: " % (name, entry)) and message in p for p in found), found


def test_an_unguarded_route_named_unsafe_passes():
    assert problems("vllm_service", vllm_service_host="0.0.0.0", vllm_service_front_unsafe_routes=["POST /tokenize"]) == []


# --- issue 41, class 6 ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("value", [0, -1, "0"])
def test_pipeline_parallel_size_is_positive_also_with_a_ray_address(value):
    """vllm_service_pipeline_parallel_size 0 with a Ray address reached the unit as --pipeline-parallel-size 0."""
    message = ("vllm_service: vllm_service_pipeline_parallel_size must be a positive number of pipeline stages (the Ray "
               "nodes), got %s" % int(value))
    assert problems("vllm_service", vllm_service_ray_address="10.0.0.1:6379",
                    vllm_service_pipeline_parallel_size=value) == [message]
    assert problems("vllm_service", vllm_service_pipeline_parallel_size=value) == [message]
    assert problems("vllm_service", vllm_service_ray_address="10.0.0.1:6379", vllm_service_pipeline_parallel_size=2) == []


def _stat_loops():
    """The loop of every task that stats the front's TLS files before the plan (the role's check, preflight)."""
    loops = []
    for path in (("vllm_service", "tasks", "check.yml"), ("preflight", "tasks", "plan.yml")):
        with open(os.path.join(specs.ROLES_DIR, *path)) as f:
            loops += [t["loop"] for t in yaml.safe_load(f) if "ansible.builtin.stat" in t
                      and "vllm_service_front_tls_cert" in t.get("loop", "")]
    assert len(loops) == 2, loops
    return loops


@pytest.mark.parametrize("broken", ["/etc/ssl/a\0b.crt", "/etc/ssl/a\nb.crt", "/etc/ssl/a\rb.crt"])
def test_a_tls_path_with_a_line_breaker_is_refused_by_the_plan_never_read(broken):
    """A NUL byte in a TLS path failed the stat before the plan with "Failed to log to syslog", naming no variable: the
    stat leaves it out, and the plan refuses it naming the variable."""
    import role_templating
    found = problems("vllm_service", vllm_service_host="0.0.0.0", vllm_service_front_tls_cert=broken,
                     vllm_service_front_tls_key="/etc/ssl/k.pem")
    assert found[0].startswith("vllm_service: vllm_service_front_tls_cert contains a "), found
    assert not [p for p in found if broken in p or "syslog" in p], found
    variables = {"vllm_service_front_tls_cert": broken, "vllm_service_front_tls_key": "/etc/ssl/k.pem",
                 "_preflight": {"plan": {"roles": ["vllm_service"]}}}
    for loop in _stat_loops():
        assert role_templating.render(loop, variables) == ["/etc/ssl/k.pem"]
    variables["vllm_service_front_tls_cert"] = "/etc/ssl/a.crt"
    for loop in _stat_loops():
        assert role_templating.render(loop, variables) == ["/etc/ssl/a.crt", "/etc/ssl/k.pem"]
