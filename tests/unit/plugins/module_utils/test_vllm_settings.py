# -*- coding: utf-8 -*-
"""Parsing units as systemd does, and comparing deployed with desired settings."""
from __future__ import annotations

import pytest

from ansible_collections.moeops.inference.plugins.module_utils._policy import settings as vs

# The shape vllm.service.j2 renders: comments, shlex-quoted Environment= lines, an
# ExecStart= over continuation lines with a comment inside the continuation.
UNIT = r"""# Ansible managed
[Unit]
Description=vLLM OpenAI-compatible server (kimi-k2.5)
After=network-online.target nvidia-persistenced.service
Wants=network-online.target nvidia-persistenced.service

[Service]
Type=exec
User=vllm
Environment=HF_HOME=/var/cache/vllm/huggingface
Environment='EXTRA=two words'
# NCCL_ALGO [policy: pcie_latency] PCIe-only with more than 2 GPUs
Environment=NCCL_ALGO=Ring
Environment=NCCL_P2P_LEVEL=SYS
Environment=NCCL_PROTO=LL
ExecStart=/opt/vllm/venv/bin/vllm serve moonshotai/Kimi-K2.5 \
    --served-model-name kimi-k2.5 \
# a comment inside a continuation is dropped
    --tensor-parallel-size 8 \
    --trust-remote-code \
    --chat-template 'it'"'"'s here' \
    --host 127.0.0.1 --port 8000

Restart=on-failure
LimitNOFILE=65536

[Install]
WantedBy=multi-user.target
"""

SOURCES = {
    "environment": {
        "NCCL_ALGO": {"value": "Ring", "source": "policy", "rule": "pcie_latency", "reason": "PCIe latency"},
        "NCCL_P2P_LEVEL": {"value": "SYS", "source": "policy", "rule": "p2p_level", "reason": "far pairs"},
        "NCCL_PROTO": {"value": "LL", "source": "policy", "rule": "pcie_latency", "reason": "PCIe latency"},
        "HF_HOME": {"source": "variable", "rule": "vllm_hf_home", "reason": ""},
    },
    "args": {"--tensor-parallel-size": {"source": "policy", "rule": "parallel_layout", "reason": "power of two"}},
}


def test_continuations_comments_and_quotes():
    eff = vs.effective_unit(UNIT)
    assert eff["environment"] == {"EXTRA": "two words", "HF_HOME": "/var/cache/vllm/huggingface",
                                  "NCCL_ALGO": "Ring", "NCCL_P2P_LEVEL": "SYS", "NCCL_PROTO": "LL"}
    assert eff["exec_start"] == ["/opt/vllm/venv/bin/vllm", "serve", "moonshotai/Kimi-K2.5",
                                 "--served-model-name", "kimi-k2.5", "--tensor-parallel-size", "8",
                                 "--trust-remote-code", "--chat-template", "it's here",
                                 "--host", "127.0.0.1", "--port", "8000"]
    assert eff["directives"]["Unit.After"] == ["network-online.target nvidia-persistenced.service"]
    assert eff["directives"]["Service.Type"] == ["exec"]
    assert "Service.Environment" not in eff["directives"]


@pytest.mark.parametrize("value, words", [
    ('A=1 "B=two words" C=\'x y\'', ["A=1", "B=two words", "C=x y"]),
    (r'"X=a\"b" Y=tab\there', ['X=a"b', "Y=tab\there"]),
    ("pre'quoted part'post", ["prequoted partpost"]),
    (r"A=\x41", ["A=A"]),
    ("   ", []),
])
def test_split_words(value, words):
    assert vs.split_words(value) == words


@pytest.mark.parametrize("value", ['"unterminated', "a\\", r"A=\q"])
def test_split_words_refuses_what_systemd_refuses(value):
    with pytest.raises(vs.UnitSyntaxError):
        vs.split_words(value)


def test_dropins_override_and_reset():
    dropins = [
        ("/etc/systemd/system/vllm.service.d/10-debug.conf", "[Service]\nEnvironment=NCCL_DEBUG=INFO NCCL_PROTO=Simple\n"),
        ("/etc/systemd/system/vllm.service.d/20-exec.conf",
         "[Service]\nExecStart=\nExecStart=-/opt/other/bin/vllm serve m --port 9000\n"),
    ]
    eff = vs.effective_unit(UNIT, dropins, main_path="/etc/systemd/system/vllm.service")
    assert eff["environment"]["NCCL_PROTO"] == "Simple"
    assert eff["environment"]["NCCL_DEBUG"] == "INFO"
    assert eff["environment_origin"]["NCCL_PROTO"] == "/etc/systemd/system/vllm.service.d/10-debug.conf"
    assert eff["environment_origin"]["NCCL_ALGO"] == "/etc/systemd/system/vllm.service"
    assert eff["exec_start"] == ["/opt/other/bin/vllm", "serve", "m", "--port", "9000"]
    assert eff["exec_prefix"] == "-"
    assert eff["exec_start_origin"].endswith("20-exec.conf")


def test_empty_environment_clears_everything_before_it():
    eff = vs.effective_unit(UNIT, [("d.conf", "[Service]\nEnvironment=\nEnvironment=ONLY=1\n")])
    assert eff["environment"] == {"ONLY": "1"}


def test_empty_directive_clears_the_list():
    eff = vs.effective_unit(UNIT, [("d.conf", "[Unit]\nAfter=\nAfter=x.target\n")])
    assert eff["directives"]["Unit.After"] == ["x.target"]


def test_dropin_order_masks_by_name_and_sorts():
    found = ["/etc/systemd/system/vllm.service.d/50-a.conf",
             "/run/systemd/system/vllm.service.d/50-a.conf",
             "/run/systemd/system/vllm.service.d/10-b.conf",
             "/usr/lib/systemd/system/service.d/99-all.conf"]
    assert vs.dropin_order(found) == ["/run/systemd/system/vllm.service.d/10-b.conf",
                                      "/etc/systemd/system/vllm.service.d/50-a.conf",
                                      "/usr/lib/systemd/system/service.d/99-all.conf"]
    assert vs.dropin_dir_names("vllm.service") == ["vllm.service.d", "service.d"]


def test_systemctl_show():
    props = vs.parse_show("Environment=HF_HOME=/x NCCL_PROTO=LL\nExecStart={ path=/v/bin/vllm ; argv[]=/v/bin/vllm serve m "
                          "--port 8000 ; ignore_errors=no ; start_time=[n/a] ; stop_time=[n/a] ; pid=0 ; code=(null) ; status=0/0 }\n")
    assert dict(vs.parse_environment_value(props["Environment"])) == {"HF_HOME": "/x", "NCCL_PROTO": "LL"}
    assert vs.parse_show_exec(props["ExecStart"]) == ["/v/bin/vllm", "serve", "m", "--port", "8000"]
    assert vs.parse_show_exec("") == []


def test_environment_file():
    env = vs.parse_environment_file("# secrets\nVLLM_API_KEY=sk-1\nexport HF_TOKEN='hf_2'\n; other\nPLAIN=\"a b\"\n")
    assert env == {"VLLM_API_KEY": "sk-1", "HF_TOKEN": "hf_2", "PLAIN": "a b"}


def test_secrets_are_masked():
    assert vs.mask_environment({"HF_TOKEN": "hf_x", "VLLM_API_KEY": "k", "NCCL_PROTO": "LL"}) == {
        "HF_TOKEN": vs.MASK, "VLLM_API_KEY": vs.MASK, "NCCL_PROTO": "LL"}
    assert vs.mask_argv(["vllm", "serve", "m", "--api-key", "sk", "--hf-token=hf"]) == [
        "vllm", "serve", "m", "--api-key", vs.MASK, "--hf-token=" + vs.MASK]


def test_serve_settings():
    got = vs.serve_settings(["/v/bin/vllm", "serve", "m", "--tp", "8", "--switch", "--x=1", "--neg", "-1", "--switch2"])
    assert got == {"executable": "/v/bin/vllm", "subcommand": "serve", "model": "m", "--tp": "8", "--switch": "true",
                   "--x": "1", "--neg": "-1", "--switch2": "true"}


def deployed_from(text, dropins=()):
    return vs.effective_unit(text, dropins, main_path="/etc/systemd/system/vllm.service")


def test_no_drift_when_only_layout_differs():
    # Same settings, other formatting: one line per Environment= word, no continuations.
    other = UNIT.replace("Environment=NCCL_ALGO=Ring\nEnvironment=NCCL_P2P_LEVEL=SYS\n",
                         'Environment="NCCL_P2P_LEVEL=SYS" NCCL_ALGO=Ring\n')
    rows = vs.compare(deployed_from(other), UNIT, SOURCES)
    assert [r for r in rows if r["drift"]] == []
    nccl = {r["name"]: r for r in rows if r["category"] == "nccl"}
    assert sorted(nccl) == ["NCCL_ALGO", "NCCL_P2P_LEVEL", "NCCL_PROTO"]
    assert nccl["NCCL_P2P_LEVEL"]["source"] == "policy" and nccl["NCCL_P2P_LEVEL"]["rule"] == "p2p_level"


def test_hand_edit_of_one_nccl_variable_is_exactly_one_drift():
    edited = UNIT.replace("NCCL_PROTO=LL", "NCCL_PROTO=Simple")
    drift = [r for r in vs.compare(deployed_from(edited), UNIT, SOURCES) if r["drift"]]
    assert [(r["name"], r["deployed"], r["desired"], r["status"], r["source"]) for r in drift] == [
        ("NCCL_PROTO", "Simple", "LL", "differs", "policy")]


def test_dropin_drift_names_the_dropin_and_new_sources_pass_through():
    sources = {"environment": dict(SOURCES["environment"],
                                   NCCL_PROTO={"source": "tuning", "rule": "nccl-tests 2026-12-01", "reason": "measured"})}
    dropin = ("/etc/systemd/system/vllm.service.d/10.conf", "[Service]\nEnvironment=NCCL_PROTO=Simple NCCL_DEBUG=INFO\n")
    rows = {r["name"]: r for r in vs.compare(deployed_from(UNIT, [dropin]), UNIT, sources)}
    assert rows["NCCL_PROTO"]["drift"] and rows["NCCL_PROTO"]["source"] == "tuning"
    assert rows["NCCL_PROTO"]["deployed_from"] == dropin[0]
    assert rows["NCCL_DEBUG"]["status"] == "unexpected" and rows["NCCL_DEBUG"]["desired"] is None
    lines = vs.report_lines("h", {"rows": list(rows.values()), "deployed": True,
                                  "unit": {"path": "/etc/systemd/system/vllm.service"}})
    assert any(line.startswith("    EXTRA   NCCL_DEBUG") and "(deployed by %s)" % dropin[0] in line for line in lines)


def test_argument_and_directive_drift():
    edited = UNIT.replace("--tensor-parallel-size 8", "--tensor-parallel-size 4").replace("LimitNOFILE=65536\n", "")
    drift = {r["name"]: r for r in vs.compare(deployed_from(edited), UNIT, SOURCES) if r["drift"]}
    assert sorted(drift) == ["--tensor-parallel-size", "Service.LimitNOFILE"]
    assert drift["--tensor-parallel-size"]["rule"] == "parallel_layout"
    assert drift["Service.LimitNOFILE"]["status"] == "missing"


def test_secret_compared_as_set_or_unset_never_shown():
    desired = UNIT.replace("[Service]\n", "[Service]\nEnvironment=HF_TOKEN=hf_desired\n")
    deployed = vs.effective_unit(UNIT.replace("[Service]\n", "[Service]\nEnvironment=HF_TOKEN=hf_other\n"))
    deployed["environment"] = vs.mask_environment(deployed["environment"])
    rows = {r["name"]: r for r in vs.compare(deployed, desired, SOURCES)}
    assert rows["HF_TOKEN"]["drift"] is False and rows["HF_TOKEN"]["secret"]
    assert rows["HF_TOKEN"]["deployed"] == vs.MASK and rows["HF_TOKEN"]["desired"] == vs.MASK
    report = vs.build_report("h", {"unit_text": desired, "sources": SOURCES},
                             {"unit": {"deployed": True, "state": {}}, "effective": deployed})
    assert "hf_desired" not in repr(report) and "hf_other" not in repr(report)


@pytest.mark.parametrize("props, verdict, words", [
    ({"LoadState": "not-found", "ActiveState": "inactive"}, "not_deployed", "not deployed"),
    ({"LoadState": "loaded", "ActiveState": "failed", "Result": "exit-code", "NRestarts": "3"}, "failed", "FAILED"),
    ({"LoadState": "loaded", "ActiveState": "activating", "SubState": "auto-restart", "Result": "exit-code"},
     "restarting", "restarting"),
    ({"LoadState": "loaded", "ActiveState": "activating", "SubState": "start"}, "starting", "starting"),
    ({"LoadState": "loaded", "ActiveState": "active", "SubState": "running", "ActiveEnterTimestamp": "@1000"},
     "running", "running (running) for 10 min"),
    ({"LoadState": "loaded", "ActiveState": "inactive", "SubState": "dead", "UnitFileState": "enabled"},
     "stopped", "not running; enabled at boot"),
    ({"LoadState": "bad-setting"}, "broken", "could not parse"),
    ({"LoadState": "masked"}, "masked", "masked"),
])
def test_service_state(props, verdict, words):
    state = vs.service_state(props, now=1600.0)
    assert state["verdict"] == verdict
    assert words in state["line"]


def _deployed(text, verdict="stopped", **state):
    eff = vs.effective_unit(text, main_path="/etc/systemd/system/vllm.service")
    return {"unit": {"deployed": True, "path": "/etc/systemd/system/vllm.service", "digest": vs.text_digest(text),
                     "dropins": [], "state": dict({"verdict": verdict, "line": verdict}, **state)},
            "effective": eff, "vllm": {"venv": "/opt/vllm/venv", "version": "0.33.0"},
            "http": {"checked": False, "why": "service not running"}}


GPUS = {"count": 8, "backend": "snapshot", "driver_version": "580.95.05",
        "gpus": [{"name": "NVIDIA RTX PRO 6000 Blackwell Workstation Edition"}] * 8,
        "interconnect": {"class": "pcie_cross_numa", "worst_path": "SYS"}}


def test_report_clean():
    report = vs.build_report("box", {"unit_text": UNIT, "sources": SOURCES, "vllm_version": "0.33.0"}, _deployed(UNIT), GPUS)
    assert report["drift"] is False and report["problems"] == [] and report["read_only"] is True
    assert report["lines"][0] == "box: NO DRIFT"
    assert any("identical to what the role renders now" in line for line in report["lines"])
    assert any(line.strip().startswith("GPUs     8x NVIDIA RTX PRO 6000") and "worst path SYS" in line
               for line in report["lines"])
    assert any("vLLM     version 0.33.0" in line for line in report["lines"])


def test_report_names_the_profile_and_where_it_came_from():
    desired = {"unit_text": UNIT, "sources": SOURCES, "vllm_version": "0.33.0",
               "profile_origin": "glm5 (profiles/glm5.yml, shipped with the collection)"}
    lines = vs.build_report("box", desired, _deployed(UNIT), GPUS)["lines"]
    assert "  profile  glm5 (profiles/glm5.yml, shipped with the collection), set by vllm_service_profile" in lines
    desired["profile_origin"] = "/srv/profiles/mine.yml (your file)"
    lines = vs.build_report("box", desired, _deployed(UNIT), GPUS)["lines"]
    assert "  profile  /srv/profiles/mine.yml (your file), set by vllm_service_profile" in lines


def test_report_hand_edited_and_loading():
    edited = UNIT.replace("NCCL_PROTO=LL", "NCCL_PROTO=Simple")
    deployed = _deployed(edited, verdict="running", uptime_s=300)
    deployed["http"] = {"checked": True, "url": "http://127.0.0.1:8000", "health": {"status": None, "error": "refused"},
                        "models": {"status": None, "error": "refused", "ids": [], "with_api_key": True}}
    report = vs.build_report("box", {"unit_text": UNIT, "sources": SOURCES}, deployed, GPUS)
    assert report["drift_names"] == ["NCCL_PROTO"]
    assert report["lines"][0].startswith("box: DRIFT, 1 setting(s) differ: NCCL_PROTO; PROBLEMS: not healthy yet")
    assert any("DIFFERS from what the role renders now" in line for line in report["lines"])
    assert any("LOADING or stuck, 5 min after the start" in line for line in report["lines"])
    assert any("DIFFERS NCCL_PROTO" in line and "deployed=Simple desired=LL from policy:pcie_latency" in line
               for line in report["lines"])


def test_report_nothing_deployed_and_no_gpus():
    deployed = {"unit": {"deployed": False, "path": "/etc/systemd/system/vllm.service",
                         "state": {"verdict": "not_deployed", "line": "not deployed"}},
                "effective": {}, "vllm": {"venv": "/opt/vllm/venv", "version": None},
                "http": {"checked": False, "why": "service not running"}}
    report = vs.build_report("bare", {"unit_text": UNIT, "sources": SOURCES, "vllm_version": "0.33.0",
                                      "nccl": {"notes": ["0 GPU(s): no inter-GPU collectives, so no NCCL settings."]}},
                             deployed, {"count": 0, "backend": "none"})
    assert report["deployed"] is False and report["drift"] is True
    assert report["lines"][0].startswith("bare: NOT DEPLOYED")
    text = "\n".join(report["lines"])
    assert "unit     NOT DEPLOYED" in text and "vLLM     NOT INSTALLED" in text
    assert "GPUs     none read (backend none)" in text
    assert "policy   0 GPU(s)" in text
    assert "MISSING NCCL_PROTO" in text and "other unit directives: 8 would be deployed" in text


def test_report_failed_service_is_a_problem():
    report = vs.build_report("box", {"unit_text": UNIT, "sources": SOURCES}, _deployed(UNIT, verdict="failed"), GPUS)
    assert report["drift"] is False and report["problems"] == ["service failed"]
    assert report["lines"][0] == "box: NO DRIFT; PROBLEMS: service failed"


def _front(**over):
    from ansible_collections.moeops.inference.plugins.module_utils._policy import api_front
    return api_front.front("vllm", over.pop("host", "0.0.0.0"), 8000, 8001, list(api_front.DEFAULT_ROUTES), ["10.0.0.0/8"],
                           "", "", 3600, 30, 131072, client_connections=256, client_timeout=10)


def test_report_front_identical_differs_and_left_over():
    front = _front()
    desired = {"unit_text": UNIT, "sources": SOURCES, "vllm_version": "0.33.0", "front": front, "front_config_text": "conf\n"}
    deployed = _deployed(UNIT)
    deployed["front"] = {"unit": "vllm-front", "installed": True, "active": "active", "config_digest": vs.text_digest("conf\n")}
    report = vs.build_report("box", desired, deployed, GPUS)
    line = [x for x in report["lines"] if x.strip().startswith("front ")][0]
    assert report["drift"] is False and report["front"]["drift"] is False
    assert "vllm-front on 0.0.0.0:8000 (TLS off) -> 127.0.0.1:8001" in line and "GET /v1/models" in line
    assert "/metrics from 10.0.0.0/8" in line and "unit active, configuration identical" in line
    deployed["front"]["config_digest"] = vs.text_digest("edited\n")
    report = vs.build_report("box", desired, deployed, GPUS)
    assert report["drift_names"] == ["front"] and report["lines"][0].startswith("box: DRIFT")
    # A loopback host now, a front still installed: the deploy would remove it.
    desired["front"] = _front(host="127.0.0.1")
    report = vs.build_report("box", desired, deployed, GPUS)
    assert report["drift_names"] == ["front"]
    assert any("vllm-front installed, but the deploy would remove it" in x for x in report["lines"])
    deployed["front"] = {"unit": "vllm-front", "installed": False}
    report = vs.build_report("box", desired, deployed, GPUS)
    assert report["drift"] is False and any("front    none: vllm_service_host 127.0.0.1 is loopback" in x
                                            for x in report["lines"])
