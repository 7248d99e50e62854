# faasrl: `make run` (the main job on an embedded platform) and `make test` (the whole suite).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: install run test lint bench up clean

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -c constraints.txt -e '.[dev]'
	touch $@

install: $(STAMP)

run: $(STAMP)
	$(BIN)/python examples/hello_echo.py

test: lint
	$(BIN)/pytest

lint: $(STAMP)
	$(BIN)/ruff check platform functions tests bench examples

bench: $(STAMP)
	$(BIN)/python bench/invoke_latency.py

up: $(STAMP)
	$(BIN)/faasrl up

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache bench/results
