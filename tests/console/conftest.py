"""Fixtures of the web console's tests: a headless Debian chromium driven by Playwright.

The browser is the system's (``/usr/bin/chromium``, which ``make test``
installs with apt-get when it runs as root): Playwright's own browser
download cannot work here, so ``playwright install`` is never run. Without
the browser the browser tests fail (they do not skip), saying how to install it.

``pytest tests/console --console-screenshot docs/console.png`` also saves
the screenshot that the README shows.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

CHROMIUM = "/usr/bin/chromium"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--console-screenshot",
        default="",
        help="where the console's browser test saves its screenshot (docs/console.png for the README)",
    )


@pytest.fixture
def browser() -> Iterator[Any]:
    """A headless chromium (the system's), closed after the test."""
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(
            f"the console's browser test needs Debian's chromium at {CHROMIUM}: install it with "
            "`apt-get install -y chromium` (as root; `make test` does it when run as root)",
            pytrace=False,
        )
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
        try:
            yield launched
        finally:
            launched.close()
