# -*- coding: utf-8 -*-
# Copyright: (c) 2026, moeops.inference contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Read `vllm serve` arguments the way vLLM reads them, from the pinned vLLM's recorded option table (serve_table.py),
so that a rule on an option holds whatever the spelling. Private to the collection (inputs.py judges
vllm_service_extra_args with it).

vLLM's FlexibleArgumentParser (vllm/utils/argparse_utils.py, 0.33.0) first rewrites the argv:
- in a `--` argument, underscores before the first `.` become dashes (`--api_key` is `--api-key`), before the `=`
  when there is one;
- `-O3`, `-O=3` and `-O 3` become `--optimization-level 3`;
- a dotted argument (`--key.sub value`, `--key.sub=value`; any argument starting with `-` that holds a `.`) is taken
  out, its value merged into a JSON object, and `--key <json>` is added at the end;
- `--model X` (exactly) is moved to the front as the positional model;
then argparse (allow_abbrev) looks each option up: exactly, then the part before `=`, then by prefix: one option
starting with it is that option (`--hos` is `--host`), several is argparse's "ambiguous option" error, none is
"unrecognized arguments". A single-dash argument also matches a two-character option followed by its value (`-xVALUE`).
Values are taken as argparse takes them: the next arguments that do not look like options.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ansible_collections.moeops.inference.plugins.module_utils._roles.vllm_service import serve_table

OPTIONS: Dict[str, Tuple[str, Any]] = serve_table.OPTIONS
VLLM_VERSION = serve_table.VLLM_VERSION
# argparse's _negative_number_matcher: such an argument is a value, no option of vLLM looking like a negative number.
_NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")
# FlexibleArgumentParser's pattern: everything after the first `--` up to the first `.`.
_NAME_PART = re.compile(r"(?<=--)[^\.]*")


def _dashes(match: Any) -> str:
    return match.group(0).replace("_", "-")


def rewrite(args: Sequence[str]) -> List[Tuple[int, str]]:
    """FlexibleArgumentParser.parse_args's rewriting, each resulting argument with the index of the one it came from.
    Raises ValueError where vLLM fails (a dotted argument without its value)."""
    processed: List[Tuple[int, str]] = []
    for i, arg in enumerate(args):
        if arg.startswith("--help="):
            processed.append((i, "--help"))
        elif arg.startswith("--"):
            if "=" in arg:
                key, value = arg.split("=", 1)
                processed.append((i, "%s=%s" % (_NAME_PART.sub(_dashes, key, count=1), value)))
            else:
                processed.append((i, _NAME_PART.sub(_dashes, arg, count=1)))
        elif arg.startswith("-O") and arg != "-O":
            processed += [(i, "--optimization-level"), (i, arg[3:] if arg[2] == "=" else arg[2:])]
        elif arg == "-O" and i + 1 < len(args) and args[i + 1] in ("0", "1", "2", "3"):
            processed.append((i, "--optimization-level"))
        else:
            processed.append((i, arg))
    out: List[Tuple[int, str]] = []
    dotted: Dict[str, int] = {}  # key -> the index of its first dotted argument, in order of appearance
    skip = set()
    for n, (i, arg) in enumerate(processed):
        if n in skip:
            continue
        if arg.startswith("--") and "." not in arg:
            out.append((i, arg))
            continue
        if arg.startswith("-") and "." in arg:
            name = arg
            if "=" in arg:
                name = arg.split("=", 1)[0]
                if "." not in name:  # the `.` was in the value
                    out.append((i, arg))
                    continue
            elif n + 1 < len(processed):
                skip.add(n + 1)
            else:
                raise ValueError("%s: a dotted argument takes a value (vLLM fails: the argument list ends)" % arg)
            dotted.setdefault(name.rstrip("+").split(".")[0], i)
            continue
        out.append((i, arg))
    for key, i in dotted.items():  # added back at the end as `--key <json>`
        out += [(i, key), (i, "{}")]
    return out


def match(arg: str) -> Tuple[Optional[str], Optional[str], List[str]]:
    """argparse's _parse_optional on the recorded table: (option string, explicit value, []) for an option,
    (None, None, []) for a value, ("", None, candidates) for an ambiguous prefix, ("", None, []) for an unknown option."""
    if not arg or arg[0] != "-":
        return None, None, []
    if arg in OPTIONS:
        return arg, None, []
    if len(arg) == 1:
        return None, None, []
    if "=" in arg:
        name, value = arg.split("=", 1)
        if name in OPTIONS:
            return name, value, []
    found: List[Tuple[str, Optional[str]]] = []
    if arg[1] == "-":
        prefix, explicit = arg.split("=", 1) if "=" in arg else (arg, None)
        found = [(o, explicit) for o in OPTIONS if o.startswith(prefix)]
    else:
        for o in OPTIONS:
            if o == arg[:2]:
                found.append((o, arg[2:]))
            elif o.startswith(arg):
                found.append((o, None))
    if len(found) > 1:
        return "", None, sorted(o for o, _v in found)
    if found:
        return found[0][0], found[0][1], []
    if _NEGATIVE_NUMBER.match(arg) or " " in arg:
        return None, None, []
    return "", None, []


def _values(nargs: Any, following: int) -> Tuple[int, str]:
    """How many of the `following` value-like arguments an option takes, and argparse's error if it cannot."""
    if nargs == 0:
        return 0, ""
    if nargs is None:
        return (1, "") if following else (0, "expected one argument")
    if nargs == "?":
        return min(following, 1), ""
    if nargs == "*":
        return following, ""
    if nargs == "+":
        return (following, "") if following else (0, "expected at least one argument")
    return (nargs, "") if following >= nargs else (0, "expected %d arguments" % nargs)


def read(args: Sequence[str]) -> List[Dict[str, Any]]:
    """Each option in `args` (vllm_service_extra_args) as vLLM reads it: {index, given, option, dest, error}, where
    `given` is the argument as written up to any `=`, `option` the option string argparse matched, `dest` what it
    sets, and `error` what vLLM refuses it with ('' when it takes it). A stray value is an entry without an option."""
    try:
        processed = rewrite(list(args))
    except ValueError as exc:
        return [{"index": len(args) - 1, "given": args[-1].split("=", 1)[0], "option": "", "dest": "",
                 "error": str(exc)}]
    found: List[Dict[str, Any]] = []
    n = 0
    while n < len(processed):
        i, arg = processed[n]
        given = args[i].split("=", 1)[0]
        n += 1
        if arg == "--":
            found.append({"index": i, "given": given, "option": "", "dest": "",
                          "error": "vLLM reads what follows `--` as positional arguments, which it refuses"})
            break
        option, explicit, candidates = match(arg)
        if option is None:
            found.append({"index": i, "given": given, "option": "", "dest": "",
                          "error": "vLLM refuses a value that belongs to no option (unrecognized arguments)"})
            continue
        if not option:
            error = ("is ambiguous in vLLM %s: it could be %s (argparse refuses it)" % (VLLM_VERSION, ", ".join(candidates))
                     if candidates else "is not an option of vLLM %s's `vllm serve` (unrecognized arguments)" % VLLM_VERSION)
            found.append({"index": i, "given": given, "option": "", "dest": "", "error": error})
            while n < len(processed) and match(processed[n][1])[0] is None:  # its values, as the user meant them
                n += 1
            continue
        dest, nargs = OPTIONS[option]
        error = ""
        if re.match(r"^--model(=.+|$)", args[i]):
            # FlexibleArgumentParser moves `--model X` to the model's place, which `vllm serve <model>` already holds.
            error = "vLLM moves its value to the model's place, before the role's model (unrecognized arguments)"
        if explicit is not None:
            if nargs == 0:
                error = "takes no value (argparse: ignored explicit argument)"
        else:
            following = 0
            while n + following < len(processed) and processed[n + following][1] != "--" \
                    and match(processed[n + following][1])[0] is None:
                following += 1
            taken, missing = _values(nargs, following)
            error, n = error or missing, n + taken
        found.append({"index": i, "given": given, "option": option, "dest": dest, "error": error})
    return found


def switch(args: Sequence[str], dest: str) -> Optional[bool]:
    """What `args` set a boolean option of vLLM to (EnableDisableAction: `--X`, `--no-X`, `--disable-X`, any spelling
    or prefix vLLM takes), the last one winning as in argparse; None when no argument sets it."""
    value = None
    for found in read(args):
        if found["dest"] == dest and not found["error"]:
            value = not found["option"].startswith(("--no-", "--disable-"))
    return value
