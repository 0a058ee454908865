"""Status conditions (``metav1.Condition``) as pure functions over lists of dicts.

A condition keeps its ``lastTransitionTime`` while its ``status`` stays the
same (only its reason and message are refreshed), so ``kubectl wait
--for=condition=Ready`` and GitOps tools (Argo CD, Flux) see transitions,
not noise. Every condition carries the ``observedGeneration`` it describes.

>>> c = set_condition([], "Ready", True, "Running", "the job runs", 3, now="2026-01-01T00:00:00Z")
>>> c = set_condition(c, "Ready", True, "Running", "still", 4, now="2026-01-02T00:00:00Z")
>>> c[0]["lastTransitionTime"], c[0]["message"], c[0]["observedGeneration"]
('2026-01-01T00:00:00Z', 'still', 4)
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from typing import Any

Condition = dict[str, Any]


def now_iso() -> str:
    """The current time as an RFC 3339 timestamp in UTC, to the second (as Kubernetes writes them)."""
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def iso_from_millis(millis: int | None) -> str | None:
    """Milliseconds since the epoch as an RFC 3339 timestamp (None stays None)."""
    if millis is None:
        return None
    moment = datetime.datetime.fromtimestamp(millis / 1000, datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def set_condition(
    conditions: Sequence[Mapping[str, Any]] | None,
    kind: str,
    status: bool | None,
    reason: str,
    message: str,
    generation: int,
    now: str | None = None,
) -> list[Condition]:
    """``conditions`` with the condition ``kind`` set (``None`` status: ``Unknown``); a new list."""
    text = "Unknown" if status is None else ("True" if status else "False")
    result: list[Condition] = []
    found = False
    for old in conditions or ():
        if old.get("type") != kind:
            result.append(dict(old))
            continue
        found = True
        changed = old.get("status") != text
        result.append(
            {
                "type": kind,
                "status": text,
                "reason": reason,
                "message": message,
                "lastTransitionTime": (now or now_iso()) if changed else old.get("lastTransitionTime"),
                "observedGeneration": generation,
            }
        )
    if not found:
        result.append(
            {
                "type": kind,
                "status": text,
                "reason": reason,
                "message": message,
                "lastTransitionTime": now or now_iso(),
                "observedGeneration": generation,
            }
        )
    return result


def get_condition(conditions: Sequence[Mapping[str, Any]] | None, kind: str) -> Mapping[str, Any] | None:
    """The condition of type ``kind``, or None."""
    for condition in conditions or ():
        if condition.get("type") == kind:
            return condition
    return None


def is_true(conditions: Sequence[Mapping[str, Any]] | None, kind: str) -> bool:
    """Whether the condition ``kind`` is there with status ``True``."""
    condition = get_condition(conditions, kind)
    return condition is not None and condition.get("status") == "True"
