# -*- coding: utf-8 -*-
# Copyright: (c) 2026, moeops.inference contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Read systemd units the way systemd does, and compare deployed vLLM settings with desired ones.

Pure functions, no I/O: the vllm_service_info module feeds them what it read on
the node, the settings_report filter feeds them the unit the vllm_service role
would render now.  Both sides go through the same parser, so the comparison is
by meaning (Environment= variables, ExecStart= arguments, other directives),
never by line position or formatting.

systemd semantics followed (systemd.syntax(7), systemd.exec(5), systemd.service(5)):
- a line ending in a backslash continues on the next one, the backslash and the
  newline becoming one space; comment lines (# or ;) inside a continuation are dropped;
- values are split into words with shell-like quoting: '...' and "..." group,
  C escapes (\\n, \\t, \\\\, \\", \\', \\s, \\xNN) are decoded, quoted parts join
  the word they touch;
- drop-ins apply after the main unit, in file-name order; an empty assignment
  (Environment=, ExecStart=) clears the list built so far;
- Environment= assignments of one variable: the last one wins.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.moeops.inference.plugins.module_utils._common import urls
from ansible_collections.moeops.inference.plugins.module_utils._policy import api_front
from ansible_collections.moeops.inference.plugins.module_utils._policy import canary
from ansible_collections.moeops.inference.plugins.module_utils._policy import pcie_findings

# Values of these variables and arguments are never shown: only whether they are set.
SECRET_NAME_RE = re.compile(r"(TOKEN|SECRET|PASSWORD|PASSWD|API_KEY|APIKEY|CREDENTIAL)", re.IGNORECASE)
SECRET_ARGS = frozenset(["--api-key", "--hf-token", "--ssl-keyfile-password"])
MASK = "<set, not shown>"

# systemd's ExecStart= prefixes (systemd.service(5), "Command lines").
_EXEC_PREFIXES = "-@:+!"

_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "s": " ", "\\": "\\", '"': '"', "'": "'", "a": "\a",
            "b": "\b", "f": "\f", "v": "\v", "0": "\0"}


class UnitSyntaxError(ValueError):
    """A unit or value that systemd would refuse to parse."""


def is_secret_name(name: str) -> bool:
    """True for environment variables whose values must not be displayed."""
    return bool(SECRET_NAME_RE.search(name))


def logical_lines(text: str) -> List[str]:
    """The unit's lines with continuations joined and comments dropped."""
    out: List[str] = []
    pending: Optional[str] = None
    for raw in text.splitlines():
        line = raw.strip()
        if pending is not None and line[:1] in ("#", ";"):
            continue  # a comment inside a continuation is skipped, the continuation goes on
        if pending is None and (not line or line[:1] in ("#", ";")):
            continue
        if line.endswith("\\"):
            pending = (pending + " " if pending is not None else "") + line[:-1].rstrip()
            continue
        line = (pending + " " if pending is not None else "") + line
        pending = None
        if line.strip():
            out.append(line.strip())
    if pending is not None and pending.strip():
        out.append(pending.strip())  # systemd accepts a trailing backslash at end of file
    return out


def parse_unit(text: str) -> List[Tuple[str, str, str]]:
    """[(section, key, value)] in file order."""
    section = ""
    entries: List[Tuple[str, str, str]] = []
    for line in logical_lines(text):
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1].strip()
            continue
        if "=" not in line:
            raise UnitSyntaxError("not a key=value assignment in [%s]: %r" % (section, line))
        key, value = line.split("=", 1)
        entries.append((section, key.strip(), value.strip()))
    return entries


def split_words(value: str) -> List[str]:
    """Split a value into words as systemd does for Environment= and ExecStart= (quotes, C escapes)."""
    words: List[str] = []
    word: List[str] = []
    in_word = False
    quote: Optional[str] = None
    i = 0
    n = len(value)
    while i < n:
        ch = value[i]
        if ch == "\\":  # systemd decodes escapes inside both kinds of quotes too
            if i + 1 >= n:
                raise UnitSyntaxError("dangling backslash in %r" % value)
            nxt = value[i + 1]
            if nxt == "x" and re.match(r"[0-9a-fA-F]{2}", value[i + 2:i + 4]):
                word.append(chr(int(value[i + 2:i + 4], 16)))
                i += 4
            elif nxt in _ESCAPES:
                word.append(_ESCAPES[nxt])
                i += 2
            else:
                raise UnitSyntaxError("unknown escape \\%s in %r" % (nxt, value))
            in_word = True
            continue
        if quote:
            if ch == quote:
                quote = None
            else:
                word.append(ch)
            i += 1
            continue
        if ch in ("'", '"'):
            quote = ch
            in_word = True
            i += 1
            continue
        if ch.isspace():
            if in_word:
                words.append("".join(word))
                word, in_word = [], False
            i += 1
            continue
        word.append(ch)
        in_word = True
        i += 1
    if quote:
        raise UnitSyntaxError("unterminated %s quote in %r" % (quote, value))
    if in_word:
        words.append("".join(word))
    return words


def parse_environment_value(value: str) -> List[Tuple[str, str]]:
    """Environment=A=1 "B=two words" -> [(A, 1), (B, two words)]; an empty value yields []."""
    pairs: List[Tuple[str, str]] = []
    for word in split_words(value):
        if "=" not in word or not word.split("=", 1)[0]:
            raise UnitSyntaxError("Environment= word without NAME=: %r" % word)
        name, val = word.split("=", 1)
        pairs.append((name, val))
    return pairs


def parse_environment_file(text: str) -> Dict[str, str]:
    """An EnvironmentFile= (systemd.exec(5)): NAME=VALUE lines, # and ; comments, optional quotes."""
    env: Dict[str, str] = {}
    for line in logical_lines(text):
        if line.startswith("export "):
            line = line[len("export "):].lstrip()
        if "=" not in line:
            raise UnitSyntaxError("EnvironmentFile line without NAME=: %r" % line.split("=")[0][:40])
        name, val = line.split("=", 1)
        val = val.strip()
        if len(val) >= 2 and val[0] == val[-1] and val[0] in ("'", '"'):
            val = val[1:-1]
        env[name.strip()] = val
    return env


def strip_exec_prefixes(word: str) -> Tuple[str, str]:
    """'-/usr/bin/x' -> ('-', '/usr/bin/x')."""
    i = 0
    while i < len(word) and word[i] in _EXEC_PREFIXES:
        i += 1
    return word[:i], word[i:]


def effective_unit(main_text: str, dropins: Sequence[Tuple[str, str]] = (), main_path: str = "unit") -> Dict[str, Any]:
    """Merge a unit and its drop-ins [(path, text)] (already in systemd's order).

    Returns {'environment': {VAR: value}, 'environment_origin': {VAR: path},
    'exec_start': [argv] (the last non-empty command), 'exec_start_origin': path,
    'exec_prefix': str, 'directives': {'Section.Key': [values]}} -- directives
    being every other assignment, an empty assignment clearing the list.
    """
    env: Dict[str, str] = {}
    origin: Dict[str, str] = {}
    exec_start: List[List[str]] = []
    exec_origin = ""
    prefix = ""
    directives: Dict[str, List[str]] = {}
    for path, text in [(main_path, main_text)] + list(dropins):
        for section, key, value in parse_unit(text):
            if section == "Service" and key == "Environment":
                if not value:
                    env.clear()
                    origin.clear()
                    continue
                for name, val in parse_environment_value(value):
                    env[name] = val
                    origin[name] = path
            elif section == "Service" and key == "ExecStart":
                if not value:
                    exec_start, exec_origin, prefix = [], path, ""
                    continue
                words = split_words(value)
                if not words:
                    continue
                prefix, words[0] = strip_exec_prefixes(words[0])
                exec_start.append(words)
                exec_origin = path
            else:
                name = "%s.%s" % (section, key)
                if not value:
                    directives[name] = []
                else:
                    directives.setdefault(name, []).append(value)
    return {
        "environment": dict(sorted(env.items())),
        "environment_origin": dict(sorted(origin.items())),
        "exec_start": exec_start[-1] if exec_start else [],
        "exec_start_count": len(exec_start),
        "exec_start_origin": exec_origin,
        "exec_prefix": prefix,
        "directives": {k: v for k, v in sorted(directives.items()) if v},
    }


# Where systemd looks for a system unit's drop-ins, highest priority first (systemd.unit(5)).
DROPIN_DIRS = ("/etc/systemd/system", "/run/systemd/system", "/usr/local/lib/systemd/system",
               "/usr/lib/systemd/system", "/lib/systemd/system")


def dropin_dir_names(unit: str) -> List[str]:
    """'vllm.service' -> ['vllm.service.d', 'service.d']: the unit's own and its type's drop-in directories."""
    names = [unit + ".d"]
    if "." in unit:
        names.append(unit.rsplit(".", 1)[1] + ".d")
    return names


def dropin_order(found: Sequence[str]) -> List[str]:
    """Drop-in paths listed highest-priority directory first -> the ones systemd applies, in its order.

    A file name in a higher-priority directory masks the same name in a lower one;
    the survivors apply sorted by file name, whatever directory they are in.
    """
    chosen: Dict[str, str] = {}
    for path in found:
        chosen.setdefault(path.rsplit("/", 1)[-1], path)
    return [chosen[name] for name in sorted(chosen)]


def parse_show(text: str) -> Dict[str, str]:
    """`systemctl show -p A -p B` output -> {A: value}."""
    props: Dict[str, str] = {}
    for line in text.splitlines():
        if "=" in line:
            key, value = line.split("=", 1)
            props[key] = value
    return props


def parse_show_exec(value: str) -> List[str]:
    """argv from systemctl show's ExecStart={ path=... ; argv[]=... ; ignore_errors=... }."""
    match = re.search(r"argv\[\]=(.*?) ; (ignore_errors|flags)=", value)
    if not match:
        return []
    return split_words(match.group(1))


def mask_environment(env: Mapping[str, str]) -> Dict[str, str]:
    """Secret-named variables as MASK; the credentials of a URL in any other (a proxy's, an index's) masked."""
    return {k: (MASK if is_secret_name(k) and v else urls.mask_userinfo(v)) for k, v in env.items()}


def mask_argv(argv: Sequence[str]) -> List[str]:
    out: List[str] = []
    hide = False
    for word in argv:
        if hide:
            out.append(MASK)
            hide = False
            continue
        if "=" in word and word.split("=", 1)[0] in SECRET_ARGS:
            out.append(word.split("=", 1)[0] + "=" + MASK)
            continue
        out.append(urls.mask_userinfo(word))
        hide = word in SECRET_ARGS
    return out


def serve_settings(argv: Sequence[str]) -> Dict[str, str]:
    """`vllm serve MODEL --flag value --switch` -> {'executable':, 'model':, '--flag': 'value', '--switch': 'true'}.

    A flag given twice keeps the last value (argparse's behaviour); --flag=value is the same as --flag value.
    """
    settings: Dict[str, str] = {}
    if not argv:
        return settings
    settings["executable"] = argv[0]
    rest = list(argv[1:])
    if rest and rest[0] == "serve":
        settings["subcommand"] = "serve"
        rest = rest[1:]
    positional = 0
    i = 0
    while i < len(rest):
        word = rest[i]
        if word.startswith("--") and "=" in word:
            flag, val = word.split("=", 1)
            settings[flag] = val
            i += 1
        elif word.startswith("-") and len(word) > 1 and not _is_number(word):
            if i + 1 < len(rest) and not (rest[i + 1].startswith("-") and not _is_number(rest[i + 1])):
                settings[word] = rest[i + 1]
                i += 2
            else:
                settings[word] = "true"
                i += 1
        else:
            settings["model" if positional == 0 else "positional[%d]" % positional] = word
            positional += 1
            i += 1
    return settings


def serve_address(argv: Sequence[str]) -> Optional[Tuple[str, int]]:
    """(host, port) where `vllm serve` answers on its own node: its --host (vLLM's default and a wildcard are read
    on loopback: 127.0.0.1, or ::1 for ::) and --port (vLLM's default 8000); None for a port that is no number."""
    settings = serve_settings(argv)
    host = settings.get("--host") or "127.0.0.1"
    if host in api_front.WILDCARD_HOSTS:
        host = "::1" if host == "::" else "127.0.0.1"
    try:
        return host, int(settings.get("--port") or 8000)
    except ValueError:
        return None


def _is_number(word: str) -> bool:
    return bool(re.match(r"^-?[0-9]+(\.[0-9]+)?$", word))


def text_digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def service_state(props: Mapping[str, str], now: Optional[float] = None) -> Dict[str, Any]:
    """A one-line verdict on systemctl show's LoadState/ActiveState/SubState/Result and uptime."""
    load = props.get("LoadState", "")
    active = props.get("ActiveState", "")
    sub = props.get("SubState", "")
    result = props.get("Result", "")
    restarts = props.get("NRestarts", "0") or "0"
    enabled = props.get("UnitFileState", "")
    since = _unix_seconds(props.get("ActiveEnterTimestamp", ""))
    uptime = int(now - since) if now is not None and since is not None and active in ("active", "reloading") else None
    if load in ("not-found", ""):
        verdict, line = "not_deployed", "not deployed: systemd knows no such unit"
    elif load == "masked":
        verdict, line = "masked", "masked: it cannot start (systemctl unmask to undo)"
    elif load != "loaded":
        verdict, line = "broken", "unit not loaded (LoadState=%s): systemd could not parse it; see systemctl status" % load
    elif active == "failed":
        verdict, line = "failed", "FAILED (result %s, %s restart(s)): journalctl -u <unit> -n 100 says why" % (result, restarts)
    elif active == "activating" and sub == "auto-restart":
        verdict, line = "restarting", "restarting after a failure (result %s, %s restart(s) so far)" % (result, restarts)
    elif active == "activating":
        verdict, line = "starting", "starting (%s)" % sub
    elif active == "active":
        verdict, line = "running", "running (%s) for %s" % (sub, _duration(uptime) if uptime is not None else "unknown time")
    elif active == "deactivating":
        verdict, line = "stopping", "stopping (%s)" % sub
    else:
        verdict, line = "stopped", "%s (%s): not running" % (active or "inactive", sub or "dead")
    if enabled and verdict not in ("not_deployed",):
        line += "; %s at boot" % enabled
    return {"verdict": verdict, "line": line, "uptime_s": uptime, "active_since_unix": since,
            "active_state": active, "sub_state": sub, "load_state": load, "result": result,
            "restarts": int(restarts) if restarts.isdigit() else None, "unit_file_state": enabled}


def _unix_seconds(value: str) -> Optional[float]:
    """systemctl show --timestamp=unix prints '@1764703200'; empty or 'n/a' when never active."""
    match = re.match(r"^@(\d+(\.\d+)?)$", value.strip())
    return float(match.group(1)) if match else None


def _duration(seconds: int) -> str:
    if seconds < 120:
        return "%d s" % seconds
    if seconds < 7200:
        return "%d min" % (seconds // 60)
    if seconds < 172800:
        return "%d h %d min" % (seconds // 3600, (seconds % 3600) // 60)
    return "%d days %d h" % (seconds // 86400, (seconds % 86400) // 3600)


def _row(category: str, name: str, deployed: Optional[str], desired: Optional[str],
         origin: Mapping[str, str], deployed_from: str = "") -> Dict[str, Any]:
    secret = (category == "environment" and is_secret_name(name)) or name in SECRET_ARGS
    if secret:
        # Compared as set/unset only: one side may be masked already.
        differs = (deployed is None) != (desired is None)
        shown_dep = None if deployed is None else MASK
        shown_des = None if desired is None else MASK
    else:
        # A URL's credentials are masked on both sides (vllm_service_info masks the deployed side already), so they
        # are compared, like a secret, by what is left.
        shown_dep, shown_des = urls.mask_userinfo(deployed), urls.mask_userinfo(desired)
        differs = shown_dep != shown_des
    if not differs:
        status = "same"
    elif deployed is None:
        status = "missing"
    elif desired is None:
        status = "unexpected"
    else:
        status = "differs"
    return {"category": category, "name": name, "deployed": shown_dep, "desired": shown_des, "drift": differs,
            "status": status, "secret": secret, "source": origin.get("source", ""), "rule": origin.get("rule", ""),
            "reason": origin.get("reason", ""), "deployed_from": deployed_from}


def compare(deployed: Mapping[str, Any], desired_text: str, sources: Mapping[str, Any]) -> List[Dict[str, Any]]:
    """Rows comparing a deployed effective unit (effective_unit's shape) with the unit text the role renders.

    `sources`: {'environment': {VAR: {source, rule, reason}}, 'args': {flag: {...}}, 'default': {...}}.
    NCCL_* rows are category 'nccl', other variables 'environment', vllm serve arguments 'vllm',
    other directives 'unit'.
    """
    want = effective_unit(desired_text, main_path="desired")
    default = dict(sources.get("default") or {"source": "role", "rule": "vllm.service.j2", "reason": ""})
    rows: List[Dict[str, Any]] = []
    env_src = sources.get("environment") or {}
    have_env = deployed.get("environment") or {}
    env_origin = deployed.get("environment_origin") or {}
    for name in sorted(set(have_env) | set(want["environment"])):
        origin = env_src.get(name) or (default if name in want["environment"] else
                                       {"source": "none", "rule": "", "reason": "nothing in the role or inventory sets it"})
        rows.append(_row("nccl" if name.startswith("NCCL_") else "environment", name, have_env.get(name),
                         want["environment"].get(name), origin, env_origin.get(name, "")))
    arg_src = sources.get("args") or {}
    have_args = serve_settings(deployed.get("exec_start") or [])
    want_args = serve_settings(want["exec_start"])
    order = list(want_args) + [k for k in have_args if k not in want_args]
    for name in order:
        origin = arg_src.get(name) or (default if name in want_args else
                                       {"source": "none", "rule": "", "reason": "the role does not pass it"})
        rows.append(_row("vllm", name, have_args.get(name), want_args.get(name), origin,
                         deployed.get("exec_start_origin", "")))
    have_dir = deployed.get("directives") or {}
    for name in sorted(set(have_dir) | set(want["directives"])):
        dep = have_dir.get(name)
        des = want["directives"].get(name)
        rows.append(_row("unit", name, None if dep is None else " ".join(dep), None if des is None else " ".join(des),
                         default if des is not None else {"source": "none", "rule": "", "reason": "not in the role's unit"}))
    return rows


def report_lines(host: str, report: Mapping[str, Any]) -> List[str]:
    """The readable block of one host."""
    rows = report.get("rows") or []
    drift = [r for r in rows if r["drift"]]
    if (report.get("front") or {}).get("drift"):
        drift.append({"name": "front"})
    if not report.get("deployed", True):
        head = "%s: NOT DEPLOYED, %d setting(s) would be deployed" % (host, len(drift))
    elif drift:
        head = "%s: DRIFT, %d setting(s) differ: %s" % (host, len(drift), ", ".join(r["name"] for r in drift))
    else:
        head = "%s: NO DRIFT" % host
    problems = [p for p in report.get("problems") or [] if p != "not deployed"]
    if problems:
        head += "; PROBLEMS: " + "; ".join(problems)
    lines = [head]
    lines.extend("  " + line for line in report.get("status_lines") or [])
    sections = [("nccl", "NCCL"), ("environment", "environment"), ("vllm", "vllm serve"), ("install", "installed"),
                ("unit", "other unit directives")]
    reasons: List[str] = []
    unit_path = (report.get("unit") or {}).get("path") or ""
    for category, title in sections:
        cat_rows = [r for r in rows if r["category"] == category]
        if category == "unit" and not report.get("deployed", True):
            lines.append("  %s: %d would be deployed (systemctl cat after the deploy shows them)" % (title, len(cat_rows)))
            continue
        if category == "unit":
            # Only differences: the rest is the role's template, shown in full by systemctl cat.
            same = len([r for r in cat_rows if not r["drift"]])
            cat_rows = [r for r in cat_rows if r["drift"]]
            if not cat_rows:
                lines.append("  %s: %d, all as the role renders them" % (title, same))
                continue
        if not cat_rows:
            lines.append("  %s: none deployed, none desired" % title)
            continue
        lines.append("  %s:" % title)
        width = max(len(r["name"]) for r in cat_rows)
        for r in cat_rows:
            src = r["source"] + (":" + r["rule"] if r["rule"] else "")
            if r["reason"]:
                key = "%s (%s)" % (src, r["reason"])
                if key not in reasons:
                    reasons.append(key)
                src += " [%d]" % (reasons.index(key) + 1)
            # DIFFERS: both set, other values; MISSING: desired but not deployed; EXTRA: deployed, not desired.
            mark = {"same": "same   ", "missing": "MISSING", "unexpected": "EXTRA  "}.get(r["status"], "DIFFERS")
            where = ""
            if r["drift"] and r["deployed"] is not None and r["deployed_from"] not in ("", unit_path):
                where = " (deployed by %s)" % r["deployed_from"]
            lines.append("    %s %s deployed=%s%s desired=%s from %s" % (
                mark, r["name"].ljust(width), _shown(r["deployed"]), where, _shown(r["desired"]), src))
    for i, key in enumerate(reasons, 1):
        lines.append("  [%d] %s" % (i, key))
    return lines


def _shown(value: Optional[str]) -> str:
    if value is None:
        return "(unset)"
    if value == "" or any(c.isspace() for c in value):
        return "'%s'" % value
    return value


def gpu_summary(facts: Mapping[str, Any]) -> Dict[str, Any]:
    """Count, model(s), driver, interconnect class and worst path of gpu_facts' nvidia_gpu."""
    gpus = facts.get("gpus") or []
    interconnect = facts.get("interconnect") or {}
    summary = {
        "count": int(facts.get("count") or 0),
        "models": sorted({str(g.get("name")) for g in gpus if g.get("name")}),
        "driver_version": facts.get("driver_version"),
        "interconnect": interconnect.get("class"),
        "worst_path": interconnect.get("worst_path"),
        "backend": facts.get("backend") or "none",
    }
    if summary["count"] == 0:
        summary["line"] = ("none read (backend %s): no NVIDIA driver answered, so the desired values below are "
                           "what the policy gives a box without GPUs" % summary["backend"])
    else:
        summary["line"] = "%dx %s, driver %s, interconnect %s (worst path %s), read by %s" % (
            summary["count"], " + ".join(summary["models"]) or "unknown model", summary["driver_version"] or "unknown",
            summary["interconnect"] or "unknown", summary["worst_path"] or "unknown", summary["backend"])
    return summary


def build_report(host: str, desired: Mapping[str, Any], deployed: Mapping[str, Any],
                 gpu_facts: Optional[Mapping[str, Any]] = None,
                 benchmark: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
    """One host's settings report: rows, drift, problems, status lines and the readable block.

    `desired` is the vllm_service role's `vllm_service_desired` fact (tasks/desired.yml),
    `deployed` the vllm_service_info module's result. The last canary (in `deployed`) is set beside the unit deployed
    now here; the newest benchmark record beside the settings now comes worked out as `benchmark`
    (module_utils/_engine/benchmark.py's last_result, which the settings_report filter calls: the benchmark's rules
    read this module, so this module does not import them).
    """
    unit = deployed.get("unit") or {}
    state = unit.get("state") or {}
    is_deployed = bool(unit.get("deployed"))
    effective = deployed.get("effective") or {}
    sources = desired.get("sources") or {}
    rows = compare(effective if is_deployed else {}, desired.get("unit_text") or "", sources)
    want_version = desired.get("vllm_version")
    have_version = (deployed.get("vllm") or {}).get("version")
    if want_version:
        rows.append(_row("install", "vllm version", have_version, want_version,
                         sources.get("vllm_version") or {"source": "variable", "rule": "vllm_version", "reason": ""},
                         (deployed.get("vllm") or {}).get("venv", "")))
    problems: List[str] = []
    status: List[str] = ["read-only: nothing on this host was changed to make this report"]
    path = unit.get("path") or desired.get("unit_path") or ""
    if not is_deployed:
        status.append("unit     NOT DEPLOYED: no %s on this host; the deploy playbook installs it" % (path or "unit file"))
        problems.append("not deployed")
    else:
        same_text = unit.get("digest") == text_digest(desired.get("unit_text") or "")
        if same_text:
            verdict_text = "identical to what the role renders now"
        else:
            verdict_text = "DIFFERS from what the role renders now (edited by hand, or rendered from other inputs)"
            if not any(r["drift"] for r in rows):
                verdict_text += "; only in comments or layout"
        status.append("unit     %s: %s" % (path, verdict_text))
        status.append("drop-ins %s" % (", ".join(unit.get("dropins") or []) or "none"))
        for env_file in deployed.get("environment_files") or []:
            if not env_file.get("exists"):
                status.append("env file %s: missing%s" % (env_file["path"], " (optional)" if env_file.get("optional") else ""))
                if not env_file.get("optional"):
                    problems.append("environment file %s missing" % env_file["path"])
            else:
                status.append("env file %s: %s%s" % (
                    env_file["path"], ", ".join(env_file.get("variables") or []) or "no variables",
                    (" (values of %s not shown)" % ", ".join(env_file["secrets"])) if env_file.get("secrets") else ""))
        if unit.get("need_daemon_reload"):
            status.append("reload   the unit files changed since systemd loaded them: systemctl daemon-reload, then restart")
        for err in unit.get("errors") or []:
            status.append("error    %s" % err)
            problems.append(err)
    verdict = state.get("verdict", "not_deployed")
    if is_deployed or verdict != "not_deployed":
        status.append("service  %s" % state.get("line", "state unknown").replace("<unit>", unit.get("name", "vllm")))
    if verdict in ("failed", "restarting", "broken", "masked"):
        problems.append("service %s" % verdict)
    mtime = unit.get("mtime")
    since = state.get("active_since_unix")
    if verdict == "running" and mtime and since and mtime > since:
        status.append("restart  the unit changed after the service started: it runs with the old settings until restarted")
        problems.append("restart pending")
    # Which model profile the desired side comes from, and where it came from (there is no default profile).
    if desired.get("profile_origin"):
        status.append("profile  %s, set by vllm_service_profile" % desired["profile_origin"])
    vllm = deployed.get("vllm") or {}
    engine = vllm.get("line") or (("version " + have_version) if have_version else "NOT INSTALLED")
    status.append("vLLM     %s in %s" % (engine if have_version else "NOT INSTALLED", vllm.get("venv")))
    http = deployed.get("http") or {}
    if not http.get("checked"):
        status.append("http     not checked: %s" % (http.get("why") or "unknown"))
    else:
        health = http.get("health") or {}
        models = http.get("models") or {}
        if health.get("status") == 200:
            hline = "/health 200"
        else:
            hline = "/health not answering (%s)" % (health.get("error") or health.get("status"))
            if verdict == "running":
                up = state.get("uptime_s")
                hline += ": LOADING or stuck, %s after the start; loading a large model takes many minutes, " \
                         "journalctl -u %s shows its progress" % (_duration(up) if up is not None else "unknown time",
                                                                  unit.get("name", "vllm"))
                problems.append("not healthy yet")
        mline = ("/v1/models %s" % ", ".join(models.get("ids") or []) if models.get("status") == 200 else
                 "/v1/models %s" % (models.get("error") or models.get("status")))
        key_text = "with the API key" if models.get("with_api_key") else "no API key set"
        status.append("http     %s at %s; %s (%s)" % (hline, http.get("url"), mline, key_text))
    gpus = gpu_summary(gpu_facts or {})
    status.append("GPUs     %s" % gpus["line"])
    gate = deployed.get("p2p_gate")
    if isinstance(gate, Mapping):
        status.append("P2P gate %s at %s (%s, %s ranks): %s" % (
            "passed" if gate.get("passed") else "FAILED", gate.get("at"), gate.get("backend"), gate.get("world_size"),
            gate.get("message")))
        if not gate.get("passed"):
            problems.append("P2P gate failed")
    elif "p2p_gate" in deployed:
        status.append("P2P gate not run here (%s)" % (deployed.get("p2p_gate_reason") or "no record"))
    # The last canary and benchmark, beside the settings they ran under and whether these changed since.
    last_canary = canary.last_result(deployed.get("canary"), deployed.get("canary_reason") or "",
                                     unit.get("digest") if is_deployed else None)
    status.append("canary   %s" % last_canary["line"])
    if last_canary["problem"]:
        problems.append(last_canary["problem"])
    if benchmark:
        last_benchmark = dict(benchmark)
        bench_lines = list(benchmark.get("lines") or [])
        status.extend(("bench    " if i == 0 else "         ") + line for i, line in enumerate(bench_lines))
        if benchmark.get("problem"):
            problems.append(benchmark["problem"])
    else:
        last_benchmark = {"status": "not_read", "lines": []}
    # The engines on the box (one venv each, vllm_service_info read their receipts), the serving one marked.
    engines = deployed.get("engines") or {}
    for line in engines.get("lines") or []:
        status.append("engine   %s" % line)
    if "engines" in deployed and not engines.get("lines"):
        status.append("engine   none under %s (a venv from before engines, or nothing installed)" % engines.get("dir"))
    # The PCIe host's P2P readiness (pcie_host's policy over the facts' host section), warnings first in full: one line
    # a kind, naming every place, as preflight says it (eight bridges with ACS on are one warning); report["pcie_host"]
    # keeps every finding.
    findings = pcie_findings.facts_findings(gpu_facts or {})
    for f in pcie_findings.grouped(findings):
        if f["result"] != "ok":
            status.append("PCIe     %s %s: %s" % (f["result"].upper(), f["check"], f["reason"])
                          + ("; remedy: %s" % f["remedy"] if f.get("remedy") else ""))
    if findings:
        fine = sorted({f["check"] for f in findings} - {f["check"] for f in findings if f["result"] != "ok"})
        status.append("PCIe     ok: %s" % (", ".join(fine) or "none"))
    # The API front: what the deploy would run, against what is installed.
    want_front = desired.get("front") or {}
    have_front = deployed.get("front") or {}
    front_drift = False
    if want_front.get("enabled"):
        installed = bool(have_front.get("installed"))
        same = installed and have_front.get("config_digest") == text_digest(desired.get("front_config_text") or "")
        front_drift = not same
        status.append("front    %s; %s, configuration %s" % (
            api_front.summary(want_front), "unit %s" % (have_front.get("active") or "?") if installed else "NOT INSTALLED",
            "identical to what the role renders now" if same else "DIFFERS from what the role renders now"))
        if installed and have_front.get("active") != "active":
            problems.append("front %s" % (have_front.get("active") or "not running"))
    elif have_front.get("installed"):
        front_drift = True
        status.append("front    %s installed, but the deploy would remove it (%s)" % (have_front.get("unit"), want_front.get("why")))
    elif want_front:
        status.append("front    %s" % api_front.summary(want_front))
    # The workload (vllm_service_workload) and what it chose, each with its source.
    served = desired.get("workload") or {}
    for line in served.get("lines") or []:
        status.append("workload %s" % line)
    policy = desired.get("nccl") or {}
    if served or policy.get("workload"):
        status.append("workload NCCL: %s" % (
            "a sweep result for the %s workload" % policy.get("workload")
            if any(v.get("source") == "tuning" for v in (policy.get("settings") or {}).values())
            else "the static rules for the %s workload (no sweep result used)" % policy.get("workload", "balanced")))
    for note in policy.get("notes") or []:
        status.append("policy   %s" % note)
    for warning in policy.get("warnings") or []:
        status.append("WARNING  %s" % warning)
    # The NCCL topology file written from the facts: shown in full, and whether it is applied and why.
    topo = policy.get("topology_file") or {}
    if topo.get("generated"):
        status.append("topology NCCL topology file from the facts, %s:" % ("APPLIED" if topo.get("applied") else "NOT APPLIED"))
        status.extend("topology | %s" % line for line in (topo.get("xml") or "").splitlines())
    drift = [r for r in rows if r["drift"]]
    if front_drift:
        drift.append({"name": "front", "drift": True})
    report = {
        "host": host,
        "read_only": True,
        "deployed": is_deployed,
        "drift": bool(drift),
        "drift_names": [r["name"] for r in drift],
        "problems": problems,
        "service": state,
        "unit": {k: unit.get(k) for k in ("name", "path", "dropins", "need_daemon_reload", "errors")},
        "vllm": {"venv": vllm.get("venv"), "version": have_version, "desired_version": want_version,
                 "engine": vllm.get("engine"), "package": vllm.get("package"),
                 "package_version": vllm.get("package_version")},
        "http": http,
        "api_key_set": bool(deployed.get("api_key_set")),
        "gpus": gpus,
        "pcie_host": findings,
        "front": {"desired": dict(want_front), "deployed": dict(have_front), "drift": front_drift},
        "workload": {k: served.get(k) for k in ("workload", "performance_mode", "queue_cap", "max_num_seqs")},
        "nccl_topology": {k: topo.get(k) for k in ("generated", "applied", "why", "xml", "gpus_written", "cpu_nodes")}
        if topo else None,
        "canary": last_canary,
        "benchmark": last_benchmark,
        "engines": engines.get("engines") or [],
        "rows": rows,
        "status_lines": status,
    }
    report["lines"] = report_lines(host, report)
    return report
