# -*- coding: utf-8 -*-
# Copyright: (c) 2026, moeops.inference contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""JSON state files that modules keep on the managed node: read one, write one atomically.

The modules use these helpers for the files they keep: nccl_tune's stored sweep
results (nccl_tune_info reads them), model_weights' staging record and
progress file (model_weights_progress reads the progress file), and gpu_facts'
dump snapshot.

Files are written with sorted keys and only when their content changes. The
content goes to a temporary file in the target's own directory (so that the
rename never crosses file systems), and that file then replaces the target
in one step. A reader sees either the old file or the new one, never part of
a file.  Runs on the managed node: Python 3.9+, standard library only.
"""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any, Callable, Collection, Optional, Tuple

# Prefix of the temporary file that replaces the target; nothing that lists a state directory takes it for a state file.
TEMP_PREFIX = ".tmp-"


def json_text(doc: Any, indent: int = 2, newline: bool = True) -> str:
    """What write_json writes: keys sorted, `indent` spaces per level, and a trailing newline if `newline` is true."""
    return json.dumps(doc, indent=indent, sort_keys=True) + ("\n" if newline else "")


def read_json_reason(path: str) -> Tuple[Optional[Any], str]:
    """(document, '') or (None, why not): the file is missing, unreadable or not JSON (the error's text)."""
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f), ""
    except (OSError, ValueError) as exc:
        return None, str(exc) or type(exc).__name__


def read_json(path: str) -> Optional[Any]:
    """The parsed file, or None when it is missing, unreadable or not JSON (a caller treats all three as absent)."""
    return read_json_reason(path)[0]


def _canonical(doc: Any, ignore_keys: Collection[str]) -> str:
    if ignore_keys and isinstance(doc, dict):
        doc = {k: v for k, v in doc.items() if k not in ignore_keys}
    return json.dumps(doc, sort_keys=True)


def same_document(old: Any, new: Any, ignore_keys: Collection[str] = ()) -> bool:
    """Whether two documents are the same as JSON (key order and formatting do not count).

    Top-level keys in `ignore_keys` are left out of the comparison when both documents are objects.
    """
    return _canonical(old, ignore_keys) == _canonical(new, ignore_keys)


def write_json(
    path: str,
    doc: Any,
    mode: int = 0o644,
    indent: int = 2,
    newline: bool = True,
    ignore_keys: Collection[str] = (),
    check_mode: bool = False,
    move: Optional[Callable[[str, str], Any]] = None,
) -> bool:
    """Write `doc` to `path` as JSON (json_text) unless the file already holds it. Returns whether the file changed.

    The file is not written when it already holds the same document (see same_document, with `ignore_keys`,
    for example a capture time that alone is no change). The existing file, its mode included, is then left as it is.
    Otherwise the text goes to a temporary file in the target's directory, which gets `mode` and then replaces
    `path` through `move(tmp, path)`. The default is os.replace; a module can pass its atomic_move, which also keeps
    an existing file's owner, mode and SELinux context. With `check_mode`, the function writes nothing and only
    reports whether the file would change. A document that is not JSON-serializable raises TypeError or ValueError
    before anything is written.
    """
    text = json_text(doc, indent, newline)
    old, why = read_json_reason(path)
    if not why and same_document(old, doc, ignore_keys):
        return False
    if check_mode:
        return True
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path) or ".", prefix=TEMP_PREFIX)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, mode)
        (move or os.replace)(tmp, path)
    except BaseException:  # SystemExit too: a module's atomic_move fails the module by raising it.
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return True
