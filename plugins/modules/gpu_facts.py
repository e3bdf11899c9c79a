#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, moeops.inference contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: gpu_facts
short_description: Read the NVIDIA GPUs of a host and how they are linked
version_added: 0.1.0
description:
  - Sets C(ansible_facts.nvidia_gpu) to the GPUs of the managed node, every GPU pair's path and P2P status,
    and an O(ignore:interconnect) summary that the C(moeops.inference.nccl_env) filter turns into NCCL settings.
  - Reads through NVML (nvidia-ml-py), through C(nvidia-smi), or replays a snapshot file written earlier by O(dump).
  - Fields a backend cannot read are null and listed in C(unavailable) with the reason; they never fail the module.
  - The snapshot format is versioned by C(schema_version) and documented in C(docs/snapshot-format.md) of the collection.
author:
  - moeops.inference contributors (@moeops)
requirements:
  - nvidia-ml-py on the managed node for O(backend=nvml) (the default under O(backend=auto) when it imports and the driver answers).
  - C(nvidia-smi) on the managed node for O(backend=nvidia_smi).
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.facts
attributes:
  check_mode:
    support: full
    details: The module only reads. In check mode the O(dump) file is not written; C(changed) says whether it would be.
  diff_mode:
    support: none
  platform:
    platforms: posix
  facts:
    support: full
options:
  backend:
    description:
      - Where to read from.
      - V(auto) uses NVML when nvidia-ml-py imports and the driver answers, else C(nvidia-smi) when it is on the path,
        else reports no GPU (backend C(none)).
      - V(snapshot) replays O(snapshot).
    type: str
    choices: [auto, nvml, nvidia_smi, snapshot]
    default: auto
  snapshot:
    description:
      - Absolute path of a snapshot JSON file on the managed node. Required with O(backend=snapshot).
    type: path
  dump:
    description:
      - Absolute path on the managed node to write what was read, as a snapshot that O(backend=snapshot) can replay elsewhere.
      - Written only when its content would change.
    type: path
  dump_description:
    description:
      - Free text stored in the snapshot's C(description), for example the machine it came from.
    type: str
    default: ""
  required:
    description:
      - Fail when no GPU can be read, naming what is missing (no driver loaded, nvidia-ml-py absent, nvidia-smi absent).
      - When V(false), a host without GPUs gets C(count=0) and C(backend=none).
    type: bool
    default: false
  network:
    description:
      - Also read the host's network interfaces (C(/sys/class/net)) and RDMA devices (C(/sys/class/infiniband)) into
        C(network), from which C(NCCL_SOCKET_IFNAME) and C(NCCL_IB_HCA) are derived for multi-node serving.
      - Read from the live host with every O(backend), also V(snapshot); GPUs may be replayed, the network is real.
        With V(false) a replayed snapshot's own C(network), if it has one, is kept.
    type: bool
    default: true
    version_added: 0.2.0
  host:
    description:
      - Also read the host's PCIe peer-to-peer readiness into C(host) - the IOMMU mode and groups, the ACS control bits
        of every bridge between each GPU and its root port (from PCI config space), each GPU's link width and speed
        and BAR1, C(nvidia_uvm)'s C(uvm_disable_hmm), the ASPM policy and C(pcie_port_pm) - from procfs and sysfs under
        O(host_root). Read as root - config space beyond 64 bytes needs it.
      - Read from the live host (or the tree at O(host_root)) with every O(backend), also V(snapshot), when there is a
        GPU. With V(false) a replayed snapshot's own C(host), if it has one, is kept.
      - The findings over it (C(docs/pcie-host-facts.md)) are the preflight module's and the settings report's.
    type: bool
    default: true
    version_added: 0.5.0
  host_root:
    description:
      - The root under which O(host) reads C(/proc) and C(/sys); V(/) on a real host, a constructed tree in tests and
        on the simulated node.
    type: path
    default: /
    version_added: 0.5.0
notes:
  - NVML's P2P status is queried with plain integer indexes; pynvml's C(NVML_P2P_CAPS_INDEX_READ) is the tuple C((0,)).
  - C(numa_node) is the CPU-side NUMA node the GPU hangs off (NVML memory affinity, else sysfs; C(nvidia-smi topo -m)'s
    NUMA Affinity). C(gpu_numa_id) is the GPU's own NUMA node on coherent systems and is usually null on PCIe GPUs.
seealso:
  - name: NVML API reference
    description: The calls the nvml backend makes.
    link: https://docs.nvidia.com/deploy/nvml-api/
"""

EXAMPLES = r"""
- name: Read the GPUs
  moeops.inference.gpu_facts:

- name: Read the GPUs and keep a snapshot to replay in tests
  moeops.inference.gpu_facts:
    backend: nvml
    dump: /var/tmp/gpu-snapshot.json
    dump_description: lab box 3, 8x RTX PRO 6000

- name: Replay a saved topology (simulated workstation)
  moeops.inference.gpu_facts:
    backend: snapshot
    snapshot: /etc/moeops/gpu-snapshot.json

- name: Stop here on a host that must have GPUs
  moeops.inference.gpu_facts:
    required: true

- name: Show the NCCL settings this topology calls for
  ansible.builtin.debug:
    msg: "{{ ansible_facts.nvidia_gpu | moeops.inference.nccl_env }}"
"""

RETURN = r"""
ansible_facts:
  description: Facts set by the module.
  returned: always
  type: dict
  contains:
    nvidia_gpu:
      description: The GPUs and their links.
      returned: always
      type: dict
      contains:
        schema_version:
          description: Version of this layout and of the snapshot format.
          type: int
          sample: 1
        backend:
          description: What was read. V(none) when no GPU could be read.
          type: str
          choices: [nvml, nvidia_smi, snapshot, none]
          sample: nvml
        count:
          description: Number of GPUs.
          type: int
          sample: 8
        from_hardware:
          description:
            - V(true) when the GPUs were read from this host's hardware (O(backend=nvml) or O(backend=nvidia_smi)) and
              there is at least one; V(false) for a replayed snapshot or no GPU.
            - The roles start services only on facts from hardware.
          type: bool
          sample: true
        driver_version:
          description: NVIDIA driver version.
          type: str
          sample: "580.159.04"
        cuda_driver_version:
          description: Highest CUDA version the driver supports.
          type: str
          sample: "13.0"
        gpus:
          description: One entry per GPU, by index.
          type: list
          elements: dict
          contains:
            index: {description: NVML index., type: int}
            name: {description: Product name., type: str, sample: NVIDIA RTX PRO 6000 Blackwell Workstation Edition}
            uuid: {description: GPU UUID., type: str}
            pci_bus_id: {description: "PCI bus id, 8-digit domain, upper case.", type: str, sample: "00000000:00:06.0"}
            compute_capability: {description: Compute capability., type: str, sample: "12.0"}
            architecture: {description: Architecture family., type: str, sample: blackwell}
            memory_total_mib: {description: Framebuffer memory in MiB., type: int, sample: 97887}
            bar1_total_mib:
              description:
                - The BAR1 aperture in MiB, how much of the GPU's memory a peer or the host can map at once
                  (NVML's C(nvmlDeviceGetBAR1MemoryInfo), nvidia-smi's C(bar1_memory_usage/total)).
                - Null where the backend cannot read it (and absent from snapshots made before it was read).
              type: int
              sample: 262144
            pcie:
              description: PCIe link, O(ignore:max_gen), O(ignore:max_width), O(ignore:current_gen), O(ignore:current_width).
              type: dict
            numa_node: {description: CPU-side NUMA node of the GPU; null when unknown., type: int}
            gpu_numa_id: {description: The GPU's own NUMA node on coherent systems; usually null., type: int}
            cpu_affinity: {description: CPUs near the GPU., type: str, sample: "0-15"}
            persistence_mode: {description: Persistence mode on., type: bool}
            mig_mode: {description: MIG mode currently on., type: bool}
            nvlink:
              description:
                - O(ignore:active_links), O(ignore:peers) (list of O(ignore:gpu) and O(ignore:links)) and O(ignore:nvswitch_links).
                - All null when the link state cannot be read.
              type: dict
        pairs:
          description: Every GPU pair once, lower index first.
          type: list
          elements: dict
          contains:
            gpus: {description: The two indexes., type: list, elements: int, sample: [0, 1]}
            path: {description: "Path class: NV#, PIX, PXB, PHB, NODE or SYS.", type: str, sample: SYS}
            p2p:
              description: "NVML P2P status for read, write, nvlink and atomics: OK, CNS, GNS, TNS, DRK, NS or U."
              type: dict
        interconnect:
          description: Summary derived from the pairs.
          type: dict
          contains:
            class:
              description: Interconnect class.
              type: str
              choices: [none, single, nvswitch, nvlink, pcie_switch, pcie_host_bridge, pcie_cross_numa]
            worst_path: {description: The farthest path between any two GPUs., type: str}
            p2p_all_ok: {description: Every pair has P2P read and write OK., type: bool}
            nvlink_all: {description: Every pair is NVLink-connected., type: bool}
            numa_nodes: {description: NUMA nodes the GPUs hang off., type: list, elements: int}
        unavailable:
          description: Fields that are null because the backend could not read them, with the reason.
          type: list
          elements: dict
        snapshot:
          description: Where a replayed snapshot came from (backend V(snapshot) only).
          type: dict
          returned: when backend is snapshot
        network:
          description:
            - The host's network interfaces and RDMA devices, read from sysfs.
            - Added in 0.2.0 without a change of O(ignore:schema_version); snapshots without it still replay.
          type: dict
          returned: when O(network) is true, or a replayed snapshot has it
          version_added: 0.2.0
          contains:
            interfaces:
              description: One entry per C(/sys/class/net) interface, by name.
              type: list
              elements: dict
              contains:
                name: {description: Interface name., type: str, sample: enp65s0f0}
                operstate: {description: "Kernel operstate: up, down, unknown, ...", type: str, sample: up}
                type: {description: "Link type: ether, infiniband, loopback, or the ARPHRD number.", type: str}
                mtu: {description: MTU in bytes., type: int, sample: 9000}
                speed_mbps: {description: Link speed in Mbit/s; null when the kernel does not know., type: int}
                mac: {description: Hardware address., type: str}
                virtual: {description: "No bus device behind it (bridge, veth, bond, loopback, tunnel).", type: bool}
                bridge: {description: A Linux bridge., type: bool}
                bond: {description: A bonding master., type: bool}
                driver: {description: Kernel driver of the device behind it., type: str, sample: mlx5_core}
                pci_bus_id: {description: "PCI address of the device behind it, like the GPUs' ids.", type: str}
            rdma_devices:
              description: One entry per C(/sys/class/infiniband) device; empty when no RDMA driver is loaded.
              type: list
              elements: dict
              contains:
                name: {description: "RDMA device name, as NCCL_IB_HCA takes it.", type: str, sample: mlx5_0}
                node_type: {description: Node type as sysfs prints it., type: str}
                firmware: {description: Firmware version., type: str}
                ports:
                  description: Ports with O(ignore:port), O(ignore:state) (ACTIVE, DOWN, ...), O(ignore:link_layer) (InfiniBand, Ethernet) and O(ignore:rate).
                  type: list
                  elements: dict
                netdevs: {description: "Network interfaces of the same device (RoCE, IPoIB).", type: list, elements: str}
                pci_bus_id: {description: PCI address of the device., type: str}
            unavailable:
              description: Network fields that could not be read, with the reason.
              type: list
              elements: dict
        host:
          description:
            - The PCIe peer-to-peer readiness of the host, as C(plugins/module_utils/_facts/pcie_host.py)'s C(read_host) gives
              it - C(cmdline), C(iommu), C(uvm), C(aspm), C(pcie_port_pm), C(gpus) (each with its link, IOMMU group,
              BAR1 and the bridges above it with their ACS bits) and C(unavailable) (every field not read, and why).
            - The reference is C(docs/pcie-host-facts.md).
          type: dict
          returned: when O(host) is true and there is a GPU, or a replayed snapshot has it
          version_added: 0.5.0
dump:
  description: Path of the snapshot written (or that would be written in check mode).
  returned: when O(dump) is set
  type: str
"""

import json
import os
import socket
import time
import traceback

from ansible.module_utils.basic import AnsibleModule, missing_required_lib
from ansible_collections.moeops.inference.plugins.module_utils._facts import gpu_topology as topo
from ansible_collections.moeops.inference.plugins.module_utils._facts import pcie_host
from ansible_collections.moeops.inference.plugins.module_utils._common import state_files

# nvidia-ml-py is optional (backend=auto falls back to nvidia-smi): imported the way ansible-core's own modules
# import optional libraries, so the module loads without it and names it only where NVML is asked for.
PYNVML_IMPORT_ERROR = None
try:
    import pynvml
except ImportError:
    pynvml = None
    PYNVML_IMPORT_ERROR = traceback.format_exc()


SMI_COMMANDS = {
    "xml": ["-q", "-x"],
    "topo": ["topo", "-m"],
    "p2p_r": ["topo", "-p2p", "r"],
    "p2p_w": ["topo", "-p2p", "w"],
    "p2p_n": ["topo", "-p2p", "n"],
    "p2p_a": ["topo", "-p2p", "a"],
    "query": ["--query-gpu=" + topo.SMI_QUERY_FIELDS, "--format=csv"],
    "nvlink": ["nvlink", "-s"],
}


def sysfs_numa(bus_id):
    """CPU-side NUMA node of a PCI device from sysfs; -1 (no affinity) reads as unknown."""
    domain, _sep, rest = bus_id.partition(":")
    path = "/sys/bus/pci/devices/%04x:%s/numa_node" % (int(domain, 16), rest.lower())
    try:
        with open(path) as f:
            node = int(f.read().strip())
    except (OSError, ValueError):
        return None
    return node if node >= 0 else None


def read_with_nvml():
    """(facts, None) or (None, why NVML cannot be used)."""
    if pynvml is None:
        return None, "nvidia-ml-py is not installed for this Python"
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        return None, "NVML did not initialise (is the NVIDIA driver loaded?): %s" % exc
    try:
        return topo.read_nvml(pynvml, sysfs_numa), None
    finally:
        pynvml.nvmlShutdown()


def read_with_smi(module):
    smi = module.get_bin_path("nvidia-smi")
    if smi is None:
        return None, "nvidia-smi is not on the PATH"
    outputs = {}
    for key, args in SMI_COMMANDS.items():
        rc, out, err = module.run_command([smi] + args)
        if key == "xml" and rc != 0:
            return None, "nvidia-smi -q -x failed (rc %d): %s" % (rc, (err or out).strip())
        outputs[key] = out if rc == 0 else None
    return topo.read_nvidia_smi(outputs), None


def read_snapshot(module, path):
    if not path:
        module.fail_json(msg="backend=snapshot needs the snapshot option")
    try:
        with open(path) as f:
            data = json.load(f)
        return topo.from_snapshot(data, path)
    except (OSError, ValueError) as exc:
        module.fail_json(msg="cannot replay snapshot: %s" % exc)


def write_dump(module, facts, path):
    snap = topo.to_snapshot(
        facts,
        captured_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        host=socket.gethostname(),
        description=module.params["dump_description"],
    )
    # The capture time alone must not make a run report a change. atomic_move keeps an existing dump's owner,
    # mode and SELinux context, and gives a new one the umask's mode.
    return state_files.write_json(path, snap, ignore_keys=("captured",), check_mode=module.check_mode,
                                  move=module.atomic_move)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            backend=dict(type="str", default="auto", choices=["auto", "nvml", "nvidia_smi", "snapshot"]),
            snapshot=dict(type="path"),
            dump=dict(type="path"),
            dump_description=dict(type="str", default=""),
            required=dict(type="bool", default=False),
            network=dict(type="bool", default=True),
            host=dict(type="bool", default=True),
            host_root=dict(type="path", default="/"),
        ),
        required_if=[("backend", "snapshot", ["snapshot"])],
        supports_check_mode=True,
    )
    backend = module.params["backend"]
    for key in ("snapshot", "dump", "host_root"):
        if module.params[key] and not os.path.isabs(module.params[key]):
            module.fail_json(msg="%s must be an absolute path, got %s" % (key, module.params[key]))

    if backend == "nvml" and pynvml is None:
        module.fail_json(msg=missing_required_lib("nvidia-ml-py", reason="for backend=nvml",
                                                  url="https://pypi.org/project/nvidia-ml-py/"),
                         exception=PYNVML_IMPORT_ERROR)
    facts, why = None, []
    if backend == "snapshot":
        facts = read_snapshot(module, module.params["snapshot"])
    if backend in ("auto", "nvml"):
        facts, reason = read_with_nvml()
        if reason:
            why.append(reason)
    if facts is None and backend in ("auto", "nvidia_smi"):
        facts, reason = read_with_smi(module)
        if reason:
            why.append(reason)
    if facts is None:
        if module.params["required"] or backend in ("nvml", "nvidia_smi"):
            module.fail_json(msg="no NVIDIA GPU could be read: " + "; ".join(why))
        facts = topo.no_gpu_facts("; ".join(why))
    elif facts["count"] == 0 and module.params["required"]:
        module.fail_json(msg="backend %s found no NVIDIA GPU" % facts["backend"])

    # Said once, here: every role reads this instead of re-deriving it from the backend.
    facts["from_hardware"] = topo.from_hardware(facts)
    if module.params["network"]:
        facts["network"] = topo.read_network("/sys")
    if module.params["host"] and facts["count"]:
        facts["host"] = pcie_host.read_host(module.params["host_root"], facts["gpus"], facts["backend"])

    result = dict(changed=False, ansible_facts=dict(nvidia_gpu=facts))
    if module.params["dump"]:
        result["changed"] = write_dump(module, facts, module.params["dump"])
        result["dump"] = module.params["dump"]
    module.exit_json(**result)


if __name__ == "__main__":
    main()
