"""Every use of Textual's private names, in one place.

Textual offers no public way to swap its border glyphs (the console profile needs CP437 ones), to paint
every cell again (Ctrl+L on a serial line), to end the app with one line instead of a traceback, or to
write a mark behind the first frame (the start-up bench). These functions do it through Textual's
internals; ``REQUIRED`` names each one, and ``tests/test_textual_private.py`` fails on a Textual upgrade
that renames or removes any of them, before a user meets the AttributeError.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from textual import _border

if TYPE_CHECKING:
    from rich.console import RenderableType
    from textual.app import App
    from textual.screen import Screen

# (object, private attribute) pairs this module relies on; checked by the test on the installed Textual.
REQUIRED: tuple[tuple[str, str], ...] = (
    ("textual._border", "BORDER_CHARS"),
    ("textual._border", "BORDER_LOCATIONS"),
    ("textual._border", "get_box"),
    ("textual.app.App", "_handle_exception"),
    ("textual.app.App", "_close_messages_no_wait"),
    ("textual.app.App", "_display"),
    ("app instance", "_return_code"),
    ("app instance", "_exception"),
    ("app instance", "_exception_event"),
    ("app instance", "_exit_renderables"),
    ("app instance", "_driver"),
    ("app instance", "_background_screens"),
    ("screen instance", "_compositor"),
)

BORDER_CHARS: dict[Any, Any] = _border.BORDER_CHARS
BORDER_LOCATIONS: dict[Any, Any] = _border.BORDER_LOCATIONS


def border_glyphs_changed() -> None:
    """Forget the boxes drawn with the old glyphs (Textual caches them)."""
    _border.get_box.cache_clear()


def end_with_line(app: App[Any], error: Exception, line: RenderableType, code: int) -> None:
    """End the app with exit status ``code`` and ``line`` printed after it, as Textual's own handler ends it
    after an uncaught exception (with 1), but without its traceback. Pilot still re-raises ``error`` in tests."""
    app._return_code = code
    if app._exception is None:
        app._exception = error
        app._exception_event.set()
    app._exit_renderables.append(line)
    app._close_messages_no_wait()


def write_to_terminal(app: App[Any], text: str) -> None:
    """Write behind what Textual has queued for the terminal (nothing when headless)."""
    driver = app._driver
    if driver is not None:
        driver.write(text)
        driver.flush()


def full_update(app: App[Any]) -> Any:
    """Every cell of the screen and the screens behind it, composed afresh (not only what changed)."""
    return app.screen._compositor.render_update(full=True, screen_stack=app._background_screens)


def repaint_all(app: App[Any]) -> None:
    """Send every cell to the terminal again."""
    app._display(app.screen, full_update(app))


def screen_lines(screen: Screen[Any]) -> list[str]:
    """The text of each line of a screen as composed (for tests and the line-noise checks)."""
    return ["".join(seg.text for seg in strip) for strip in screen._compositor.render_strips()]


_A = TypeVar("_A", bound="App[Any]")


def display_hook(app_class: type[_A], seen: Callable[[_A], None]) -> type[_A]:
    """A subclass of ``app_class`` that calls ``seen(app)`` before each frame goes to the terminal."""

    class Watched(app_class):  # type: ignore[valid-type,misc]
        def _display(self, screen: Screen[Any], renderable: RenderableType | None) -> None:
            seen(self)
            super()._display(screen, renderable)

    return Watched
