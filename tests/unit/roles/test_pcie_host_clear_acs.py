# -*- coding: utf-8 -*-
"""roles/pcie_host/files/clear_acs.py over the CONSTRUCTED 4x RTX PRO 6000 tree, with a setpci TEST DOUBLE that
holds each bridge's ACS Control register (from the spec) and applies writes with setpci's value:mask rule."""
from __future__ import annotations

import importlib.util
import json
import os
import stat
import sys
import textwrap

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
HOST = os.path.join(ROOT, "tests", "fixtures", "host")


def _load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


clear_acs = _load("moeops_clear_acs", os.path.join(ROOT, "roles", "pcie_host", "files", "clear_acs.py"))
capture = _load("moeops_host_capture_acs", os.path.join(HOST, "capture.py"))


@pytest.fixture
def box(tmp_path):
    """The as-shipped 4x box as a tree, and a setpci double over its bridges' ACS Control values."""
    with open(os.path.join(HOST, "constructed", "rtxpro6000-x4-epyc-as-shipped.spec.json")) as f:
        spec = json.load(f)
    root = capture.build(spec, str(tmp_path / "root"))
    registers = {}
    for dev in spec["pci"]:
        acs = [c for c in dev.get("config", {}).get("ext_caps", []) if c["id"] == "0x000d"]
        if acs:
            registers[os.path.basename(dev["path"])] = int(acs[0]["ctrl"], 16)
    state, log = tmp_path / "acs.json", tmp_path / "setpci.log"
    state.write_text(json.dumps(registers))
    setpci = tmp_path / "setpci"
    setpci.write_text(textwrap.dedent("""\
        #!%s
        # TEST DOUBLE for setpci: -s BDF ECAP_ACS+6.w[=value:mask], over a JSON file of ACS Control registers.
        import json, sys
        state = json.load(open(%r))
        open(%r, "a").write(" ".join(sys.argv[1:]) + "\\n")
        bdf, reg = sys.argv[2], sys.argv[3]
        if bdf not in state:
            sys.stderr.write("setpci: Capability ECAP_ACS not found\\n"); sys.exit(1)
        if "=" in reg:
            value, mask = (int(x, 16) for x in reg.split("=")[1].split(":"))
            state[bdf] = (state[bdf] & ~mask) | (value & mask)
            json.dump(state, open(%r, "w"))
        else:
            print("%%04x" %% state[bdf])
        """ % (sys.executable, str(state), str(log), str(state))))
    setpci.chmod(setpci.stat().st_mode | stat.S_IEXEC)
    return root, str(setpci), state, log


def test_the_bridges_above_the_gpus_root_port_first(box):
    root = box[0]
    want = ["0000:00:01.1", "0000:01:00.0", "0000:02:00.0", "0000:02:01.0", "0000:40:01.1", "0000:60:01.1"]
    assert clear_acs.bridges_above_gpus(root) == want


def test_only_the_redirect_bits_are_cleared_where_set(box, capsys):
    root, setpci, state, log = box
    before = json.loads(state.read_text())
    assert clear_acs.main(["--root", root, "--setpci", setpci]) == 0
    after = json.loads(state.read_text())
    # 0x001d (SrcValid, ReqRedir, CmpltRedir, UpstreamFwd) becomes 0x0011; 0x0011 and 0 are not written.
    assert after == {bdf: value & ~0x000C for bdf, value in before.items()}
    writes = [line for line in log.read_text().splitlines() if "=" in line]
    assert writes == ["-s %s ECAP_ACS+6.w=0000:000c" % b for b in ("0000:00:01.1", "0000:02:00.0", "0000:40:01.1")]
    out = capsys.readouterr().out
    assert "0000:02:01.0: ACSCtl 0x0011, no redirect bit set" in out and "0000:01:00.0: no ACS capability" in out
    # At the next boot the bits are back only if the firmware sets them: run again, nothing to write.
    assert clear_acs.main(["--root", root, "--setpci", setpci]) == 0
    assert len([line for line in log.read_text().splitlines() if "=" in line]) == 3


def test_dry_run_writes_nothing(box):
    root, setpci, state, log = box
    before = state.read_text()
    assert clear_acs.main(["--root", root, "--setpci", setpci, "--dry-run"]) == 0
    assert state.read_text() == before and "=" not in log.read_text()


def test_no_gpu_nothing_to_clear(tmp_path, capsys):
    assert clear_acs.main(["--root", str(tmp_path), "--setpci", "/nonexistent/setpci"]) == 0
    assert "nothing to clear" in capsys.readouterr().out
