# -*- coding: utf-8 -*-
# Copyright: (c) 2026, moeops.inference contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
r"""How a value must be written into a systemd unit file so that systemd reads back exactly that value.

systemd expands `%` specifiers in every setting (systemd.unit(5), "Specifiers"), so `%h` in
NCCL_DEBUG_FILE=/var/log/nccl.%h.log would become the service user's home; `%%` is a literal `%`. In
Exec lines it also substitutes `$NAME` and `${NAME}` from the environment (systemd.service(5), "Command
lines"); `$$` is a literal `$`. A line break cannot be escaped at all: systemd splits the file into lines
before it reads quotes, so the roles' input checks refuse it (_common/inputs.py, line_safety_problems), and this
refuses it again rather than write a second directive.

Quoting is systemd's, not the shell's: in Environment= and Exec lines systemd C-unescapes inside quotes too
(systemd.syntax(7)), so `'C:\\models\\new'` in shell quotes is "Invalid syntax" and the whole assignment is
dropped. A word that needs quoting is written in double quotes with `\` and `"` escaped.
"""

from __future__ import annotations

import re
from typing import Any

LINE_BREAKS = ("\n", "\r", "\0")
# What a word may hold bare, as Python's shlex leaves it unquoted: anything else is quoted.
_UNSAFE = re.compile(r"[^\w@%+=:,./-]", re.ASCII)


def escape(value: Any, exec_arg: bool = False, comment: bool = False) -> str:
    """`value` as text for a unit file: `%` as `%%`, and with `exec_arg` `$` as `$$`. With `comment`, text for a
    comment line (`# ...`), which systemd reads verbatim: only the line-break check, nothing else changed."""
    text = str(value)
    if any(c in text for c in LINE_BREAKS):
        raise ValueError("a value for a systemd unit contains a line break; it would start a new directive")
    if comment:
        return text
    text = text.replace("%", "%%")
    return text.replace("$", "$$") if exec_arg else text


def quote(value: Any, exec_arg: bool = False) -> str:
    """`value` as one word of an Environment= assignment or an Exec line: escaped as `escape` does, then, unless it
    is plain, in double quotes with `\\` and `"` escaped, which systemd reads back exactly."""
    text = escape(value, exec_arg=exec_arg)
    if text and not _UNSAFE.search(text):
        return text
    return '"%s"' % text.replace("\\", "\\\\").replace('"', '\\"')
