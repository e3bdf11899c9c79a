# -*- coding: utf-8 -*-
# Copyright: (c) 2026, moeops.inference contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Clear ACS P2P Request Redirect and Completion Redirect on every PCIe bridge between an NVIDIA GPU and its root
port, so that the GPUs' peer traffic is not sent up through the IOMMU (NCCL #2079). The firmware sets the bits
again at every boot: the pcie_host role runs this from a oneshot unit at boot. Only those two bits of the ACS
Control register change (setpci's value:mask form); the other ACS bits, and bridges without ACS, are left alone.

    clear-acs [--root /] [--setpci setpci] [--dry-run]

--root and --setpci let the unit tests run it over a constructed sysfs tree with a setpci test double.
"""
import argparse
import os
import re
import subprocess
import sys

ADDRESS = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
REDIRECT = 0x000C  # ACS Control bit 2 (P2P Request Redirect) and bit 3 (P2P Completion Redirect)
REGISTER = "ECAP_ACS+6.w"  # the ACS Control register: 6 bytes into the ACS extended capability


def _attr(devices, bus, name):
    try:
        with open(os.path.join(devices, bus, name)) as f:
            return f.read().strip()
    except OSError:
        return None


def bridges_above_gpus(root):
    """Every bridge between an NVIDIA display/3D controller and its root port, root port first, each once."""
    devices = os.path.join(root, "sys", "bus", "pci", "devices")
    found = []
    for bus in sorted(os.listdir(devices)) if os.path.isdir(devices) else []:
        if _attr(devices, bus, "vendor") != "0x10de" or not (_attr(devices, bus, "class") or "").startswith("0x03"):
            continue
        parts = os.path.realpath(os.path.join(devices, bus)).split(os.sep)
        for part in parts[:-1]:
            if ADDRESS.match(part) and part not in found:
                found.append(part)
    return found


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default="/")
    parser.add_argument("--setpci", default="setpci")
    parser.add_argument("--dry-run", action="store_true")
    args = parser.parse_args(argv)
    bridges = bridges_above_gpus(args.root)
    if not bridges:
        print("no PCIe bridge above an NVIDIA GPU: nothing to clear")
        return 0
    failed = False
    for bridge in bridges:
        read = subprocess.run([args.setpci, "-s", bridge, REGISTER], capture_output=True, text=True, check=False)
        if read.returncode != 0 or not read.stdout.strip():
            print("%s: no ACS capability, nothing to clear (%s)" % (bridge, (read.stderr or read.stdout).strip()))
            continue
        value = int(read.stdout.strip(), 16)
        if not value & REDIRECT:
            print("%s: ACSCtl %#06x, no redirect bit set" % (bridge, value))
            continue
        if args.dry_run:
            print("%s: ACSCtl %#06x, would clear ReqRedir/CmpltRedir" % (bridge, value))
            continue
        write = subprocess.run([args.setpci, "-s", bridge, "%s=0000:%04x" % (REGISTER, REDIRECT)],
                               capture_output=True, text=True, check=False)
        after = subprocess.run([args.setpci, "-s", bridge, REGISTER], capture_output=True, text=True, check=False)
        now = after.stdout.strip()
        if write.returncode != 0 or not now or int(now, 16) & REDIRECT:
            print("%s: could not clear the redirect bits (ACSCtl %#06x, now %r): %s"
                  % (bridge, value, now, write.stderr.strip()), file=sys.stderr)
            failed = True
            continue
        print("%s: ACSCtl %#06x -> 0x%s (ReqRedir and CmpltRedir cleared)" % (bridge, value, now))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
