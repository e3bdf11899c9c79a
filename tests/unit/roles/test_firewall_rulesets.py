# -*- coding: utf-8 -*-
"""Every nftables table a role writes (roles/*/templates/*.nft.j2), rendered as the role renders it from its plan:
each chain keeps the connections already open first (`ct state established,related accept`), and no table drops the
port Ansible connects on (ansible_port), whatever it is. Issue 41, class 2: an exporter port of 22 wrote a table that
dropped SSH from everyone outside the allowlist, with no established rule: loaded in a network namespace, it froze an
open session. A table added later fails here until its role's renderer is listed below."""
from __future__ import annotations

import glob
import os
import re

import pytest
import role_templating

from conftest import role_result


def _plan(role, ctx, **values):
    result = role_result(role, ctx, **values)
    assert result["problems"] == [], result["problems"]
    return result


def _render(role, template, variables):
    with open(os.path.join(role_templating.ROLES, role, "templates", template)) as f:
        return role_templating.render(f.read(), variables)


def monitoring(ssh_port):
    values = {"monitoring_listen": "10.0.0.5", "monitoring_allow": ["10.0.5.0/24", "fd00::/64"]}
    variables = role_templating.role_vars("monitoring", ansible_managed="Ansible managed", **values)
    variables["_monitoring"] = _plan("monitoring", {"ssh_port": ssh_port}, **values)
    return _render("monitoring", "monitoring-firewall.nft.j2", variables)


def ray_cluster(ssh_port):
    values = {"ray_cluster_firewall": True, "ray_cluster_head_host": "head", "ray_cluster_head_address": "10.0.0.1",
              "ray_cluster_node_address": "10.0.0.1", "ray_cluster_retired": [], "ray_cluster_num_gpus": 8}
    ctx = {"members": ["head", "worker"], "host": "head", "ssh_port": ssh_port, "ephemeral": "32768\t60999\n"}
    variables = role_templating.role_vars("ray_cluster", ansible_managed="Ansible managed", **values)
    variables.update(_ray_cluster=_plan("ray_cluster", ctx, **values), _members=["10.0.0.1", "10.0.0.2"])
    return _render("ray_cluster", "ray-firewall.nft.j2", variables)


# Each role's table, rendered from its plan with the SSH port Ansible connects on.
RENDERERS = {"monitoring/templates/monitoring-firewall.nft.j2": monitoring,
             "ray_cluster/templates/ray-firewall.nft.j2": ray_cluster}


def test_every_table_of_every_role_is_rendered_here():
    found = {os.path.relpath(p, role_templating.ROLES)
             for p in glob.glob(os.path.join(role_templating.ROLES, "*", "templates", "*.nft.j2"))}
    assert found == set(RENDERERS), "list a renderer for every nftables template: %s" % sorted(found ^ set(RENDERERS))


def chains(text):
    """{chain name: [rule, ...]} of the rendered table, comments and the chain's `type ... hook` line left out."""
    found, name = {}, None
    for line in text.splitlines():
        line = line.strip()
        opened = re.match(r"^chain (\S+) \{$", line)
        if opened:
            name = opened.group(1)
            found[name] = []
        elif name and line == "}":
            name = None
        elif name and line and not line.startswith("#") and not line.startswith("type "):
            found[name].append(line)
    return found


# A drop of new connections only: a SYN alone. A session opened before the table is loaded may be unknown to conntrack
# (where this table is the first to use it), and a drop of every packet would cut it (test_netns_session.py loads them).
NEW_ONLY = "tcp flags syn / fin,syn,rst,ack drop"


def dropped_ports(text):
    """Every port or range a rule drops, as (low, high); a drop of anything but new connections fails."""
    found = []
    for rule in [r for rules in chains(text).values() for r in rules]:
        match = re.match(r"^tcp dport (\{[^}]*\}|\S+) " + re.escape(NEW_ONLY) + "$", rule)
        if match:
            for part in match.group(1).strip("{} ").split(","):
                low, _sep, high = part.strip().partition("-")
                found.append((int(low), int(high or low)))
        else:
            assert not rule.endswith(" drop") and not rule.endswith(" reject"), "not a drop of new connections: %r" % rule
    return found


@pytest.mark.parametrize("table", sorted(RENDERERS))
@pytest.mark.parametrize("ssh_port", [22, 2222, "2222"])
def test_every_chain_keeps_open_connections_first_and_never_drops_the_ssh_port(table, ssh_port):
    text = RENDERERS[table](ssh_port)
    found = chains(text)
    assert found, text
    for name, rules in found.items():
        assert rules[0] == "ct state established,related accept", (table, name, rules)
    drops = dropped_ports(text)
    assert drops, text  # the table drops something: the check above read its rules
    assert not [(low, high) for low, high in drops if low <= int(ssh_port) <= high], (table, drops)
