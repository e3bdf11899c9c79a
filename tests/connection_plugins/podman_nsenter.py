# -*- coding: utf-8 -*-
# TEST INFRASTRUCTURE, not shipped (galaxy.yml's build_ignore keeps tests/ out): how the test suites reach their
# systemd podman nodes. Found through ansible.cfg's connection_plugins; inventories/sim/group_vars names it.
from __future__ import annotations

DOCUMENTATION = r"""
name: podman_nsenter
short_description: Run tasks in a running rootful podman container by entering its namespaces
description:
  - A stand-in for C(containers.podman.podman) on the test nodes, for speed only. On this project's CI machines
    (Debian 12, podman 4.3 with runc), C(podman exec) costs about 0.18 s of CPU per task, a third of what a task costs
    there; entering the container's namespaces with C(nsenter) costs about 0.008 s.
  - The task runs as C(podman exec) runs it, in the container's mount, UTS, IPC, network, PID and cgroup namespaces, at its
    root, with its capability bounding set (read from its PID 1) and C(podman exec)'s environment. Unlike C(podman exec)
    it stays in the caller's cgroup (in the container's cgroup namespace) and runs without the container's seccomp filter.
  - Needs root on the machine, C(nsenter) there and C(setpriv) in the container (both util-linux).
options:
  remote_addr:
    description: The container's name or ID.
    default: inventory_hostname
    vars:
      - name: inventory_hostname
      - name: ansible_host
"""

import json
import os
import shlex
import subprocess
import tempfile

from ansible.errors import AnsibleConnectionFailure, AnsibleError
from ansible.module_utils.common.text.converters import to_bytes, to_native, to_text
from ansible.plugins.connection import ConnectionBase
from ansible.utils.display import Display

display = Display()

# Linux capability numbers 0 to 40, by their setpriv names.
CAPS = ("chown dac_override dac_read_search fowner fsetid kill setgid setuid setpcap linux_immutable net_bind_service "
        "net_broadcast net_admin net_raw ipc_lock ipc_owner sys_module sys_rawio sys_chroot sys_ptrace sys_pacct "
        "sys_admin sys_boot sys_nice sys_resource sys_time sys_tty_config mknod lease audit_write audit_control setfcap "
        "mac_override mac_admin syslog wake_alarm block_suspend audit_read perfmon bpf checkpoint_restore").split()
# What `podman exec` gives a process in these containers (`podman exec NODE env`).
EXEC_ENV = ("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "TERM=xterm", "container=podman",
            "HOME=/root")


def _status(pid: int) -> dict:
    with open("/proc/%d/status" % pid, encoding="ascii") as f:
        return dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)


def _is_init_of(pid: int, container_id: str) -> bool:
    """True when pid is PID 1 of that container (a process of its own namespace, not of a unit's private one)."""
    try:
        with open("/proc/%d/cgroup" % pid, encoding="ascii") as f:
            cgroups = f.read()
        return container_id in cgroups and _status(pid).get("NSpid", "").split()[-1:] == ["1"]
    except (OSError, ValueError):
        return False


class Connection(ConnectionBase):
    """nsenter into a running container: the same namespaces, root and capabilities as podman exec."""

    transport = "podman_nsenter"
    has_pipelining = True

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._enter = []

    def _container_init(self, name: str) -> int:
        # Each task is a new connection: the container's PID is kept in a file by name, and trusted only while it is
        # still PID 1 of that container (a restarted node has a new one).
        cache = os.path.join(tempfile.gettempdir(), "moeops-nsenter-%s.json" % name.replace("/", "_"))
        try:
            with open(cache, encoding="utf-8") as f:
                pid, container_id = json.load(f)
            if _is_init_of(pid, container_id):
                return pid
        except (OSError, ValueError, TypeError):
            pass
        p = subprocess.run(["podman", "inspect", "--type", "container", "--format", "{{.State.Pid}} {{.Id}}", name],
                           capture_output=True, check=False)
        fields = to_text(p.stdout).split()
        if p.returncode != 0 or len(fields) != 2 or fields[0] in ("0", "-1"):
            raise AnsibleConnectionFailure("container %s is not running: %s" % (name, to_text(p.stderr).strip()))
        pid, container_id = int(fields[0]), fields[1]
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(cache))
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump([pid, container_id], f)
        os.replace(tmp, cache)
        return pid

    def _connect(self):
        super()._connect()
        if not self._connected:
            pid = self._container_init(self.get_option("remote_addr"))
            bounding = int(_status(pid)["CapBnd"], 16)
            caps = ",".join(["-all"] + ["+" + c for n, c in enumerate(CAPS) if bounding >> n & 1])
            self._enter = (["nsenter", "--target", str(pid), "--mount", "--uts", "--ipc", "--net", "--pid", "--cgroup", "--root",
                            "--wd", "--", "/usr/bin/setpriv", "--bounding-set", caps, "--", "/usr/bin/env", "-i"]
                           + list(EXEC_ENV))
            display.vvv("NSENTER %s (pid %d)" % (self.get_option("remote_addr"), pid), host=self.get_option("remote_addr"))
            self._connected = True
        return self

    def _run(self, cmd: str, stdin=None, in_data=None, stdout=subprocess.PIPE):
        argv = self._enter + ["/bin/sh", "-c", cmd]
        display.vvvvv("EXEC %s" % argv, host=self.get_option("remote_addr"))
        p = subprocess.Popen(argv, stdin=stdin if stdin is not None else subprocess.PIPE, stdout=stdout,
                             stderr=subprocess.PIPE)
        out, err = p.communicate(in_data)
        return p.returncode, out, err

    def exec_command(self, cmd, in_data=None, sudoable=False):
        super().exec_command(cmd, in_data=in_data, sudoable=sudoable)
        return self._run(to_native(cmd, errors="surrogate_or_strict"), in_data=to_bytes(in_data) if in_data else None)

    def put_file(self, in_path, out_path):
        super().put_file(in_path, out_path)
        with open(to_bytes(in_path, errors="surrogate_or_strict"), "rb") as f:
            rc, _out, err = self._run("cat > %s" % shlex.quote(out_path), stdin=f)
        if rc != 0:
            raise AnsibleError("failed to put %s to %s: %s" % (in_path, out_path, to_text(err)))

    def fetch_file(self, in_path, out_path):
        super().fetch_file(in_path, out_path)
        with open(to_bytes(out_path, errors="surrogate_or_strict"), "wb") as f:
            rc, _out, err = self._run("cat %s" % shlex.quote(in_path), stdout=f)
        if rc != 0:
            raise AnsibleError("failed to fetch %s to %s: %s" % (in_path, out_path, to_text(err)))

    def close(self):
        super().close()
        self._connected = False
