# -*- coding: utf-8 -*-
# Copyright: (c) 2026, moeops.inference contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rules every role's inputs follow, and the shared names' rules. Private to the collection.

Applied by each role's plan (the role_plan action) to the value the role will really use, as Ansible templated it:
- generic rules, derived from each option's meta/argument_specs.yml entry, so that an option added later is
  covered without anyone remembering: the spec's own type check and conversion (`-e x=false` is the string
  "false", which Jinja takes as true: the roles use the converted value), no line break in any string, strict
  integers and booleans, lists and dicts not given as strings, paths absolute, normalised and without whitespace;
- the address and port types (AddressType, port): every address, network list and port option, as each role's
  module declares it (ADDRESS_OPTIONS, PORT_OPTIONS), applied by the plan;
- names: a variable with the role's prefix that is no option (a typo: refused, with a "did you mean"; a warning with
  moeops_unknown_names: warn), and a name removed from the collection (refused, naming its replacement);
- the rules of the names several roles share (vllm_user, vllm_group), and small checks the roles' own modules
  use (_roles/<role>.py): accounts, hosts, number ranges, environment mappings.
Every message names the variable (and the place in it) and what is allowed; never a secret.
"""

from __future__ import annotations

import difflib
import ipaddress
import json
import posixpath
import re
import socket
from typing import Any, Dict, List, Mapping, Sequence, Tuple

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.moeops.inference.plugins.module_utils._common import urls

# systemd splits a unit file into lines before it reads quotes, so one of these in any value that reaches a
# unit, an env file, a path or an account starts a directive of the caller's choosing (ExecStartPre=...).
LINE_BREAKERS = {"\n": "a newline (\\n)", "\r": "a carriage return (\\r)", "\0": "a NUL byte"}
# Debian's adduser NAME_REGEX (also what useradd accepts on Ubuntu), without the trailing $ of machine accounts.
ACCOUNT_NAME = re.compile(r"^[a-z][-a-z0-9_]{0,31}$")
PINNED_PACKAGE = re.compile(r"^[A-Za-z0-9_.-]+(\[[A-Za-z0-9_,.-]+\])?==[^=\s]+$")
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
INTEGER = re.compile(r"^[+-]?[0-9]+$")
# What Ansible's boolean() takes (`-e x=off` is a string): converted by the spec's type, never taken as true.
BOOLEAN_WORDS = ("true", "false", "yes", "no", "on", "off", "1", "0", "y", "n", "t", "f")
# Names of environment variables that carry secrets: they belong in the root-only env file, through the
# dedicated variables, never in a 0644 unit.
SECRET_ENV_NAME = re.compile(r"(_TOKEN|_KEY|_SECRET)$|PASSWORD|^HF_TOKEN$|^VLLM_API_KEY$", re.IGNORECASE)
SECRET_HINT = "set secrets with vllm_service_hf_token or vllm_service_api_key (they go to the root-only env file)"
# systemd rejects a time span this long, and a number of seconds above it is not a timeout anyone means.
SYSTEMD_MAX_SECONDS = 2 ** 32 // 1000  # about 49 days

Problems = List[str]


# --- generic rules, from the argument specs -----------------------------------------------------------

def line_safety_problems(name: str, value: Any) -> Problems:
    """Every string in `value` (a dict's keys and values, a list's items, at any depth) that holds a line
    breaker, each named by its place under `name`: e.g. "vllm_service_nccl_overrides.NCCL_PROTO contains
    a newline (\\n)". The value itself is not printed (it may be a secret, and it is the broken part)."""
    if isinstance(value, str):
        found = [what for char, what in LINE_BREAKERS.items() if char in value]
        return ["%s contains %s: no value may span lines (systemd reads each line as a directive)"
                % (name, " and ".join(found))] if found else []
    problems: Problems = []
    if isinstance(value, Mapping):
        for key, item in value.items():
            where = "%s.%s" % (name, key)
            if isinstance(key, str) and any(char in key for char in LINE_BREAKERS):
                where = "%s key %r" % (name, key)
                problems.extend(line_safety_problems(where, key))
            problems.extend(line_safety_problems(where, item))
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            problems.extend(line_safety_problems("%s[%d]" % (name, index), item))
    return problems


def _shown(value: Any) -> str:
    return json.dumps(value) if isinstance(value, (bool, type(None))) else repr(value)


def type_name(value: Any) -> str:
    """The builtin type a value is, as a user wrote it: Ansible's tagged and lazy subclasses (_AnsibleTaggedInt,
    _AnsibleLazyTemplateDict, ...) read as their base type, never as Ansible's internal class name."""
    for kind in (bool, int, float, str, dict, list, tuple):
        if isinstance(value, kind):
            return kind.__name__
    return type(value).__name__


def plain_type_names(message: str, raw: Any) -> str:
    """Ansible's own conversion messages print type(value) ("<class '...._AnsibleTaggedList'> cannot be converted to a
    dict", ansible-core 2.19 and later): the value's class, and its items', named as type_name names them ("list")."""
    items = list(raw.values()) if isinstance(raw, Mapping) else list(raw) if isinstance(raw, (list, tuple)) else []
    for value in [raw] + items:
        message = message.replace(str(type(value)), type_name(value))
    return message


def type_problems(name: str, opt: Mapping[str, Any], raw: Any) -> Problems:
    """What the spec's own conversion would let through, or turn into something else: a boolean taken as
    1, `1e4` as a number, a string split into characters, a relative or `~` path made absolute."""
    kind = opt.get("type", "str")
    if kind in ("int", "float") and isinstance(raw, bool):
        return ["%s must be a number, got the boolean %s" % (name, _shown(raw))]
    if kind == "int" and isinstance(raw, str) and not INTEGER.match(raw.strip()):
        return ["%s must be a whole number, got %r" % (name, raw)]
    if kind == "int" and isinstance(raw, float) and not raw.is_integer():
        return ["%s must be a whole number, got %r" % (name, raw)]
    if kind == "bool" and not isinstance(raw, bool) and str(raw).lower() not in BOOLEAN_WORDS:
        return ["%s must be true or false, got %r" % (name, raw)]
    if kind in ("list", "dict") and isinstance(raw, str):
        example = '["..."]' if kind == "list" else '{"KEY": "value"}'
        return ["%s must be a %s, got the string %r; from the command line pass JSON: -e '{\"%s\": %s}'"
                % (name, kind, raw, name, example)]
    if kind == "path" and isinstance(raw, str) and not (raw == "" and opt.get("default") == ""):
        if not raw.startswith("/"):
            return ["%s must be an absolute path, got %r" % (name, raw)]
        if re.search(r"\s", raw):
            # systemd splits ReadWritePaths=, StateDirectory= and the like on whitespace: one path would become two.
            return ["%s must be an absolute path without whitespace (systemd reads path lists split on spaces), got %r"
                    % (name, raw)]
        bare = raw.rstrip("/") or "/"  # a trailing slash names the same directory
        if posixpath.normpath(bare) != bare or bare.startswith("//"):
            return ["%s must be a normalised absolute path (no '..', '.' or '//'), got %r; use %r"
                    % (name, raw, posixpath.normpath(bare))]
    return []


def generic_problems(spec: Mapping[str, Any], values: Mapping[str, Any]) -> Tuple[Problems, Dict[str, Any], List[str]]:
    """The spec's own validation plus the rules above, for the options set in `values`; the validated values (the
    spec's conversions applied) for the semantic checks; and the names of the options these rules refused."""
    result = ArgumentSpecValidator(dict(spec)).validate(dict(values))
    broken = {name: line_safety_problems(name, raw) for name, raw in values.items()}

    def names(message: str, name: str) -> bool:
        return "'%s'" % name in message or " %s " % name in message

    # A value that spans lines gets that one message: the spec's own (a choice's "got: ...") would echo it.
    problems = [str(m) for m in result.error_messages if not any(broken[n] and names(str(m), n) for n in values)]
    problems = [next((plain_type_names(m, values[n]) for n in values if names(m, n)), m) for m in problems]
    refused = []
    for name in sorted(values):
        raw = values[name]
        problems.extend(broken[name])
        named = broken[name] or any(names(str(m), name) for m in result.error_messages)
        own = type_problems(name, spec[name], raw) if raw is not None and not named else []
        problems.extend(own)  # one message per mistake: the spec's own, when it has one
        if named or own:
            refused.append(name)
    return problems, dict(result.validated_parameters), refused


# --- semantic checks, one per role ----------------------------------------------------------------

def account(name: str, value: Any) -> Problems:
    if not isinstance(value, str):
        return []
    if value in ("root", "0") or not ACCOUNT_NAME.match(value):
        return ["%s must be an unprivileged account name (lower case, starting with a letter, as adduser allows; "
                "not root), got %r" % (name, value)]
    return []


def number_in(name: str, value: Any, low: float, high: float, low_open: bool = True, what: str = "") -> Problems:
    if value is None or isinstance(value, bool):
        return []
    try:
        number = float(value)
    except (TypeError, ValueError):
        return []  # the spec's conversion names it
    if (number <= low if low_open else number < low) or number > high:
        return ["%s must be %s, got %r" % (name, what, value)]
    return []


def env_mapping(name: str, value: Any, allow_null: bool) -> Problems:
    """Keys are environment variable names, values strings (null removes an override where allowed), and
    no secret rides in a 0644 unit."""
    if not isinstance(value, Mapping):
        return []
    problems: Problems = []
    for var, val in sorted(value.items(), key=lambda kv: str(kv[0])):
        if not isinstance(var, str) or not ENV_NAME.match(var):
            problems.append("%s key %r is not an environment variable name" % (name, var))
            continue
        if SECRET_ENV_NAME.search(var):
            problems.append("%s.%s looks like a secret and would be written to the world-readable unit: %s"
                            % (name, var, SECRET_HINT))
        if val is None and allow_null:
            continue
        if not isinstance(val, str):
            problems.append("%s.%s must be a string (quote it in YAML: \"%s\")%s, got %s %r"
                            % (name, var, json.dumps(val).lower(), " or null to remove it" if allow_null else "",
                               type_name(val), val))
    return problems


# What NCCL reads: upper-case NCCL_* names, exactly (getenv); nccl_proto would be set and never read.
NCCL_NAME = re.compile(r"^NCCL_[A-Z0-9_]+$")
UNIT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@-]*$")


def nccl_overrides(name: str, value: Any) -> Problems:
    """An NCCL override mapping (vllm_service_nccl_overrides, ray_cluster_nccl_overrides): an environment mapping whose
    keys are NCCL's own variable names, upper case as NCCL reads them. A lower-case or other key was written into the
    unit and never read (or, with null, removed nothing), so it is refused, naming the NCCL variable meant."""
    problems = env_mapping(name, value, allow_null=True)
    if not isinstance(value, Mapping):
        return problems
    for var in sorted((k for k in value if isinstance(k, str) and ENV_NAME.match(k) and not NCCL_NAME.match(k)), key=str):
        meant = var.upper() if NCCL_NAME.match(var.upper()) else ""
        problems.append("%s key %r is not an NCCL variable: NCCL reads only upper-case NCCL_* names%s; other variables "
                        "go in %s" % (name, var, " (did you mean %s?)" % meant if meant else "",
                                      name.replace("nccl_overrides", "environment")))
    return problems


def _ip(text: Any) -> Any:
    """The IP address `text` is (a scoped IPv6 address too: _address_problem refuses its zone), or None."""
    try:
        return ipaddress.ip_address(str(text))
    except ValueError:
        return None


def is_loopback(host: Any) -> bool:
    """Loopback, by the literal only: an address in 127.0.0.0/8, ::1 (in any spelling, with or without a scope id), or
    exactly `localhost`. A name that merely starts with `127.` is a name: it may resolve anywhere.

    An IPv4-mapped IPv6 address (::ffff:127.0.0.1) is decided here, not by ipaddress: Python 3.13 calls it loopback and
    3.12 does not, so the exposure rules (a front and an API key, an allowlist) would follow the controller's Python.
    It is never loopback, the stricter answer; the address types refuse that spelling anyway, naming the IPv4 address."""
    if host == "localhost":
        return True
    try:
        address = ipaddress.ip_address(str(host))
    except ValueError:
        return False
    if address.version == 6 and address.ipv4_mapped is not None:
        return False
    return address.is_loopback


# --- the address and port types: every role's address, network list and port options --------------------------------
#
# Each role's private module declares the type of each such option (ADDRESS_OPTIONS, PORT_OPTIONS); the plan applies
# them (_common/plan.py) before the role's own rules, so no role parses an address or a port itself.
# tests/unit/roles/test_typed_inputs.py fails for an option named like an address, a network list or a port that no
# role types.
#
# Zone ids (fe80::1%eth0) are refused outright. A zone names an interface of the node, and the interface names are not
# known where the roles plan: monitoring's check and preflight plan before any fact is gathered, and preflight plans
# every role of a deploy. Python's ipaddress takes any text after the '%' ("fe80::%x any /64"), which then reached
# IPAddressAllow= as `any`, argv and nginx's configuration. No role needs a link-local address: the API and the
# exporters are reached over routed networks, Ray over IPv4.

# RFC 1123 host names: dot-separated labels of letters, digits and inner hyphens, 253 characters at most.
HOST_NAME = re.compile(r"^(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
                       r"(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?$")
ENDPOINT = re.compile(r"^(\[(?P<v6>[^\]]*)\]|(?P<host>[^:\[\]]*)):(?P<port>[0-9]{1,5})$")
# Ports below this are privileged: a service binds them only with CAP_NET_BIND_SERVICE, and sshd, DNS, a web server
# are there. Allowed only with this one switch (declared by every role that has a port option).
PRIVILEGED_BELOW = 1024
PRIVILEGED_SWITCH = "moeops_allow_privileged_ports"


class AddressType(object):
    """One kind of address option. `kind`: ip (an address of this node, to listen on), host (an IP address or a host
    name: listened on or dialled), endpoint (HOST:PORT dialled), networks (a list of CIDR networks or addresses).
    `ipv4_why`: the address is reached over IPv4 only, and why. `empty_means`: what an empty string means (else it is
    refused, except for an endpoint, where empty means none)."""

    def __init__(self, kind: str, ipv4_why: str = "", empty_means: str = ""):
        self.kind, self.ipv4_why, self.empty_means = kind, ipv4_why, empty_means

    def __repr__(self) -> str:
        return "AddressType(%r)" % self.kind

    def problems(self, name: str, value: Any) -> Problems:
        if value is None:
            return []
        if self.kind == "networks":
            return networks(name, value)
        if self.kind == "endpoint":
            return endpoint(name, value)
        if self.kind == "ip":
            return ip(name, value)
        found = host(name, value, self.empty_means)
        return found or (ipv4_only(name, value, self.ipv4_why) if self.ipv4_why else [])


IP = AddressType("ip")
HOST = AddressType("host")
ENDPOINT_TYPE = AddressType("endpoint")
NETWORKS = AddressType("networks")


def host_type(empty_means: str = "", ipv4_why: str = "") -> AddressType:
    return AddressType("host", ipv4_why=ipv4_why, empty_means=empty_means)


def _address_problem(name: str, value: str, what: str) -> Problems:
    """The rules every IP literal follows, in any address type: no zone id, no IPv4-mapped spelling, canonical form."""
    address, scoped, _zone = value.partition("%")
    if scoped and _ip(address) is not None:
        return ["%s must be %s without a zone id ('%%' and an interface after an IPv6 address): the roles cannot "
                "check the interface when they plan, and none needs a link-local address, got %r" % (name, what, value)]
    parsed = _ip(value)
    if parsed is None:
        return []
    if parsed.version == 6 and parsed.ipv4_mapped is not None:
        return ["%s must be %s; %r is an IPv4-mapped IPv6 address: write the IPv4 address %s"
                % (name, what, value, parsed.ipv4_mapped)]
    if str(parsed) != value:
        return ["%s must be %s in canonical form: write '%s', not %r" % (name, what, parsed, value)]
    return []


def ip(name: str, value: Any) -> Problems:
    """An IP address of this node, canonical, without a zone id."""
    if not isinstance(value, str):
        return []
    what = "an IP address of this node"
    return _address_problem(name, value, what) or ([] if _ip(value) is not None else [
        "%s must be %s (127.0.0.1 for loopback only), got %r" % (name, what, value)])


def host(name: str, value: Any, empty_means: str = "") -> Problems:
    """An IP address (canonical, without a zone id) or a host name: it is written into argv and the unit as one word, and
    bound or dialled. A name that the resolver reads as an IPv4 address (127.1, 0x7f000001, 2130706433) is refused for
    its usual form, so that what is checked (loopback or not) is what is used."""
    if not isinstance(value, str) or (value == "" and empty_means):
        return []
    what = "an IP address or a host name"
    found = _address_problem(name, value, what)
    if found or _ip(value) is not None:
        return found
    if HOST_NAME.match(value):
        try:
            packed = socket.inet_aton(value)
        except OSError:
            return []
        return ["%s must be %s; %r is read by the resolver as the IPv4 address %s: write that address"
                % (name, what, value, socket.inet_ntoa(packed))]
    return ["%s must be %s%s, got %r" % (name, what, " (empty: %s)" % empty_means if empty_means else "", value)]


def ipv4_only(name: str, value: Any, why: str) -> Problems:
    """No IPv6 literal: for what is reached over IPv4 only (`why` says what)."""
    parsed = _ip(value) if isinstance(value, str) else None
    if parsed is not None and parsed.version == 6:
        return ["%s must be an IPv4 address or a host name with one: %s, got the IPv6 address %r" % (name, why, value)]
    return []


def endpoint(name: str, value: Any) -> Problems:
    """HOST:PORT dialled (an IPv6 address in brackets), or empty for none: the host by `host`, the port in 1-65535."""
    if not isinstance(value, str) or value == "":
        return []
    match = ENDPOINT.match(value)
    if not match or not 1 <= int(match.group("port")) <= 65535:
        return ["%s must be HOST:PORT (an IPv6 address in brackets, a port in 1-65535) or empty, got %r" % (name, value)]
    address = match.group("v6")
    if address is not None:
        parsed = _ip(address.partition("%")[0])
        if parsed is None or parsed.version != 6:
            return ["%s must be HOST:PORT; only an IPv6 address goes in brackets, got %r" % (name, value)]
        return _address_problem(name, address, "HOST:PORT with an IP address or a host name")
    return host(name, match.group("host"))


def network(name: str, value: Any) -> Problems:
    """One network (CIDR) or address: canonical (the network's own address, a prefix length, lower case), no zone id,
    no IPv4-mapped IPv6 network (an nftables `ip6 saddr` never matches IPv4 traffic)."""
    what = "a network such as 10.0.0.0/8 or an address"
    text = value if isinstance(value, str) else None
    if text is None:
        return ["%s must be %s, got %s %r" % (name, what, type_name(value), value)]
    if "%" in text:
        return ["%s must be %s without a zone id ('%%' and an interface): the roles cannot check the interface when "
                "they plan, got %r" % (name, what, text)]
    address, slash, _prefix = text.partition("/")
    try:
        parsed = ipaddress.ip_network(text, strict=False)
    except ValueError:
        return ["%s must be %s, got %r" % (name, what, text)]
    if parsed.version == 6 and parsed.network_address.ipv4_mapped is not None:
        return ["%s must be %s; %r is an IPv4-mapped IPv6 network: write the IPv4 network" % (name, what, text)]
    canonical = str(parsed) if slash else str(parsed.network_address)
    if canonical != text:
        return ["%s must be %s in canonical form: write %r, not %r" % (name, what, canonical, text)]
    return []


def networks(name: str, value: Any) -> Problems:
    if not isinstance(value, (list, tuple)):
        return []  # the spec's conversion names it
    problems: Problems = []
    for index, item in enumerate(value):
        problems += network("%s[%d]" % (name, index), item)
    return problems


def port_number(value: Any) -> Any:
    """A port as the spec converted it (an int, or digits from -e), else None."""
    if isinstance(value, bool) or value is None:
        return None
    text = str(value).strip()
    return int(text) if INTEGER.match(text) else None


def port(name: str, value: Any, ssh_port: Any = 22, privileged: bool = False,
         elsewhere: Mapping[str, Any] = None) -> Problems:
    """A TCP port this node listens on (or that a role's firewall drops): in 1-65535; never the SSH port the inventory
    connects on (ansible_port, default 22), which the roles' firewalls would drop and a listener would take; below 1024
    only with moeops_allow_privileged_ports; never another role's port (`elsewhere`: option -> its value on this host)."""
    number = port_number(value)
    if number is None:
        return []  # the spec's conversion names it
    if not 1 <= number <= 65535:
        return ["%s must be a TCP port in 1-65535, got %r" % (name, value)]
    ssh = port_number(ssh_port)
    if number == ssh:
        return ["%s is %d, the SSH port (ansible_port) Ansible connects on: a listener there takes it, and a firewall "
                "that drops it locks Ansible out" % (name, number)]
    problems: Problems = []
    if number < PRIVILEGED_BELOW and not privileged:
        problems.append("%s is %d, a privileged port (below %d: sshd, DNS, a web server live there): pick a port from %d "
                        "up, or set %s: true if it is meant"
                        % (name, number, PRIVILEGED_BELOW, PRIVILEGED_BELOW, PRIVILEGED_SWITCH))
    for other in sorted(elsewhere or {}):
        if other != name and port_number((elsewhere or {})[other]) == number:
            problems.append("%s is %d, also %s's: each listener needs its own port" % (name, number, other))
    return problems


def unit_name(name: str, value: Any) -> Problems:
    if isinstance(value, str) and not UNIT_NAME.match(value):
        return ["%s must be a systemd unit name without .service (letters, digits, _ . @ -), got %r" % (name, value)]
    return []


def no_whitespace(name: str, value: Any) -> Problems:
    if isinstance(value, str) and re.search(r"\s", value):
        return ["%s must not contain whitespace" % name]
    return []


def matches(name: str, value: Any, pattern: str, what: str) -> Problems:
    if isinstance(value, str) and not re.match(pattern, value):
        return ["%s must be %s, got %r" % (name, what, value)]
    return []


def shared_name_problems(values: Mapping[str, Any]) -> Problems:
    """The names several roles declare (one name per thing): vllm_user and vllm_group are unprivileged accounts."""
    return account("vllm_user", values.get("vllm_user")) + account("vllm_group", values.get("vllm_group"))


# --- names: unknown and removed -----------------------------------------------------------------------------------

# Names the collection no longer reads: the role that refuses each, and what replaced it (changelogs: the roles'
# restructuring). Given, they would be ignored without a word and the play would do something else
# (moeops_model: glm5 deployed Kimi-K2.5). A name without a role's prefix belongs to the role that needs its successor.
_GPU_FACTS = "gpu_facts_backend and gpu_facts_snapshot (the gpu_facts role reads the GPUs for every role)"
REMOVED: Dict[str, Tuple[str, str]] = {
    "moeops_model": ("vllm_service", "vllm_service_profile"),
    "gpu_topology_backend": ("gpu_facts", "gpu_facts_backend"),
    "gpu_topology_snapshot": ("gpu_facts", "gpu_facts_snapshot"),
    "gpu_topology_required": ("gpu_facts", "gpu_facts_required"),
    "vllm_service_user": ("vllm_service", "vllm_user"),
    "vllm_service_group": ("vllm_service", "vllm_group"),
    "vllm_service_venv": ("vllm_service", "vllm_venv"),
    "vllm_service_hf_home": ("vllm_service", "vllm_hf_home"),
    "vllm_service_working_directory": ("vllm_service", "vllm_home"),
    "vllm_service_model": ("vllm_service", "vllm_service_profile"),
    "vllm_service_gpu_facts": ("vllm_service", _GPU_FACTS),
    "model_weights_user": ("model_weights", "vllm_user"),
    "model_weights_group": ("model_weights", "vllm_group"),
    "model_weights_hf_home": ("model_weights", "vllm_hf_home"),
    "model_weights_venv": ("model_weights", "vllm_venv"),
    "model_weights_ca_bundle": ("model_weights", "vllm_ca_bundle"),
    "model_weights_gpu_facts": ("model_weights", _GPU_FACTS),
    "ray_cluster_venv": ("ray_cluster", "vllm_venv"),
    "ray_cluster_user": ("ray_cluster", "vllm_user"),
    "ray_cluster_user_group": ("ray_cluster", "vllm_group"),
    "ray_cluster_working_directory": ("ray_cluster", "vllm_home"),
    "ray_cluster_ca_bundle": ("ray_cluster", "vllm_ca_bundle"),
    "ray_cluster_uv": ("ray_cluster", "vllm_uv_venv"),
    "ray_cluster_uv_cache_dir": ("ray_cluster", "vllm_uv_cache_dir"),
    "ray_cluster_index_url": ("ray_cluster", "vllm_index_url"),
    "ray_cluster_gpu_facts": ("ray_cluster", _GPU_FACTS),
    "preflight_gpu_facts": ("preflight", _GPU_FACTS),
    "preflight_tensor_parallel_size": ("preflight", "vllm_service_tensor_parallel_size"),
    "preflight_gpu_memory_utilization": ("preflight", "vllm_service_gpu_memory_utilization"),
}


def removed_name_problems(role: str, names: Sequence[str]) -> Problems:
    """The removed names of `role` that are set: refused, naming what replaced each."""
    return ["%s was removed from moeops.inference; set %s instead (as it is, it would be ignored without a word)"
            % (name, REMOVED[name][1]) for name in sorted(names) if REMOVED.get(name, ("",))[0] == role]


# The switch for unknown names: refuse (the default) or warn, for an inventory shared with other tools whose
# variables happen to start with a role's prefix. Not a role option: every role's plan reads it.
UNKNOWN_NAMES_SWITCH = "moeops_unknown_names"
UNKNOWN_NAMES_MODES = ("refuse", "warn")


def unknown_names_mode(value: Any) -> Tuple[str, Problems]:
    """What moeops_unknown_names asks for (unset: refuse), and the problem with a value that is neither choice (which
    refuses, as unset does)."""
    if value is None:
        return "refuse", []
    if isinstance(value, str) and value in UNKNOWN_NAMES_MODES:
        return value, []
    return "refuse", ["%s must be %s, got %r" % (UNKNOWN_NAMES_SWITCH, " or ".join(UNKNOWN_NAMES_MODES), value)]


def unknown_name_messages(prefix: str, options: Sequence[str], names: Sequence[str],
                          known_other: Sequence[str] = (), mode: str = "warn") -> Problems:
    """Variables with the role's prefix that are neither an option nor a known result: usually a typo, which would
    be ignored without a word (vllm_service_profle: minimax_m25 deployed another model). Each message names the
    closest option; with `mode` refuse (moeops_unknown_names' default) they are problems, with warn warnings."""
    messages = []
    for name in sorted(set(n for n in names if n.startswith(prefix)) - set(options) - set(known_other) - set(REMOVED)):
        close = difflib.get_close_matches(name, list(options), n=1)
        messages.append("%s is set but is not an option of role %s%s; %s"
                        % (name, prefix.rstrip("_"), " (did you mean %s?)" % close[0] if close else "",
                           "it has no effect" if mode == "warn" else
                           "refused, as it would have no effect (%s: warn makes this a warning, for an inventory "
                           "shared with other tools)" % UNKNOWN_NAMES_SWITCH))
    return messages


# --- argv words and remote sources (issue 41: what a careless or hostile inventory still gets through) -------------
# Kept apart from the rules above on purpose: URL and argv rules only.

# The switch that lets a package index or a weights mirror be reached without TLS (declared by each role that fetches:
# vllm, ray_cluster, model_weights); every run that uses it warns.
INSECURE_SWITCH = "vllm_allow_insecure_sources"


def argv_word(name: str, value: Any, program: str) -> Problems:
    """A URL or a path that a role passes to another program as one argv word (uv's --index-url, rsync's source,
    dpkg's package): one that starts with '-' is read by that program as an option (uv takes `--index-url -x` as a
    missing value, rsync `-e...` as its remote shell), so it is refused here, naming the variable."""
    if isinstance(value, str) and value.startswith("-"):
        return ["%s must be a URL or an absolute path, not something that starts with '-' (%s would read it as an "
                "option), got %r" % (name, program, urls.mask_userinfo(value))]
    return []


def url_option_problems(values: Mapping[str, Any]) -> Problems:
    """`argv_word` for every option whose name ends in _url: each is handed to a downloader or installer."""
    return [p for name in sorted(values) if name.endswith("_url")
            for p in argv_word(name, values[name], "the program it is passed to")]


def secure_source(name: str, value: Any, allow_insecure: Any, what: str) -> Tuple[Problems, Problems]:
    """(problems, warnings) for a remote source the node trusts with root's or the service's code (a package index
    whose wheels run at install, a weights mirror whose files vLLM loads): https only, unless INSECURE_SWITCH is true,
    and then a warning in every run. `what` says what comes from it. An empty value is no source; a local one (a
    file:// URL or an absolute path, as uv takes an index) crosses no network."""
    local = value.strip().lower().startswith(("https://", "file://", "/")) if isinstance(value, str) else True
    if not isinstance(value, str) or not value.strip() or local:
        return [], []
    shown = urls.mask_userinfo(value)
    if allow_insecure is True:
        return [], ["%s %r is not https: %s comes without TLS, so anyone on the path can replace it (%s is true)"
                    % (name, shown, what, INSECURE_SWITCH)]
    return ["%s must be an https:// URL: %s, and without TLS anyone on the path can replace it; got %r (set %s to "
            "true to accept that)" % (name, what, shown, INSECURE_SWITCH)], []
