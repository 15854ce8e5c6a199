"""The shared test helpers keep their promises: a wait that times out fails the test and says what it waited
for; the units are what their names say."""

from __future__ import annotations

import pytest
from textual.app import App

from helpers.pilot import run, wait_for
from helpers.units import SECTOR, MiB, MiB_SECTORS


@run
async def test_wait_for_fails_saying_what_it_waited_for_and_returns_once_true() -> None:
    app: App[None] = App()
    async with app.run_test() as pilot:
        with pytest.raises(AssertionError, match=r"timed out after 0\.2 s waiting for .*app\.is_headless is False"):
            await wait_for(pilot, lambda: app.is_headless is False, 0.2)
        with pytest.raises(AssertionError, match="waiting for the moon"):
            await wait_for(pilot, lambda: False, 0.1, what="the moon")
        await wait_for(pilot, lambda: app.is_running, 0.1)


def test_mib_is_bytes_and_mib_sectors_is_sectors() -> None:
    assert MiB == 1_048_576
    assert MiB_SECTORS * SECTOR == MiB
