# -*- coding: utf-8 -*-
from __future__ import annotations

import copy
import os
import subprocess
import sys

import pytest

from ansible_collections.moeops.inference.plugins.module_utils._facts import gpu_topology as topo
from conftest import FIXTURES, constructed_names, load_json
import nvml_double


def smi_outputs(capture):
    out = capture["nvidia_smi"]
    query = [k for k in out if k.startswith("nvidia-smi --query-gpu")][0]
    return {
        "xml": out["nvidia-smi -q -x"]["stdout"],
        "topo": out["nvidia-smi topo -m"]["stdout"],
        "p2p_r": out["nvidia-smi topo -p2p r"]["stdout"],
        "p2p_w": out["nvidia-smi topo -p2p w"]["stdout"],
        "p2p_n": out["nvidia-smi topo -p2p n"]["stdout"],
        "p2p_a": None,
        "query": out[query]["stdout"],
        "nvlink": out["nvidia-smi nvlink -s"]["stdout"],
    }


# ------------------------------------------------------------ real H200 capture

def test_h200_nvml_reader(h200_capture):
    facts = topo.read_nvml(nvml_double.from_capture(os.path.join(FIXTURES, "real", "h200-x1-vm.json")))
    assert facts["backend"] == "nvml"
    assert facts["count"] == 1
    assert facts["driver_version"] == "580.159.04"
    assert facts["cuda_driver_version"] == "13.0"
    g = facts["gpus"][0]
    assert g["name"] == "NVIDIA H200"
    assert g["compute_capability"] == "9.0"
    assert g["architecture"] == "hopper"
    assert g["memory_total_mib"] == 143771
    assert g["pci_bus_id"] == "00000000:00:06.0"
    assert g["pcie"] == {"max_gen": 5, "max_width": 16, "current_gen": 5, "current_width": 16}
    assert g["cpu_affinity"] == "0-15"
    assert g["persistence_mode"] is True
    assert g["mig_mode"] is False
    # NotSupported in the capture: null, and listed with the reason.
    assert g["gpu_numa_id"] is None
    assert g["nvlink"] == {"active_links": None, "peers": None, "nvswitch_links": None}
    missing = {u["field"]: u["reason"] for u in facts["unavailable"]}
    assert "NotSupported" in missing["gpus[0].nvlink"]
    assert "NotSupported" in missing["gpus[0].gpu_numa_id"]
    assert "gpus[0].numa_node" in missing  # memory affinity was not captured, no sysfs here
    assert facts["interconnect"]["class"] == "single"
    assert facts["interconnect"]["nvlink_all"] is None


def test_h200_nvml_reader_uses_sysfs_numa_fallback(h200_capture):
    double = nvml_double.from_capture(os.path.join(FIXTURES, "real", "h200-x1-vm.json"))
    seen = []
    facts = topo.read_nvml(double, lambda bus: seen.append(bus) or 0)
    assert seen == ["00000000:00:06.0"]
    assert facts["gpus"][0]["numa_node"] == 0
    assert facts["interconnect"]["numa_nodes"] == [0]


def test_h200_smi_reader(h200_capture):
    facts = topo.read_nvidia_smi(smi_outputs(h200_capture))
    assert facts["backend"] == "nvidia_smi"
    assert facts["count"] == 1
    g = facts["gpus"][0]
    assert (g["name"], g["compute_capability"], g["architecture"]) == ("NVIDIA H200", "9.0", "hopper")
    assert g["numa_node"] == 0 and g["cpu_affinity"] == "0-15"
    assert g["nvlink"]["active_links"] is None
    assert facts["interconnect"]["class"] == "single"


def test_h200_backends_agree(h200_capture):
    """What both backends can read, they read alike. The VM capture recorded no NVML BAR1 call: NVML's BAR1 is null
    there, named in unavailable, and nvidia-smi's is that machine's 262144 MiB (the BAR1 tests below)."""
    a = topo.read_nvml(nvml_double.from_capture(os.path.join(FIXTURES, "real", "h200-x1-vm.json")), lambda bus: 0)
    b = topo.read_nvidia_smi(smi_outputs(h200_capture))
    assert (a["gpus"][0].pop("bar1_total_mib"), b["gpus"][0].pop("bar1_total_mib")) == (None, 262144)
    assert {"field": "gpus[0].bar1_total_mib", "reason": "not in the recorded data: nvmlDeviceGetBAR1MemoryInfo"} \
        in a["unavailable"]
    assert a["gpus"] == b["gpus"]
    assert a["pairs"] == b["pairs"] == []
    assert a["interconnect"] == b["interconnect"]
    assert (a["driver_version"], a["cuda_driver_version"]) == (b["driver_version"], b["cuda_driver_version"])


def test_topo_matrix_strips_ansi_and_padding(h200_capture):
    parsed = topo.parse_topo_matrix(h200_capture["nvidia_smi"]["nvidia-smi topo -m"]["stdout"])
    assert parsed == {"paths": {}, "cpu_affinity": {0: "0-15"}, "numa_affinity": {0: 0}, "gpu_numa_id": {0: None}}


def test_query_csv_drops_units(h200_capture):
    out = h200_capture["nvidia_smi"]
    query = [k for k in out if k.startswith("nvidia-smi --query-gpu")][0]
    rows = topo.parse_query_csv(out[query]["stdout"])
    assert rows[0]["memory.total"] == "143771 MiB"
    assert rows[0]["compute_cap"] == "9.0"


# A multi-GPU topo -m as nvidia-smi prints it (layout of NVIDIA's documented
# output; CONSTRUCTED, values chosen for the test).
TOPO_4 = (
    "\t\x1b[4mGPU0\tGPU1\tGPU2\tGPU3\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\x1b[0m\n"
    "GPU0\t X \tNV12\tSYS\tSYS\tPXB\t0-31\t0\t\tN/A\n"
    "GPU1\tNV12\t X \tSYS\tSYS\tPXB\t0-31\t0\t\tN/A\n"
    "GPU2\tSYS\tSYS\t X \tNV12\tSYS\t32-63\t1\t\tN/A\n"
    "GPU3\tSYS\tSYS\tNV12\t X \tSYS\t32-63\t1\t\tN/A\n"
    "NIC0\tPXB\tPXB\tSYS\tSYS\t X \t\t\t\t\n"
    "\nLegend:\n\n  X    = Self\n"
)
P2P_4 = (
    " \t\x1b[4mGPU0\tGPU1\tGPU2\tGPU3\t\x1b[0m\n"
    " GPU0\tX\tOK\tOK\tOK\t\n GPU1\tOK\tX\tOK\tOK\t\n"
    " GPU2\tOK\tOK\tX\tOK\t\n GPU3\tOK\tOK\tOK\tX\t\n\nLegend:\n"
)


def test_topo_matrix_multi_gpu_with_nic():
    parsed = topo.parse_topo_matrix(TOPO_4)
    assert parsed["paths"] == {(0, 1): "NV12", (0, 2): "SYS", (0, 3): "SYS", (1, 2): "SYS", (1, 3): "SYS", (2, 3): "NV12"}
    assert parsed["numa_affinity"] == {0: 0, 1: 0, 2: 1, 3: 1}
    assert parsed["cpu_affinity"][3] == "32-63"


def test_p2p_matrix():
    assert topo.parse_p2p_matrix(P2P_4) == {k: "OK" for k in [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]}


def test_nvlink_status_parser():
    text = ("GPU 0: NVIDIA H100 (UUID: GPU-x)\n\t Link 0: 26.562 GB/s\n\t Link 1: <inactive>\n"
            "GPU 1: NVIDIA H100 (UUID: GPU-y)\n\t Link 0: 26.562 GB/s\n")
    assert topo.parse_nvlink_status(text) == {0: 1, 1: 1}
    assert topo.parse_nvlink_status("") == {}


@pytest.mark.parametrize("cc,family", [
    ("12.0", "blackwell"), ("10.0", "blackwell"), ("9.0", "hopper"), ("8.9", "ada"),
    ("8.0", "ampere"), ("8.6", "ampere"), ("7.5", "turing"), ("7.0", "volta"), ("99.9", None), (None, None),
])
def test_architecture_family(cc, family):
    assert topo.architecture_family(cc) == family


def test_cpu_masks():
    assert topo.cpu_list_from_masks([65535, 0, 0, 0]) == "0-15"
    assert topo.cpu_list_from_masks([0xFFFFFFFF, 0xFFFFFFFF, 0, 0]) == "0-31,64-95"
    assert topo.cpu_list_from_masks([0b1011]) == "0-1,3"
    assert topo.cpu_list_from_masks([0]) == ""


def test_bus_id_normalised():
    assert topo.normalize_bus_id("0000:c1:00.0") == "00000000:C1:00.0"
    assert topo.normalize_bus_id("00000000:00:06.0") == "00000000:00:06.0"


# ----------------------------------------------------- constructed topologies

EXPECTED_INTERCONNECT = {
    # name: (class, worst_path, p2p_all_ok, nvlink_all, numa_nodes)
    "rtxpro6000-x8-2numa": ("pcie_cross_numa", "SYS", True, False, [0, 1]),
    "rtxpro6000-x4-1numa": ("pcie_host_bridge", "PHB", True, False, [0]),
    "rtxpro6000-x2-1numa": ("pcie_host_bridge", "NODE", True, False, [0]),
    "l40s-x4-pcie-switch": ("pcie_switch", "PIX", True, False, [0]),
    "l40s-x8-2switch-2numa": ("pcie_cross_numa", "SYS", True, False, [0, 1]),
    "h100pcie-x4-nvlink-pairs": ("pcie_cross_numa", "SYS", True, False, [0, 1]),
    "h100sxm-x8-nvswitch": ("nvswitch", "NV18", True, True, [0, 1]),
    "rtx4090-x4-p2p-unsupported": ("pcie_host_bridge", "PHB", False, False, [0]),
    "l40s-x4-acs-partial": ("pcie_host_bridge", "PHB", False, False, [0]),
    "mixed-x2": ("pcie_host_bridge", "PHB", True, False, [0]),
    "h100sxm-x1-mig": ("single", None, None, None, [0]),
}


def test_every_constructed_fixture_has_an_expectation():
    assert sorted(EXPECTED_INTERCONNECT) == constructed_names()


@pytest.mark.parametrize("name", sorted(EXPECTED_INTERCONNECT))
def test_constructed_interconnect(name):
    snap = load_json("constructed", name + ".json")
    assert snap["constructed"] is True and snap["description"].startswith("CONSTRUCTED")
    s = topo.from_snapshot(snap, name)["interconnect"]
    assert (s["class"], s["worst_path"], s["p2p_all_ok"], s["nvlink_all"], s["numa_nodes"]) == EXPECTED_INTERCONNECT[name]


def without_unread_bar1(read, snapshot_gpus):
    """The GPUs as read, less a null bar1_total_mib where the snapshot (made before BAR1 was read) has none."""
    out = [dict(g) for g in read]
    for gpu, snap in zip(out, snapshot_gpus):
        if "bar1_total_mib" not in snap:
            assert gpu.pop("bar1_total_mib") is None
    return out


@pytest.mark.parametrize("name", sorted(EXPECTED_INTERCONNECT))
def test_nvml_reader_round_trips_constructed(name):
    """The NVML reader, fed NVML's answers for a topology, gives that topology back."""
    snap = load_json("constructed", name + ".json")
    double = nvml_double.from_snapshot(snap)
    facts = topo.read_nvml(double)
    assert without_unread_bar1(facts["gpus"], snap["gpus"]) == snap["gpus"]
    assert facts["pairs"] == snap["pairs"]
    assert all(isinstance(i, int) and not isinstance(i, tuple) for i in double.p2p_calls)
    assert sorted(set(double.p2p_calls)) == ([0, 1, 2, 3] if snap["pairs"] else [])


def test_pynvml_read_index_is_a_tuple_and_the_double_refuses_it():
    pynvml = pytest.importorskip("pynvml")
    assert pynvml.NVML_P2P_CAPS_INDEX_READ == (0,)  # the upstream bug this code works around
    double = nvml_double.from_snapshot(load_json("constructed", "mixed-x2.json"))
    with pytest.raises(TypeError):
        double.nvmlDeviceGetP2PStatus(0, 1, pynvml.NVML_P2P_CAPS_INDEX_READ)
    assert topo.P2P_CAPS_INDEX["read"] == 0


def test_mig_fixture():
    facts = topo.from_snapshot(load_json("constructed", "h100sxm-x1-mig.json"), "x")
    assert facts["gpus"][0]["mig_mode"] is True


# ------------------------------------------------------------------- snapshots

def test_snapshot_round_trip():
    snap = load_json("constructed", "rtxpro6000-x8-2numa.json")
    facts = topo.from_snapshot(snap, "/x.json")
    assert facts["backend"] == "snapshot"
    assert facts["snapshot"]["constructed"] is True
    again = topo.to_snapshot(facts, "t", "h", snap["description"], constructed=True)
    for key in topo.SNAPSHOT_KEYS:
        assert again[key] == snap[key]


@pytest.mark.parametrize("mutate,message", [
    (lambda s: s.update(schema_version=2), "schema_version 2 is not supported"),
    (lambda s: s.pop("pairs"), "lacks 'pairs'"),
    (lambda s: s["pairs"].pop(), "every GPU pair once"),
    (lambda s: s["gpus"].reverse(), "listed by index"),
    (lambda s: s["pairs"][0].update(path="NVL"), "unknown path 'NVL'"),
])
def test_snapshot_rejects_bad_files(mutate, message):
    snap = copy.deepcopy(load_json("constructed", "rtxpro6000-x4-1numa.json"))
    mutate(snap)
    with pytest.raises(topo.SnapshotError, match=message):
        topo.from_snapshot(snap, "bad.json")


def test_no_gpu_facts():
    facts = topo.no_gpu_facts("nvidia-smi is not on the PATH")
    assert (facts["count"], facts["backend"], facts["interconnect"]["class"]) == (0, "none", "none")


def test_constructed_fixtures_match_their_builder():
    build = os.path.join(FIXTURES, "constructed", "build.py")
    subprocess.run([sys.executable, build, "--check"], check=True)


# ----------------------------------------------- the device run (real H200)

DEVICE = os.path.join(FIXTURES, "real", "h200-x1-device")


def _device_outputs():
    def read(name):
        with open(os.path.join(DEVICE, name)) as f:
            return f.read()
    return {
        "xml": read("nvidia-smi.q_x.txt"), "topo": read("nvidia-smi.topo_m.txt"),
        "p2p_r": read("nvidia-smi.topo_p2p_r.txt"), "p2p_w": read("nvidia-smi.topo_p2p_w.txt"),
        "p2p_n": read("nvidia-smi.topo_p2p_n.txt"), "p2p_a": read("nvidia-smi.topo_p2p_a.txt"),
        "query": read("nvidia-smi.query.csv"), "nvlink": read("nvidia-smi.nvlink_s.txt"),
    }


@pytest.mark.parametrize("backend", ["nvml", "nvidia_smi"])
def test_device_snapshots_replay(backend):
    snap = load_json("real", "h200-x1-device.%s.snapshot.json" % backend)
    assert snap["constructed"] is False and snap["captured"]["backend"] == backend
    facts = topo.from_snapshot(snap, backend)
    g = facts["gpus"][0]
    assert (facts["count"], g["architecture"], g["compute_capability"]) == (1, "hopper", "9.0")
    assert g["nvlink"]["active_links"] is None and facts["interconnect"]["class"] == "single"


def test_device_backends_agree_and_raw_outputs_parse_the_same():
    nvml = load_json("real", "h200-x1-device.nvml.snapshot.json")
    smi = load_json("real", "h200-x1-device.nvidia_smi.snapshot.json")
    assert nvml["gpus"] == smi["gpus"]
    parsed = topo.read_nvidia_smi(_device_outputs())
    # The snapshots predate BAR1's reading; that run's raw -q -x has it: 262144 MiB.
    assert [g["bar1_total_mib"] for g in parsed["gpus"]] == [262144]
    assert [dict(g, bar1_total_mib=None) for g in parsed["gpus"]] == [dict(g, bar1_total_mib=None) for g in smi["gpus"]]
    assert (parsed["driver_version"], parsed["cuda_driver_version"]) == ("580.159.04", "13.0")


# --- BAR1, read by both backends (issue 28): the real H200 captures ------------------------------------------------

DEVICE = os.path.join(FIXTURES, "real", "h200-x1-device")


def test_bar1_through_nvml_on_the_real_h200():
    """nvmlDeviceGetBAR1MemoryInfo's bar1Total as the device's H200 returned it (274877906944 bytes), in MiB. The
    double answers only what that run recorded; every other field is null and listed, none made up."""
    facts = topo.read_nvml(nvml_double.from_bar1_capture(os.path.join(DEVICE, "nvml-bar1.json")))
    gpu = facts["gpus"][0]
    assert (gpu["name"], gpu["pci_bus_id"], gpu["memory_total_mib"], gpu["bar1_total_mib"]) == (
        "NVIDIA H200", "00000000:00:06.0", 143771, 262144)
    assert not [u for u in facts["unavailable"] if "bar1" in u["field"]]
    assert {"field": "gpus[0].compute_capability", "reason": "not in the recorded data: nvmlDeviceGetCudaComputeCapability"} \
        in facts["unavailable"]


def test_bar1_through_nvidia_smi_on_the_real_h200():
    """nvidia-smi -q -x's bar1_memory_usage/total from the same device run, and from the first device capture."""
    for name in ("nvidia-smi.q_x.bar1-capture.xml", "nvidia-smi.q_x.txt"):
        with open(os.path.join(DEVICE, name)) as f:
            parsed = topo.parse_smi_xml(f.read())
        assert [g["bar1_total_mib"] for g in parsed["gpus"]] == [262144], name


def test_both_backends_agree_on_bar1_on_the_real_h200():
    with open(os.path.join(DEVICE, "nvidia-smi.q_x.bar1-capture.xml")) as f:
        smi = topo.read_nvidia_smi({"xml": f.read(), "topo": None, "query": None, "nvlink": None})
    nvml = topo.read_nvml(nvml_double.from_bar1_capture(os.path.join(DEVICE, "nvml-bar1.json")))
    assert smi["gpus"][0]["bar1_total_mib"] == nvml["gpus"][0]["bar1_total_mib"] == 262144
    assert smi["gpus"][0]["pci_bus_id"] == nvml["gpus"][0]["pci_bus_id"]


@pytest.mark.parametrize("element, expected", [
    ("<bar1_memory_usage><total>256 MiB</total></bar1_memory_usage>", 256),
    ("<bar1_memory_usage><total>N/A</total></bar1_memory_usage>", None),
    ("", None),
])
def test_nvidia_smi_bar1_missing_or_odd_is_null_and_listed(element, expected):
    xml = ("<nvidia_smi_log><driver_version>580.159.04</driver_version><gpu id=\"00000000:17:00.0\">"
           "<product_name>X</product_name><fb_memory_usage><total>97887 MiB</total></fb_memory_usage>%s</gpu>"
           "</nvidia_smi_log>" % element)
    facts = topo.read_nvidia_smi({"xml": xml, "topo": None, "query": None, "nvlink": None})
    assert facts["gpus"][0]["bar1_total_mib"] == expected
    listed = {"field": "gpus[0].bar1_total_mib", "reason": "not in nvidia-smi -q -x"} in facts["unavailable"]
    assert listed is (expected is None)
