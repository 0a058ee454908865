"""Given the bundled text, when the word-count DAG runs, then it equals collections.Counter."""

from collections import Counter

import jetlet
from jetlet import word_count


def test_word_count_equals_counter() -> None:
    lines = word_count.bundled_text().splitlines() * 3
    out: list[tuple[str, int]] = []
    with jetlet.embedded() as jet:
        jet.new_job(word_count.word_count_dag(lines, out)).join()
    assert dict(out) == Counter(w for line in lines for w in word_count.tokenize(line))
