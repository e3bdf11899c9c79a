#!/usr/bin/env bash
# The pcie_host role on one systemd podman node (playbooks/sim_node.yml): every switch on, then the files
# it writes (GRUB drop-in, modprobe.d, the oneshot unit passing systemd-analyze verify, enabled and run), a
# second run changes nothing, every switch off removes all of it, and a fourth run changes nothing again.
# The node has no GPU and no GRUB: the unit finds no bridge to clear and the role says to update GRUB by hand
# (clear_acs.py itself is unit-tested over constructed trees with a setpci test double).
# Runs from the repository root with the tooling venv on PATH (tests/run sets that up).
set -euo pipefail
start=$SECONDS
here=$PWD/tests/integration/pcie_host
inv=$here/inventory
export MOEOPS_NODE_SUFFIX=${MOEOPS_NODE_SUFFIX:-}
node=moeops-pcie$MOEOPS_NODE_SUFFIX
work=$(mktemp -d)
cleanup() { podman rm -f -t 0 "$node" >/dev/null 2>&1 || true; rm -rf "$work"; }
trap cleanup EXIT
# A check that fails says which one (the greps and tests below are quiet).
trap 'echo "56-pcie-host: failed at line $LINENO: $BASH_COMMAND"' ERR
podman rm -f -t 0 "$node" >/dev/null 2>&1 || true
ansible-playbook -i "$inv" playbooks/sim_node.yml > "$work/sim.log" || { tail -40 "$work/sim.log"; exit 1; }

# Switched as a user switches them from the command line: key=value, so strings ("false", "no", "0", "off"), which
# Jinja takes as true; the role must use its plan's converted values (issue 28: -e pcie_host_iommu_passthrough=false
# once wrote iommu=pt, -e pcie_host_reboot=false once rebooted).
on=(-e pcie_host_iommu_passthrough=true -e pcie_host_port_pm_off=yes -e pcie_host_disable_hmm=1 -e pcie_host_clear_acs=on
    -e pcie_host_reboot=false)
off=(-e pcie_host_iommu_passthrough=false -e pcie_host_port_pm_off=no -e pcie_host_disable_hmm=0 -e pcie_host_clear_acs=off
     -e pcie_host_reboot=off)
run() {  # run NAME ARGS...: converge, keep the output, print the recap's changed count
  local name=$1; shift
  ANSIBLE_CALLBACK_RESULT_FORMAT=json ANSIBLE_CALLBACK_FORMAT_PRETTY=false \
    ansible-playbook -i "$inv" "$here/converge.yml" "$@" > "$work/$name.txt" 2>&1 || { tail -40 "$work/$name.txt" >&2; exit 1; }
  grep -o 'changed=[0-9]*' "$work/$name.txt" | tail -n1 | cut -d= -f2
}
n=$(run on "${on[@]}")
[ "$n" -gt 0 ] || { echo "switches on: nothing changed"; exit 1; }
podman exec "$node" grep -qx 'GRUB_CMDLINE_LINUX_DEFAULT="${GRUB_CMDLINE_LINUX_DEFAULT} iommu=pt pcie_port_pm=off"' \
  /etc/default/grub.d/90-moeops-pcie-host.cfg
podman exec "$node" grep -qx 'options nvidia_uvm uvm_disable_hmm=1' /etc/modprobe.d/moeops-nvidia-uvm.conf
podman exec "$node" systemd-analyze verify /etc/systemd/system/moeops-clear-acs.service
[ "$(podman exec "$node" systemctl is-enabled moeops-clear-acs.service)" = enabled ]
[ "$(podman exec "$node" systemctl is-active moeops-clear-acs.service)" = active ]
# journald may write the unit's output a moment after the unit finished, on a busy machine.
for _ in 1 2 3 4 5 6 7 8 9 10; do
  podman exec "$node" journalctl -u moeops-clear-acs.service --no-pager | grep -q 'no PCIe bridge above an NVIDIA GPU: nothing to clear' && break
  sleep 1
done
podman exec "$node" journalctl -u moeops-clear-acs.service --no-pager | grep -q 'no PCIe bridge above an NVIDIA GPU: nothing to clear'
podman exec "$node" test -x /usr/bin/setpci
grep -q 'reboot needed (pcie_host_reboot is false): kernel arguments not in effect yet: iommu=pt pcie_port_pm=off' "$work/on.txt"
grep -q 'update-grub is not installed here' "$work/on.txt"
echo "switches on: changed=$n; GRUB drop-in, modprobe.d, unit verified, enabled and run; reboot needed reported"
# Check mode, every switch on and -e pcie_host_reboot=false: a reboot is needed, and said, never done.
run check-on --check "${on[@]}" > /dev/null
grep -q 'reboot needed (pcie_host_reboot is false)' "$work/check-on.txt"
reboot=$(grep -A3 'Reboot | Reboot so that the fixes take effect\]' "$work/check-on.txt" | grep -m1 -E '^(skipping|ok|changed|fatal)' || true)
[[ $reboot == skipping* ]] || { echo "check mode with -e pcie_host_reboot=false: the reboot task said '$reboot'"; exit 1; }
echo "check mode, -e pcie_host_reboot=false: reboot needed, said, not done"
n=$(run on-again "${on[@]}")
[ "$n" -eq 0 ] || { echo "second run changed $n"; grep -B3 'changed:' "$work/on-again.txt" | head -30; exit 1; }
echo "switches on again: changed=0"
n=$(run off "${off[@]}")
[ "$n" -gt 0 ] || { echo "switches off: nothing changed"; exit 1; }
for f in /etc/default/grub.d/90-moeops-pcie-host.cfg /etc/modprobe.d/moeops-nvidia-uvm.conf \
         /etc/systemd/system/moeops-clear-acs.service /usr/local/libexec/moeops/clear-acs; do
  ! podman exec "$node" test -e "$f" || { echo "left behind: $f"; exit 1; }
done
if podman exec "$node" systemctl is-enabled moeops-clear-acs.service >/dev/null 2>&1; then echo "the unit is still enabled"; exit 1; fi
grep -q 'kernel arguments removed from GRUB, still in the running kernel' "$work/off.txt"
echo "switches off (-e ...=false, no, 0, off): changed=$n; everything the role wrote is gone"
n=$(run off-again "${off[@]}")
[ "$n" -eq 0 ] || { echo "fourth run changed $n"; exit 1; }
echo "switches off again: changed=0"
echo "56-pcie-host: $((SECONDS - start)) s"
