"""Pickling with the C pickler first and cloudpickle where it fails (jetlet._pickling)."""

from __future__ import annotations

import dataclasses
import pickle
import traceback

import pytest

from jetlet import _pickling
from jetlet.nexmark.model import Bid


def _no_cloudpickle(*args: object, **kwargs: object) -> bytes:
    raise AssertionError("cloudpickle was used for an object the C pickler handles")


def test_an_object_found_by_name_is_pickled_by_the_c_pickler(monkeypatch: pytest.MonkeyPatch) -> None:
    # given a dataclass instance whose class can be imported by name, and cloudpickle out of reach
    bid = Bid(1, 2, 300, 1_500, "", "USD", "https://example.com/bid")
    monkeypatch.setattr(_pickling, "cloudpickle_dumps", _no_cloudpickle)
    # when pickled, then the bytes are the C pickler's and load back equal
    assert _pickling.dumps(bid) == pickle.dumps(bid, protocol=5)
    assert pickle.loads(_pickling.dumps(bid)) == bid


def test_lambdas_and_local_classes_fall_back_to_cloudpickle_and_load_back() -> None:
    # given what the C pickler refuses: a closure, and an instance of a class local to this function
    offset = 7

    @dataclasses.dataclass
    class Local:
        value: int

    def add(x: int) -> int:
        return x + offset

    # when pickled, then each loads back and behaves as the original
    assert pickle.loads(_pickling.dumps(add))(1) == 8
    assert pickle.loads(_pickling.dumps(lambda x: x * 2))(4) == 8
    restored = pickle.loads(_pickling.dumps(Local(3)))
    assert restored.value == 3 and type(restored).__name__ == "Local"


def test_a_function_pickled_by_value_keeps_its_file_name_for_the_users_traceback() -> None:
    # given a closure with a nested comprehension that raises (cloudpickle 3.1.3 alone names the file
    # of every code object "<dynamic-code>")
    limit = 2

    def explode(items: list[int]) -> list[int]:
        return [item // (item - limit) for item in items]

    # when it travels by value and raises on the other side
    restored = pickle.loads(_pickling.dumps(explode))
    with pytest.raises(ZeroDivisionError) as caught:
        restored([1, 2])
    # then every frame of the traceback names this file and the user's function
    frames = traceback.extract_tb(caught.value.__traceback__)[1:]
    assert [(frame.filename, frame.name) for frame in frames] == [
        (__file__, "explode"),
        (__file__, "<listcomp>"),
    ]
    assert restored.__code__.co_firstlineno == explode.__code__.co_firstlineno
