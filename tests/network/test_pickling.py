"""Pickling with the C pickler first and cloudpickle where it fails (jetlet._pickling)."""

from __future__ import annotations

import dataclasses
import pickle

import pytest

from jetlet import _pickling
from jetlet.nexmark.model import Bid


def _no_cloudpickle(*args: object, **kwargs: object) -> bytes:
    raise AssertionError("cloudpickle was used for an object the C pickler handles")


def test_an_object_found_by_name_is_pickled_by_the_c_pickler(monkeypatch: pytest.MonkeyPatch) -> None:
    # given a dataclass instance whose class can be imported by name, and cloudpickle out of reach
    bid = Bid(1, 2, 300, 1_500, "", "USD", "https://example.com/bid")
    monkeypatch.setattr(_pickling.cloudpickle, "dumps", _no_cloudpickle)
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
