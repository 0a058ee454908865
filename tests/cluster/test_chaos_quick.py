"""A quick subset of the chaos suite (``bench/chaos.py``): three scenarios, one seed each, must be exact.

Each run starts a fresh 3-member local cluster, runs one EXACTLY_ONCE job
with windowed, keyed-stateful and map-sink state, injects the scenario's
fault at a seeded moment after the first snapshot and compares the
committed files and the map with plain Python (see the bench module's
docstring). A run that is not exact fails here with its differences and the
directory under ``bench/out/`` that keeps the members' logs; replay it with
``python bench/chaos.py --scenario NAME --seed 1``.
"""

from __future__ import annotations

import pathlib
import sys
from types import ModuleType

import pytest

BENCH = pathlib.Path(__file__).resolve().parents[2] / "bench"

pytestmark = pytest.mark.timeout(240)


def _chaos() -> ModuleType:
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    import chaos

    return chaos


@pytest.mark.parametrize("scenario", ["kill-coordinator", "pause-coordinator-sbp", "restart-on-address"])
def test_the_job_survives_the_fault_with_exactly_plain_pythons_output(scenario: str) -> None:
    chaos = _chaos()
    result = chaos.run_once(chaos.SCENARIOS[scenario], seed=1)
    assert result.verdict == "exact", chaos._one_line(result) + f"; evidence in {result.evidence}"
    assert result.recovery_s is not None, "the job did not restart after the fault"
