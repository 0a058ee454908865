"""The peers' input: jetlet's NEXMark events written once to a neutral file, JSON lines.

Theory of operation: the peers must not need jetlet's runtime, so the harness (in jetlet's venv)
writes the events of a generator to ``bench/out/nexmark/events-<generator>-<count>.jsonl`` and every
peer reads that file. A file that already exists is reused (its name fixes its content: the
generators are pure functions of the event number); a new one is written to a temporary name and
renamed, so a reader never sees half a file.

The format is JSON lines, one flat object per event, in event-number order (so event time only
grows): ``kind`` (``"person"``, ``"auction"`` or ``"bid"``) and the event's fields under Beam's
names in snake_case (:mod:`jetlet.nexmark.model`); times are epoch milliseconds, prices cents. JSON
lines is the one text format both peers read without help: Spark's file source parses it in the
JVM against a declared schema, Bytewax's ``FileSource`` hands each line to ``json.loads``. Parsing
is part of each peer's cost, and the runners count it in their time.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from jetlet.nexmark.model import Auction, Bid, Event, Person

EVENTS_DIR = Path(__file__).resolve().parent.parent / "out" / "nexmark"
"""Where the events files are written (``bench/out/nexmark``, ignored by git)."""

KIND_OF_CLASS: dict[type, str] = {Person: "person", Auction: "auction", Bid: "bid"}
CLASS_OF_KIND: dict[str, type[Person] | type[Auction] | type[Bid]] = {
    kind: cls for cls, kind in KIND_OF_CLASS.items()
}


FAST_RATE = 10_000
"""The fast generator's event rate here: Beam's default, so both generators' files span the same
event time (``count / 10,000`` seconds) and the same windows close in them."""


def _beam_events(count: int) -> Iterator[Event]:
    from jetlet.nexmark.generator import event

    return (event(number) for number in range(count))


def _fast_events(count: int) -> Iterator[Event]:
    from jetlet.nexmark.fast_generator import FastConfig, fast_events

    config = FastConfig(rate=FAST_RATE)
    for start in range(0, count, 65_536):
        yield from fast_events(range(start, min(start + 65_536, count)), config)


GENERATORS: dict[str, Callable[[int], Iterator[Event]]] = {"beam": _beam_events, "fast": _fast_events}
"""Generator name -> the first ``count`` events of that generator (Beam's defaults; fast: 10 k/s)."""


def events_path(generator: str, count: int, directory: Path = EVENTS_DIR) -> Path:
    """The events file of the first ``count`` events of ``generator``."""
    return directory / f"events-{generator}-{count}.jsonl"


def to_record(item: Event) -> dict[str, object]:
    """The flat JSON object of an event (``None`` fields, the unset optional ones, left out)."""
    record: dict[str, object] = {"kind": KIND_OF_CLASS[type(item)]}
    for field in dataclasses.fields(item):
        value = getattr(item, field.name)
        if value is not None:
            record[field.name] = value
    return record


def from_record(record: dict[str, object]) -> Event:
    """The event a :func:`to_record` object stands for."""
    fields = {name: value for name, value in record.items() if name != "kind"}
    cls = CLASS_OF_KIND[str(record["kind"])]
    return cls(**fields)  # type: ignore[arg-type]


def write_events(path: Path, items: Iterable[Event]) -> int:
    """Write ``items`` to ``path`` as JSON lines (atomically); how many were written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    written = 0
    with temporary.open("w", encoding="utf-8") as out:
        for item in items:
            out.write(json.dumps(to_record(item), separators=(",", ":")))
            out.write("\n")
            written += 1
    temporary.replace(path)
    return written


def read_events(path: Path) -> Iterator[Event]:
    """The events of a file :func:`write_events` wrote, in order."""
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            yield from_record(json.loads(line))


def ensure_events_file(generator: str, count: int, directory: Path = EVENTS_DIR) -> Path:
    """The events file of ``count`` events of ``generator``, written unless it exists."""
    if generator not in GENERATORS:
        raise ValueError(f"unknown generator {generator!r}; known: {sorted(GENERATORS)}")
    if count < 0:
        raise ValueError(f"count must be >= 0, got {count}")
    path = events_path(generator, count, directory)
    if not path.exists():
        write_events(path, GENERATORS[generator](count))
    return path
