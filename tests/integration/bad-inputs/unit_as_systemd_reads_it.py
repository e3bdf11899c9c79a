# -*- coding: utf-8 -*-
"""Print, as JSON, what systemd itself parsed from a loaded unit: its Exec* command lines (path and argv), its
Environment= list, EnvironmentFile=, User=, Group=, WorkingDirectory= and load state, read over D-Bus with busctl
(exact arrays, no display quoting). Run on the node by tests/integration/bad-inputs/accepted.yml.

    unit_as_systemd_reads_it.py NAME.service
"""
import json
import subprocess
import sys

EXECS = ("ExecCondition", "ExecStartPre", "ExecStart", "ExecStartPost", "ExecReload", "ExecStop", "ExecStopPost")
STRINGS = ("User", "Group", "WorkingDirectory")


def busctl(*args):
    out = subprocess.run(["busctl", "--json=short"] + list(args), check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def main(name):
    path = busctl("call", "org.freedesktop.systemd1", "/org/freedesktop/systemd1", "org.freedesktop.systemd1.Manager",
                  "LoadUnit", "s", name)["data"][0]

    def prop(interface, key):
        return busctl("get-property", "org.freedesktop.systemd1", path, "org.freedesktop.systemd1." + interface,
                      key)["data"]
    read = {"LoadState": prop("Unit", "LoadState"), "Environment": prop("Service", "Environment"),
            "EnvironmentFiles": [f[0] for f in prop("Service", "EnvironmentFiles")]}
    for key in EXECS:
        read[key] = [{"path": c[0], "argv": c[1]} for c in prop("Service", key)]
    for key in STRINGS:
        read[key] = prop("Service", key)
    print(json.dumps(read))


if __name__ == "__main__":
    main(sys.argv[1])
