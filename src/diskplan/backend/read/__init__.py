"""Reading a target: what it is, its table (through backend.parted and backend.raw), what sits
inside each partition, and plan files read without trusting them."""
