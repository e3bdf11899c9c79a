# -*- coding: utf-8 -*-
"""model_weights_progress on real files: the progress file the download writes and the async job's status file that
async_wrapper writes (its first line, then the module's result), in a temporary directory."""
from __future__ import annotations

import json
import os
import time

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.moeops.inference.plugins.modules import model_weights_progress as mwp
from conftest import ExitJson

pytestmark = pytest.mark.usefixtures("module_exits")

RUNNING_JOB = {"started": True, "finished": False, "ansible_job_id": "j1"}
ENDED_JOB = {"changed": True, "path": "/x"}  # what async_wrapper leaves when the module returned


def write(path, data):
    with open(path, "w") as f:
        f.write(data if isinstance(data, str) else json.dumps(data))
    return str(path)


def poll(**args):
    with patch_module_args(args):
        with pytest.raises(ExitJson) as exc:
            mwp.main()
    return exc.value.args[0]


def test_job_file_says_whether_the_job_runs(tmp_path):
    assert mwp._job_runs(write(tmp_path / "a", RUNNING_JOB))
    assert not mwp._job_runs(write(tmp_path / "b", ENDED_JOB))
    assert mwp._job_runs(write(tmp_path / "c", '{"started": tr'))  # caught mid-write
    assert not mwp._job_runs(str(tmp_path / "missing")) and not mwp._job_runs(None)


def test_no_progress_file_yet_while_the_job_runs_is_not_finished(tmp_path):
    """The race of issue 40's audit: the download plans (imports huggingface_hub, asks the Hub) before it writes its
    progress file; a poll in that time must not end the poll loop."""
    job = write(tmp_path / "job", RUNNING_JOB)
    t0 = time.monotonic()
    result = poll(progress_file=str(tmp_path / "progress.json"), job_file=job, wait=1)
    assert (result["state"], result["finished"]) == ("starting", False)
    assert time.monotonic() - t0 >= 1  # it waited its interval


def test_no_progress_file_and_the_job_ended_is_finished(tmp_path):
    job = write(tmp_path / "job", ENDED_JOB)
    result = poll(progress_file=str(tmp_path / "progress.json"), job_file=job, wait=0)
    assert (result["state"], result["finished"]) == ("unknown", True)
    # Without a job file, as before: reported finished, so that async_status says what happened.
    result = poll(progress_file=str(tmp_path / "progress.json"), wait=0)
    assert (result["state"], result["finished"]) == ("unknown", True)


def test_a_running_download_is_reported_with_its_bytes(tmp_path):
    measure = tmp_path / "dl"
    measure.mkdir()
    write(measure / "part", "x" * 1000)
    progress = write(tmp_path / "progress.json", {"state": "running", "pid": os.getpid(), "measure": str(measure),
                                                  "total": 4000, "baseline": 0, "started": time.time() - 2})
    result = poll(progress_file=progress, job_file=write(tmp_path / "job", RUNNING_JOB), wait=0)
    assert (result["state"], result["finished"], result["bytes_done"]) == ("running", False, 1000)
