"""What the kernel knows about block devices: sysfs topology, and (only ``udev.py``) pyudev."""
