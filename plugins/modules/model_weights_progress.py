#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, moeops.inference contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: model_weights_progress
short_description: Report the bytes done of a model download that M(moeops.inference.model_weights) runs
version_added: 0.2.0
description:
  - Reads the progress file of a running M(moeops.inference.model_weights) download (started with C(async)),
    waits up to O(wait) seconds for it to finish, and reports the bytes on disk, the expected total, percent,
    rate and ETA.
  - The bytes are measured on disk (files still being written included), so the report holds whatever the
    download tool does.
  - Meant to be looped with C(loop_control.break_when) on RV(finished) and C(loop_control.label) showing RV(msg),
    so that each poll prints one line.
author:
  - moeops.inference contributors (@moeops)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: Only reads.
  diff_mode:
    support: none
  platform:
    platforms: posix
options:
  progress_file:
    description: The O(moeops.inference.model_weights#module:progress_file) of the download.
    type: path
    required: true
  wait:
    description: Seconds to wait for the download to finish before reporting (0 reports at once).
    type: int
    default: 30
  job_file:
    description:
      - The C(results_file) that the C(async) task of the download registered (the async job's status file).
      - Until the download has written its O(progress_file) (it does so after it has planned the download), the
        poll reports RV(state) C(starting), not finished, for as long as this file says that the job runs. Without
        it, a progress file not yet written is reported as finished once O(wait) has passed.
    type: path
seealso:
  - module: moeops.inference.model_weights
"""

EXAMPLES = r"""
- name: Download progress
  moeops.inference.model_weights_progress:
    progress_file: /var/lib/moeops/model_weights/kimi-k2.5-int4.progress.json
    job_file: "{{ job_file }}"
    wait: 60
  register: poll
  loop: "{{ range(1440) | list }}"
  loop_control:
    label: "{{ poll.msg | default('starting') }}"
    break_when: [poll.finished]
  vars:
    job_file: "{{ download_job.results_file }}"  # the async task's registered result
"""

RETURN = r"""
finished:
  description: Whether the download ended (done, failed, or its process is gone).
  returned: always
  type: bool
state:
  description: V(running), V(verifying), V(done), V(failed), V(gone) (the process died without a word), V(starting) (no
    progress file yet, and O(job_file) says the job runs) or V(unknown) (no progress file).
  returned: always
  type: str
bytes_done:
  description: Bytes on disk in the download's directory.
  returned: always
  type: int
bytes_total:
  description: Bytes the source says the model has; null until the source answered.
  returned: always
  type: int
bytes_fetched:
  description: Bytes added since the download started (what a resume really fetched).
  returned: always
  type: int
percent:
  description: bytes_done of bytes_total.
  returned: always
  type: float
rate_bytes_per_s:
  description: Average rate since the download started.
  returned: always
  type: int
eta_s:
  description: Seconds left at that rate; null when unknown.
  returned: always
  type: int
msg:
  description: All that on one line.
  returned: always
  type: str
  sample: "running: 412.3 GiB of 554.1 GiB (74.4%) at 187.2 MiB/s ETA 0h12m"
"""

import json
import os
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.moeops.inference.plugins.module_utils._weights import model_weights as mw
from ansible_collections.moeops.inference.plugins.module_utils._common import state_files

FINAL_STATES = ("done", "failed")


def _read(path):
    data = state_files.read_json(path)
    return data if isinstance(data, dict) else None


def _alive(pid):
    try:
        os.kill(int(pid), 0)
    except (OSError, TypeError, ValueError):
        return False
    return True


def _job_runs(path):
    """Whether the async job whose status file is `path` still runs: async_wrapper writes {"started": true,
    "finished": false, ...} first and the module's result when it ends; a file caught mid-write counts as running."""
    if not path or not os.path.exists(path):
        return False
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, ValueError):
        return True
    return bool(isinstance(data, dict) and data.get("started") and not data.get("finished"))


def _state(data, job_file=None):
    if data is None:
        # No progress file yet: the job is still planning its download (importing its tool, asking the source).
        return "starting" if _job_runs(job_file) else "unknown"
    state = data.get("state", "unknown")
    if state not in FINAL_STATES and not _alive(data.get("pid")):
        return "gone"
    return state


def main():
    module = AnsibleModule(
        argument_spec=dict(progress_file=dict(type="path", required=True), wait=dict(type="int", default=30),
                           job_file=dict(type="path")),
        supports_check_mode=True,
    )
    path, deadline = module.params["progress_file"], time.time() + max(module.params["wait"], 0)
    job_file = module.params["job_file"]
    data = _read(path)
    # unknown: no progress file and no running job known; waited for, then reported as finished so that the
    # async_status after the poll loop says what happened. starting: the job runs but has not written it yet.
    while _state(data, job_file) in ("running", "verifying", "starting", "unknown") and time.time() < deadline:
        time.sleep(min(2.0, max(deadline - time.time(), 0)))
        data = _read(path)
    state = _state(data, job_file)
    data = data or {}
    measure = data.get("measure")
    done = mw.bytes_on_disk(measure) if measure and os.path.isdir(measure) else 0
    end = data.get("finished") or time.time()
    report = mw.progress_report(done, data.get("total"), int(data.get("baseline") or 0),
                                end - float(data.get("started") or end), state)
    module.exit_json(changed=False, finished=state not in ("running", "verifying", "starting"), state=state, **report)


if __name__ == "__main__":
    main()
