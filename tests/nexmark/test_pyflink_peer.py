"""The PyFlink peers (``bench/nexmark_peers/pyflink_runner.py``, ``pyflink_queries.py``): their
commands, SQL, Python functions and reading back of results, and one real run of Q1 checked against
the plain-Python reference.

The real run (marker ``peers``: ``make test-peers``, not ``make test``) needs Java 17 and the
PyFlink venv (``bench/.venvs/pyflink``, made from PyPI when missing: about 4 minutes and 1 GB,
once): an install that fails fails the test, it does not skip.
"""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

peers: ModuleType = importlib.import_module("bench.nexmark_peers")
queries: ModuleType = importlib.import_module("bench.nexmark_peers.pyflink_queries")
venvs: ModuleType = importlib.import_module("bench.nexmark_peers.venvs")
events_file: ModuleType = importlib.import_module("bench.nexmark_peers.events_file")

SQL_QUERIES = ("q0", "q1", "q2", "q3", "q5", "q7", "q8", "q13")


@pytest.mark.parametrize(("peer", "parallelism"), [("pyflink", "1"), ("pyflink2", "2")])
def test_command_runs_the_pyflink_runner_at_the_peers_parallelism(peer: str, parallelism: str) -> None:
    # when the command of a PyFlink peer is built
    command = peers.runner_command("/venv/bin/python", peer, "q5", Path("/e.jsonl"), Path("/r.json"), 100, 20)
    # then both peers run the one PyFlink runner, with the harness's flags and their parallelism
    assert command == [
        "/venv/bin/python",
        "-m",
        "bench.nexmark_peers.pyflink_runner",
        "--query",
        "q5",
        "--events-file",
        "/e.jsonl",
        "--out-json",
        "/r.json",
        "--window-ms",
        "100",
        "--slide-ms",
        "20",
        "--parallelism",
        parallelism,
    ]
    # and the command line it builds is the one the runner parses
    args = queries.parse_args(command[3:])
    assert (args.query, args.parallelism, args.window_ms, args.slide_ms) == ("q5", int(parallelism), 100, 20)
    assert args.python_mode == "thread"


def test_other_peers_commands_have_no_parallelism_flag() -> None:
    command = peers.runner_command("py", "bytewax", "q1", Path("e"), Path("r"))
    assert command[2] == "bench.nexmark_peers.bytewax_runner"
    assert "--parallelism" not in command


def test_parse_args_refuses_a_parallelism_below_one(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        queries.parse_args(["--query", "q1", "--events-file", "e", "--out-json", "r", "--parallelism", "0"])
    assert "--parallelism must be at least 1" in capsys.readouterr().err


def test_both_pyflink_peers_share_one_venv() -> None:
    assert venvs.venv_dir("pyflink2") == venvs.venv_dir("pyflink")
    assert venvs.venv_python("pyflink2") == venvs.venv_python("pyflink")
    assert any(pin.startswith("apache-flink==") for pin in venvs.REQUIREMENTS["pyflink"])


@pytest.mark.parametrize("peer", ["pyflink", "pyflink2"])
@pytest.mark.parametrize("query", ["q0", "q1", "q2", "q3", "q4", "q5", "q6", "q7", "q8", "q13"])
def test_pyflink_expresses_every_query(peer: str, query: str) -> None:
    able, how = peers.expressible(peer, query)
    assert able
    assert how
    # every query but Q4/Q6 (keyed Python functions on a DataStream) is a SQL SELECT
    if query in SQL_QUERIES:
        assert queries.select(query, 10_000, 1_000).startswith("SELECT ")
    else:
        assert query in queries.UPDATING
        assert "KeyedProcessFunction" in how


def test_select_raises_for_a_query_it_has_no_sql_for() -> None:
    with pytest.raises(ValueError, match="no SQL for 'q4'"):
        queries.select("q4", 10_000, 1_000)


def test_python_functions_compute_the_reference_values() -> None:
    # Q1's conversion rounds down as the reference does
    assert [queries.to_euro(p) for p in (100, 101, 1_000_003)] == [89, 89, 890_002]
    # Q2's predicate keeps the multiples of 123 and is false for a null auction (a person's row)
    assert [queries.sampled(a) for a in (0, 123, 1107, 1108, None)] == [True, True, True, False, False]
    # Q13's lookup is the reference's side value
    assert [queries.side_value(b) for b in (0, 499, 500, 1234)] == [
        peers.side_value(b) for b in (0, 499, 500, 1234)
    ]


def test_interval_literals_carry_milliseconds() -> None:
    assert queries.interval(10_000) == "INTERVAL '10.000' SECOND(6, 3)"
    assert queries.interval(20) == "INTERVAL '0.020' SECOND(6, 3)"


def test_ddl_declares_the_event_time_and_the_canonical_sink_columns() -> None:
    source = queries.source_ddl(Path("/data/events.jsonl"))
    assert "`date_time` BIGINT" in source and "`extra` STRING" in source
    assert "WATERMARK FOR ts AS ts - INTERVAL '0.001' SECOND" in source
    assert "'path' = '/data/events.jsonl'" in source
    sink = queries.sink_ddl("q5", Path("/out"))
    assert "`window_end` BIGINT,\n  `auction` BIGINT,\n  `bids` BIGINT" in sink
    for query in SQL_QUERIES:
        assert len(queries.SINK_TYPES[query]) == len(peers.ROW_FIELDS[query])
    # an updating query's sink has one more column, its count of updates
    assert "`average_price` DOUBLE,\n  `updates` BIGINT" in queries.sink_ddl("q4", Path("/out"))


def test_canonical_rows_reads_every_committed_file_and_drops_open_windows(tmp_path: Path) -> None:
    # given an events file whose last event is at 250 ms
    events = tmp_path / "events.jsonl"
    events.write_text('{"kind":"bid","date_time":10}\n{"kind":"bid","date_time":250}\n', encoding="utf-8")
    # and the sink's output of Q5 in two part files (one per task), plus a hidden in-progress file
    out = tmp_path / "out"
    out.mkdir()
    (out / "part-0-0").write_text('{"window_end":200,"auction":7,"bids":3}\n', encoding="utf-8")
    (out / "part-1-0").write_text(
        '{"window_end":240,"auction":8,"bids":1}\n{"window_end":260,"auction":8,"bids":1}\n', encoding="utf-8"
    )
    (out / ".part-2-0.inprogress").write_text('{"window_end":100,"auction":9,"bids":9}\n', encoding="utf-8")
    # when the canonical rows are read back
    emitted, rows = queries.canonical_rows("q5", out, events)
    # then the committed rows count, and the window ending after the last event (260 > 250) is dropped
    assert emitted == 3
    assert sorted(rows) == [(200, 7, 3), (240, 8, 1)]


def test_canonical_rows_keeps_every_row_of_a_query_without_windows(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "part-0-0").write_text(json.dumps({"auction": 1107, "price": 5}) + "\n", encoding="utf-8")
    assert queries.canonical_rows("q2", out, tmp_path / "unread.jsonl") == (1, [(1107, 5)])


def test_a_bid_beats_the_best_only_within_the_auctions_lifetime_and_reserve() -> None:
    # given an auction open from 100 (inclusive) to 200 (exclusive) with reserve 50
    auction = (1000, 100, 200, 50, 10, 1001)
    # then a bid counts only inside [100, 200) and from the reserve up
    assert queries.beats(auction, None, 50, 100)
    assert not queries.beats(auction, None, 49, 150)
    assert not queries.beats(auction, None, 80, 99)
    assert not queries.beats(auction, None, 80, 200)
    # and it beats the best with a higher price, or the same price earlier
    assert queries.beats(auction, (60, 150), 61, 190)
    assert queries.beats(auction, (60, 150), 60, 120)
    assert not queries.beats(auction, (60, 150), 60, 150)
    assert not queries.beats(auction, (60, 150), 59, 110)


def test_latest_winners_keeps_the_ten_latest_by_expiry_then_id_whatever_the_arrival_order() -> None:
    # given twelve winners (expires, id, price) arriving in a scrambled order
    winners = [(1000 + (i * 7) % 12, 2000 + i, i) for i in range(12)]
    kept: list[tuple[int, int, int]] = []
    for winner in reversed(winners):
        kept = queries.latest_winners(kept, winner)
    # then the ten latest by (expires, id) are kept, as the reference's closing order takes them
    assert kept == sorted(winners)[-10:]


def test_canonical_rows_of_an_updating_query_is_each_keys_most_updated_row(tmp_path: Path) -> None:
    # given Q4's updates of two categories written by two tasks, not in update order
    out = tmp_path / "out"
    out.mkdir()
    (out / "part-0-0").write_text(
        '{"category":10,"average_price":7.5,"updates":2}\n{"category":10,"average_price":5.0,"updates":1}\n',
        encoding="utf-8",
    )
    (out / "part-1-0").write_text('{"category":11,"average_price":3.0,"updates":1}\n', encoding="utf-8")
    # when read back
    emitted, rows = queries.canonical_rows("q4", out, tmp_path / "unread.jsonl")
    # then each category's last value is the one with the most updates, without the count
    assert emitted == 3
    assert sorted(rows) == [(10, 7.5), (11, 3.0)]


@pytest.mark.peers
@pytest.mark.timeout(900)
def test_real_q1_run_matches_the_reference(tmp_path: Path) -> None:
    # given the PyFlink venv, made from PyPI unless ready (a failed install fails the test)
    venvs.ensure_venv("pyflink", log=False)
    # when Q1 runs in Flink at parallelism 1 over the first 3,000 events of Beam's generator
    path = events_file.ensure_events_file("beam", 3000, tmp_path)
    run = peers.run_peer_on_file("pyflink", "q1", path, 3000, timeout_s=600)
    # then its rows are the reference's (the Python UDF converted every bid's price)
    assert run.expressible, run.note
    assert (run.results, run.digest) == peers.reference_digest("q1", path)
    assert run.seconds is not None and run.seconds > 0
    assert "parallelism 1" in run.note
