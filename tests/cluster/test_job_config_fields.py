"""JobConfig has only settings that something reads (issue 13 item 9).

``max_processor_accumulated_records`` was documented but enforced by no
processor, so it is gone: setting it is refused, in Python and over REST,
instead of being silently ignored.
"""

from __future__ import annotations

import dataclasses

import pytest

from jetlet import config, errors
from jetlet._cluster import job_service


def test_given_the_unenforced_accumulation_limit_when_set_then_refused_not_ignored() -> None:
    assert "max_processor_accumulated_records" not in {f.name for f in dataclasses.fields(config.JobConfig)}
    with pytest.raises(TypeError, match="max_processor_accumulated_records"):
        config.JobConfig(max_processor_accumulated_records=10)  # type: ignore[call-arg]
    with pytest.raises(errors.InvalidJobError, match="max_processor_accumulated_records") as caught:
        job_service.job_config_from_dict({"max_processor_accumulated_records": 10})
    assert "is not a JobConfig field" in str(caught.value)


def test_given_a_record_written_before_the_limit_was_removed_then_it_still_loads() -> None:
    # given the config of a job recorded when every JobConfig carried the limit's "no limit" value
    recorded = {
        **job_service.job_config_to_dict(config.JobConfig(name="old")),
        "max_processor_accumulated_records": -1,
    }
    # then it loads as the same config
    assert job_service.job_config_from_dict(recorded) == config.JobConfig(name="old")
