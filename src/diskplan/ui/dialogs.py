"""The planner's dialogs: a new label, a new partition (or another type, name and flags for one),
the snapping target, and a file path (save or load a plan).

Each dialog computes the plan step itself from the plan it was given, shows it live (what would
happen, or why it is refused), and returns the ``Outcome``; the app records it. Only characters a
CP437 console font has, and no state shown by colour alone: a flag reads ``[x]`` or ``[ ]``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.events import Click
from textual.message import Message
from textual.screen import ModalScreen
from textual.suggester import SuggestFromList
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option

from diskplan.model import labels, ptypes
from diskplan.model.extent import Extent, Partition, Role
from diskplan.model.grain import SnapTarget, bytes_grain, mib_grain, optimal_grain, physical_grain, user_grain
from diskplan.model.plan.plan import Outcome, Plan
from diskplan.model.plan.snap import Gap
from diskplan.model.safetext import safe
from diskplan.model.sizes import SizeError, format_size, parse_lba, parse_size
from diskplan.model.typenames import GPT_NAMES
from diskplan.model.units import human_bytes

FORM_CSS = """
.form { width: 78; max-width: 100%; height: auto; max-height: 100%; border: solid $accent; background: $surface;
        padding: 0 1; }
.form .row { height: 1; width: 1fr; }
.form .label { width: 7; color: $text-muted; }
.form Input.field { border: none; height: 1; width: 1fr; padding: 0 1; background: $boost; }
.form Input.field:focus { background: $primary 40%; }
.form .note { height: auto; color: $text-muted; padding: 0 0 0 7; }
.form .result { height: auto; margin-top: 1; }
.form .result.-refused { color: $error; }
.form .keys { height: 1; color: $text-muted; margin-top: 1; }
.form FlagToggle { width: auto; height: 1; margin-right: 2; }
.form FlagToggle:focus { text-style: reverse; }
.form OptionList, .form OptionList:focus { height: auto; max-height: 8; border: none; padding: 0; }
.form .text { height: auto; }
"""


class FlagToggle(Static, can_focus=True):
    """``[x] name`` / ``[ ] name``: toggled with Space, Enter or a click."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("space", "flip", "toggle", show=False)]

    class Toggled(Message):
        def __init__(self, toggle: FlagToggle) -> None:
            super().__init__()
            self.toggle = toggle

    def __init__(self, flag: str, value: bool = False, id: str | None = None) -> None:
        super().__init__(id=id)
        self.flag = flag
        self.value = value

    def on_mount(self) -> None:
        self._draw()

    def _draw(self) -> None:
        self.update(Content(f"[{'x' if self.value else ' '}] {self.flag}"))

    def action_flip(self) -> None:  # not action_toggle: DOMNode has one that takes an attribute name
        self.value = not self.value
        self._draw()
        self.post_message(self.Toggled(self))

    def on_click(self, event: Click) -> None:
        event.stop()
        self.focus()
        self.action_flip()


class TypeInput(Input):
    """A partition type by name, GUID or MBR id; Up/Down go through the names this label knows."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up", "cycle(-1)", "previous type", show=False),
        Binding("down", "cycle(1)", "next type", show=False),
    ]

    def __init__(self, names: list[str], value: str, id: str | None = None, classes: str | None = None,
                 select_on_focus: bool = True) -> None:
        super().__init__(value, suggester=SuggestFromList(names, case_sensitive=False), id=id, classes=classes,
                         select_on_focus=select_on_focus)
        self.names = names

    def action_cycle(self, direction: int) -> None:
        current = ptypes.lookup(self.value)
        name = current.name if current is not None else self.value
        names = self.names
        index = names.index(name) if name in names else -direction
        self.value = names[(index + direction) % len(names)]
        self.cursor_position = len(self.value)


def type_names(label: str, role: Role | None = None) -> list[str]:
    """The named types a label can hold (msdos: extended ones too, unless ``role`` says logical). GPT: ours,
    then every other type libfdisk names (the raw patch after libparted's commit writes any GUID)."""
    if label == "gpt":
        ours = [t.name for t in ptypes.TYPES if t.gpt]
        return ours + [n for g, n in GPT_NAMES.items() if g not in {t.gpt for t in ptypes.TYPES}]
    names = [t.name for t in ptypes.TYPES if t.mbr is not None]
    if role is Role.LOGICAL:
        names = [n for n in names if not labels.is_extended_type(labels.type_code("msdos", n))]
    return names


def shown_flags(label: str) -> tuple[str, ...]:
    """The flags offered as toggles (GPT's type-specific bits 48-62 are left to plan files)."""
    return tuple(f for f in labels.attribute_flags(label) if not f.startswith("guid:"))


# --- a new label --------------------------------------------------------------------------------------


class LabelScreen(ModalScreen[Outcome | None]):
    """A new, empty gpt or msdos table: every partition on the disk is marked for deletion."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "dismiss(None)", "cancel")]
    DEFAULT_CSS = "LabelScreen { align: center middle; }\n" + FORM_CSS

    def __init__(self, plan: Plan) -> None:
        super().__init__()
        self.plan = plan

    def compose(self) -> ComposeResult:
        base = self.plan.base
        n = len(base.partitions)
        now = f"The disk has a {base.label} table with {n} partition{'s' if n != 1 else ''}: all of them are " \
              "marked for deletion (their data stays until you write; undo takes this back)." \
            if base.label else "The disk has no partition table yet."
        big = self.plan.geometry.sectors * self.plan.geometry.logical > 2 * 1024**4
        with Vertical(classes="form") as v:
            v.border_title = "New partition table"
            yield Static(now, classes="text")
            yield OptionList(
                Option("gpt     GUID partition table: 128 partitions, names, any size", id="gpt"),
                Option("msdos   MBR: 4 primaries (or 3 and logicals), up to 2 TiB"
                       + (" (smaller than this disk)" if big else ""), id="msdos"),
                id="labels",
            )
            yield Static("Enter chooses   Esc cancels", classes="keys")

    @on(OptionList.OptionSelected)
    def _chosen(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(self.plan.new_label(event.option.id or "gpt"))


# --- a new partition, or another type/name/flags for one -------------------------------------------------


def default_gap(plan: Plan, lba: int) -> tuple[Gap | None, str]:
    """The free space for a new partition near the cursor: the one holding ``lba``, else the next one after
    it, else the largest; with the reason when the cursor is not in free space."""
    gap, why = plan.gap_at(lba)
    if gap is not None:
        return gap, ""
    gaps = plan.free_regions()
    if not gaps:
        return None, why or "there is no free space left"
    after = [g for g in gaps if g.lo > lba]
    return (after[0] if after else max(gaps, key=lambda g: g.hi - g.lo)), why


def suggest_size(start: int, gap: Gap, plan: Plan) -> str:
    """The rest of the free space from ``start`` in whole grains (so the end is aligned too), written in
    whole MiB when it is whole MiB."""
    sectors = gap.hi - start + 1
    g = plan.grain.sectors
    if sectors >= g:
        sectors -= sectors % g
    mib = (1 << 20) // plan.geometry.logical
    return format_size(sectors, plan.geometry, "MiB") if sectors % mib == 0 else f"{sectors}s"


class PartitionScreen(ModalScreen[Outcome | None]):
    """A new partition in a free region (``gap``), or the type, name and flags of partition ``number``."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "dismiss(None)", "cancel"),
        Binding("enter", "submit", "create", show=False),
    ]
    DEFAULT_CSS = "PartitionScreen { align: center middle; }\n" + FORM_CSS

    def __init__(self, plan: Plan, *, gap: Gap | None = None, start: int = 0, number: int | None = None) -> None:
        super().__init__()
        self.plan = plan
        self.gap = gap
        self.start = start
        self.number = number
        self.label = plan.table.label or "gpt"
        self.outcome: Outcome | None = None

    @property
    def editing(self) -> Partition | None:
        return self.plan.partition(self.number) if self.number is not None else None

    def compose(self) -> ComposeResult:
        p = self.editing
        geom = self.plan.geometry
        with Vertical(classes="form") as v:
            if p is not None:
                v.border_title = f"Partition {p.number}: type, name, flags"
                ptype = ptypes.describe(p.type) if p.type else ""
                yield Static(f"{p.start}s..{p.end}s ({human_bytes(p.size * geom.logical)}); "
                             f"{p.state.value}", classes="note")
            else:
                assert self.gap is not None
                g = self.gap
                size = human_bytes((g.hi - g.lo + 1) * geom.logical)
                v.border_title = f"New partition in free space {g.lo}s..{g.hi}s ({size})"
                start = self.plan.grain.align_up(max(self.start, g.lo))
                start = start if start <= g.hi else g.lo
                ptype = ptypes.DEFAULT.name
                # Size first: the cursor starts there (what a user types first is a size), and Tab goes on
                # down the form in the order it is drawn (Start, Type, Name, Flags).
                with Horizontal(classes="row"):
                    yield Static("Size", classes="label")
                    yield Input(suggest_size(start, g, self.plan), id="size", classes="field",
                                select_on_focus=True)
                yield Static("", id="size-note", classes="note")
                with Horizontal(classes="row"):
                    yield Static("Start", classes="label")
                    yield Input(f"{start}s", id="start", classes="field", select_on_focus=False)
            role = Role.LOGICAL if p is None and self._inside_extended() else (p.role if p else None)
            with Horizontal(classes="row"):
                yield Static("Type", classes="label")
                yield TypeInput(type_names(self.label, role), ptype, id="type", classes="field", select_on_focus=False)
            yield Static("", id="type-note", classes="note")
            if self.label == "gpt":
                with Horizontal(classes="row"):
                    yield Static("Name", classes="label")
                    # A name read from the disk is shown with its control characters escaped (see _compute).
                    shown = safe(p.name) if p else ""
                    yield Input(shown, id="name", classes="field", max_length=max(len(shown), labels.GPT_NAME_UNITS))
            have = set(labels.plan_flags(self.label, p.flags)) if p else set()
            with Horizontal(classes="row"):
                yield Static("Flags", classes="label")
                for flag in shown_flags(self.label):
                    yield FlagToggle(flag, flag in have)
            yield Static("", id="result", classes="result")
            yield Static("Enter " + ("applies" if p else "creates") + "   Tab: next field   Up/Down: types   "
                         "Esc: cancel", classes="keys")

    def _inside_extended(self) -> bool:
        ext = self.plan.extended()
        return ext is not None and self.gap is not None and ext.start <= self.gap.lo <= ext.end

    def on_mount(self) -> None:
        self._update()
        first = self.query("#size") or self.query("#type")
        first.first().focus()

    @on(Input.Changed)
    @on(FlagToggle.Toggled)
    def _changed(self) -> None:
        self._update()

    def _value(self, ident: str) -> str:
        found = self.query(f"#{ident}")
        return found.first(Input).value if found else ""

    def _flags(self) -> tuple[str, ...]:
        return tuple(t.flag for t in self.query(FlagToggle) if t.value)

    def _update(self) -> None:
        note = self.query("#size-note")
        outcome, size_note = self._compute()
        if note:
            note.first(Static).update(size_note)
        type_note = self._type_note()
        self.query_one("#type-note", Static).update(type_note)
        result = self.query_one("#result", Static)
        self.outcome = outcome if outcome is not None and outcome.ok else None
        if outcome is None:
            result.update("")
        elif outcome.ok:
            notes = list(outcome.snap.notes) if outcome.snap else []
            snap = outcome.snap
            if snap is not None and snap.snapped.size != snap.requested.end - snap.requested.start + 1:
                asked = snap.requested.end - snap.requested.start + 1
                notes.append(f"{snap.snapped.size:,}s, not {asked:,}s: the end snaps to the nearest "
                             f"{human_bytes(snap.grain.sectors * snap.sector_size)} boundary")
            result.update(Content(f"-> {outcome.message}" + (f"\n   {'; '.join(notes)}" if notes else "")))
        else:
            result.update(Content(f"cannot: {outcome.message}"))
        result.set_class(outcome is not None and not outcome.ok, "-refused")

    def _type_note(self) -> str:
        text = self._value("type")
        try:
            code = labels.type_code(self.label, text)
        except labels.LabelError:
            return "a name (Up/Down: " + ", ".join(type_names(self.label)[:4]) + ", ...), " + \
                ("a type GUID" if self.label == "gpt" else "or an MBR id like 0x83")
        name = ptypes.describe(code)
        if name == code:
            return f"= {code} (no name known for it)"
        return f"= {code}" + (f" ({name})" if name.lower() != text.strip().lower() else "")

    def _compute(self) -> tuple[Outcome | None, str]:
        """The step as typed, and the words about the size (its unit family, what it came to)."""
        p = self.editing
        ptype, name, flags = self._value("type"), self._value("name"), self._flags()
        if p is not None:
            if name == safe(p.name):
                name = p.name  # left as shown: the stored name stays, escapes and all
            step = self.plan.set_type(p.number, ptype) if ptype else None
            plan = step.plan if step is not None and step.ok else self.plan
            if step is not None and not step.ok:
                return step, ""
            makers: tuple[Callable[[Plan], Outcome | None], ...] = (
                lambda q: q.set_name(p.number, name) if self.label == "gpt" else None,
                lambda q: q.set_flags(p.number, flags))
            for make in makers:
                o = make(plan)
                if o is None:
                    continue
                if not o.ok:
                    return o, ""
                plan = o.plan
            if plan is self.plan:
                return Outcome(self.plan, self.plan, True, f"partition {p.number} unchanged", None, p.number), ""
            q = plan.partition(p.number)
            assert q is not None
            what = f"partition {p.number}: type {ptypes.describe(q.type)}" + (
                f", name {q.name!r}" if self.label == "gpt" else "") + f", flags {' '.join(flags) or '-'}"
            return Outcome(self.plan, plan, True, what, None, p.number), ""
        assert self.gap is not None
        geom = self.plan.geometry
        region = Extent(self.gap.lo, self.gap.hi)
        try:
            start = parse_lba(self._value("start"), geom, region=region)
        except SizeError as exc:
            return Outcome(self.plan, self.plan, False, f"start: {exc}"), ""
        try:
            size = parse_size(self._value("size"), geom, region=region)
        except SizeError as exc:
            return Outcome(self.plan, self.plan, False, f"size: {exc}"), ""
        note = f"{size.explanation}\nunits: {size.family.value}"
        role = None
        try:
            if labels.is_extended_type(labels.type_code(self.label, ptype)):
                role = Role.EXTENDED
        except labels.LabelError:
            pass
        outcome = self.plan.propose(start.sectors, size.sectors, ptype=ptype, name=name, flags=flags, role=role)
        return outcome, note

    def action_submit(self) -> None:
        if self.outcome is not None:
            self.dismiss(self.outcome)
        else:
            self.notify(str(self.query_one("#result", Static).render()) or "nothing to do", severity="warning",
                        timeout=4)

    @on(Input.Submitted)
    def _submitted(self) -> None:
        self.action_submit()


# --- the snapping target ------------------------------------------------------------------------------


SnapChoice = tuple[SnapTarget, tuple[int, ...] | None, bool]


class SnapScreen(ModalScreen[SnapChoice | None]):
    """Optimal, physical block, custom grains, or none; optionally re-snap every proposal at once."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "dismiss(None)", "cancel")]
    DEFAULT_CSS = "SnapScreen { align: center middle; }\n" + FORM_CSS

    def __init__(self, plan: Plan) -> None:
        super().__init__()
        self.plan = plan

    def compose(self) -> ComposeResult:
        geom = self.plan.geometry
        ss = geom.logical

        def grain_words(sectors: int) -> str:
            return f"{sectors:,} s = {human_bytes(sectors * ss)}"

        custom = user_grain(geom, self.plan.custom)
        rows = (
            (SnapTarget.OPTIMAL, grain_words(optimal_grain(geom).sectors),
             "lcm of 1 MiB, the physical block, the I/O hint and your grains"),
            (SnapTarget.PHYSICAL, grain_words(physical_grain(geom).sectors), "the physical block only"),
            (SnapTarget.CUSTOM, grain_words(custom.sectors) if custom else "type grains below",
             "a stripe, an erase block, or the lcm of several"),
            (SnapTarget.NONE, "1 sector", "no snapping: partitions land where you put them"),
        )
        mine = self.plan.custom if self.plan.custom is not None else geom.user_grains
        grains = ", ".join(human_bytes(g).replace(" ", "") for g in mine)
        with Vertical(classes="form") as v:
            v.border_title = "Snapping target"
            yield OptionList(*(
                Option(f"{'*' if t is self.plan.target else ' '} {t.value:<9}{size:<22}{why}", id=t.value)
                for t, size, why in rows), id="targets")
            with Horizontal(classes="row"):
                yield Static("Grains", classes="label")
                yield Input(grains, placeholder="e.g. 192KiB, 1MiB (for custom)", id="grains", classes="field")
            yield Static("", id="grains-note", classes="note")
            with Horizontal(classes="row"):
                yield Static("", classes="label")
                yield FlagToggle("re-snap every proposed partition now (fix my layout)", id="fix")
            yield Static("Enter chooses (* is the current one)   Tab: grains, fix   Esc cancels", classes="keys")

    def on_mount(self) -> None:
        options = self.query_one(OptionList)
        options.highlighted = [t for t in SnapTarget].index(self.plan.target)
        self._check()

    def _grains(self) -> tuple[int, ...]:
        text = self.query_one("#grains", Input).value
        out = []
        for part in text.replace(";", ",").split(","):
            if part.strip():
                out.append(parse_size(part, self.plan.geometry).nbytes)
        return tuple(out)

    @on(Input.Changed, "#grains")
    def _check(self) -> None:
        note = self.query_one("#grains-note", Static)
        try:
            grains = self._grains()
        except SizeError as exc:
            note.update(Content(str(exc)))
            return
        if not grains:
            note.update("")
            return
        geom = self.plan.geometry
        try:
            g = physical_grain(geom)
            for nbytes in grains:
                g = g.combine(bytes_grain(geom, nbytes))
        except ValueError as exc:
            note.update(Content(str(exc)))
            return
        mib = g.sectors % mib_grain(geom).sectors == 0
        note.update(Content(f"custom grain: {g.sectors:,} sectors = {human_bytes(g.sectors * geom.logical)}"
                            + ("" if mib else " (not a multiple of 1 MiB)")))

    @on(Input.Submitted, "#grains")
    def _grains_done(self) -> None:
        self._choose(SnapTarget.CUSTOM)

    @on(OptionList.OptionSelected)
    def _chosen(self, event: OptionList.OptionSelected) -> None:
        self._choose(SnapTarget(event.option.id))

    def _choose(self, target: SnapTarget) -> None:
        fix = self.query_one("#fix", FlagToggle).value
        grains: tuple[int, ...] | None = None
        if target is SnapTarget.CUSTOM:
            try:
                grains = self._grains()
            except SizeError as exc:
                self.notify(str(exc), severity="warning", timeout=5)
                return
            if not grains and not user_grain(self.plan.geometry, self.plan.custom):
                self.notify("Type a grain for the custom target (e.g. 192KiB, a stripe).", severity="warning",
                            timeout=5)
                self.query_one("#grains", Input).focus()
                return
            grains = grains or None
        self.dismiss((target, grains, fix))


# --- a file path --------------------------------------------------------------------------------------


class PathScreen(ModalScreen[str | None]):
    """A path for saving or loading a plan; ``act(path)`` does it and returns an error, or None."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "dismiss(None)", "cancel")]
    DEFAULT_CSS = "PathScreen { align: center middle; }\n" + FORM_CSS

    def __init__(self, title: str, prompt: str, default: str, act: Callable[[str], str | None]) -> None:
        super().__init__()
        self.title_text = title
        self.prompt = prompt
        self.default = default
        self.act = act

    def compose(self) -> ComposeResult:
        with Vertical(classes="form") as v:
            v.border_title = self.title_text
            yield Static(self.prompt, classes="note")
            with Horizontal(classes="row"):
                yield Static("File", classes="label")
                yield Input(self.default, id="path", classes="field", select_on_focus=False)
            yield Static("", id="path-error", classes="result -refused")
            yield Static("Enter " + self.title_text.split()[0].lower() + "s   Esc cancels", classes="keys")

    @on(Input.Submitted)
    def _submit(self, event: Input.Submitted) -> None:
        path = event.value.strip()
        error = self.act(path) if path else "type a file name"
        if error:
            self.query_one("#path-error", Static).update(Content(error))
            return
        self.dismiss(path)


# --- pending changes that would be lost ---------------------------------------------------------------


class UnsavedScreen(ModalScreen[str | None]):
    """Asked before quitting, opening another disk or loading a plan while the plan has changes that are
    neither written nor saved: "write", "save", "discard", or None (cancel: nothing happens)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,c", "dismiss(None)", "cancel"),
        Binding("w", "dismiss('write')", "write", show=False),
        Binding("s", "dismiss('save')", "save", show=False),
        Binding("d", "dismiss('discard')", "discard", show=False),
    ]
    DEFAULT_CSS = "UnsavedScreen { align: center middle; }\n" + FORM_CSS

    def __init__(self, what: str, changes: int, *, can_save: bool = True) -> None:
        """``can_save``: offer saving the plan as a file (not when served to browsers)."""
        super().__init__()
        self.what = what
        self.changes = changes
        self.can_save = can_save

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return self.can_save or parameters != ("save",)

    def compose(self) -> ComposeResult:
        n = self.changes
        with Vertical(classes="form") as v:
            v.border_title = "The plan is not saved"
            yield Static(f"The plan has {n} pending change{'s' if n != 1 else ''}, neither written nor saved. "
                         f"{self.what[0].upper() + self.what[1:]} would lose {'them' if n != 1 else 'it'}.",
                         classes="text")
            save = [Option(f"s  save the plan as a file, then go on {self.what}", id="save")] if self.can_save else []
            yield OptionList(
                Option("w  write the plan to the disk first", id="write"),
                *save,
                Option(f"d  discard the changes and go on {self.what}", id="discard"),
                Option("c  cancel: back to the plan", id="cancel"),
                id="unsaved",
            )
            yield Static(f"w {'s ' if self.can_save else ''}d c, or Enter chooses   Esc cancels", classes="keys")

    @on(OptionList.OptionSelected)
    def _chosen(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(None if event.option.id == "cancel" else event.option.id)
