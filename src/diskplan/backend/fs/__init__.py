"""Filesystems by their own tools: checks (blkid, fsck), resizes (resize2fs, xfs_growfs, ...), FAT
through libparted's resizer, and a partition resized with its filesystem."""
