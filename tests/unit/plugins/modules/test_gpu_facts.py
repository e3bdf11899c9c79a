# -*- coding: utf-8 -*-
"""gpu_facts through Ansible's module test pattern (patch_module_args, exit/fail captured)."""
from __future__ import annotations

import json
import os
import stat
import sys
import textwrap

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.moeops.inference.plugins.modules import gpu_facts
from conftest import FIXTURES, ExitJson, FailJson, load_json
import nvml_double

SEED = os.path.join(FIXTURES, "constructed", "rtxpro6000-x8-2numa.json")
CAPTURE = os.path.join(FIXTURES, "real", "h200-x1-vm.json")


# exit_json/fail_json raise ExitJson/FailJson (tests/unit/conftest.py).
pytestmark = pytest.mark.usefixtures("module_exits")


def run(args, expect=ExitJson):
    with patch_module_args(args):
        with pytest.raises(expect) as exc:
            gpu_facts.main()
    return exc.value.args[0]


@pytest.fixture
def no_nvml(monkeypatch):
    """nvidia-ml-py as if it were not installed: the state the module's guarded import leaves behind."""
    monkeypatch.setattr(gpu_facts, "pynvml", None)
    monkeypatch.setattr(gpu_facts, "PYNVML_IMPORT_ERROR", "ModuleNotFoundError: No module named 'pynvml'")


@pytest.fixture
def empty_path(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    return tmp_path


@pytest.fixture
def fake_smi(empty_path, h200_capture):
    """TEST DOUBLE for nvidia-smi: a script that prints what the real one printed on the H200."""
    outputs = {tuple(k.split()[1:]): v for k, v in h200_capture["nvidia_smi"].items() if k.startswith("nvidia-smi ")}
    data = empty_path / "outputs.json"
    data.write_text(json.dumps({" ".join(k): v for k, v in outputs.items()}))
    script = empty_path / "nvidia-smi"
    script.write_text(textwrap.dedent("""\
        #!%s
        import json, sys
        out = json.load(open(%r)).get(" ".join(sys.argv[1:]))
        if out is None:
            sys.stderr.write("Invalid combination of input arguments.\\n")
            sys.exit(2)
        sys.stdout.write(out["stdout"])
        sys.exit(out["rc"])
        """ % (sys.executable, str(data))))
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return script


def test_snapshot_backend():
    result = run({"backend": "snapshot", "snapshot": SEED})
    facts = result["ansible_facts"]["nvidia_gpu"]
    assert result["changed"] is False
    assert facts["backend"] == "snapshot" and facts["count"] == 8
    assert facts["interconnect"]["class"] == "pcie_cross_numa"
    assert facts["snapshot"]["constructed"] is True


def test_nvml_backend_reads_through_pynvml(monkeypatch):
    double = nvml_double.from_capture(CAPTURE)
    calls = []
    double.nvmlInit = lambda: calls.append("init")
    double.nvmlShutdown = lambda: calls.append("shutdown")
    monkeypatch.setattr(gpu_facts, "pynvml", double)
    facts = run({"backend": "nvml"})["ansible_facts"]["nvidia_gpu"]
    assert calls == ["init", "shutdown"]
    assert (facts["backend"], facts["count"], facts["gpus"][0]["architecture"]) == ("nvml", 1, "hopper")


def test_nvml_driver_not_loaded_falls_back_to_smi(monkeypatch, fake_smi):
    double = nvml_double.from_capture(CAPTURE)

    def init():
        raise nvml_double.NVMLError("Driver Not Loaded")
    double.nvmlInit = init
    monkeypatch.setattr(gpu_facts, "pynvml", double)
    facts = run({})["ansible_facts"]["nvidia_gpu"]
    assert facts["backend"] == "nvidia_smi"
    assert facts["gpus"][0]["compute_capability"] == "9.0"


def test_nvidia_smi_backend_with_the_h200_outputs(no_nvml, fake_smi):
    facts = run({"backend": "nvidia_smi"})["ansible_facts"]["nvidia_gpu"]
    assert (facts["backend"], facts["count"]) == ("nvidia_smi", 1)
    g = facts["gpus"][0]
    assert (g["name"], g["compute_capability"], g["architecture"], g["memory_total_mib"], g["numa_node"]) == (
        "NVIDIA H200", "9.0", "hopper", 143771, 0)
    # `topo -p2p a` is not in the capture: the double exits 2 like nvidia-smi does; nothing fails.
    assert facts["interconnect"]["class"] == "single"


def test_auto_without_anything_reports_no_gpu(no_nvml, empty_path):
    facts = run({})["ansible_facts"]["nvidia_gpu"]
    assert (facts["count"], facts["backend"]) == (0, "none")
    assert "nvidia-ml-py is not installed" in facts["unavailable"][0]["reason"]
    assert "nvidia-smi is not on the PATH" in facts["unavailable"][0]["reason"]


def test_required_fails_naming_what_is_missing(no_nvml, empty_path):
    msg = run({"required": True}, FailJson)["msg"]
    assert "nvidia-ml-py is not installed" in msg and "nvidia-smi is not on the PATH" in msg


def test_nvml_backend_without_library_fails(no_nvml):
    result = run({"backend": "nvml"}, FailJson)
    # ansible-core's missing_required_lib wording, with the reason and where to get it.
    assert result["msg"].startswith("Failed to import the required Python library (nvidia-ml-py)")
    assert "for backend=nvml" in result["msg"] and "https://pypi.org/project/nvidia-ml-py/" in result["msg"]
    assert "No module named 'pynvml'" in result["exception"]


def test_snapshot_needs_path():
    assert "snapshot" in run({"backend": "snapshot"}, FailJson)["msg"]


def test_relative_paths_refused():
    assert "must be an absolute path" in run({"backend": "snapshot", "snapshot": "rel.json"}, FailJson)["msg"]


def test_bad_snapshot_fails_cleanly(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema_version": 99}')
    assert "schema_version 99" in run({"backend": "snapshot", "snapshot": str(bad)}, FailJson)["msg"]


def test_dump_writes_once_and_respects_check_mode(tmp_path):
    out = str(tmp_path / "snap.json")
    checked = run({"backend": "snapshot", "snapshot": SEED, "dump": out, "_ansible_check_mode": True})
    assert checked["changed"] is True and not os.path.exists(out)
    first = run({"backend": "snapshot", "snapshot": SEED, "dump": out, "dump_description": "seed again"})
    assert first["changed"] is True
    second = run({"backend": "snapshot", "snapshot": SEED, "dump": out, "dump_description": "seed again"})
    assert second["changed"] is False
    written = json.load(open(out))
    assert written["schema_version"] == 1 and written["description"] == "seed again"
    assert written["gpus"] == load_json("constructed", "rtxpro6000-x8-2numa.json")["gpus"]
    replay = run({"backend": "snapshot", "snapshot": out})["ansible_facts"]["nvidia_gpu"]
    assert replay["interconnect"]["class"] == "pcie_cross_numa"


def test_host_section_read_under_host_root_with_a_replayed_snapshot(tmp_path, seed_host_facts):
    root = seed_host_facts["host_root"]
    facts = run({"backend": "snapshot", "snapshot": SEED, "host_root": root})["ansible_facts"]["nvidia_gpu"]
    host = facts["host"]
    assert host == seed_host_facts["host"]
    assert host["unavailable"] == [] and host["iommu"]["mode"] == "translated"
    assert [g["pci_bus_id"] for g in host["gpus"]] == ["0000:%s:00.0" % b for b in ("01", "21", "41", "61", "81", "a1", "c1", "e1")]
    assert {b["acs"]["control_text"] for g in host["gpus"] for b in g["bridges"]} == \
        {"SrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-"}
    # Dumped, the section travels with the snapshot; replayed with host=false it is kept as recorded.
    dump = str(tmp_path / "dump.json")
    run({"backend": "snapshot", "snapshot": SEED, "host_root": root, "dump": dump})
    again = run({"backend": "snapshot", "snapshot": dump, "host": False})["ansible_facts"]["nvidia_gpu"]
    assert again["host"] == host


def test_no_host_section_without_gpus_or_when_not_asked(no_nvml, empty_path):
    assert "host" not in run({})["ansible_facts"]["nvidia_gpu"]
    assert "host" not in run({"backend": "snapshot", "snapshot": SEED, "host": False})["ansible_facts"]["nvidia_gpu"]
