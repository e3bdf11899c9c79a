# -*- coding: utf-8 -*-
"""The address and port types (plugins/module_utils/_common/inputs.py) over every role's options (issue 41, classes 1
and 2): every option named like an address, a network list or a port, in every entry point of every role's
meta/argument_specs.yml, is declared with its shared type in its role's module (ADDRESS_OPTIONS, PORT_OPTIONS), and the
plan applies that type: a zone id, a non-canonical spelling, the SSH port, a privileged port and another role's port
are refused, each naming the variable. An option added later with such a name fails here until it is typed."""
from __future__ import annotations

import glob
import ipaddress
import os
import re
import types

import pytest
import yaml

from ansible_collections.moeops.inference.plugins.module_utils._common import inputs
from ansible_collections.moeops.inference.plugins.module_utils._common.plan import (
    other_port_options, plan_role, role_module)
from ansible_collections.moeops.inference.plugins.module_utils._common.specs import spec_roles
from conftest import REPO, role_inputs, role_spec

# By name: what is bound, dialled or allowed (an address, a host, a network list) and what is listened on (a port).
ADDRESS_NAME = re.compile(r"_(host|hosts|listen|address|addresses|allow|cidr|cidrs|ip|ips|network|networks|bind)$")
PORT_NAME = re.compile(r"_(port|ports)$")
# Options named so that are no address or port, each with the reason.
EXCEPTIONS = {
    "ray_cluster_head_host": "an inventory host name (a member of ray_cluster_group), not an address: the plan finds it "
                             "among the group's members, and the head is reached at ray_cluster_head_address",
    "moeops_allow_privileged_ports": "the port type's own switch (a boolean), no port",
}


def spec_options():
    """(role, entry point, option) of every entry point of every role."""
    found = []
    for path in sorted(glob.glob(os.path.join(REPO, "roles", "*", "meta", "argument_specs.yml"))):
        role = path.split(os.sep)[-3]
        with open(path) as f:
            entry_points = yaml.safe_load(f)["argument_specs"]
        for entry, spec in sorted(entry_points.items()):
            found += [(role, entry, name) for name in sorted((spec or {}).get("options") or {})]
    return found


ADDRESS_LIKE = [o for o in spec_options() if ADDRESS_NAME.search(o[2])]
PORT_LIKE = [o for o in spec_options() if PORT_NAME.search(o[2])]


def test_the_name_patterns_find_the_options_they_are_for():
    """The walk below is only as good as its patterns: these options exist and are found."""
    names = {o[2] for o in ADDRESS_LIKE} | {o[2] for o in PORT_LIKE}
    assert {"monitoring_listen", "monitoring_allow", "vllm_service_host", "vllm_service_front_metrics_cidrs",
            "vllm_service_ray_address", "ray_cluster_head_address", "ray_cluster_dashboard_host",
            "monitoring_node_exporter_port", "ray_cluster_gcs_port", "vllm_service_backend_port"} <= names
    assert "gpu_facts_host_root" not in names and "pcie_host_port_pm_off" not in names  # a prefix is no suffix


@pytest.mark.parametrize("role, entry, name", ADDRESS_LIKE, ids=["%s:%s:%s" % o for o in ADDRESS_LIKE])
def test_every_address_like_option_has_the_address_type(role, entry, name):
    declared = getattr(role_module(role), "ADDRESS_OPTIONS", {})
    assert name in EXCEPTIONS or isinstance(declared.get(name), inputs.AddressType), (
        "%s (role %s, entry point %s) is named like an address: declare its type in the role's ADDRESS_OPTIONS, or "
        "list it in EXCEPTIONS with the reason" % (name, role, entry))


@pytest.mark.parametrize("role, entry, name", PORT_LIKE, ids=["%s:%s:%s" % o for o in PORT_LIKE])
def test_every_port_like_option_has_the_port_type(role, entry, name):
    assert name in EXCEPTIONS or name in getattr(role_module(role), "PORT_OPTIONS", ()), (
        "%s (role %s, entry point %s) is named like a port: list it in the role's PORT_OPTIONS, or in EXCEPTIONS "
        "with the reason" % (name, role, entry))


def test_every_exception_and_every_declaration_names_an_option():
    options = {(o[0], o[2]) for o in spec_options()}
    assert {name for _role, name in options} >= set(EXCEPTIONS)
    for role in spec_roles():
        module = role_module(role)
        for name in list(getattr(module, "ADDRESS_OPTIONS", {})) + list(getattr(module, "PORT_OPTIONS", ())):
            assert (role, name) in options, "%s declares a type for %s, which is not its option" % (role, name)


def problems(role, ctx=None, elsewhere=None, **values):
    """The role's input problems (its plan not run), as the role_plan action finds them: its defaults, then `values`."""
    values = dict(role_inputs(role), **values)  # role_inputs names the model, as every deploy does
    return plan_role(role, role_spec(role), values, sorted(values), spec_roles(), ctx or {}, plan=False,
                     elsewhere=elsewhere)["problems"]


TYPED_PORTS = sorted({(r, n) for r, _e, n in PORT_LIKE if n not in EXCEPTIONS})
TYPED_ADDRESSES = sorted({(r, n) for r, _e, n in ADDRESS_LIKE if n not in EXCEPTIONS})


@pytest.mark.parametrize("role, name", TYPED_PORTS)
@pytest.mark.parametrize("ssh_port", [22, 2222, "2222"])
def test_no_port_may_be_the_ssh_port_ansible_connects_on(role, name, ssh_port):
    """Class 2: monitoring_node_exporter_port 22 wrote a table that dropped SSH for everyone outside the allowlist."""
    found = problems(role, {"ssh_port": ssh_port}, moeops_allow_privileged_ports=True, **{name: int(ssh_port)})
    assert "%s: %s is %d, the SSH port (ansible_port) Ansible connects on: a listener there takes it, and a firewall " \
           "that drops it locks Ansible out" % (role, name, int(ssh_port)) in found, found


@pytest.mark.parametrize("role, name", TYPED_PORTS)
def test_a_privileged_port_needs_the_switch(role, name):
    message = ("%s: %s is 80, a privileged port (below 1024: sshd, DNS, a web server live there): pick a port from 1024 "
               "up, or set moeops_allow_privileged_ports: true if it is meant" % (role, name))
    assert message in problems(role, **{name: 80})
    assert message not in problems(role, moeops_allow_privileged_ports=True, **{name: 80})
    assert message not in problems(role, moeops_allow_privileged_ports="true", **{name: 80})  # -e converts
    assert not [p for p in problems(role, **{name: 1024}) if "privileged" in p]


@pytest.mark.parametrize("role, name", TYPED_PORTS)
@pytest.mark.parametrize("value", [0, 65536])
def test_a_port_is_in_range(role, name, value):
    assert "%s: %s must be a TCP port in 1-65535, got %d" % (role, name, value) in problems(role, **{name: value})


def test_no_port_may_be_another_roles_port():
    """The role_plan action passes the other roles' ports on this host (other_port_options names them)."""
    found = problems("monitoring", elsewhere={"vllm_service_port": 9100, "ray_cluster_gcs_port": 6379})
    assert found == ["monitoring: monitoring_node_exporter_port is 9100, also vllm_service_port's: each listener needs "
                     "its own port"]
    assert problems("monitoring", elsewhere={"vllm_service_port": "9400"}) == [
        "monitoring: monitoring_dcgm_exporter_port is 9400, also vllm_service_port's: each listener needs its own port"]
    assert problems("monitoring", elsewhere={"vllm_service_port": 8000, "vllm_service_backend_port": None}) == []


def test_the_other_roles_ports_are_every_port_option_the_role_does_not_declare():
    roles = spec_roles()
    others = other_port_options("monitoring", role_spec("monitoring"), roles)
    assert others["vllm_service"] == ["vllm_service_port", "vllm_service_backend_port"]
    assert "ray_cluster_gcs_port" in others["ray_cluster"] and "monitoring" not in others
    # ray_cluster declares vllm_service_port itself (its firewall keeps the API open): its own rules check it.
    assert "vllm_service_port" not in other_port_options("ray_cluster", role_spec("ray_cluster"), roles)["vllm_service"]
    assert "monitoring_node_exporter_port" in other_port_options("vllm_service", role_spec("vllm_service"), roles)[
        "monitoring"]


def test_the_defaults_of_every_role_take_no_other_roles_port():
    """What the action would pass for a host that sets nothing: the roles' defaults, which must not collide."""
    roles = spec_roles()
    defaults = {}
    for role in roles:
        with open(os.path.join(REPO, "roles", role, "defaults", "main.yml")) as f:
            defaults.update(yaml.safe_load(f) or {})
    for role in roles:
        elsewhere = {n: defaults.get(n) for names in other_port_options(role, role_spec(role), roles).values()
                     for n in names}
        assert not [p for p in problems(role, elsewhere=elsewhere) if "each listener needs" in p], role


def zoned(name):
    if name.endswith(("_allow", "_cidrs")):
        return ["fe80::%x any /64"]
    if name == "vllm_service_ray_address":
        return "[fe80::1%eth0]:6379"
    return "fe80::1%eth0"


@pytest.mark.parametrize("role, name", TYPED_ADDRESSES)
def test_every_address_option_refuses_a_zone_id(role, name):
    """Class 1: monitoring_allow `fe80::%x any /64` reached IPAddressAllow= as `any`; the scope-id rule of
    vllm_service_host never reached the monitoring role."""
    extra = {"monitoring_listen": "10.0.0.5"} if name == "monitoring_allow" else {}
    found = [p for p in problems(role, **dict(extra, **{name: zoned(name)})) if "zone id" in p]
    assert len(found) == 1 and found[0].startswith("%s: %s" % (role, name)), found


@pytest.mark.parametrize("value, canonical", [("0:0:0:0:0:0:0:1", "::1"), ("FD00::5", "fd00::5"),
                                              ("fd00:0::5", "fd00::5")])
@pytest.mark.parametrize("role, name", [("vllm_service", "vllm_service_host"), ("monitoring", "monitoring_listen"),
                                        ("ray_cluster", "ray_cluster_dashboard_host")])
def test_an_address_is_written_in_its_canonical_form(role, name, value, canonical):
    found = problems(role, **{name: value})
    assert any(p.startswith("%s: %s must be" % (role, name)) and "in canonical form: write %r, not %r"
               % (canonical, value) in p for p in found), found


@pytest.mark.parametrize("value", ["::ffff:127.0.0.1", "::ffff:7f00:1", "::ffff:10.0.0.5"])
@pytest.mark.parametrize("role, name", [("vllm_service", "vllm_service_host"), ("monitoring", "monitoring_listen")])
def test_an_ipv4_mapped_address_is_refused_naming_the_ipv4_address(role, name, value):
    mapped = ipaddress.ip_address(value).ipv4_mapped
    found = problems(role, **{name: value})
    assert any(p.startswith("%s: %s must be" % (role, name)) and "is an IPv4-mapped IPv6 address: write the IPv4 "
               "address %s" % mapped in p for p in found), found


@pytest.mark.parametrize("cidr, message", [
    ("10.0.5.7/24", "in canonical form: write '10.0.5.0/24', not '10.0.5.7/24'"),
    ("10.0.0.0/255.0.0.0", "in canonical form: write '10.0.0.0/8', not '10.0.0.0/255.0.0.0'"),
    ("FD00::/8", "in canonical form: write 'fd00::/8', not 'FD00::/8'"),
    ("::ffff:10.0.0.0/104", "is an IPv4-mapped IPv6 network: write the IPv4 network"),
    ("all", "must be a network such as 10.0.0.0/8 or an address, got 'all'"),
])
@pytest.mark.parametrize("role, name", [("vllm_service", "vllm_service_front_metrics_cidrs"),
                                        ("monitoring", "monitoring_allow")])
def test_a_network_is_written_in_its_canonical_form(role, name, cidr, message):
    extra = {"monitoring_listen": "10.0.0.5"} if role == "monitoring" else {}
    found = problems(role, **dict(extra, **{name: ["10.0.0.0/8", cidr]}))
    assert any(p.startswith("%s: %s[1] must be" % (role, name)) and message in p for p in found), found


@pytest.mark.parametrize("role, values", [
    ("monitoring", {"monitoring_listen": "10.0.0.5", "monitoring_allow": ["10.0.5.0/24", "fd00::/64", "10.0.0.9"],
                    "monitoring_vllm_target": "[fd00::1]:8000"}),
    ("vllm_service", {"vllm_service_host": "", "vllm_service_front_metrics_cidrs": ["10.0.0.0/8", "::1"],
                      "vllm_service_ray_address": "head.lab:6379", "vllm_service_port": 443,
                      "moeops_allow_privileged_ports": True}),
    ("ray_cluster", {"ray_cluster_head_address": "head.lab", "ray_cluster_dashboard_host": "::1"}),
])
def test_canonical_addresses_and_ports_pass(role, values):
    assert problems(role, **values) == []


@pytest.mark.parametrize("value", ["box1:8000:1", "[box1]:8000", "box1:0", "https://box1:8000", "[fe80::1%eth0]:6379",
                                   "[::ffff:127.0.0.1]:6379", "127.1:6379"])
def test_an_endpoint_is_host_colon_port(value):
    found = problems("vllm_service", vllm_service_ray_address=value)
    assert len(found) == 1 and found[0].startswith("vllm_service: vllm_service_ray_address must be"), found


@pytest.mark.parametrize("value", ["::ffff:127.0.0.1", "::ffff:7f00:1", "::ffff:127.1.2.3"])
def test_an_ipv4_mapped_loopback_is_decided_the_same_on_every_python(value, monkeypatch):
    """Python 3.13 calls ::ffff:127.0.0.1 loopback, 3.12 does not: the rule decides it itself (never loopback), so the
    exposure rules do not follow the controller's Python. Both behaviours of ipaddress are tried here."""
    for pythons_answer in (True, False):
        monkeypatch.setattr(ipaddress.IPv6Address, "is_loopback", property(
            lambda self, answer=pythons_answer: answer if self.ipv4_mapped is not None else self._ip == 1))
        assert inputs.is_loopback(value) is False
        assert inputs.is_loopback("::1") is True


def _action(task_vars_port=None, play_context_port=None):
    """The role_plan action with Ansible's own loader and templar (no connection: it needs none)."""
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar
    from ansible_collections.moeops.inference.plugins.action.role_plan import ActionModule
    action = ActionModule.__new__(ActionModule)
    action._loader = DataLoader()
    action._templar = Templar(loader=action._loader)
    action._play_context = types.SimpleNamespace(port=play_context_port)
    return action


@pytest.mark.parametrize("task_vars, play_context_port, port", [
    ({}, None, 22), ({"ansible_port": 2222}, None, 2222), ({"ansible_ssh_port": 2200}, None, 2200),
    ({}, 2022, 2022), ({"ansible_port": 2222}, 2022, 2222)])
def test_the_action_reads_the_ssh_port_from_the_inventory(task_vars, play_context_port, port):
    assert int(_action(play_context_port=play_context_port)._ssh_port(task_vars)) == port


def test_the_action_reads_the_other_roles_ports_the_host_sets():
    """Only ports the host's variables set: a default port counts only where its role runs, which the plan cannot
    know (Ray's metrics port 8080 would otherwise refuse vllm_service_port 8080 on a box without Ray)."""
    action = _action()
    roles = spec_roles()
    found = action._ports_elsewhere("monitoring", role_spec("monitoring"), roles,
                                    {"vllm_service_port": 9100, "monitoring_node_exporter_port": 9101})
    assert found == {"vllm_service_port": 9100}
    found = action._ports_elsewhere("vllm_service", role_spec("vllm_service"), roles, {"vllm_service_port": 8080})
    assert found == {}


def test_the_bad_inputs_cases_of_issue_41_get_the_messages_they_expect():
    """tests/integration/bad-inputs/cases.yml (run on a podman node, not here): its issue 41 host, planned as preflight
    plans each role it names, gets every message its cases expect."""
    with open(os.path.join(REPO, "tests", "integration", "bad-inputs", "cases.yml")) as f:
        case = [c for c in yaml.safe_load(f)["deploy"] if c["host"] == "inputs-addresses-and-ports"][0]
    given = {}
    for one in case["inputs"]:
        given.update(one["vars"])
    said = []
    for role in ("monitoring", "vllm_service"):
        assert role in given["preflight_roles"]
        mine = {k: v for k, v in given.items() if k in role_spec(role)}
        said += problems(role, {"ssh_port": 22}, **mine)
    for one in case["inputs"]:
        assert [e for e in one["expect"] if e not in " ".join(said)] == [], (one["name"], said)
