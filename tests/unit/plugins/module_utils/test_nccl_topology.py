# -*- coding: utf-8 -*-
"""The NCCL topology file written from the GPU facts (plugins/module_utils/_nccl/topology.py).

Every file is parsed back twice: by ElementTree, and by a TEST DOUBLE of NCCL's own hand-written reader
(nccl_reader_double, from NVIDIA/nccl v2.30.7 src/graph/xml.cc), which is stricter than XML. Boxes: the seed
(8x RTX PRO 6000, two AMD sockets, conftest's seed_host_facts), the constructed 4-GPU EPYC box with a Broadcom
switch, single-socket boxes, GPU facts without a host section, and what came back from the device tool's H200
(tests/fixtures/nccl_topology/h200-x1-device, written by tests/device/nccl_topo_on_device.sh).
"""
from __future__ import annotations

import copy
import importlib.util
import json
import os
import random
import re
import xml.etree.ElementTree as ET

import pytest
from conftest import load_json

from ansible_collections.moeops.inference.plugins.module_utils._nccl import topology as nt
from ansible_collections.moeops.inference.plugins.module_utils._facts import gpu_topology, pcie_host

TESTS = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
HOST_FIXTURES = os.path.join(TESTS, "fixtures", "host")
DEVICE_RUN = os.path.join(TESTS, "fixtures", "nccl_topology", "h200-x1-device")
DOC = os.path.join(os.path.dirname(TESTS), "docs", "nccl-tuning.md")

_spec = importlib.util.spec_from_file_location("moeops_host_capture_nccl_topology", os.path.join(HOST_FIXTURES, "capture.py"))
capture = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(capture)


def constructed(name):
    return gpu_topology.from_snapshot(load_json("constructed", name + ".json"), name)


def device_file(name):
    with open(os.path.join(DEVICE_RUN, name)) as f:
        return f.read()


# ---------------------------------------------------------------- a test double of NCCL's reader

class NcclReaderError(Exception):
    pass


def nccl_reader_double(text):
    """TEST DOUBLE of NCCL's XML reader (xml.cc xmlGetNode, xmlGetToken, xmlGetValue, xmlLoadSub, v2.30.7).

    Returns [(name, {attribute: raw value}, children)]. Raises where NCCL fails the load: a first character that
    is not '<' after spaces and newlines (so a tab, or text), an unquoted value, an unterminated comment or
    element, a mismatched closing tag, more than MAX_ATTR_COUNT (16) attributes, a value of MAX_STR_LEN (255) or
    more characters. NCCL reads "<x a="1" />" as an attribute with an empty name: kept here as "" for the tests
    to see. Values are not entity-decoded, as in NCCL.
    """
    pos = [0]

    def getc():
        if pos[0] >= len(text):
            raise NcclReaderError("Unexpected EOF")
        pos[0] += 1
        return text[pos[0] - 1]

    def value():
        quote = getc()
        if quote not in "\"'":
            raise NcclReaderError("Expected (double) quote")
        out = ""
        while True:
            c = getc()
            if c == quote:
                break
            out += c
        if len(out) >= 255:
            raise NcclReaderError("value too long")
        return out, getc()

    def token(with_value):
        name = ""
        while True:
            c = getc()
            if c == "=":
                if not with_value:
                    raise NcclReaderError("Unexpected value with name %s" % name)
                found, last = value()
                return name, found, last
            name += c
            if c in " >/\n\r":
                return name[:-1], "", c

    def node():
        c = " "
        while c in " \n\r":
            if pos[0] >= len(text):
                return None
            c = getc()
        if c != "<":
            raise NcclReaderError("expecting '<', got %r" % c)
        start = pos[0]
        name, _value, c = token(False)
        if name.startswith("!--"):
            end = text.find("-->", start + 3)
            if end < 0:
                raise NcclReaderError("unterminated comment")
            pos[0] = end + 3
            return node()
        if name == "" and c == "/":
            name, _value, c = token(False)
            if c != ">":
                raise NcclReaderError("unexpected trailing %r in closing tag %s" % (c, name))
            return ("close", name, {})
        attributes = {}
        while c == " ":
            key, found, c = token(True)
            attributes[key] = found
        if len(attributes) > 16:
            raise NcclReaderError("more than 16 attributes")
        kind = "open"
        if c == "/":
            kind = "single"
            _name, _value, c = token(False)
        if c != ">":
            raise NcclReaderError("expected >, got %r" % c)
        return (kind, name, attributes)

    def load(head):
        children = []
        while True:
            found = node()
            if found is None:
                if head is not None:
                    raise NcclReaderError("unterminated %s" % head)
                return children
            kind, name, attributes = found
            if kind == "close":
                if name != head:
                    raise NcclReaderError("XML Mismatch : %s / %s" % (head, name))
                return children
            children.append((name, attributes, [] if kind == "single" else load(name)))
    return load(None)


def as_tuples(element):
    return (element.tag, dict(element.attrib), [as_tuples(child) for child in element])


def read_as_nccl_does(text):
    """The file through the reader double, checked against ElementTree: the same tree, no stray attribute."""
    tree = nccl_reader_double(text)
    assert len(tree) == 1 and tree[0][0] == "system"
    assert tree[0] == as_tuples(ET.fromstring(text))
    return tree[0]


def test_the_reader_double_fails_where_nccl_fails():
    good = '<system version="1">\n  <cpu numaid="0"/>\n</system>\n'
    assert nccl_reader_double(good) == [("system", {"version": "1"}, [("cpu", {"numaid": "0"}, [])])]
    with pytest.raises(NcclReaderError):  # an XML declaration: '?' where NCCL wants '>'
        nccl_reader_double('<?xml version="1.0"?>\n' + good)
    with pytest.raises(NcclReaderError):  # a tab is not white space to NCCL
        nccl_reader_double(good.replace("  <cpu", "\t<cpu"))
    with pytest.raises(NcclReaderError):
        nccl_reader_double(good.replace("</system>", "</cpu>"))
    # ElementTree's " />": NCCL reads an attribute with an empty name.
    assert nccl_reader_double('<system version="1" />')[0][1] == {"version": "1", "": ""}


# ---------------------------------------------------------------- boxes

def index(tree):
    """{busid: (cpu numaid, [pci parents], pci attributes, gpu attributes or None)} and {numaid: attributes}."""
    pcis, cpus = {}, {}

    def walk(children, cpu, parents):
        for name, attributes, kids in children:
            if name == "cpu":
                cpus[attributes["numaid"]] = attributes
                walk(kids, attributes["numaid"], [])
            elif name == "pci":
                gpu = [k[1] for k in kids if k[0] == "gpu"]
                pcis[attributes["busid"]] = (cpu, parents, attributes, gpu[0] if gpu else None)
                walk(kids, cpu, parents + [attributes["busid"]])
    walk(tree[2], None, [])
    return pcis, cpus


def epyc_switch_box(tmp_path):
    """TEST DOUBLE, CONSTRUCTED: the 4-GPU EPYC box of tests/fixtures/host/constructed/rtxpro6000-x4-epyc-as-shipped
    (GPUs 03:00.0 and 04:00.0 behind a Broadcom switch, 41:00.0 and 61:00.0 on root ports; GPU3 trained at x8),
    with GPU facts taken from the seed's first four GPUs (root complexes 00-60 are the seed's NUMA node 0) given
    that spec's bus ids and link widths. The host section is read by pcie_host.read_host over the built tree."""
    spec = load_json("..", "host", "constructed", "rtxpro6000-x4-epyc-as-shipped.spec.json")
    root = capture.build(spec, str(tmp_path / "epyc-root"))
    seed = constructed("rtxpro6000-x8-2numa")
    links = {os.path.basename(d["path"]): d["link"] for d in spec["pci"] if "link" in d}
    gpus = []
    for listed, gpu in zip(spec["gpus"], seed["gpus"][:4]):
        gpu = copy.deepcopy(gpu)
        gpu["pci_bus_id"] = listed["pci_bus_id"]
        gpu["pcie"]["current_width"] = int(links[pcie_host.sysfs_bus_id(listed["pci_bus_id"])]["current_link_width"])
        gpus.append(gpu)
    pairs = [{"gpus": [i, j], "path": None, "p2p": {}} for i in range(4) for j in range(i + 1, 4)]
    facts = gpu_topology.build_facts("snapshot", "580.95.05", "13.0", gpus, pairs, [])
    facts["host"] = pcie_host.read_host(root, gpus)
    return facts, spec


def first_socket_of_seed(seed_host_facts):
    """TEST DOUBLE, CONSTRUCTED: the seed box's NUMA node 0 alone, a single-socket AMD box with its host section."""
    facts = copy.deepcopy(seed_host_facts)
    facts["gpus"] = [g for g in facts["gpus"] if g["numa_node"] == 0]
    facts["host"] = pcie_host.read_host(facts["host_root"], facts["gpus"])
    return facts


def inter_cpu_choices(result):
    return [c for c in result["choices"] if c["element"].startswith("SYS link between CPU nodes")]


def test_seed_every_gpu_under_its_numa_node(seed_host_facts):
    result = nt.nccl_topology(seed_host_facts)
    pcis, cpus = index(read_as_nccl_does(result["xml"]))
    host = {g["pci_bus_id"]: g for g in seed_host_facts["host"]["gpus"]}
    assert sorted(cpus) == sorted({str(g["numa_node"]) for g in seed_host_facts["gpus"]})
    assert len(cpus) == 2
    for gpu in seed_host_facts["gpus"]:
        bus = pcie_host.sysfs_bus_id(gpu["pci_bus_id"])
        cpu, parents, attributes, gpu_attributes = pcis[bus]
        assert cpu == str(gpu["numa_node"])
        assert parents == []  # every seed GPU is on its own root port: NCCL skips root ports
        assert attributes["link_width"] == str(host[bus]["link"]["current_width"])
        assert attributes["link_speed"] == host[bus]["link"]["max_speed"]  # sysfs says the same as NVML's max_gen
        major, minor = gpu["compute_capability"].split(".")
        assert gpu_attributes == {"dev": str(gpu["index"]), "sm": str(int(major) * 10 + int(minor))}
    for numa, attributes in cpus.items():
        near = {c for g in seed_host_facts["gpus"] if str(g["numa_node"]) == numa for c in nt.cpu_ids(g["cpu_affinity"])}
        assert nt.cpumap_cpus(attributes["affinity"]) == near
        # Not written: NCCL reads them by cpuid; declaring them would change NCCL's vendor rules.
        assert not {"arch", "vendor", "familyid", "modelid", "host_hash"} & set(attributes)
    assert sorted(result["gpus_written"]) == sorted(pcie_host.sysfs_bus_id(g["pci_bus_id"]) for g in seed_host_facts["gpus"])
    assert result["gpus_left_out"] == []


def test_seed_names_nccls_amd_socket_bandwidth_with_its_source(seed_host_facts):
    result = nt.nccl_topology(seed_host_facts)
    [choice] = inter_cpu_choices(result)
    assert choice["value"] == "%.1f GB/s" % nt.NCCL_AMD_BW == "16.0 GB/s"
    assert "AMD_BW" in choice["source"] and "v2.30.7" in choice["source"]
    for gpu in seed_host_facts["host"]["gpus"]:
        assert gpu["bridges"][0]["vendor"] == "0x1022"
        assert gpu["bridges"][0]["bus_id"] in choice["source"]
    assert "cannot change it" in choice["reason"]
    # The figure is NCCL's, not the file's: no attribute carries it.
    assert "16.0" not in result["xml"]


def test_no_amd_figure_without_two_amd_cpu_nodes(seed_host_facts):
    one_socket = nt.nccl_topology(first_socket_of_seed(seed_host_facts))
    assert inter_cpu_choices(one_socket) == []  # AMD root ports, but one CPU node: no link between CPUs
    for name in ("l40s-x8-2switch-2numa", "h100sxm-x8-nvswitch"):
        result = nt.nccl_topology(constructed(name))
        assert inter_cpu_choices(result) == []  # two NUMA nodes, but nothing says who made the CPUs
        assert any("do not say who made the CPUs" in n for n in result["notes"])


def test_a_switch_keeps_its_upstream_port_as_nccl_does(tmp_path):
    facts, spec = epyc_switch_box(tmp_path)
    result = nt.nccl_topology(facts)
    pcis, cpus = index(read_as_nccl_does(result["xml"]))
    devices = {os.path.basename(d["path"]): d for d in spec["pci"]}
    for listed in spec["gpus"]:
        bus = pcie_host.sysfs_bus_id(listed["pci_bus_id"])
        above = devices[bus]["path"].split("/")[1:-1]  # the bridges, root port first
        # NCCL's walk, said for the depths this box has: a switch (root, up, down) keeps "up"; a root port nothing.
        expected = [above[1]] if len(above) == 3 else []
        assert len(above) in (1, 3)
        cpu, parents, attributes, gpu = pcis[bus]
        assert (cpu, parents) == ("0", expected)
        assert attributes["link_width"] == devices[bus]["link"]["current_link_width"]
        assert gpu is not None
    switch = [b for b in pcis if pcis[b][3] is None]
    assert len(switch) == 1
    up = devices[switch[0]]
    assert pcis[switch[0]][2] == {"busid": switch[0], "class": up["class"], "vendor": up["vendor"], "device": up["device"]}
    assert up["vendor"] == "0x1000"  # the Broadcom switch of the spec
    for skipped in ("0000:00:01.1", "0000:02:00.0", "0000:02:01.0", "0000:40:01.1", "0000:60:01.1"):
        assert skipped in devices and skipped not in pcis
    [narrow] = [c for c in result["choices"] if c["element"].startswith("pci busid=0000:61:00.0") and
                c["attribute"] == "link_width"]
    assert narrow["value"] == "8"
    assert "%.1f GB/s" % nt.nccl_link_bw(8, "32.0 GT/s PCIe") in narrow["reason"]
    assert nt.nccl_link_bw(8, "32.0 GT/s PCIe") == 24.0
    assert len(inter_cpu_choices(result)) == 0  # one NUMA node in this double


def test_nccl_parents_follow_the_two_level_walk():
    chain = [{"bus_id": name} for name in ("root", "up1", "down1", "up2", "down2")]
    assert nt.nccl_parents([]) == []
    assert nt.nccl_parents(chain[:1]) == []
    assert nt.nccl_parents(chain[:2]) == [chain[0]]
    assert nt.nccl_parents(chain[:3]) == [chain[1]]
    assert nt.nccl_parents(chain) == [chain[1], chain[3]]


def test_gpus_without_a_pcie_path_are_left_for_nccl():
    facts = constructed("rtxpro6000-x4-1numa")
    assert "host" not in facts
    result = nt.nccl_topology(facts)
    pcis, cpus = index(read_as_nccl_does(result["xml"]))
    assert pcis == {}
    assert sorted(result["gpus_left_out"]) == sorted(pcie_host.sysfs_bus_id(g["pci_bus_id"]) for g in facts["gpus"])
    for gpu in facts["gpus"]:
        assert any(n.startswith("GPU %d (%s): left out" % (gpu["index"], gpu["pci_bus_id"])) for n in result["notes"])
    assert list(cpus) == ["0"]
    assert nt.cpumap_cpus(cpus["0"]["affinity"]) == nt.cpu_ids(facts["gpus"][0]["cpu_affinity"])


def test_nvlinks_are_left_to_nccl(tmp_path):
    facts = constructed("h100sxm-x8-nvswitch")
    # TEST DOUBLE: a host section saying each GPU sits on a root bus, to get the GPUs written.
    facts["host"] = {"gpus": [{"pci_bus_id": pcie_host.sysfs_bus_id(g["pci_bus_id"]), "bridges": [], "link": {}}
                              for g in facts["gpus"]]}
    result = nt.nccl_topology(facts)
    pcis, _cpus = index(read_as_nccl_does(result["xml"]))
    assert len([p for p in pcis.values() if p[3] is not None]) == len(facts["gpus"])
    assert "nvlink" not in result["xml"]
    assert sum("NVLinks not written" in n for n in result["notes"]) == len(facts["gpus"])
    # No link in the double's host section: the width comes from NVML's facts.
    assert {p[2]["link_width"] for p in pcis.values()} == {str(g["pcie"]["current_width"]) for g in facts["gpus"]}


def test_what_the_facts_lack_is_a_note_not_a_value(seed_host_facts):
    facts = copy.deepcopy(seed_host_facts)
    facts["gpus"][2]["compute_capability"] = None
    facts["gpus"][5]["cpu_affinity"] = None
    facts["gpus"][6]["pcie"]["max_gen"] = None
    bus6 = pcie_host.sysfs_bus_id(facts["gpus"][6]["pci_bus_id"])
    for entry in facts["host"]["gpus"]:
        if entry["pci_bus_id"] == bus6:
            entry["link"] = {}
    facts["gpus"][7]["numa_node"] = None
    result = nt.nccl_topology(facts)
    pcis, cpus = index(read_as_nccl_does(result["xml"]))
    notes = "\n".join(result["notes"])
    assert "sm" not in pcis[pcie_host.sysfs_bus_id(facts["gpus"][2]["pci_bus_id"])][3]
    assert "gpu sm left out" in notes
    assert "affinity" not in cpus[str(facts["gpus"][5]["numa_node"])] and "affinity" in cpus["0"]
    assert "affinity left out (GPUs [5] give no cpu_affinity)" in notes
    assert "link_speed" not in pcis[bus6][2] and pcis[bus6][2]["link_width"] == str(facts["gpus"][6]["pcie"]["current_width"])
    assert "link_speed left out" in notes
    bus7 = pcie_host.sysfs_bus_id(facts["gpus"][7]["pci_bus_id"])
    assert bus7 not in pcis and result["gpus_left_out"] == [bus7]
    assert "no NUMA node" in notes


def test_the_same_facts_give_the_same_file(seed_host_facts):
    first = nt.nccl_topology(seed_host_facts)
    shuffled = copy.deepcopy(seed_host_facts)
    random.Random(7).shuffle(shuffled["gpus"])
    random.Random(8).shuffle(shuffled["host"]["gpus"])
    again = nt.nccl_topology(shuffled)
    assert again["xml"] == first["xml"]
    assert sorted(map(json.dumps, again["choices"])) == sorted(map(json.dumps, first["choices"]))
    busids = re.findall(r'<pci busid="([^"]+)"', first["xml"])
    numa0 = [b for b in busids if b < "0000:80"]
    assert numa0 == sorted(numa0) and busids[len(numa0):] == sorted(busids[len(numa0):])


def test_values_are_escaped_and_a_note_says_nccl_reads_them_raw(tmp_path):
    facts, _spec = epyc_switch_box(tmp_path)
    for entry in facts["host"]["gpus"]:
        for bridge in entry["bridges"] or []:
            if bridge["bus_id"] == "0000:01:00.0":
                bridge["device"] = 'x"&<y'  # TEST DOUBLE: no sysfs value looks like this
    result = nt.nccl_topology(facts)
    assert 'device="x&quot;&amp;&lt;y"' in result["xml"]
    [switch] = [e for e in ET.fromstring(result["xml"]).iter("pci") if e.get("busid") == "0000:01:00.0"]
    assert switch.get("device") == 'x"&<y'
    assert any("NCCL's parser does not decode them" in n for n in result["notes"])


def test_a_value_longer_than_nccls_limit_is_left_out(seed_host_facts):
    facts = copy.deepcopy(seed_host_facts)
    for gpu in facts["gpus"]:
        if gpu["numa_node"] == 1:
            gpu["cpu_affinity"] = "0-2047"  # 64 words of 9 characters: past MAX_STR_LEN
    result = nt.nccl_topology(facts)
    _pcis, cpus = index(read_as_nccl_does(result["xml"]))
    assert "affinity" not in cpus["1"]
    assert any("affinity left out" in n and "MAX_STR_LEN" in n for n in result["notes"])


def test_no_gpu_gives_an_empty_system():
    result = nt.nccl_topology(gpu_topology.no_gpu_facts("no driver"))
    assert read_as_nccl_does(result["xml"]) == ("system", {"version": "1", "name": "moeops.inference"}, [])
    assert result["gpus_written"] == [] and any("no GPU" in n for n in result["notes"])


# ---------------------------------------------------------------- conversions

def test_cpu_maps():
    assert nt.cpu_ids("0-3,8") == {0, 1, 2, 3, 8}
    assert nt.cpu_ids("0-31,x") is None and nt.cpu_ids("") is None and nt.cpu_ids("5-2") is None
    assert nt.cpumap({0, 1, 2, 3, 8}) == "0000010f"
    assert nt.cpumap(set(range(16)), highest=127) == "00000000,00000000,00000000,0000ffff"
    # sysfs writes "ffff" on a 16-CPU host; NCCL parses both the same (cpuset.h ncclStrToCpuset).
    assert nt.cpumap_cpus("ffff") == nt.cpumap_cpus("0000ffff") == set(range(16))
    assert nt.cpumap_cpus("ffffffff,00000000") == set(range(32, 64))
    assert nt.cpumap_cpus("zz") is None


def test_link_conversions():
    assert [nt.pcie_speed(g) for g in (1, 4, 5, 6, None, "x")] == [
        "2.5 GT/s PCIe", "16.0 GT/s PCIe", "32.0 GT/s PCIe", "64.0 GT/s PCIe", None, None]
    assert nt.nccl_link_bw(16, "32.0 GT/s PCIe") == 48.0
    assert nt.nccl_link_bw(16, "16.0 GT/s PCIe") == 24.0
    assert nt.nccl_link_bw(0, "32.0 GT/s PCIe") == 48.0  # NCCL counts an unknown width (0) as 16
    assert nt.nccl_link_bw(16, "2.5 GT/s") is None and nt.nccl_link_bw(None, "32.0 GT/s PCIe") is None
    assert nt.sm_value("12.0") == "120" and nt.sm_value("9.0") == "90" and nt.sm_value("10.3") == "103"
    assert nt.sm_value(None) is None and nt.sm_value("x.1") is None


# ---------------------------------------------------------------- the device tool's H200

def test_the_device_facts_give_the_file_nccl_loaded_there():
    facts = json.loads(device_file("facts.json"))
    result = nt.nccl_topology(facts)
    assert result["xml"] == device_file("generated.xml")
    assert json.loads(device_file("generated-choices.json"))["notes"] == result["notes"]
    read_as_nccl_does(result["xml"])


def test_the_device_dumps_against_the_file():
    generated = device_file("generated.xml")
    loaded = nt.compare(generated, device_file("nccl-dump-loaded.xml"))
    detected = nt.compare(generated, device_file("nccl-dump-detected.xml"))
    assert json.loads(device_file("comparison.json"))["loaded"] == loaded
    assert json.loads(device_file("comparison.json"))["detected"] == detected
    # With the file NCCL kept every value the file gave, except the GPU class, which it reads from sysfs.
    assert [d["what"] for d in loaded["differed"]] == ["gpu 0000:00:06.0 class"]
    assert loaded["differed"][0]["dumped"].startswith(nt.GPU_CLASS)
    assert set(loaded["added_by_nccl"]["cpu numaid=0"]) == {"host_hash", "arch", "vendor", "familyid", "modelid"}
    # Alone, NCCL put the GPU under NUMA node -1 (the VM's sysfs numa_node) with width 0 (no parent port in sysfs).
    whats = {d["what"]: d["dumped"] for d in detected["differed"]}
    assert whats["gpu 0000:00:06.0 cpu numaid"] == "-1" and whats["gpu 0000:00:06.0 link_width"] == "0"
    log = device_file("nccl-log.txt")
    assert "[loaded] " in log and "Loading topology moeops.inference" in log
    assert log.count("ALL_REDUCE sum_ok=True") == 2
    # NCCL's own figure for the GPU's link, both runs, is the one nccl_link_bw gives for the file's values.
    ours = nt.nccl_link_bw(16, "32.0 GT/s PCIe")
    assert re.findall(r"\[(detected|loaded)\].*\+ PCI\[([0-9.]+)\] - GPU/", log) == [
        ("detected", "%.1f" % ours), ("loaded", "%.1f" % ours)]


def test_a_dump_that_moved_a_gpu_is_reported():
    generated = device_file("generated.xml")
    moved = device_file("nccl-dump-loaded.xml").replace('numaid="0"', 'numaid="3"').replace(
        'link_width="16"', 'link_width="8"')
    result = nt.compare(generated, moved)
    whats = {d["what"] for d in result["differed"]}
    assert {"cpu numaid=0", "gpu 0000:00:06.0 cpu numaid", "gpu 0000:00:06.0 link_width"} <= whats
    assert "cpu numaid=3" in result["only_in_dump"]


def test_the_docs_show_the_seed_file(seed_host_facts):
    with open(DOC) as f:
        doc = f.read()
    section = doc[doc.index("## The NCCL topology file"):]
    shown = re.search(r"```xml\n(.*?)```", section, re.S).group(1)
    assert shown == nt.nccl_topology(seed_host_facts)["xml"]
