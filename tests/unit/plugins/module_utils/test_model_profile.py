# -*- coding: utf-8 -*-
"""Model profiles: the shipped ones validate, constraints apply per compute capability, the
vllm serve arguments carry each recipe's flags."""
from __future__ import annotations

import copy
import glob
import os
import re

import pytest
import yaml

from ansible_collections.moeops.inference.plugins.module_utils._facts import gpu_topology as topo
from ansible_collections.moeops.inference.plugins.module_utils._policy import model_profile as mp
from conftest import PROFILES, load_json
from conftest import shipped_profile as profile


def facts(name):
    return topo.from_snapshot(load_json("constructed", name + ".json"), name)


def test_every_shipped_profile_validates():
    files = sorted(glob.glob(os.path.join(PROFILES, "*.yml")))
    assert [os.path.basename(f) for f in files] == ["glm5.yml", "kimi_k25.yml", "minimax_m25.yml"]
    for f in files:
        with open(f) as fh:
            data = yaml.safe_load(fh)
        assert "name" in data and "vllm_model_profile" not in data, f  # the file is the profile mapping itself
        assert mp.validate_profile(data) == [], f


def test_validate_profile_names_every_bad_key():
    bad = copy.deepcopy(profile("kimi_k25"))
    bad["max_model_len"] = "long"
    bad["trust_remote_code"] = "yes"
    bad["tool_parser"] = "kimi_k2"
    del bad["served_name"]
    problems = mp.validate_profile(bad)
    assert any(p.startswith("vllm_service_profile.max_model_len: must be a integer") for p in problems)
    assert any(p.startswith("vllm_service_profile.trust_remote_code: must be a boolean") for p in problems)
    assert any(p.startswith("vllm_service_profile.tool_parser: not a profile key") for p in problems)
    assert any(p.startswith("vllm_service_profile.served_name: required") for p in problems)
    assert len(problems) == 4


@pytest.mark.parametrize("key,value,needle", [
    ("gpu_memory_utilization", 1.5, "at most 1"),
    ("source", "relative/dir/model", "neither a Hugging Face repo id"),
    ("kv_cache_dtype", "fp4", "not one of vLLM's"),
    ("min_gpu_memory_gb", True, "must be a integer or number"),
    ("extra_args", ["--max-num-seqs", 64], "every element must be a string"),
])
def test_validate_profile_values(key, value, needle):
    bad = dict(profile("minimax_m25"), **{key: value})
    problems = mp.validate_profile(bad, "vllm_model_profile")
    assert len(problems) == 1 and needle in problems[0] and problems[0].startswith("vllm_model_profile.%s" % key)


def test_not_a_profile():
    assert "expected a model profile" in mp.validate_profile("kimi_k25")[0]
    assert "an empty mapping" in mp.validate_profile({})[0]


def test_glm5_on_compute_capability_12_keeps_the_kv_dtype_auto_and_no_custom_all_reduce():
    """vLLM's only sparse-MLA backend on 12.x takes fp8_ds_mla, which auto resolves to; bfloat16 has none there."""
    glm = profile("glm5")
    args = mp.serve_args(glm, 8, "127.0.0.1", 8000, ccs=mp.compute_capabilities(facts("rtxpro6000-x8-2numa")))
    assert "--kv-cache-dtype" not in args
    assert "--disable-custom-all-reduce" in args
    settings = mp.effective_settings(glm, ["12.0"])
    assert settings["kv_cache_dtype"] == "auto"
    assert settings["applied"] and "FLASHINFER_MLA_SPARSE_SM120" in settings["applied"][0]


def test_glm5_elsewhere_has_no_constraint():
    glm = profile("glm5")
    args = mp.serve_args(glm, 8, "127.0.0.1", 8000, ccs=["10.0"])
    assert "--kv-cache-dtype" not in args and "--disable-custom-all-reduce" not in args
    assert mp.effective_settings(glm, ["10.0"])["applied"] == []


def test_recipe_flags_in_the_arguments():
    kimi = mp.serve_args(profile("kimi_k25"), 8, "127.0.0.1", 8000, ccs=["12.0"])
    assert kimi[:2] == ["serve", "moonshotai/Kimi-K2.5"]
    assert "--trust-remote-code" in kimi and kimi[kimi.index("--tool-call-parser") + 1] == "kimi_k2"
    assert kimi[kimi.index("--mm-encoder-tp-mode") + 1] == "data"
    glm = mp.serve_args(profile("glm5"), 8, "0.0.0.0", 8001)
    assert glm[glm.index("--tool-call-parser") + 1] == "glm47" and glm[glm.index("--reasoning-parser") + 1] == "glm45"
    assert glm[glm.index("--chat-template-content-format") + 1] == "string" and "--trust-remote-code" not in glm
    mm = mp.serve_args(profile("minimax_m25"), 4, "127.0.0.1", 8000, extra_args=["--max-num-seqs", "32"])
    assert mm[mm.index("--reasoning-parser") + 1] == "minimax_m2_append_think"
    assert mm[-4:] == ["--port", "8000", "--max-num-seqs", "32"]  # inventory extra args last
    assert mm[mm.index("--tensor-parallel-size") + 1] == "4"


def test_overrides_and_staged_model_path():
    args = mp.serve_args(profile("kimi_k25"), 8, "127.0.0.1", 8000, max_model_len=65536, gpu_memory_utilization=0.8,
                         model="/srv/models/kimi")
    assert args[1] == "/srv/models/kimi"
    assert args[args.index("--max-model-len") + 1] == "65536"
    assert args[args.index("--gpu-memory-utilization") + 1] == "0.8"


def test_chat_template_kwargs_are_json():
    p = dict(profile("glm5"), default_chat_template_kwargs={"enable_thinking": False})
    args = mp.serve_args(p, 8, "127.0.0.1", 8000)
    assert args[args.index("--default-chat-template-kwargs") + 1] == '{"enable_thinking":false}'


def test_dimensions_from_config_json_first_then_profile():
    kimi = profile("kimi_k25")
    assert mp.model_dimensions(kimi)["sources"] == {
        "hidden_size": "profile", "num_attention_heads": "profile", "num_key_value_heads": "profile"}
    # Kimi-K2.5's config.json keeps the language model's dimensions in text_config.
    config = {"architectures": ["KimiK25"], "text_config": {"hidden_size": 7000, "num_attention_heads": 56}}
    dims = mp.model_dimensions(kimi, config)
    assert (dims["hidden_size"], dims["num_attention_heads"], dims["num_key_value_heads"]) == (7000, 56, 56)
    # No key/value head count beside the attention heads: as many as those (vLLM's reading), not the profile's 64.
    assert dims["sources"] == {"hidden_size": "config.json", "num_attention_heads": "config.json",
                               "num_key_value_heads": "config.json"}
    assert mp.model_dimensions(kimi, {"hidden_size": True})["sources"]["hidden_size"] == "profile"
    # The other names vLLM reads (ChatGLM-style multi_query_group_num), at the top level or in text_config.
    assert mp.model_dimensions(kimi, {"num_attention_heads": 32, "multi_query_group_num": 2})["num_key_value_heads"] == 2
    assert mp.model_dimensions(kimi, {"text_config": {"num_kv_heads": 4}})["num_key_value_heads"] == 4
    # Neither count in config.json: both from the profile.
    only_hidden = mp.model_dimensions(kimi, {"hidden_size": 7168})
    assert (only_hidden["num_key_value_heads"], only_hidden["sources"]["num_key_value_heads"]) == (64, "profile")


def test_constraint_conflict_with_extra_args():
    glm = profile("glm5")
    problems = mp.constraint_conflicts(glm, ["12.0"], ["--kv-cache-dtype", "bfloat16"])
    assert len(problems) == 1 and problems[0].startswith("vllm_service_extra_args: --kv-cache-dtype bfloat16 contradicts")
    assert mp.constraint_conflicts(glm, ["12.0"], ["--kv-cache-dtype=auto"]) == []
    assert mp.constraint_conflicts(glm, ["10.0"], ["--kv-cache-dtype", "bfloat16"]) == []


def test_bad_constraint_is_named():
    p = dict(profile("glm5"), compute_capability_constraints=[{"compute_capabilities": [12.0], "kv": "x"}])
    problems = mp.validate_profile(p)
    assert any("compute_capability_constraints[0].kv: not a constraint key" in x for x in problems)
    assert any("compute_capability_constraints[0].reason: required" in x for x in problems)
    assert any("compute_capability_constraints[0].compute_capabilities: a non-empty list of strings" in x for x in problems)


# --- loading profiles: profile_path, load_profile_text, known_profiles, load_profile --------------------------

TINY = """\
name: tiny
source: org/tiny
served_name: tiny
quantization: bf16
max_model_len: 4096
gpu_memory_utilization: 0.5
weights_size_gb: 1
min_gpu_memory_gb: 2
hidden_size: 64
num_attention_heads: 4
"""


def test_known_profiles_are_the_shipped_files():
    assert mp.known_profiles(PROFILES) == ["glm5", "kimi_k25", "minimax_m25"]


def test_known_profiles_ignores_what_is_not_a_profile_name(tmp_path):
    for name in ("b_2.yml", "a.yml", "Upper.yml", "dash-ed.yml", "other.yaml", "notes.txt"):
        (tmp_path / name).write_text(TINY)
    (tmp_path / "dir.yml").mkdir()
    assert mp.known_profiles(str(tmp_path)) == ["a", "b_2"]
    assert mp.known_profiles(str(tmp_path / "missing")) == []


def test_profile_path_of_a_name_and_of_an_absolute_path(tmp_path):
    assert mp.profile_path("glm5", PROFILES) == os.path.join(PROFILES, "glm5.yml")
    # An absolute path is taken as it is, even before it exists (load_profile reports that).
    assert mp.profile_path(str(tmp_path / "mine.yml"), PROFILES) == str(tmp_path / "mine.yml")


def test_profile_path_unknown_name_lists_the_known_ones():
    with pytest.raises(mp.ProfileError) as err:
        mp.profile_path("llama", PROFILES)
    assert str(err.value) == ("vllm_service_profile: unknown model profile 'llama'; known profiles: glm5, kimi_k25, "
                              "minimax_m25; the absolute path of a profile file on the controller works too")


@pytest.mark.parametrize("value", ["profiles/glm5.yml", "glm5.yml", "./glm5", "~/glm5.yml", "GLM5", "glm-5"])
def test_profile_path_refuses_a_relative_path_or_another_string(value):
    with pytest.raises(mp.ProfileError) as err:
        mp.profile_path(value, PROFILES)
    assert str(err.value) == (
        "vllm_service_profile: %r is not a profile name or an absolute path; expected the name of a profile shipped "
        "with the collection (glm5, kimi_k25, minimax_m25) or the absolute path of a profile file on the controller "
        "(a relative path is not accepted: write it as an absolute path)" % value)


@pytest.mark.parametrize("value", ["glm5\nExecStartPre=/bin/id", "/srv/p.yml\r[Service]", "kimi_k25\0"])
def test_profile_path_refuses_a_line_break_without_echoing_it(value):
    with pytest.raises(mp.ProfileError) as err:
        mp.profile_path(value, PROFILES)
    assert str(err.value).startswith("vllm_service_profile: a profile name or path cannot span lines; expected the name")
    assert "ExecStart" not in str(err.value) and "Service" not in str(err.value)


@pytest.mark.parametrize("value", [None, "", " \t"])
def test_profile_path_refuses_no_profile_listing_the_shipped_ones(value):
    """There is no default model: nothing named is refused with the shipped names (read from the directory) and the
    path form."""
    with pytest.raises(mp.ProfileError) as err:
        mp.profile_path(value, PROFILES)
    assert str(err.value) == (
        "vllm_service_profile: not set, and moeops.inference deploys no model by default; set vllm_service_profile (in "
        "the inventory, or -e vllm_service_profile=NAME) to the name of a profile shipped with the collection (glm5, "
        "kimi_k25, minimax_m25) or the absolute path of a profile file on the controller")
    assert mp.unset_problems(value, PROFILES) == [str(err.value)]


def test_no_profile_names_the_profiles_the_directory_holds(tmp_path):
    """The list is the directory's, not a copy: a profile added there is named."""
    for name in ("alpha", "beta_2"):
        (tmp_path / (name + ".yml")).write_text("name: x\n")
    (tmp_path / "README.md").write_text("not a profile\n")
    assert "(alpha, beta_2)" in mp.not_set(str(tmp_path))
    assert mp.unset_problems("alpha", str(tmp_path)) == []


def test_profile_origin_names_a_shipped_profile_by_name_and_file_and_a_users_by_path():
    assert mp.profile_origin("glm5") == "glm5 (profiles/glm5.yml, shipped with the collection)"
    assert mp.profile_origin("/srv/profiles/mine.yml") == "/srv/profiles/mine.yml (your file)"


@pytest.mark.parametrize("value, shown", [(25, "an integer (25)"), (True, "a boolean (True)"),
                                          (2.5, "a float (2.5)"), ({"name": "x"}, "a mapping ({'name': 'x'})"),
                                          (["glm5"], "a list (['glm5'])"), (b"glm5", "a bytes (b'glm5')")])
def test_profile_path_refuses_a_non_string(value, shown):
    with pytest.raises(mp.ProfileError) as err:
        mp.profile_path(value, PROFILES)
    assert str(err.value) == ("vllm_service_profile: expected the name of a profile shipped with the collection "
                              "(glm5, kimi_k25, minimax_m25) or the absolute path of a profile file on the controller, "
                              "got %s" % shown)


def test_profile_path_with_no_profiles_directory(tmp_path):
    with pytest.raises(mp.ProfileError, match=r"known profiles: none; "):
        mp.profile_path("glm5", str(tmp_path))
    with pytest.raises(mp.ProfileError, match=r"\(none found in .*\)"):
        mp.profile_path(7, str(tmp_path))


def test_load_profile_text_returns_the_mapping():
    assert mp.load_profile_text(TINY, "t.yml") == yaml.safe_load(TINY)


def test_load_profile_text_keeps_templates_as_text():
    text = TINY.replace("name: tiny\n", "name: \"{{ lookup('pipe', 'id') }}\"\n")
    assert mp.load_profile_text(text, "t.yml")["name"] == "{{ lookup('pipe', 'id') }}"


def test_load_profile_text_not_yaml_gives_line_and_column():
    with pytest.raises(mp.ProfileError) as err:
        mp.load_profile_text("name: tiny\nsource: [org/tiny\n", "/p/bad.yml")
    assert str(err.value).startswith("vllm_service_profile: /p/bad.yml is not valid YAML at line 3, column 1: ")
    with pytest.raises(mp.ProfileError) as err:
        mp.load_profile_text("name: tiny\n  source: x: y\n", "/p/bad.yml")
    assert str(err.value) == ("vllm_service_profile: /p/bad.yml is not valid YAML at line 2, column 9: "
                              "mapping values are not allowed here")


@pytest.mark.parametrize("text, message", [
    ("- name: tiny\n- source: org/tiny\n",
     "/p/x.yml holds a list, not a mapping; expected a model profile (a mapping of the keys in docs/model-profiles.md)"),
    ("kimi_k25\n", "/p/x.yml holds a string, not a mapping; expected a model profile (a mapping of the "
     "keys in docs/model-profiles.md)"),
    ("42\n", "/p/x.yml holds an integer, not a mapping; expected a model profile (a mapping of the keys in "
     "docs/model-profiles.md)"),
    ("", "/p/x.yml is empty; expected a model profile (a mapping of the keys in docs/model-profiles.md)"),
    ("---\n# only a comment\n", "/p/x.yml is empty; expected a model profile (a mapping of the keys in "
     "docs/model-profiles.md)"),
])
def test_load_profile_text_not_a_mapping(text, message):
    with pytest.raises(mp.ProfileError) as err:
        mp.load_profile_text(text, "/p/x.yml")
    assert str(err.value) == "vllm_service_profile: " + message


def test_load_profile_text_old_wrapped_file():
    wrapped = "vllm_model_profile:\n" + "".join("  " + line + "\n" for line in TINY.splitlines())
    with pytest.raises(mp.ProfileError) as err:
        mp.load_profile_text(wrapped, "/p/old.yml")
    assert str(err.value) == ("vllm_service_profile: /p/old.yml holds its profile under vllm_model_profile:, the "
                              "vars-file form of old; remove that key and dedent the rest so that the file is the "
                              "profile mapping itself")


def test_load_profile_text_invalid_profile_lists_every_problem():
    text = TINY.replace("max_model_len: 4096", "max_model_len: long").replace("served_name: tiny\n", "") + "tp: 8\n"
    with pytest.raises(mp.ProfileError) as err:
        mp.load_profile_text(text, "/p/x.yml")
    message = str(err.value)
    assert message.startswith("vllm_service_profile: /p/x.yml is not a valid model profile: ")
    for problem in ("vllm_service_profile.tp: not a profile key", "vllm_service_profile.served_name: required",
                    "vllm_service_profile.max_model_len: must be a integer, got str 'long'"):
        assert problem in message
    assert message.count("vllm_service_profile.") == 3


def test_load_profile_text_with_keys_that_are_not_strings():
    with pytest.raises(mp.ProfileError) as err:
        mp.load_profile_text(TINY + "1: one\nfalse: no\n", "/p/x.yml")
    assert "vllm_service_profile.1: not a profile key" in str(err.value)
    assert "vllm_service_profile.False: not a profile key" in str(err.value)


@pytest.mark.parametrize("name", ["glm5", "kimi_k25", "minimax_m25"])
def test_load_profile_of_each_shipped_name(name):
    loaded = mp.load_profile(name, PROFILES)
    assert loaded == profile(name) and mp.validate_profile(loaded, "vllm_service_profile") == []


def test_load_profile_from_an_absolute_path(tmp_path):
    path = tmp_path / "mine.yml"
    path.write_text(TINY)
    assert mp.load_profile(str(path), PROFILES)["served_name"] == "tiny"


def test_load_profile_messages_name_the_file(tmp_path):
    with pytest.raises(mp.ProfileError) as err:
        mp.load_profile(str(tmp_path / "missing.yml"), PROFILES)
    assert str(err.value) == "vllm_service_profile: the profile file %s does not exist" % (tmp_path / "missing.yml")
    with pytest.raises(mp.ProfileError) as err:
        mp.load_profile(str(tmp_path), PROFILES)
    assert str(err.value) == "vllm_service_profile: %s is a directory, not a profile file" % tmp_path
    (tmp_path / "binary.yml").write_bytes(b"name: \xff\xfe\n")
    with pytest.raises(mp.ProfileError) as err:
        mp.load_profile(str(tmp_path / "binary.yml"), PROFILES)
    assert str(err.value) == ("vllm_service_profile: %s is not UTF-8 text (byte 6): not a profile file"
                              % (tmp_path / "binary.yml"))
    # A shipped name is named with its file in messages about the content.
    (tmp_path / "broken.yml").write_text("- a\n")
    with pytest.raises(mp.ProfileError, match=r"^vllm_service_profile: profile broken \(%s\) holds a list"
                       % re.escape(str(tmp_path / "broken.yml"))):
        mp.load_profile("broken", str(tmp_path))


def test_load_profile_unreadable_file(tmp_path, refuse_open):
    path = tmp_path / "secret.yml"
    path.write_text(TINY)
    refuse_open(path)
    with pytest.raises(mp.ProfileError) as err:
        mp.load_profile(str(path), PROFILES)
    assert str(err.value) == "vllm_service_profile: cannot read the profile file %s: Permission denied" % path


def test_a_canary_is_checked_key_by_key():
    from ansible_collections.moeops.inference.plugins.module_utils._policy import model_profile as mp
    base = dict(profile("kimi_k25"))
    assert mp.validate_profile(dict(base, canary={"prompt": "q", "max_tokens": 8, "expect": r"\b42\b"})) == []
    problems = mp.validate_profile(dict(base, canary={"max_tokens": 0, "expect": "(", "extra": 1}))
    assert "vllm_service_profile.canary.prompt: required" in problems
    assert "vllm_service_profile.canary.max_tokens: must be 1 to 4096, got 0" in problems
    assert any(p.startswith("vllm_service_profile.canary.expect: not a regular expression") for p in problems)
    assert any(p.startswith("vllm_service_profile.canary.extra: not a canary key") for p in problems)
    assert mp.canary({"canary": {"prompt": "q"}})["max_tokens"] == mp.DEFAULT_CANARY["max_tokens"]


# --- issue 28: a line break in any profile string is refused when the profile is loaded, by file and key ---------

STRING_KEYS = sorted(k for k, (types, _req, _what) in mp.PROFILE_KEYS.items() if types == (str,))


@pytest.mark.parametrize("breaker, what", [("\n", "a newline (\\n)"), ("\r", "a carriage return (\\r)")])
@pytest.mark.parametrize("key", STRING_KEYS)
def test_a_line_break_in_any_string_key_is_refused_naming_the_file_and_key(key, breaker, what):
    data = yaml.safe_load(TINY)
    data[key] = "x" + breaker + "[Service]" + breaker + "ExecStartPre=/bin/sh -c id"
    with pytest.raises(mp.ProfileError) as err:
        mp.load_profile_text(yaml.safe_dump(data), "/p/evil.yml")
    message = str(err.value)
    assert message.startswith("vllm_service_profile: /p/evil.yml is not a valid model profile: ")
    assert "vllm_service_profile.%s contains %s: every string of a profile is one line" % (key, what) in message
    assert "ExecStartPre" not in message and "[Service]" not in message
    assert message.count("vllm_service_profile.%s" % key) == 1  # that one message, no second rule echoes it


@pytest.mark.parametrize("extra, place", [
    ("extra_args: [--enforce-eager, \"--x\\nExecStartPre=/bin/id\"]\n", "extra_args[1]"),
    ("chat_template: \"{% for m in messages %}\\n{{ m.content }}\\n{% endfor %}\"\n", "chat_template"),
    ("default_chat_template_kwargs: {thinking: \"a\\rb\"}\n", "default_chat_template_kwargs.thinking"),
    ("canary: {prompt: \"one\\ntwo\"}\n", "canary.prompt"),
    ("compute_capability_constraints: [{compute_capabilities: ['9.0'], reason: \"r\\nExecStartPre=/bin/id\"}]\n",
     "compute_capability_constraints[0].reason"),
])
def test_a_line_break_at_any_depth_is_named_by_its_place(extra, place):
    with pytest.raises(mp.ProfileError) as err:
        mp.load_profile_text(TINY + extra, "/p/x.yml")
    assert "vllm_service_profile.%s contains " % place in str(err.value)
    assert "ExecStartPre" not in str(err.value) and "two" not in str(err.value)


def test_a_key_that_spans_lines_is_not_shown():
    with pytest.raises(mp.ProfileError) as err:
        mp.load_profile_text(TINY + "\"x\\nExecStartPre=/bin/id\": 1\n", "/p/x.yml")
    assert "vllm_service_profile has a key that spans lines (not shown)" in str(err.value)
    assert "ExecStartPre" not in str(err.value)


@pytest.mark.parametrize("text", [
    "HF_TOKEN=hf_SECRETVALUE\nAWS_SECRET=abcSECRETVALUE\n",  # an env file: one multi-line YAML string
    "root:x:0:0:root:/root:/bin/bash\ndaemon:x:1:1:SECRETVALUE:/usr/sbin:/usr/sbin/nologin\n",
    "- SECRETVALUE\n- another line\n",
    "[default]\naws_access_key_id = SECRETVALUE\n",
])
def test_a_file_that_is_no_profile_is_never_echoed(tmp_path, text):
    path = tmp_path / "not-a-profile"
    path.write_text(text)
    with pytest.raises(mp.ProfileError) as err:
        mp.load_profile(str(path), PROFILES)
    assert str(err.value).startswith("vllm_service_profile: %s " % path)
    assert "SECRETVALUE" not in str(err.value) and "root:x" not in str(err.value)


def test_a_known_key_of_the_wrong_type_shows_only_a_short_one_line_value():
    data = yaml.safe_load(TINY)
    data.update(max_model_len="long", hidden_size={"secret": "SECRETVALUE"}, num_attention_heads="y" * 200)
    problems = mp.validate_profile(data)
    assert "vllm_service_profile.max_model_len: must be a integer, got str 'long'" in problems
    assert "vllm_service_profile.hidden_size: must be a integer, got a mapping of 1 key(s)" in problems
    assert "vllm_service_profile.num_attention_heads: must be a integer, got a string of 200 characters" in problems
    assert "SECRETVALUE" not in " ".join(problems)
