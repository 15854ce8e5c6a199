"""Below libparted: a disk's sectors read and written, its table bytes parsed and patched (MBR, EBR
chains, GPT headers and entries, APM/BSD), what a path is, and the kernel's partition list."""
