"""Every format ``diskplan export`` writes, in one registry: its name, what renders it, and whether it needs
exact sectors. ``export`` offers exactly these (its ``--format`` choices) and renders through them, so a new
format is one entry here, and an unknown name is an error, never a silent fallback to another format."""

from __future__ import annotations

from collections.abc import Callable

from diskplan.model.formats.ansible import to_ansible
from diskplan.model.formats.ignition import to_ignition
from diskplan.model.formats.planfile import PlanFileError, PlanSpec, to_json, to_parted, to_sfdisk
from diskplan.model.formats.repart import to_repart
from diskplan.model.safetext import safe_name
from diskplan.model.value import value


@value
class Format:
    name: str
    render: Callable[[PlanSpec, str], str]  # (the plan, the device it names) -> the text
    exact: bool  # a script in exact sectors: a relative plan must be resolved on a disk first
    what: str  # for --help


# A script names the device in comments and commands: a control character in an image's file name is shown
# escaped (model.safetext), as every other command shows it, never sent raw to a terminal; the bytes of a name
# that is not UTF-8 stay as they are.
FORMATS: dict[str, Format] = {f.name: f for f in (
    Format("json", lambda spec, device: to_json(spec), False, "the JSON plan file (diskplan apply reads it)"),
    Format("sfdisk", lambda spec, device: to_sfdisk(spec, safe_name(device)), True, "an sfdisk script"),
    Format("parted", lambda spec, device: to_parted(spec, safe_name(device)), True, "parted commands"),
    Format("ansible", to_ansible, False, "an Ansible playbook of community.general.parted tasks"),
    # Ignition wants a path
    Format("ignition", lambda spec, device: to_ignition(spec, device if device != "DEVICE" else "/dev/DEVICE"),
           False, "an Ignition config (spec 3.4.0)"),
    Format("repart", lambda spec, device: to_repart(spec), False, "systemd-repart.d definitions"),
)}


def render(spec: PlanSpec, name: str, device: str) -> str:
    """``spec`` in the format called ``name``; PlanFileError for an unknown name, or for a relative plan in a
    format of exact sectors (saying which formats take it)."""
    fmt = FORMATS.get(name)
    if fmt is None:
        raise PlanFileError(f"unknown export format {name!r} (one of: {', '.join(FORMATS)})")
    if fmt.exact and spec.relative is not None:
        # Ignition sizes are MiB, never a share: offered only to a plan without percentages
        others = [f.name for f in FORMATS.values() if not f.exact and f.name != "json"
                  and not (f.name == "ignition" and any(w.size.percent is not None for w in spec.relative))]
        raise PlanFileError(f"{'an' if name == 'sfdisk' else 'a'} {name} script is in exact sectors, and this plan's "
                            "sizes are relative: `diskplan apply PLAN DISK` resolves it on a disk, then "
                            f"`diskplan export DISK` prints it (or use --format {', '.join(others[:-1])} or "
                            f"{others[-1]})")
    return fmt.render(spec, device)
