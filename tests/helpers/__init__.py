"""What the tests share (no tests here): referee tools (tools), named units (units), images and what the
referees read from them (images), `diskplan` as a user runs it (cli), driving the planner with Pilot
(pilot), counting calls (costs), processes holding a disk (lockholders). Fixtures are in conftest.py."""
