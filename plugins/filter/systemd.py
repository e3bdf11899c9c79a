# -*- coding: utf-8 -*-
# Copyright: (c) 2026, moeops.inference contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Values written into systemd unit files; documentation in the adjacent YAML files."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible_collections.moeops.inference.plugins.module_utils._common import systemd_unit


def systemd_escape(value, exec_arg=False, quote=False, comment=False):
    """A value as systemd reads it back: `%` doubled (specifiers), and in an Exec line `$` doubled too; with
    `quote`, one word in systemd's own quoting; with `comment`, text for a comment line (a line break refused, nothing
    else changed)."""
    try:
        if comment:
            return systemd_unit.escape(value, comment=True)
        if quote:
            return systemd_unit.quote(value, exec_arg=bool(exec_arg))
        return systemd_unit.escape(value, exec_arg=bool(exec_arg))
    except ValueError as exc:
        raise AnsibleFilterError(str(exc))


class FilterModule(object):
    def filters(self):
        return {"systemd_escape": systemd_escape}
