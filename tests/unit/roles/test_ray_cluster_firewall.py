# -*- coding: utf-8 -*-
"""The Ray cluster's firewall (ray_cluster_firewall) as the role renders it from its plan, and the plan's port rules:
Ray Client's server (which `ray start --head` opens whenever grpc imports) is dropped like the other Ray ports, and no
Ray port or dropped range may hold the SSH port or the API's. tests/integration/55-ray-cluster.sh probes the loaded
rules from a non-member container (port 10001 among them)."""
from __future__ import annotations

import os
import shutil
import subprocess

import pytest
import role_templating

from conftest import role_result
from test_firewall_rulesets import dropped_ports as drops

TEMPLATE = os.path.join(role_templating.ROLES, "ray_cluster", "templates", "ray-firewall.nft.j2")
MEMBERS = ["head", "worker"]


def planned(ssh_port=22, ephemeral="32768\t60999\n", **values):
    values.setdefault("ray_cluster_firewall", True)
    values.setdefault("ray_cluster_head_host", "head")
    values.setdefault("ray_cluster_head_address", "10.0.0.1")
    values.setdefault("ray_cluster_node_address", "10.0.0.1")
    values.setdefault("ray_cluster_retired", [])
    values.setdefault("ray_cluster_num_gpus", 8)
    ctx = {"members": MEMBERS, "host": "head", "ssh_port": ssh_port, "ephemeral": ephemeral}
    return role_result("ray_cluster", ctx, **values)


def rules(result):
    assert result["problems"] == [], result["problems"]
    variables = role_templating.role_vars("ray_cluster")
    variables.update(ansible_managed="Ansible managed", _ray_cluster=result, _members=["10.0.0.1", "10.0.0.2"])
    with open(TEMPLATE) as f:
        return role_templating.render(f.read(), variables)


def dropped(text, port):
    return any(low <= port <= high for low, high in drops(text))


def test_ray_client_is_dropped_for_non_members_also_when_no_port_is_set():
    text = rules(planned())
    assert dropped(text, 10001)  # Ray's own default: ray start --head opens it whenever grpc imports
    for port in (6379, 8265, 8076, 8077, 8078, 8079, 52365, 8080, 10002, 10999, 32768, 60999):
        assert dropped(text, port), port
    # Members, loopback and established connections pass first; SSH and the API are never dropped.
    assert text.index("ip saddr @members accept") < text.index("tcp dport")
    assert not dropped(text, 22) and not dropped(text, 8000)
    # A port set for Ray Client is the one dropped.
    text = rules(planned(ray_cluster_client_server_port=10501, ray_cluster_max_worker_port=10500))
    assert dropped(text, 10501) and not dropped(text, 10001)


@pytest.mark.skipif(shutil.which("nft") is None, reason="nft is not installed")
def test_nft_accepts_the_rules(tmp_path):
    path = tmp_path / "ray.nft"
    path.write_text(rules(planned()))
    done = subprocess.run(["nft", "-c", "-f", str(path)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("values,ctx,message", [
    # Privileged worker ports, allowed by the switch: the range rule still refuses the SSH port in it.
    ({"ray_cluster_min_worker_port": 1, "ray_cluster_max_worker_port": 1024, "moeops_allow_privileged_ports": True}, {},
     "ray_cluster_min_worker_port..ray_cluster_max_worker_port (1-1024) contains the SSH port (ansible_port), 22"),
    ({"ray_cluster_min_worker_port": 2000, "ray_cluster_max_worker_port": 3000}, {"ssh_port": "2222"},
     "ray_cluster_min_worker_port..ray_cluster_max_worker_port (2000-3000) contains the SSH port (ansible_port), 2222"),
    ({"ray_cluster_min_worker_port": 7000, "ray_cluster_max_worker_port": 8050}, {},
     "ray_cluster_min_worker_port..ray_cluster_max_worker_port (7000-8050) contains vllm_service_port, 8000"),
    ({"vllm_service_port": 10500}, {},
     "ray_cluster_min_worker_port..ray_cluster_max_worker_port (10002-10999) contains vllm_service_port, 10500"),
    ({"ray_cluster_gcs_port": 22}, {}, "ray_cluster_gcs_port is 22, the SSH port (ansible_port)"),
    ({"ray_cluster_metrics_export_port": 8000}, {}, "ray_cluster_metrics_export_port is 8000, vllm_service_port"),
    ({"vllm_service_port": 10001}, {}, "Ray Client's server (ray_cluster_client_server_port null: Ray's default) is "
                                       "10001, vllm_service_port"),
    ({"vllm_service_port": 40000}, {},
     "ray_cluster_firewall drops non-members on this host's ephemeral port range 32768-60999"),
    ({}, {"ephemeral": "1\t65535"}, "ephemeral port range 1-65535 (net.ipv4.ip_local_port_range, where NCCL and gloo "
                                    "listen), which contains the SSH port (ansible_port), 22"),
    ({"ray_cluster_min_worker_port": 10000}, {}, "the Ray ports must be distinct, in 1-65535 and outside the worker "
                                                 "port range 10000-10999"),
])
def test_a_port_or_range_that_holds_ssh_or_the_api_is_refused_naming_the_variable(values, ctx, message):
    result = planned(**dict(ctx, **values))  # the role_plan step fails on any problem, before any change
    assert any(message in p for p in result["problems"]), result["problems"]
    assert all(p.startswith("ray_cluster: ") for p in result["problems"])


def test_the_ephemeral_range_matters_only_with_the_firewall():
    assert planned(vllm_service_port=40000, ray_cluster_firewall=False)["problems"] == []
    assert planned(ssh_port=22, ephemeral="1024 65000", ray_cluster_firewall=False)["problems"] == []
    assert planned()["plan"]["firewall"] == {"ports": [6379, 8076, 8077, 8078, 8079, 8080, 8265, 10001, 52365],
                                             "workers": [10002, 10999], "ephemeral": [32768, 60999],
                                             "client_port": 10001}
