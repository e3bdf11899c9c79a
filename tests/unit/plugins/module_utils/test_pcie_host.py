# -*- coding: utf-8 -*-
"""PCIe P2P readiness: the sysfs/procfs readers over constructed trees and a real capture, and the policy.

Trees are built at test time (sysfs names hold colons, which ansible-test refuses in committed file
names) by tests/fixtures/host/capture.py: build() from a CONSTRUCTED spec, unpack() for the packed
real capture (net's packing, plus binary config space as hex).
"""
from __future__ import annotations

import copy
import importlib.util
import json
import os

import pytest
from conftest import load_json

from ansible_collections.moeops.inference.plugins.module_utils._facts import pcie_host as ph
from ansible_collections.moeops.inference.plugins.module_utils._policy import pcie_findings as pf

TESTS = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
HOST_FIXTURES = os.path.join(TESTS, "fixtures", "host")
DOC = os.path.join(os.path.dirname(TESTS), "docs", "pcie-host-facts.md")

_spec = importlib.util.spec_from_file_location("moeops_host_capture", os.path.join(HOST_FIXTURES, "capture.py"))
capture = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(capture)

AER = {"id": 0x0001, "version": 2}
VSEC = {"id": 0x000B, "version": 1}


def acs(ctrl, cap=0x005F):
    return {"id": 0x000D, "version": 1, "cap": cap, "ctrl": ctrl}


def spec(name):
    return load_json("..", "host", "constructed", name + ".spec.json")


def tree(tmp_path, name, change=None):
    """A constructed tree in tmp_path from constructed/<name>.spec.json, changed first by change(spec)."""
    s = spec(name)
    if change:
        change(s)
    return capture.build(s, str(tmp_path / "root")), s


def bridge_entry(s, bus_id):
    return next(d for d in s["pci"] if d["path"].endswith(bus_id))


def by_check(findings):
    out = {}
    for f in findings:
        out.setdefault(f["check"], []).append(f)
    return out


# ---------------------------------------------------------------- parse_acs: config space bytes

def test_acs_after_aer_with_redirect_bits_set():
    data = capture.config_space(0x1022, 0x14AB, 0x060400, 4096, [AER, acs(0x001D)])
    assert len(data) == 4096
    found = ph.parse_acs(data)
    assert found["offset"] == 0x140 and found["version"] == 1
    assert found["control_raw"] == 0x001D and found["capability_raw"] == 0x005F
    assert found["control"] == {"SrcValid": True, "TransBlk": False, "ReqRedir": True, "CmpltRedir": True,
                                "UpstreamFwd": True, "EgressCtrl": False, "DirectTrans": False}
    # The same text lspci -vvv prints for ACSCtl (NCCL #2079's 0x001d).
    assert found["control_text"] == "SrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-"
    assert ph.config_space_problem(len(data)) is None


def test_acs_with_redirect_bits_clear():
    found = ph.parse_acs(capture.config_space(ext_caps=[AER, VSEC, acs(0x0011)]))
    assert found["offset"] == 0x180
    assert not found["control"]["ReqRedir"] and not found["control"]["CmpltRedir"]
    assert found["control"]["SrcValid"] and found["control"]["UpstreamFwd"]


@pytest.mark.parametrize("bit,name", list(enumerate(ph.ACS_BITS)))
def test_each_acs_control_bit_decodes_to_its_name(bit, name):
    found = ph.parse_acs(capture.config_space(ext_caps=[AER, acs(1 << bit)]))
    assert [k for k, on in found["control"].items() if on] == [name]


def test_no_acs_capability_is_none_and_readable():
    data = capture.config_space(ext_caps=[AER, VSEC])
    assert ph.parse_acs(data) is None and ph.config_space_problem(len(data)) is None
    # No extended capabilities at all: the header at 0x100 is 0 (this machine's host bridge).
    assert ph.parse_acs(capture.config_space(ext_caps=[])) is None


def test_short_config_space_is_unreadable_not_absent():
    assert ph.parse_acs(capture.config_space(size=256, ext_caps=[])) is None
    assert ph.config_space_problem(256).startswith("unreadable (no extended config space)")
    # An unprivileged read of sysfs config gives 64 bytes.
    assert ph.parse_acs(bytes(64)) is None
    assert ph.config_space_problem(64).startswith("unreadable (not root)")


@pytest.mark.parametrize("caps,size", [
    ([dict(AER, next=0x100), acs(0x001D)], 4096),          # AER points at itself: a loop
    ([dict(AER, next=0x180), dict(VSEC, at=0x180, next=0x100)], 4096),  # a longer loop
    ([dict(AER, next=0x40), acs(0x001D)], 4096),           # next below 0x100 ends the list
    ([dict(AER, next=0x800), acs(0x001D)], 0x400),         # next past the end of a short read
    ([AER, acs(0x001D, cap=0)], 0x144),                     # ACS header fits, its registers do not
    ([{"id": 0xFFFF, "version": 0xF, "next": 0xFFF}], 4096),  # 0xffffffff: the device is gone
])
def test_walk_survives_loops_and_bad_offsets(caps, size):
    assert ph.parse_acs(capture.config_space(size=size, ext_caps=caps)) is None


def test_next_offset_low_bits_are_masked_as_linux_does():
    found = ph.parse_acs(capture.config_space(ext_caps=[dict(AER, next=0x143), acs(0x0004)]))
    assert found["offset"] == 0x140 and found["control_text"].split()[2] == "ReqRedir+"


# ---------------------------------------------------------------- readers over small trees

@pytest.mark.parametrize("groups,mode,types", [
    ({"0": "identity", "1": "identity"}, "passthrough", {"identity": 2}),
    ({"0": "DMA", "1": "DMA"}, "translated", {"DMA": 2}),
    ({"0": "DMA-FQ", "1": "DMA", "2": "unmanaged"}, "translated", {"DMA-FQ": 1, "DMA": 1, "unmanaged": 1}),
    ({"0": "identity", "1": "DMA-FQ"}, "mixed", {"identity": 1, "DMA-FQ": 1}),
    ({"0": None, "1": None}, "unknown", {}),
    ({"0": "blocked"}, "unknown", {"blocked": 1}),
    ({}, "off", {}),
    (None, "off", {}),
])
def test_iommu_groups(tmp_path, groups, mode, types):
    root = capture.build({"iommu_groups": groups}, str(tmp_path))
    got = ph.read_iommu(root)
    assert got["mode"] == mode and got["types"] == types
    assert got["groups"] == len(groups or {})
    assert bool(got["unavailable"]) == any(t is None for t in (groups or {}).values())
    if mode == "unknown" and None in (groups or {}).values():
        assert got["unavailable"][0]["reason"] == "2 of 2 groups have no readable type file (/sys/kernel/iommu_groups/<group>/type; Linux 5.11+)"


def test_cmdline_settings_quotes_init_arguments_and_last_wins(tmp_path):
    root = capture.build({"cmdline": 'BOOT_IMAGE=/vmlinuz root="LABEL=my root" amd_iommu=on iommu=nopt iommu=pt '
                                     'iommu.passthrough=1 pcie-port-pm=off pcie_aspm -- iommu=off pcie_aspm=force'}, str(tmp_path))
    got = ph.read_cmdline(root)
    assert got["params"] == {"iommu": "pt", "intel_iommu": None, "amd_iommu": "on", "iommu.passthrough": "1",
                             "pcie_port_pm": "off", "pcie_aspm": ""}
    assert got["unavailable"] == []
    missing = ph.read_cmdline(str(tmp_path / "nothing"))
    assert missing["raw"] is None and set(missing["params"].values()) == {None}
    assert missing["unavailable"] == [{"field": "cmdline", "reason": "/proc/cmdline: No such file or directory"}]


@pytest.mark.parametrize("value,expected", [("Y", True), ("N", False), ("1", True), ("0", False), ("maybe", None)])
def test_uvm_disable_hmm_values(tmp_path, value, expected):
    root = capture.build({"files": {"sys/module/nvidia_uvm/parameters/uvm_disable_hmm": value + "\n"}}, str(tmp_path))
    got = ph.read_uvm(root)
    assert got["loaded"] is True and got["uvm_disable_hmm"] == value and got["hmm_disabled"] is expected


def test_uvm_not_loaded_is_unknown_and_modprobe_options_are_read(tmp_path):
    root = capture.build({"files": {
        "etc/modprobe.d/10-nvidia.conf": "# comment\noptions nvidia NVreg_EnableGpuFirmware=1\n"
                                         "options nvidia-uvm uvm_perf_prefetch_enable=1 \\\n    uvm_disable_hmm=0\n",
        "etc/modprobe.d/90-hmm.conf": "options nvidia_uvm uvm_disable_hmm=1  # the community guides' setting\n",
        "etc/modprobe.d/hmm.conf.disabled": "options nvidia_uvm uvm_disable_hmm=0\n",
    }}, str(tmp_path))
    got = ph.read_uvm(root)
    assert got["loaded"] is False and got["hmm_disabled"] is None
    assert got["unavailable"] == [{"field": "uvm.uvm_disable_hmm", "reason": "/sys/module/nvidia_uvm: nvidia_uvm is not loaded"}]
    assert got["modprobe_options"] == [
        {"file": "/etc/modprobe.d/10-nvidia.conf", "line": "options nvidia-uvm uvm_perf_prefetch_enable=1 uvm_disable_hmm=0",
         "params": {"uvm_perf_prefetch_enable": "1", "uvm_disable_hmm": "0"}},
        {"file": "/etc/modprobe.d/90-hmm.conf", "line": "options nvidia_uvm uvm_disable_hmm=1",
         "params": {"uvm_disable_hmm": "1"}},
    ]
    assert got["configured_hmm_disabled"] is True  # the last file read wins, .conf files only


@pytest.mark.parametrize("text,policy", [
    ("[default] performance powersave powersupersave \n", "default"),
    ("default [performance] powersave powersupersave\n", "performance"),
])
def test_aspm_policy_is_the_bracketed_one(tmp_path, text, policy):
    root = capture.build({"files": {"sys/module/pcie_aspm/parameters/policy": text}}, str(tmp_path))
    assert ph.read_aspm(root) == {"policy": policy, "available": ["default", "performance", "powersave", "powersupersave"],
                                  "unavailable": []}


def test_aspm_missing(tmp_path):
    got = ph.read_aspm(str(tmp_path))
    assert got["policy"] is None and got["unavailable"][0]["field"] == "aspm.policy"


TWO_BRIDGES = {"pci": [
    {"path": "pci0000:16/0000:16:01.0", "vendor": "0x8086", "device": "0x352a", "class": "0x060400",
     "config": {"ext_caps": [AER, acs(0x001D)]}},
    {"path": "pci0000:16/0000:16:01.0/0000:17:00.0", "vendor": "0x1000", "device": "0xc030", "class": "0x060400",
     "config": {"ext_caps": [AER, VSEC]}},
    {"path": "pci0000:16/0000:16:01.0/0000:17:00.0/0000:18:00.0", "vendor": "0x10de", "device": "0x2bb1",
     "class": "0x030000", "config": {"ext_caps": [AER]}, "bar1_mib": 256,
     "link": {"current_link_width": "8", "max_link_width": "16", "current_link_speed": "16.0 GT/s PCIe",
              "max_link_speed": "32.0 GT/s PCIe"}},
]}


def test_gpu_under_two_bridges(tmp_path):
    root = capture.build(TWO_BRIDGES, str(tmp_path))
    got = ph.read_pci_path(root, "0000:18:00.0")
    assert got["path"] == "pci0000:16/0000:16:01.0/0000:17:00.0/0000:18:00.0" and got["unavailable"] == []
    assert [b["bus_id"] for b in got["bridges"]] == ["0000:16:01.0", "0000:17:00.0"]  # root port first, GPU left out
    root_port, switch = got["bridges"]
    assert (root_port["vendor"], root_port["device"], root_port["class"]) == ("0x8086", "0x352a", "0x060400")
    assert root_port["acs_state"] == "present" and root_port["acs"]["control_raw"] == 0x001D
    assert switch["acs_state"] == "absent" and switch["acs"] is None and switch["config_bytes"] == 4096


def test_narrowed_link_is_degraded_a_slower_one_alone_is_not(tmp_path):
    root = capture.build(TWO_BRIDGES, str(tmp_path))
    link = ph.read_link(root, "0000:18:00.0")
    assert link == {"current_width": 8, "max_width": 16, "current_speed": "16.0 GT/s PCIe", "max_speed": "32.0 GT/s PCIe",
                    "degraded": True, "speed_below_max": True, "unavailable": []}
    with open(os.path.join(root, "sys", "bus", "pci", "devices", "0000:18:00.0", "current_link_width"), "w") as f:
        f.write("16\n")
    link = ph.read_link(root, "0000:18:00.0")
    assert link["degraded"] is False and link["speed_below_max"] is True


def test_missing_device_and_files_are_unavailable_never_raised(tmp_path):
    root = capture.build(TWO_BRIDGES, str(tmp_path))
    assert ph.read_pci_path(root, "0000:99:00.0") == {"path": None, "bridges": None, "unavailable": [
        {"field": "pci_path (0000:99:00.0)", "reason": "/sys/bus/pci/devices/0000:99:00.0: no such device"}]}
    link = ph.read_link(root, "0000:16:01.0")
    assert link["degraded"] is None and [u["field"] for u in link["unavailable"]] == [
        "link.%s (0000:16:01.0)" % n for n in ph.LINK_FILES]
    assert ph.read_acs(root, "0000:99:00.0")["acs_state"] == "unreadable"
    assert ph.read_iommu_group(root, "0000:18:00.0") == {"group": None, "type": None, "unavailable": []}
    host = ph.read_host(str(tmp_path / "empty"), [{"pci_bus_id": "00000000:18:00.0"}, {"pci_bus_id": "not-a-bus-id"}])
    json.dumps(host)
    assert host["gpus"][1]["pci_bus_id"] is None and host["gpus"][0]["bridges"] is None
    assert {u["field"] for u in host["unavailable"]} >= {"cmdline", "aspm.policy", "uvm.uvm_disable_hmm",
                                                         "gpus[1].pci_bus_id", "pci_path (0000:18:00.0)"}


def test_bar1_from_sysfs_resource_for_nvidia_only(tmp_path):
    root = capture.build(TWO_BRIDGES, str(tmp_path))
    assert ph.read_bar1_mib(root, "0000:18:00.0") == {"bar1_mib": 256, "unavailable": []}
    assert ph.read_bar1_mib(root, "0000:17:00.0")["unavailable"][0]["reason"] == "vendor 0x1000 is not NVIDIA: no BAR1 aperture to read"
    gpu = ph.read_host(root, [{"pci_bus_id": "00000000:18:00.0", "memory_total_mib": 98304}])["gpus"][0]
    assert (gpu["bar1_mib"], gpu["bar1_source"], gpu["framebuffer_mib"]) == (256, "sysfs resource", 98304)
    gpu = ph.read_host(root, [{"pci_bus_id": "00000000:18:00.0", "bar1_total_mib": 131072}], "nvidia_smi")["gpus"][0]
    assert (gpu["bar1_mib"], gpu["bar1_source"], gpu["framebuffer_mib"]) == (131072, "nvidia_smi", None)


@pytest.mark.parametrize("given,sysfs", [("00000000:17:00.0", "0000:17:00.0"), ("00000000:C1:00.0", "0000:c1:00.0"),
                                         ("0000:c1:00.1", "0000:c1:00.1"), ("17:00.0", "0000:17:00.0"), ("nonsense", None)])
def test_bus_id_from_nvml_to_sysfs(given, sysfs):
    assert ph.sysfs_bus_id(given) == sysfs


# ---------------------------------------------------------------- the constructed 4x RTX PRO 6000 box

def test_as_shipped_host_section(tmp_path):
    root, s = tree(tmp_path, "rtxpro6000-x4-epyc-as-shipped")
    host = ph.read_host(root, s["gpus"], "nvml")
    assert json.loads(json.dumps(host)) == host and host["unavailable"] == []
    assert host["iommu"] == {"mode": "translated", "groups": 6, "types": {"DMA-FQ": 4, "DMA": 1, "unmanaged": 1}, "untyped": 0}
    assert host["uvm"]["hmm_disabled"] is False and host["aspm"]["policy"] == "default"
    assert host["pcie_port_pm"] == {"value": None, "off": False}
    gpus = host["gpus"]
    assert [g["pci_bus_id"] for g in gpus] == ["0000:03:00.0", "0000:04:00.0", "0000:41:00.0", "0000:61:00.0"]
    assert [[b["bus_id"] for b in g["bridges"]] for g in gpus] == [
        ["0000:00:01.1", "0000:01:00.0", "0000:02:00.0"], ["0000:00:01.1", "0000:01:00.0", "0000:02:01.0"],
        ["0000:40:01.1"], ["0000:60:01.1"]]
    assert [(g["bar1_mib"], g["bar1_source"]) for g in gpus] == [
        (131072, "nvml"), (131072, "nvml"), (131072, "sysfs resource"), (256, "sysfs resource")]
    assert [g["iommu_group"] for g in gpus] == [
        {"group": "20", "type": "DMA-FQ"}, {"group": "21", "type": "DMA-FQ"}, {"group": "22", "type": "DMA"},
        {"group": "23", "type": "DMA-FQ"}]
    assert gpus[3]["link"]["degraded"] is True and gpus[1]["link"]["speed_below_max"] is True
    assert pf.p2p_ports(gpus).keys() == {"0000:00:01.1", "0000:02:00.0", "0000:02:01.0", "0000:40:01.1", "0000:60:01.1"}


def test_as_shipped_findings(tmp_path):
    root, s = tree(tmp_path, "rtxpro6000-x4-epyc-as-shipped")
    findings = pf.host_findings(ph.read_host(root, s["gpus"]), 4, "blackwell")
    assert [(f["check"], f["result"]) for f in findings] == [
        ("iommu", "warning"), ("acs", "warning"), ("acs", "warning"), ("acs", "warning"), ("bar1", "warning"),
        ("hmm", "warning"), ("link_width", "warning"), ("pcie_port_pm", "warning")]
    assert all(set(f) == {"check", "result", "reason", "remedy"} and f["remedy"] for f in findings)
    got = by_check(findings)
    assert "GPU 2 (0000:41:00.0) (group type DMA)" in got["iommu"][0]["reason"] and "vLLM #33041" in got["iommu"][0]["reason"]
    assert "amd_iommu=on iommu=pt" in got["iommu"][0]["remedy"] and "255 logical CPUs" in got["iommu"][0]["remedy"]
    # Root port 00:01.1 turns the cross-root pairs, switch port 02:00.0 the switch pair, root port 40:01.1 GPU 2's pairs.
    # 02:01.0 (0x0011, no redirect), 60:01.1 (cleared) and the switch's upstream port 01:00.0 are not findings.
    acs_reasons = [f["reason"] for f in got["acs"]]
    assert [r.split()[1] for r in acs_reasons] == ["0000:00:01.1", "0000:02:00.0", "0000:40:01.1"]
    assert "GPU pairs 0-2, 0-3, 1-2, 1-3" in acs_reasons[0] and "GPU pairs 0-1:" in acs_reasons[1]
    assert "above GPU 0 (0000:03:00.0), GPU 1 (0000:04:00.0)" in acs_reasons[0]
    assert "ReqRedir+ CmpltRedir+ (ACSCtl 0x001d" in acs_reasons[2] and "NCCL #2079" in acs_reasons[2]
    assert got["acs"][1]["remedy"].startswith("disable ACS in the BIOS, or clear it at boot: setpci -s 0000:02:00.0 ECAP_ACS+6.w=0000")
    assert got["bar1"][0]["reason"].startswith("GPU 3 (0000:61:00.0) has BAR1 256 MiB, smaller than its 98304 MiB framebuffer")
    assert "Above 4G decoding" in got["bar1"][0]["remedy"] and "Re-Size BAR Support" in got["bar1"][0]["remedy"]
    assert "uvm_disable_hmm=N" in got["hmm"][0]["reason"]
    assert got["hmm"][0]["remedy"].startswith("options nvidia_uvm uvm_disable_hmm=1")
    assert got["link_width"][0]["reason"].startswith("GPU 3 (0000:61:00.0) in slot 0000:61:00.0 runs at x8 of x16")
    assert got["pcie_port_pm"][0]["remedy"] == "add pcie_port_pm=off to the kernel command line"


def test_fixed_box_is_all_ok_and_idle_speed_is_only_noted(tmp_path):
    root, s = tree(tmp_path, "rtxpro6000-x4-epyc-fixed")
    findings = pf.host_findings(ph.read_host(root, s["gpus"]), 4, "blackwell")
    assert [(f["check"], f["result"]) for f in findings] == [(c, "ok") for c in pf.CHECKS]
    got = by_check(findings)
    assert got["link_width"][0]["reason"] == ("every GPU link runs at its full width; informational, a lower link speed (GPUs drop "
                                              "the link generation at idle): GPU 1 (0000:04:00.0) at 2.5 GT/s PCIe of 32.0 GT/s PCIe")
    assert got["iommu"][0]["reason"] == "the GPUs' IOMMU groups are identity (passthrough)"


@pytest.mark.parametrize("ctrl,bits", [(0x001D, "ReqRedir+ CmpltRedir+"), (0x0005, "ReqRedir+"), (0x0009, "CmpltRedir+"),
                                       (0x0011, None), (0x0000, None), (0x0060, None)])
def test_the_finding_follows_the_redirect_bits_of_the_switch_port(tmp_path, ctrl, bits):
    def change(s):
        bridge_entry(s, "0000:02:00.0")["config"]["ext_caps"][1]["ctrl"] = ctrl
    root, s = tree(tmp_path, "rtxpro6000-x4-epyc-as-shipped", change)
    acs_findings = by_check(pf.host_findings(ph.read_host(root, s["gpus"]), 4, "blackwell"))["acs"]
    flagged = dict((f["reason"].split()[1], f["reason"]) for f in acs_findings)
    assert sorted(flagged) == sorted(["0000:00:01.1", "0000:40:01.1"] + (["0000:02:00.0"] if bits else []))
    if bits:
        assert "has ACS %s (ACSCtl 0x%04x" % (bits, ctrl) in flagged["0000:02:00.0"]


def test_a_bridge_above_the_meeting_point_is_not_judged(tmp_path):
    def change(s):  # ACS redirect on the switch's upstream port, which the pair's traffic never turns in
        bridge_entry(s, "0000:01:00.0")["config"]["ext_caps"][1] = acs(0x001D)
    root, s = tree(tmp_path, "rtxpro6000-x4-epyc-fixed", change)
    host = ph.read_host(root, s["gpus"])
    assert host["gpus"][0]["bridges"][1]["acs"]["control"]["ReqRedir"] is True
    assert by_check(pf.host_findings(host, 4, "blackwell"))["acs"][0]["result"] == "ok"


def test_one_gpu_every_p2p_check_is_ok_but_its_link_is_still_judged(tmp_path):
    root, s = tree(tmp_path, "rtxpro6000-x4-epyc-as-shipped")
    findings = pf.host_findings(ph.read_host(root, s["gpus"][3:]), 1, "blackwell")
    for f in findings:
        if f["check"] in pf.P2P_CHECKS:
            assert (f["result"], f["reason"], f["remedy"]) == ("ok", "one GPU: no peer-to-peer traffic", "")
    assert [f["result"] for f in findings if f["check"] == "link_width"] == ["warning"]
    assert pf.host_findings(ph.read_host(root, []), 0, None)[4]["reason"] == "no GPU: no link to check"


# ---------------------------------------------------------------- unknowns: never "ok" where they matter

def test_config_space_read_without_root_is_could_not_be_read(tmp_path):
    root, s = tree(tmp_path, "rtxpro6000-x4-epyc-fixed")
    for bus in ("0000:02:00.0", "0000:40:01.1"):
        path = os.path.realpath(os.path.join(root, "sys", "bus", "pci", "devices", bus, "config"))
        with open(path, "rb") as f:
            head = f.read(64)
        with open(path, "wb") as f:
            f.write(head)
    host = ph.read_host(root, s["gpus"])
    assert host["gpus"][0]["bridges"][2]["acs_state"] == "unreadable"
    (found,) = by_check(pf.host_findings(host, 4, "blackwell"))["acs"]
    assert found["result"] == "warning" and found["reason"].startswith("could not be read: ACS of bridge 0000:02:00.0")
    assert "unreadable (not root): config space read returned 64 bytes" in found["reason"]
    assert "0000:40:01.1" in found["reason"] and "lspci -vvv" in found["remedy"]


def test_unknown_inputs_of_applicable_checks_are_warnings(tmp_path):
    root, s = tree(tmp_path, "rtxpro6000-x4-epyc-fixed")
    os.remove(os.path.join(root, "proc", "cmdline"))
    os.remove(os.path.join(root, "sys", "module", "nvidia_uvm", "parameters", "uvm_disable_hmm"))
    os.remove(os.path.join(root, "etc", "modprobe.d", "nvidia-uvm.conf"))
    for group in os.listdir(os.path.join(root, "sys", "kernel", "iommu_groups")):
        os.remove(os.path.join(root, "sys", "kernel", "iommu_groups", group, "type"))
    gpus = [dict(g) for g in s["gpus"]]
    del gpus[2]["memory_total_mib"]
    gpus[3]["pci_bus_id"] = "00000000:62:00.0"  # not on this box
    got = by_check(pf.host_findings(ph.read_host(root, gpus), 4, "blackwell"))
    for check in pf.CHECKS:
        assert [f["result"] for f in got[check]] == ["warning"], check
        assert got[check][0]["reason"].startswith(pf.UNREAD), check
    assert "the IOMMU mode (6 of 6 groups have no readable type file" in got["iommu"][0]["reason"]
    assert "/proc/cmdline: No such file or directory" in got["pcie_port_pm"][0]["reason"]
    assert "uvm_disable_hmm: No such file or directory" in got["hmm"][0]["reason"]
    assert "the framebuffer size of GPU 2 (0000:41:00.0)" in got["bar1"][0]["reason"]
    assert "the PCI path of GPU 3 (0000:62:00.0) (/sys/bus/pci/devices/0000:62:00.0: no such device)" in got["acs"][0]["reason"]
    assert "the link width of GPU 3 (0000:62:00.0)" in got["link_width"][0]["reason"]


def test_hmm_depends_on_architecture_and_on_what_modprobe_will_set(tmp_path):
    root, s = tree(tmp_path, "rtxpro6000-x4-epyc-fixed")
    host = ph.read_host(root, s["gpus"])
    assert by_check(pf.host_findings(host, 4, None))["hmm"][0]["reason"].startswith(pf.UNREAD + "the GPU architecture")
    unloaded = copy.deepcopy(host)
    unloaded["uvm"].update(loaded=False, uvm_disable_hmm=None, hmm_disabled=None)
    assert pf.check_hmm(unloaded, "blackwell") == [{"check": "hmm", "result": "ok", "remedy": "", "reason":
                                                   "nvidia_uvm is not loaded; /etc/modprobe.d/nvidia-uvm.conf sets uvm_disable_hmm=1 for its next load"}]
    pending = copy.deepcopy(host)
    pending["uvm"].update(uvm_disable_hmm="N", hmm_disabled=False)
    assert "/etc/modprobe.d/nvidia-uvm.conf sets uvm_disable_hmm=1, not yet in effect" in pf.check_hmm(pending, "blackwell")[0]["reason"]
    hopper = pf.check_hmm(pending, "hopper")[0]
    assert (hopper["result"], hopper["reason"]) == ("ok", "hopper, not Blackwell: the HMM lock-up is reported on Blackwell")


def test_iommu_from_the_host_mode_when_the_gpus_groups_are_not_known(tmp_path):
    root, s = tree(tmp_path, "rtxpro6000-x4-epyc-as-shipped")
    host = ph.read_host(root, s["gpus"])
    for gpu in host["gpus"]:
        gpu["iommu_group"] = {"group": None, "type": None}
    assert pf.check_iommu(host)[0]["reason"].startswith("the IOMMU is in translated mode (1 DMA, 4 DMA-FQ, 1 unmanaged)")
    host["cmdline"]["params"]["iommu"] = "pt"
    assert "asks for passthrough, so that has not taken effect" in pf.check_iommu(host)[0]["reason"]
    host["iommu"].update(mode="mixed", types={"identity": 3, "DMA": 1})
    assert pf.check_iommu(host)[0]["reason"].startswith(pf.UNREAD + "which IOMMU groups the GPUs are in")
    host["iommu"].update(mode="off", types={}, groups=0)
    assert pf.check_iommu(host)[0] == {"check": "iommu", "result": "ok", "reason": "no IOMMU groups: the IOMMU is off", "remedy": ""}


def test_fewer_gpus_in_the_host_section_than_on_the_box(tmp_path):
    root, s = tree(tmp_path, "rtxpro6000-x4-epyc-fixed")
    got = by_check(pf.host_findings(ph.read_host(root, s["gpus"][:2]), 4, "blackwell"))
    for check in pf.PER_GPU_CHECKS:
        assert [f["reason"] for f in got[check]] == [pf.UNREAD + "2 of the 4 GPUs are not in the host section"]


# ---------------------------------------------------------------- real captures: this machine, the device's H200

REAL = os.path.join(HOST_FIXTURES, "real")
_REAL_TREES = {}


def real_tree(name):
    """real/<name>/tree.json unpacked into a temporary directory (once per run, removed at exit)."""
    if name not in _REAL_TREES:
        import atexit
        import shutil
        import tempfile
        dest = tempfile.mkdtemp(prefix="moeops-host-")
        atexit.register(shutil.rmtree, dest, True)
        with open(os.path.join(REAL, name, "tree.json")) as f:
            _REAL_TREES[name] = capture.unpack(json.load(f), dest)
    return _REAL_TREES[name]


@pytest.fixture(scope="module")
def real_root():
    return real_tree("this-machine")


@pytest.mark.parametrize("name", ["this-machine", "h200-x1-device"])
def test_real_capture_replays_to_the_recorded_reader_output(name):
    with open(os.path.join(REAL, name, "readers.json")) as f:
        recorded = json.load(f)
    assert recorded.pop("captured")["root"] == "/"
    assert capture.readers_output(ph, pf, real_tree(name)) == recorded


def test_real_capture_what_a_firecracker_vm_shows(real_root):
    assert capture.list_pci_devices(real_root) == ["0000:00:0%d.0" % i for i in range(6)]
    assert ph.read_iommu(real_root) == {"mode": "off", "groups": 0, "types": {}, "untyped": 0, "unavailable": []}
    assert ph.read_aspm(real_root)["policy"] == "default"
    assert ph.read_uvm(real_root)["loaded"] is False
    cmdline = ph.read_cmdline(real_root)
    assert cmdline["raw"].startswith("mitigations=auto") and set(cmdline["params"].values()) == {None}
    # The host bridge has a 4096-byte config space with no extended capabilities; the virtio devices have 256 bytes.
    host_bridge = ph.read_acs(real_root, "0000:00:00.0")
    assert (host_bridge["config_bytes"], host_bridge["acs_state"]) == (4096, "absent")
    virtio = ph.read_acs(real_root, "0000:00:03.0")
    assert (virtio["config_bytes"], virtio["acs_state"]) == (256, "unreadable")
    assert "unreadable (no extended config space)" in virtio["unavailable"][0]["reason"]
    assert ph.read_pci_path(real_root, "0000:00:03.0")["bridges"] == []  # flat root bus
    host = ph.read_host(real_root, [])
    assert host["unavailable"] == [{"field": "uvm.uvm_disable_hmm", "reason": "/sys/module/nvidia_uvm: nvidia_uvm is not loaded"}]
    assert pf.host_findings(host, 0, None) == [
        {"check": c, "result": "ok", "remedy": "",
         "reason": "no GPU: no link to check" if c == "link_width" else "no GPU: no peer-to-peer traffic"} for c in pf.CHECKS]


def test_real_h200_bar1_from_sysfs_agrees_with_nvml_and_its_findings():
    root = real_tree("h200-x1-device")
    with open(os.path.join(REAL, "h200-x1-device", "nvidia-smi-q-memory.txt")) as f:
        smi = f.read()
    nvml_bar1 = int(smi.split("BAR1 Memory Usage")[1].split("Total")[1].split(":")[1].split()[0])
    fb = int(smi.split("FB Memory Usage")[1].split("Total")[1].split(":")[1].split()[0])
    assert (nvml_bar1, fb) == (262144, 143771)
    # BAR0 is 64-bit there: BAR1 is region 2 of sysfs resource, not region 1.
    with open(os.path.join(root, "sys", "bus", "pci", "devices", "0000:00:06.0", "resource")) as f:
        assert ph.bar1_region(f.read())[0] == 2
    host = ph.read_host(root, [{"index": 0, "pci_bus_id": "00000000:00:06.0", "memory_total_mib": fb}])
    gpu = host["gpus"][0]
    assert (gpu["bar1_mib"], gpu["bar1_source"], gpu["framebuffer_mib"]) == (nvml_bar1, "sysfs resource", fb)
    assert gpu["link"] == {"current_width": 16, "max_width": 16, "current_speed": "32.0 GT/s PCIe",
                           "max_speed": "32.0 GT/s PCIe", "degraded": False, "speed_below_max": False}
    assert gpu["bridges"] == [] and gpu["iommu_group"] == {"group": None, "type": None}
    assert host["iommu"]["mode"] == "off" and host["unavailable"] == []
    assert (host["uvm"]["loaded"], host["uvm"]["uvm_disable_hmm"], host["uvm"]["hmm_disabled"]) == (True, "N", False)
    findings = pf.host_findings(host, 1, "hopper")
    assert [(f["check"], f["result"]) for f in findings] == [(c, "ok") for c in pf.CHECKS]
    assert findings[4]["reason"] == "every GPU link runs at its full width"
    # The same real reading on a Blackwell box of several GPUs would warn: HMM is on in this driver's default.
    assert pf.check_hmm(host, "blackwell")[0]["reason"].startswith("nvidia_uvm runs with HMM on (uvm_disable_hmm=N)")


# ---------------------------------------------------------------- fixtures and docs stay honest

def test_constructed_specs_say_so_and_are_listed_in_their_readme():
    folder = os.path.join(HOST_FIXTURES, "constructed")
    with open(os.path.join(folder, "README.md")) as f:
        readme = f.read()
    names = sorted(n for n in os.listdir(folder) if n.endswith(".spec.json"))
    assert names
    for name in names:
        assert spec(name[:-len(".spec.json")])["description"].startswith("CONSTRUCTED"), name
        assert "`%s`: CONSTRUCTED" % name in readme, name


def test_doc_names_every_check():
    with open(DOC) as f:
        doc = f.read()
    for check in pf.CHECKS:
        assert "| `%s` |" % check in doc, check


# --- issue 28: BAR1 from the GPU backends first, as docs/pcie-host-facts.md promises -------------------------------

@pytest.mark.parametrize("backend", ["nvml", "nvidia_smi"])
def test_bar1_from_either_backend_needs_no_resource_file(tmp_path, backend):
    """The real H200's BAR1 as each backend read it (tests/fixtures/gpu/real/h200-x1-device), over a host tree without
    sysfs resource files (a VM's, a container's): BAR1 is read, from the backend, and the finding is ok, no longer
    "could not be read"."""
    import nvml_double
    from ansible_collections.moeops.inference.plugins.module_utils._facts import gpu_topology as topo
    device = os.path.join(os.path.dirname(HOST_FIXTURES), "gpu", "real", "h200-x1-device")
    if backend == "nvml":
        gpus = topo.read_nvml(nvml_double.from_bar1_capture(os.path.join(device, "nvml-bar1.json")))["gpus"]
    else:
        with open(os.path.join(device, "nvidia-smi.q_x.bar1-capture.xml")) as f:
            gpus = topo.read_nvidia_smi({"xml": f.read(), "topo": None, "query": None, "nvlink": None})["gpus"]
    host = ph.read_host(str(tmp_path / "no-sysfs"), gpus, backend)
    gpu = host["gpus"][0]
    assert (gpu["bar1_mib"], gpu["bar1_source"], gpu["framebuffer_mib"]) == (262144, backend, 143771)
    assert not [u for u in host["unavailable"] if "bar1" in u["field"]]
    assert [(f["result"], f["reason"]) for f in pf.check_bar1(host)] == [("ok", "BAR1 covers the framebuffer on every GPU")]


def _uvm_zero(tmp_path, name="zz-hmm-on.conf"):
    """The fixed box, plus a modprobe.d file read after the role's that sets uvm_disable_hmm=0."""
    root, s = tree(tmp_path, "rtxpro6000-x4-epyc-fixed")
    with open(os.path.join(root, "etc", "modprobe.d", name), "w") as f:
        f.write("# turns HMM back on\noptions nvidia_uvm uvm_disable_hmm=0\n")
    return ph.read_host(root, s["gpus"])


def test_uvm_disable_hmm_0_in_modprobe_d_is_a_setting_not_nothing(tmp_path):
    """Issue 28: =0 was tested for truth and read as "not set": a file that turns HMM back on at the next load went
    unreported (loaded with HMM off) or reported as unreadable (not loaded)."""
    host = _uvm_zero(tmp_path)
    assert host["uvm"]["configured_hmm_disabled"] is False
    where = "/etc/modprobe.d/zz-hmm-on.conf sets uvm_disable_hmm=0"
    loaded_off = copy.deepcopy(host)
    loaded_off["uvm"].update(loaded=True, uvm_disable_hmm="Y", hmm_disabled=True)
    found = pf.check_hmm(loaded_off, "blackwell")
    assert [(f["result"], f["reason"].split(". Source:")[0]) for f in found] == [
        ("warning", "nvidia_uvm runs with uvm_disable_hmm=Y now, but %s: HMM comes back on when nvidia_uvm is next "
                    "loaded (a reboot)" % where)]
    unloaded = copy.deepcopy(host)
    unloaded["uvm"].update(loaded=False, uvm_disable_hmm=None, hmm_disabled=None)
    found = pf.check_hmm(unloaded, "blackwell")
    assert [(f["result"], f["reason"].split(". Source:")[0]) for f in found] == [
        ("warning", "nvidia_uvm is not loaded, and %s: HMM will be on when it loads, on a multi-GPU Blackwell box" % where)]
    assert not found[0]["reason"].startswith(pf.UNREAD)
    loaded_on = copy.deepcopy(host)
    loaded_on["uvm"].update(loaded=True, uvm_disable_hmm="N", hmm_disabled=False)
    assert "; %s, which keeps it on" % where in pf.check_hmm(loaded_on, "blackwell")[0]["reason"]


@pytest.mark.parametrize("mode, says", [
    ("translated", "redirected up to the root complex and through the IOMMU instead of going GPU to GPU, and NCCL can hang"),
    ("mixed", "through the IOMMU"),
    ("off", "(the IOMMU is off here, so it is not translated, but every transfer takes the long way"),
    ("passthrough", "(the IOMMU is in passthrough here, so it is not translated, but every transfer takes the long way)"),
])
def test_the_acs_warning_names_the_iommu_only_where_there_is_one(tmp_path, mode, says):
    root, s = tree(tmp_path, "rtxpro6000-x4-epyc-as-shipped")
    host = ph.read_host(root, s["gpus"])
    host["iommu"]["mode"] = mode
    warned = [f for f in pf.check_acs(host) if f["result"] == "warning" and not f["reason"].startswith(pf.UNREAD)]
    assert warned and all(says in f["reason"] for f in warned)
    if mode in ("off", "passthrough"):
        # The source it cites (NCCL #2079) still says how that report's box failed.
        assert not any("through the IOMMU" in f["reason"].split(". Source:")[0] for f in warned)
