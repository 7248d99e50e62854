# faasrl: `make run` (the main job on an embedded platform) and `make test` (the whole suite);
# `make docker-engine`, `make images`, `make up` / `make down` for the compose cluster;
# `make docs` serves the docs site, `make docs-build` builds it strictly.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
BENCH_STAMP := $(VENV)/.installed-bench
RLLIB_VENV  := .venv-rllib
RLLIB_STAMP := $(RLLIB_VENV)/.installed

.PHONY: install run test lint bench clean docker-engine images image-runtime image-platform \
	image-runtime-gpu up down bench-docker docs-schemas docs docs-build rllib-env

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -c constraints.txt -e '.[dev]'
	touch $@

$(BENCH_STAMP): $(STAMP)
	$(BIN)/pip install --quiet --disable-pip-version-check -c constraints.txt -e '.[dev,bench]'
	touch $@

# RLlib for the MuJoCo peers' third side, apart: its gymnasium pin is not the platform's.
$(RLLIB_STAMP): bench/rllib_requirements.txt
	$(PYTHON) -m venv $(RLLIB_VENV)
	$(RLLIB_VENV)/bin/pip install --quiet --disable-pip-version-check -r $<
	touch $@

rllib-env: $(RLLIB_STAMP)

install: $(STAMP)

run: $(STAMP)
	$(BIN)/faasrl run examples/cartpole.yaml

test: lint $(BENCH_STAMP) $(RLLIB_STAMP)
	$(BIN)/pytest

lint: $(STAMP)
	$(BIN)/ruff check platform functions tests bench examples images docs/gen

# The function contracts' JSON Schemas in docs/contracts (a unit test fails when they are stale).
docs-schemas: $(STAMP)
	$(BIN)/python -m faasrl.contracts_schema docs/contracts

# The docs site (mkdocs.yml): its reference pages are generated from the code at build time.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve

docs-build: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

bench: $(BENCH_STAMP)
	$(BIN)/python bench/invoke_latency.py
	$(BIN)/python bench/throughput.py
	$(BIN)/python bench/cold_start.py
	$(BIN)/python bench/rollout_throughput.py
	$(BIN)/python bench/trajectory_transfer.py
	$(BIN)/python bench/ppo_cartpole.py
	$(BIN)/python bench/cartpole_e2e.py
	$(BIN)/python bench/longhaul.py
	$(BIN)/python bench/offpolicy.py
	$(BIN)/python bench/nitro_overhead.py

bench-docker: $(STAMP)
	$(BIN)/python bench/docker_containers.py

# Docker: the engine (installed and started where none runs), the images (offline base,
# host-built wheelhouse; each step skipped when its inputs did not change), the compose cluster.
docker-engine:
	deploy/docker-engine.sh

images: image-runtime image-platform

image-runtime image-platform image-runtime-gpu: image-%: $(STAMP)
	images/build.sh $*

up: images
	deploy/cluster.sh up

down:
	deploy/cluster.sh down

clean:
	rm -rf $(VENV) $(RLLIB_VENV) .pytest_cache .ruff_cache bench/results site
