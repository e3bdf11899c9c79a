# -*- coding: utf-8 -*-
"""The monitoring role's units and drop-ins, rendered with Ansible's own templating from the role's variables and the
plan its check works out (the role_plan step) (on loopback, and on a node address with an allowlist): every line a directive systemd
reads as one, the listen address and the allowlist where they belong, the sandbox in every unit, and none of the
combinations this collection measured to fail. systemd itself checks them on the simulated node
(tests/integration/51-monitoring-live.sh: systemd-analyze verify and security, then they run)."""
from __future__ import annotations

import os
import re

import pytest
import role_templating

from conftest import role_result

TEMPLATES = os.path.join(role_templating.ROLES, "monitoring", "templates")
SANDBOX = {"NoNewPrivileges=true", "ProtectSystem=strict", "ProtectHome=true", "PrivateTmp=true",
           "ProtectKernelTunables=true", "ProtectKernelModules=true", "ProtectKernelLogs=true",
           "ProtectControlGroups=true", "RestrictNamespaces=true", "LockPersonality=true", "MemoryDenyWriteExecute=true",
           "CapabilityBoundingSet=", "SystemCallFilter=@system-service", "SystemCallArchitectures=native"}
DIRECTIVE = re.compile(r"^[A-Z][A-Za-z]+=")


def planned(**values):
    """The role's plan as its check registers it (_monitoring), from its defaults and `values`."""
    result = role_result("monitoring", {}, **values)
    assert result["problems"] == [], result["problems"]
    return result


def render(template, listen="127.0.0.1", allow=(), **overrides):
    values = dict(monitoring_listen=listen, monitoring_allow=list(allow), **overrides)
    variables = role_templating.role_vars("monitoring", ansible_managed="Ansible managed", inventory_hostname="box1",
                                          **values)
    variables["_monitoring"] = planned(**values)
    with open(os.path.join(TEMPLATES, template)) as f:
        text = f.read()
    with open(os.path.join(TEMPLATES, "sandbox.j2")) as f:
        # The template action resolves the include from the role's templates; rendered here the same way.
        text = text.replace("{% include 'sandbox.j2' %}", f.read().rstrip("\n"))
    return role_templating.render(text, variables)


def directives(text):
    """[(key, value)] of the unit, continuation lines joined; a line that is neither a section, a comment, blank
    nor KEY=VALUE fails (a directive glued to the next line's text is how a missing newline shows)."""
    out, pending = [], ""
    for line in text.splitlines():
        if pending:
            line, pending = pending + " " + line.strip(), ""
        if line.endswith("\\"):
            pending = line[:-1].rstrip()
            continue
        if not line.strip() or line.startswith("#") or re.match(r"^\[\w+\]$", line):
            continue
        assert DIRECTIVE.match(line), line
        key, value = line.split("=", 1)
        assert "#" not in value or key in ("ExecStart",), line
        out.append((key, value))
    return out


UNITS = ["node-exporter.conf.j2", "dcgm-exporter.service.j2", "moeops-textfile.service.j2", "prometheus.conf.j2"]


@pytest.mark.parametrize("template", UNITS)
@pytest.mark.parametrize("listen, allow", [("127.0.0.1", ()), ("10.0.0.5", ("10.0.5.0/24", "fd00::/64"))])
def test_every_unit_is_sandboxed_line_by_line(template, listen, allow):
    found = directives(render(template, listen, allow))
    lines = {"%s=%s" % kv for kv in found}
    assert SANDBOX <= lines, sorted(SANDBOX - lines)
    # A key given twice is systemd's "last one wins" (or a list): only the filter and the ExecStart reset may repeat.
    keys = [pair[0] for pair in found]
    assert {k for k in keys if keys.count(k) > 1} <= {"SystemCallFilter", "ExecStart"}, found
    # systemd 252 fails at step USER with ProtectProc=invisible beside PrivateUsers= and a non-root user (measured on
    # the simulated node): prometheus.service already has PrivateUsers=true, so its drop-in must not add ProtectProc.
    assert not ("ProtectProc=invisible" in lines and ("PrivateUsers=true" in lines or template == "prometheus.conf.j2"))


@pytest.mark.parametrize("listen, allow, expected", [
    ("127.0.0.1", (), "localhost"),
    ("10.0.0.5", ("10.0.5.0/24", "fd00::/64"), "localhost 10.0.0.5 10.0.5.0/24 fd00::/64"),
])
def test_the_exporters_listen_where_planned_open_to_the_allowlist_only(listen, allow, expected):
    node = dict(directives(render("node-exporter.conf.j2", listen, allow)))
    assert "--web.listen-address=%s:9100" % listen in node["ExecStart"]
    assert "--collector.textfile.directory=/var/lib/prometheus/node-exporter" in node["ExecStart"]
    assert node["EnvironmentFile"] == ""  # the packaged ARGS (every address) are not read
    dcgm = dict(directives(render("dcgm-exporter.service.j2", listen, allow)))
    assert dcgm["ExecStart"].split() == ["/usr/bin/dcgm-exporter", "-f", "/etc/dcgm-exporter/moeops-counters.csv",
                                         "-a", "%s:9400" % listen, "-r", "127.0.0.1:5555", "-c", "10000"]
    assert dcgm["DynamicUser"] == "true" and dcgm["PrivateDevices"] == "true"
    for unit in (node, dcgm):
        assert unit["IPAddressDeny"] == "any" and unit["IPAddressAllow"] == expected


def test_prometheus_listens_on_loopback_and_reaches_this_node_only():
    unit = dict(directives(render("prometheus.conf.j2", "10.0.0.5", ("10.0.5.0/24",), monitoring_prometheus=True)))
    assert "--web.listen-address=127.0.0.1:9090" in unit["ExecStart"]
    assert "--config.file=/etc/moeops/monitoring/prometheus/prometheus-local.yml" in unit["ExecStart"]
    assert unit["IPAddressAllow"] == "localhost 10.0.0.5"
    assert unit["ReadWritePaths"] == "/var/lib/prometheus/metrics2"


def test_the_textfile_writer_has_no_network_and_writes_one_directory():
    unit = dict(directives(render("moeops-textfile.service.j2")))
    assert unit["ExecStart"] == ("/usr/bin/python3 /usr/local/libexec/moeops/moeops-textfile "
                                 "/var/lib/moeops/monitoring/facts.json /var/lib/prometheus/node-exporter/moeops.prom")
    assert unit["PrivateNetwork"] == "true" and unit["ReadWritePaths"] == "/var/lib/prometheus/node-exporter"
    assert unit["Type"] == "oneshot"


def test_the_firewall_table_drops_the_exporter_ports_for_all_but_the_allowlist():
    text = render("monitoring-firewall.nft.j2", "10.0.0.5", ("10.0.5.0/24", "fd00::/64"))
    assert "elements = { 10.0.5.0/24 }" in text and "elements = { fd00::/64 }" in text
    rules = [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("#")]
    new_only = "tcp flags syn / fin,syn,rst,ack drop"  # new connections only (test_firewall_rulesets.py says why)
    assert rules.index('iif "lo" accept') < rules.index("ip saddr @allow4 accept") < rules.index(
        "tcp dport { 9100, 9400 } " + new_only)
    assert "delete table inet moeops_monitoring" in rules  # reloading replaces only this table
    assert "tcp dport { 9100 } " + new_only in render("monitoring-firewall.nft.j2", "10.0.0.5", ("10.0.5.0/24",),
                                                      monitoring_dcgm=False)


def test_the_local_prometheus_scrapes_this_node_with_its_name():
    import yaml
    variables = role_templating.role_vars("monitoring", ansible_managed="Ansible managed", inventory_hostname="box1")
    variables["_monitoring"] = planned()
    variables["_monitoring"]["plan"]["facts"] = {"vllm_target": "127.0.0.1:8001"}  # what tasks/read.yml plans
    with open(os.path.join(TEMPLATES, "prometheus-local.yml.j2")) as f:
        config = yaml.safe_load(role_templating.render(f.read(), variables))
    jobs = {j["job_name"]: j["static_configs"][0] for j in config["scrape_configs"]}
    assert jobs["moeops_vllm"] == {"targets": ["127.0.0.1:8001"], "labels": {"node": "box1"}}
    assert jobs["moeops_node"]["targets"] == ["127.0.0.1:9100"] and jobs["moeops_dcgm"]["targets"] == ["127.0.0.1:9400"]
    assert config["rule_files"] == ["/etc/moeops/monitoring/prometheus/rules/*.yml"]
