"""``bench/run_all.py`` keeps RESULTS.md's other sections when it measures some again."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType


def test_given_results_when_one_section_is_measured_again_then_it_is_replaced_and_the_rest_kept(
    load_bench: Callable[[str], ModuleType],
) -> None:
    run_all = load_bench("run_all")
    old_a = run_all.wrap_section("a_bench", "## A\n\nold numbers\n", "python bench/run_all.py")
    old_b = run_all.wrap_section("b_bench", "## B\n\nkept numbers\n", "python bench/run_all.py")
    existing = run_all.merge_sections("", {"a_bench": old_a, "b_bench": old_b})

    rerun = "python bench/run_all.py --only a_bench,c_bench"
    new_a = run_all.wrap_section("a_bench", "## A\n\nnew numbers\n", rerun)
    new_c = run_all.wrap_section("c_bench", "## C\n\nfirst numbers\n", rerun)
    merged = run_all.merge_sections(existing, {"a_bench": new_a, "c_bench": new_c})

    assert merged.startswith(run_all.HEADER)
    assert "old numbers" not in merged
    assert merged.index("new numbers") < merged.index("kept numbers") < merged.index("first numbers")
    assert merged.count("<!-- section:") == 3
    assert f"`{rerun}`" in merged
    # merging again with nothing fresh changes nothing
    assert run_all.merge_sections(merged, {}) == merged
