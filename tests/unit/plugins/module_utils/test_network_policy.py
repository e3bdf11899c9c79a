# -*- coding: utf-8 -*-
"""Network facts from sysfs, the NCCL interface/RDMA choice, the multi-node layout, the Ray version plan."""
from __future__ import annotations

import copy
import os

import pytest
from conftest import load_json, net_tree

from ansible_collections.moeops.inference.plugins.module_utils._facts import gpu_topology as topo
from ansible_collections.moeops.inference.plugins.module_utils._policy import nccl_policy as policy
from ansible_collections.moeops.inference.plugins.module_utils._policy import ray_version

NET = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))),
                   "fixtures", "net")
# Captured on this project's CI/dev VM: eth0 (virtio), podman's cni-podman0 bridge, six veths, two ifb, lo.
REAL_VM = net_tree("real/vm-podman-host")
# CONSTRUCTED test double (capture.py --spec): onboard NIC, ConnectX-7 IB port ACTIVE, RoCE port DOWN, docker0, virbr0.
RDMA_BOX = net_tree("constructed/workstation-cx7-rdma")
VLLM_METADATA = os.path.join(os.path.dirname(NET), "vllm", "vllm-0.33.0.dist-info.METADATA")


def _names(network):
    return [i["name"] for i in network["interfaces"]]


def test_real_capture_reads_every_interface_with_its_kind():
    net = topo.read_network(REAL_VM)
    assert net["unavailable"] == [] and net["rdma_devices"] == []
    by = {i["name"]: i for i in net["interfaces"]}
    assert sorted(by) == _names(net)
    assert by["eth0"]["virtual"] is False and by["eth0"]["driver"] == "virtio_net"
    assert by["eth0"]["pci_bus_id"] == "00000000:00:03.0" and by["eth0"]["mtu"] == 1400
    assert by["eth0"]["speed_mbps"] is None  # virtio reports -1
    assert by["cni-podman0"]["bridge"] is True and by["cni-podman0"]["virtual"] is True
    assert by["lo"]["type"] == "loopback"
    assert sum(1 for n in by if n.startswith("veth")) == 6


def test_real_capture_picks_eth0_never_a_bridge_or_veth():
    result = policy.network_policy(topo.read_network(REAL_VM))
    assert result["errors"] == []
    assert result["env"] == {"NCCL_SOCKET_IFNAME": "=eth0", "GLOO_SOCKET_IFNAME": "eth0"}
    assert result["settings"]["NCCL_SOCKET_IFNAME"]["rule"] == "only_physical_interface"


def test_constructed_rdma_box_reads_ports_and_netdevs():
    net = topo.read_network(RDMA_BOX)
    devs = {d["name"]: d for d in net["rdma_devices"]}
    assert devs["mlx5_0"]["ports"] == [{"port": 1, "state": "ACTIVE", "link_layer": "InfiniBand", "rate": "400 Gb/sec (4X NDR)"}]
    assert devs["mlx5_0"]["netdevs"] == ["ib0"] and devs["mlx5_0"]["pci_bus_id"] == "00000000:41:00.0"
    assert devs["mlx5_1"]["ports"][0]["state"] == "DOWN"
    assert {i["name"]: i["type"] for i in net["interfaces"]}["ib0"] == "infiniband"


def test_two_physical_candidates_need_inventory_or_the_address_interface():
    net = topo.read_network(RDMA_BOX)
    ambiguous = policy.network_policy(net)
    assert "NCCL_SOCKET_IFNAME" not in ambiguous["env"]
    assert "enp5s0, ib0" in ambiguous["errors"][0] and "ray_cluster_nccl_socket_ifname" in ambiguous["errors"][0]
    # Only the ACTIVE RDMA device, never the DOWN one.
    assert ambiguous["env"]["NCCL_IB_HCA"] == "=mlx5_0"
    by_address = policy.network_policy(net, address_interface="enp5s0")
    assert by_address["errors"] == [] and by_address["env"]["NCCL_SOCKET_IFNAME"] == "=enp5s0"
    from_inventory = policy.network_policy(net, socket_ifname="ib0", ib_hca="mlx5_0:1")
    assert from_inventory["env"] == {"NCCL_SOCKET_IFNAME": "ib0", "GLOO_SOCKET_IFNAME": "ib0", "NCCL_IB_HCA": "mlx5_0:1"}
    assert from_inventory["settings"]["NCCL_IB_HCA"]["source"] == "inventory" and from_inventory["warnings"] == []


@pytest.mark.parametrize("address_interface", ["docker0", "virbr0", "veth1a2b3c", "lo"])
def test_address_on_a_bridge_or_loopback_is_never_taken(address_interface):
    result = policy.network_policy(topo.read_network(RDMA_BOX), address_interface=address_interface)
    assert "NCCL_SOCKET_IFNAME" not in result["env"] and result["errors"]


def test_inventory_names_are_checked_against_the_facts():
    net = topo.read_network(REAL_VM)
    assert "does not have" in policy.network_policy(net, socket_ifname="=enp9s0")["warnings"][0]
    assert "loopback/bridge" in policy.network_policy(net, socket_ifname="docker0")["warnings"][0] or \
        "does not have" in policy.network_policy(net, socket_ifname="docker0")["warnings"][0]
    assert "not an RDMA device" in policy.network_policy(net, ib_hca="mlx5_0")["warnings"][0]


def test_only_bridges_and_loopback_is_an_error_not_a_default():
    net = topo.read_network(REAL_VM)
    net["interfaces"] = [i for i in net["interfaces"] if i["name"] != "eth0"]
    result = policy.network_policy(net)
    assert result["env"] == {} and "no interface" in result["errors"][0]


def test_missing_sysfs_is_reported_not_raised(tmp_path):
    net = topo.read_network(str(tmp_path))
    assert net["interfaces"] == [] and net["rdma_devices"] == []
    assert net["unavailable"][0]["field"] == "network.interfaces"


def test_snapshot_v1_without_network_still_replays_and_network_round_trips():
    # A schema_version 1 snapshot written before the network part existed.
    facts = copy.deepcopy(topo.from_snapshot(load_json("real", "h200-x1-device.nvml.snapshot.json"), "old.json"))
    snap = topo.to_snapshot(facts, "2026-01-01T00:00:00Z", "h")
    assert "network" not in snap and "network" not in topo.from_snapshot(snap, "x.json")
    facts["network"] = topo.read_network(RDMA_BOX)
    snap = topo.to_snapshot(facts, "2026-01-01T00:00:00Z", "h")
    assert snap["schema_version"] == 1
    assert topo.from_snapshot(snap, "x.json")["network"] == facts["network"]
    snap["network"] = {"interfaces": [{"mtu": 1500}]}
    with pytest.raises(topo.SnapshotError, match="network.interfaces"):
        topo.from_snapshot(snap, "x.json")


def _facts(count, name="NVIDIA RTX PRO 6000 Blackwell Workstation Edition"):
    return {"count": count, "gpus": [{"index": i, "name": name} for i in range(count)], "pairs": [],
            "interconnect": {"nvlink_all": False, "p2p_all_ok": True}}


def test_multinode_layout_tp_inside_pp_across():
    layout = policy.multinode_layout([_facts(8), _facts(8)])
    assert (layout["tensor_parallel_size"], layout["pipeline_parallel_size"], layout["world_size"]) == (8, 2, 16)
    assert layout["args"] == ["--distributed-executor-backend", "ray", "--pipeline-parallel-size", "2"]
    assert layout["errors"] == []
    assert policy.multinode_layout([_facts(4)] * 3)["world_size"] == 12


def test_multinode_layout_one_node_adds_no_ray_arguments():
    assert policy.multinode_layout([_facts(8)])["args"] == []


def test_multinode_layout_refuses_unequal_nodes():
    assert "differ" in policy.multinode_layout([_facts(8), _facts(4)])["errors"][0]
    assert "differ" in policy.multinode_layout([_facts(8), _facts(8, "NVIDIA H100")])["errors"][0]
    assert policy.multinode_layout([_facts(0), _facts(0)])["errors"] == ["the head has no GPU"]


def _requires_from(path):
    with open(path) as f:
        return [line.split(":", 1)[1].strip() for line in f if line.startswith("Requires-Dist:")]


def test_vllm_0_33_0_declares_no_ray_so_the_pin_is_used():
    requires = _requires_from(VLLM_METADATA)
    assert len(requires) > 50
    plan = ray_version.ray_version_plan(requires, "2.60.0", "0.33.0")
    assert plan == {"version": "2.60.0", "source": "role_pin", "declared": [], "extras": [], "errors": [],
                    "reason": plan["reason"]}
    assert "declares no Ray requirement" in plan["reason"]


def test_declared_ray_range_checks_the_pin_and_an_exact_pin_wins():
    ranged = ["torch==2.9.0", 'ray[cgraph]>=2.48.0; extra == "ray"']
    assert ray_version.ray_version_plan(ranged, "2.60.0")["errors"] == []
    assert ray_version.ray_version_plan(ranged, "2.60.0")["extras"] == ["cgraph"]
    assert "does not satisfy" in ray_version.ray_version_plan(ranged, "2.47.1")["errors"][0]
    exact = ray_version.ray_version_plan(["Ray==2.49.2"], "2.60.0")
    assert (exact["version"], exact["source"], exact["errors"]) == ("2.49.2", "vllm_metadata", [])
    assert ray_version.ray_version_plan(["ray<2.50,!=2.49.0"], "2.49.0")["errors"]
    assert ray_version.ray_version_plan(["ray~=2.48"], "2.60.0")["errors"] == []
    assert ray_version.ray_version_plan(["ray~=2.48.0"], "2.60.0")["errors"]
    assert ray_version.ray_version_plan([], "")["errors"]
    with pytest.raises(ValueError):
        ray_version.ray_version_plan(["ray @ https://example.invalid/ray.whl"], "2.60.0")
