"""Everything that touches libparted (only ``libparted.py`` imports ``parted``) and raw table bytes."""
