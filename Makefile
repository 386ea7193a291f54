.PHONY: help install run test lint bench

help:  ## list targets
	@grep -E '^[a-z]+:.*##' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

install:  ## install the project with dev tools
	pip install -e '.[dev]'

run:  ## run the whole pipeline on the default model/backend
	python -m pipeline model=vit backend=xnnpack

test:  ## run the test suite (the README's test command)
	python -m pytest -n 2

lint:  ## ruff lint + format check, mypy
	ruff check . && ruff format --check . && mypy

bench:  ## run the benchmarks (results go to benchmarks/RESULTS.md by hand)
	@for b in benchmarks/bench_*.py; do echo "== $$b"; PYTHONPATH=. python $$b; done
