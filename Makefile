# Berth — the two set-up commands are `make run` and `make test`; both install
# into .venv first when needed.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PROTO_DIR := protos
PROTO_OUT := protos
PROTOS := $(wildcard $(PROTO_DIR)/berth/v1/*.proto)

HTTP_PORT ?= 8888
GRPC_PORT ?= 50051

.PHONY: install run test test-fast lint protos check-protos e2e e2e-deps bench helm-lint clean

install: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,bench]'
	@touch $(STAMP)

run: install
	$(BIN)/berth serve --cluster examples/cluster.yaml --config examples/berth.yaml \
		--http-port $(HTTP_PORT) --grpc-port $(GRPC_PORT)

# Every test: unit, adapter, conformance, lint and the real-control-plane suite.
test: install lint
	$(BIN)/python -m pytest -q -p no:cacheprovider

# The fast suite only (no real control plane).
test-fast: install
	$(BIN)/python -m pytest -q -p no:cacheprovider -m "not e2e"

lint: install
	$(BIN)/ruff check service adapters tests
	$(BIN)/mypy service adapters
	$(BIN)/lint-imports

# Regenerate the committed protobuf stubs (with .pyi from mypy-protobuf).
protos: install
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/python -m grpc_tools.protoc -I $(PROTO_DIR) \
		--python_out=$(PROTO_OUT) --mypy_out=$(PROTO_OUT) \
		--grpc_python_out=$(PROTO_OUT) --mypy_grpc_out=$(PROTO_OUT) \
		$(PROTOS)

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
