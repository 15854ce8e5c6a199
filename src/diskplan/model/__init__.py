"""The pure model: imports nothing but the stdlib (tests/test_layers.py checks). At its top the vocabulary
every part shares: geometry, grains, extents, tables, labels and type names, sizes and units, exit statuses,
the storage stack inside a partition and its plan. Its sub-packages, each importing only those before it:

- ``findings``: what is wrong where, with its arithmetic; the code registry; the report ``check`` prints;
  what the other tools would say;
- ``plan``: the wanted table shaped step by step, its operations, snapping, data-move schedules, relative
  plans and repairs;
- ``formats``: plan files and what plans travel as (JSON, sfdisk scripts, Ansible, Ignition, repart);
- ``teach``: the demo disks, exercises, and what ``measure``'s numbers and labs mean."""
