"""Everything that reads or writes a disk, below the user interface. Its sub-packages point one way (each
imports only those before it; tests/test_layers.py checks):

- ``raw``: a disk's sectors, its table bytes parsed and patched without libparted, what a path is, the
  kernel's partition list;
- ``parted``: libparted (only ``parted/pedread.py``, its read as plain rows, and ``parted/libparted.py``, the
  reads into the model and the writes, import pyparted) in forked, isolated children;
- ``read``: a target read whole: its kind, its table, what sits inside each partition, plan files;
- ``fs``: filesystems through their own tools (blkid, fsck, resize2fs, xfs_growfs, FAT through libparted);
- ``write``: the steps every write shares (lock, backup, commit, read-back), GPT repair, restore;
- ``move``: data moves and resizes: the engine, its journal, rollback, plans that keep data.

Beside them: the demo images, ``measure``'s timing and labs, the loop devices diskplan attaches, and the
tests' crash points (``faults``)."""
