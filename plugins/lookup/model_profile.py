# -*- coding: utf-8 -*-
# Copyright: (c) 2026, moeops.inference contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: model_profile
author:
  - moeops.inference contributors (@moeops)
version_added: 0.2.0
short_description: Load a model profile shipped with the collection, or one from a file
description:
  - Returns the model profile (the mapping described in the collection's C(docs/model-profiles.md)) that each term
    stands for, read on the controller and checked against the profile schema.
  - A term is either the name of a profile shipped with the collection, such as V(kimi_k25), V(glm5) or
    V(minimax_m25) (lower case letters, digits and V(_); the file C(profiles/<name>.yml) of the collection, found
    both in a checkout and in an installed collection), or the absolute path of a profile file on the controller.
  - A profile file holds the profile mapping itself, at its top level.
  - The file is parsed as plain YAML. Nothing in it is templated, so a value such as C({{ inventory_hostname }}) is
    returned as that literal text, however the profile is used later; vault-encrypted files are not read.
  - Each error starts with C(vllm_service_profile:), the role variable that names the profile, and says what is
    wrong; an unknown name (listing the shipped names); a relative path, or a value that is not a string; a file
    that does not exist or cannot be read; text that is not YAML (with the line and column); YAML that is not a
    mapping; or a mapping that is not a valid profile (every problem, each naming C(vllm_service_profile.<key>)).
  - With one term, C(lookup) returns the profile mapping itself; C(query), or C(lookup) with C(wantlist=true),
    returns a list with one profile per term.
options:
  _terms:
    description:
      - The profiles to load, each the name of a shipped profile or the absolute path of a profile file on the
        controller.
    type: list
    elements: str
    required: true
notes:
  - The shipped profiles' names are the base names of the collection's C(profiles/*.yml) files.
  - The profile schema is in C(docs/model-profiles.md) of the collection.
"""

EXAMPLES = r"""
- name: Load the GLM-5 profile shipped with the collection
  ansible.builtin.set_fact:
    model_profile: "{{ lookup('moeops.inference.model_profile', 'glm5') }}"

- name: Show the served name of a profile of your own
  ansible.builtin.debug:
    msg: "{{ lookup('moeops.inference.model_profile', '/srv/ansible/profiles/my_model.yml').served_name }}"

- name: The memory the shipped profiles need, one profile per term
  ansible.builtin.debug:
    msg: "{{ query('moeops.inference.model_profile', 'kimi_k25', 'minimax_m25') | map(attribute='min_gpu_memory_gb') }}"
"""

RETURN = r"""
_raw:
  description:
    - One model profile per term, each the mapping read from its file, with the keys documented in
      C(docs/model-profiles.md) (for example C(name), C(source), C(served_name), C(max_model_len)).
    - With a single term, C(lookup) returns that mapping rather than a list.
  type: list
  elements: dict
"""

import os

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase
from ansible_collections.moeops.inference.plugins.module_utils._policy import model_profile

# The collection's root: plugins/lookup/<this file> is three levels below it, in a checkout and installed alike.
COLLECTION_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROFILES_DIR = os.path.join(COLLECTION_ROOT, "profiles")


class LookupModule(LookupBase):

    def run(self, terms, variables=None, **kwargs):
        self.set_options(var_options=variables, direct=kwargs)
        profiles = []
        for term in terms:
            try:
                profiles.append(model_profile.load_profile(term, PROFILES_DIR))
            except model_profile.ProfileError as exc:
                raise AnsibleLookupError(str(exc)) from None
        return profiles
