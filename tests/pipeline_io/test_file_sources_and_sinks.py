"""``Sources.json``, ``Sources.files`` and ``Sinks.files`` in real jobs, checked against a hand reading."""

from __future__ import annotations

import collections
import json
from pathlib import Path
from typing import Any

import pytest

import jetlet
from jetlet.errors import JobFailedError
from jetlet.pipeline import Pipeline, Sinks, Sources

JOIN_TIMEOUT_S = 30


def write_json_lines(directory: Path, file_count: int) -> None:
    """``file_count`` JSON Lines files (of different lengths, one with a blank line) and one other file."""
    directory.mkdir(parents=True, exist_ok=True)
    for f in range(file_count):
        lines = [json.dumps({"file": f, "n": n, "word": f"w{n % 3}"}) for n in range(f * 3 + 1)]
        if f == 1:
            lines.insert(1, "   ")
        (directory / f"part-{f}.json").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (directory / "notes.txt").write_text('{"not": "matched"}\n', encoding="utf-8")


def json_reference(directory: Path) -> collections.Counter[str]:
    """Every object of the ``*.json`` files, read by hand, as canonical JSON text."""
    found: collections.Counter[str] = collections.Counter()
    for path in directory.glob("*.json"):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                found[json.dumps(json.loads(line), sort_keys=True)] += 1
    return found


def slice_counts(directory: Path, lp: int) -> list[int]:
    """How many objects each of ``lp`` processors should read, by hand."""
    files = sorted(directory.glob("*.json"))
    counts = [
        sum(1 for line in path.read_text(encoding="utf-8").splitlines() if line.strip()) for path in files
    ]
    return [sum(counts[i::lp]) for i in range(lp)]


def canonical(items: list[Any]) -> collections.Counter[str]:
    return collections.Counter(json.dumps(item, sort_keys=True) for item in items)


def lines_in(directory: Path) -> collections.Counter[str]:
    found: collections.Counter[str] = collections.Counter()
    for path in directory.iterdir():
        found.update(path.read_text(encoding="utf-8").splitlines())
    return found


@pytest.mark.parametrize("lp", [1, 4])
def test_json_source_reads_every_object_of_the_matching_files_once(
    jet: jetlet.EmbeddedInstance, tmp_path: Path, lp: int
) -> None:
    # given five JSON Lines files and a file the glob does not match
    write_json_lines(tmp_path / "in", 5)
    # when a pipeline reads them with lp source processors
    p = Pipeline()
    p.read_from(Sources.json(tmp_path / "in")).set_local_parallelism(lp).write_to(Sinks.list("out"))
    job = jet.new_job(p)
    job.join(timeout=JOIN_TIMEOUT_S)
    # then every object arrives exactly once, parsed to a dict
    out = jet.get_list("out")
    assert all(isinstance(item, dict) for item in out)
    assert canonical(out) == json_reference(tmp_path / "in")
    # and processor i read the files i, i + lp, ... of the sorted names
    emitted = [counters["emittedCount"] for name, counters in sorted(job.metrics().items()) if "json" in name]
    assert emitted == slice_counts(tmp_path / "in", lp)


def test_json_source_names_the_file_and_line_of_a_bad_line(
    jet: jetlet.EmbeddedInstance, tmp_path: Path
) -> None:
    # given a file whose third line is not JSON
    (tmp_path / "bad.json").write_text('{"a": 1}\n{"a": 2}\n{"a": oops}\n', encoding="utf-8")
    p = Pipeline()
    p.read_from(Sources.json(tmp_path)).write_to(Sinks.list("out"))
    # when the job runs, then it fails naming the file and the line
    with pytest.raises(JobFailedError) as failure:
        jet.new_job(p).join(timeout=JOIN_TIMEOUT_S)
    assert "bad.json, line 3: invalid JSON" in str(failure.value.__cause__)


def test_json_source_refuses_a_line_that_is_not_an_object(
    jet: jetlet.EmbeddedInstance, tmp_path: Path
) -> None:
    # given a JSON Lines file whose second line is an array
    (tmp_path / "mixed.json").write_text('{"a": 1}\n[1, 2]\n', encoding="utf-8")
    p = Pipeline()
    p.read_from(Sources.json(tmp_path)).write_to(Sinks.list("out"))
    # when the job runs, then it fails naming the line and what it found
    with pytest.raises(JobFailedError) as failure:
        jet.new_job(p).join(timeout=JOIN_TIMEOUT_S)
    assert "mixed.json, line 2: expected a JSON object, got list" in str(failure.value.__cause__)


@pytest.mark.parametrize("lp", [1, 4])
def test_files_sink_writes_each_processors_items_to_its_own_file(
    jet: jetlet.EmbeddedInstance, tmp_path: Path, lp: int
) -> None:
    # given numbers mapped to text, written by lp sink processors to a directory that does not exist yet
    numbers = list(range(500))
    out_dir = tmp_path / "nested" / "out"
    p = Pipeline()
    stage = p.read_from(Sources.items(*numbers)).map(lambda n: f"line {n}")
    stage.write_to(Sinks.files(out_dir)).set_local_parallelism(lp)
    # when the job completes
    jet.new_job(p).join(timeout=JOIN_TIMEOUT_S)
    # then there is one file per processor, named by its global index, and together they hold every line once
    assert sorted(path.name for path in out_dir.iterdir()) == [str(i) for i in range(lp)]
    assert lines_in(out_dir) == collections.Counter(f"line {n}" for n in numbers)


@pytest.mark.parametrize("lp", [1, 4])
def test_files_round_trip_through_sinks_files_and_sources_files(
    jet: jetlet.EmbeddedInstance, tmp_path: Path, lp: int
) -> None:
    # given JSON objects written as text lines by one job
    write_json_lines(tmp_path / "in", 4)
    p1 = Pipeline()
    p1.read_from(Sources.json(tmp_path / "in")).map(lambda d: json.dumps(d, sort_keys=True)).write_to(
        Sinks.files(tmp_path / "mid")
    ).set_local_parallelism(lp)
    jet.new_job(p1).join(timeout=JOIN_TIMEOUT_S)
    # when a second job reads those files back line by line with lp processors
    p2 = Pipeline()
    p2.read_from(Sources.files(tmp_path / "mid")).set_local_parallelism(lp).write_to(Sinks.list("back"))
    jet.new_job(p2).join(timeout=JOIN_TIMEOUT_S)
    # then the lines are the original objects
    assert collections.Counter(jet.get_list("back")) == json_reference(tmp_path / "in")


def test_files_sink_uses_to_string_fn_and_replaces_an_older_file(
    jet: jetlet.EmbeddedInstance, tmp_path: Path
) -> None:
    # given an older output file 0 with other content
    (tmp_path / "0").write_text("stale\nstale\nstale\n", encoding="utf-8")
    p = Pipeline()
    p.read_from(Sources.items(1, 2, 3)).write_to(Sinks.files(tmp_path, to_string_fn=lambda n: f"<{n}>"))
    # when the job writes to the same directory
    jet.new_job(p).join(timeout=JOIN_TIMEOUT_S)
    # then file 0 holds only the new items, formatted by to_string_fn
    assert sorted((tmp_path / "0").read_text(encoding="utf-8").splitlines()) == ["<1>", "<2>", "<3>"]


def test_file_source_and_sink_arguments_are_validated(tmp_path: Path) -> None:
    # given bad arguments, when the source or sink is made, then the error names the argument
    with pytest.raises(ValueError, match=r"Sinks\.files: directory must be a non-empty path"):
        Sinks.files("")
    with pytest.raises(TypeError, match=r"Sinks\.files: to_string_fn must be callable"):
        Sinks.files(tmp_path, to_string_fn="str")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"Sinks\.files: encoding 'no-such-codec'"):
        Sinks.files(tmp_path, encoding="no-such-codec")
    with pytest.raises(ValueError, match=r"Sources\.json: directory must be a non-empty path"):
        Sources.json("")
    with pytest.raises(TypeError, match=r"Sources\.json: glob must be a string, got 3"):
        Sources.json(tmp_path, glob=3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"Sources\.files: encoding 'no-such-codec'"):
        Sources.files(tmp_path, encoding="no-such-codec")
