# faasrl: `make run` (the main job on an embedded platform) and `make test` (the whole suite).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
BENCH_STAMP := $(VENV)/.installed-bench

.PHONY: install run test lint bench up clean

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -c constraints.txt -e '.[dev]'
	touch $@

$(BENCH_STAMP): $(STAMP)
	$(BIN)/pip install --quiet --disable-pip-version-check -c constraints.txt -e '.[dev,bench]'
	touch $@

install: $(STAMP)

run: $(STAMP)
	$(BIN)/faasrl run examples/cartpole.yaml

test: lint
	$(BIN)/pytest

lint: $(STAMP)
	$(BIN)/ruff check platform functions tests bench examples

bench: $(BENCH_STAMP)
	$(BIN)/python bench/invoke_latency.py
	$(BIN)/python bench/rollout_throughput.py
	$(BIN)/python bench/trajectory_transfer.py
	$(BIN)/python bench/ppo_cartpole.py

up: $(STAMP)
	$(BIN)/faasrl up

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache bench/results
