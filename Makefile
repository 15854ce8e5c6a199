# The two commands a newcomer needs (see README.md): `make demo` and `make test`.
.PHONY: demo test lint bench screenshots share setup setup-test clean

# mypy strict on src and scripts (pyproject.toml); the tests again, with unannotated test functions allowed
MYPY_TESTS = cd tests && MYPYPATH=../src:../scripts ../.venv/bin/mypy --config-file ../pyproject.toml --allow-untyped-defs \
	--allow-incomplete-defs --explicit-package-bases .

setup:
	@scripts/bootstrap.sh

setup-test:
	@scripts/bootstrap.sh --test

demo: setup
	.venv/bin/diskplan --demo

test: lint
	.venv/bin/python -m pytest

lint: setup-test
	.venv/bin/ruff check src tests scripts
	.venv/bin/mypy
	$(MYPY_TESTS)

bench: setup-test
	.venv/bin/python scripts/bench.py

screenshots: setup-test
	.venv/bin/python scripts/screenshots.py

share: setup-test  # the man page and shell completions, from the argument parser
	.venv/bin/python scripts/gen_share.py

clean:
	rm -rf .venv .pytest_cache .ruff_cache .hypothesis .mypy_cache tests/.mypy_cache
