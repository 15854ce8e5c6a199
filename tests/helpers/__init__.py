"""What the tests share (no tests here): referee tools (tools), named units (units), images and what the
referees read from them (images), `diskplan` as a user runs it (cli), driving the planner with Pilot and its
move dialog (pilot), plans made by hand and drawn by Hypothesis (plans), counting calls (costs), processes
holding a disk (lockholders), disks for the data moves (movedisk) and for the logical-partition moves
(logicals), storage-stack headers (stacks). Fixtures are in conftest.py. A test module never imports
another (tests/test_layers.py checks)."""
