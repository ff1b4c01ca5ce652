# Berth — the two set-up commands are `make run` and `make test`; both install
# into .venv first when needed.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

# The Kubernetes release of the e2e bed and the conformance reference
# (tests/e2e/controlplane/k8s/ has one wrapper module per supported release).
K8S_VERSION ?= v1.37.2
K8S_VERSIONS := v1.35.4 v1.36.3 v1.37.2
export BERTH_K8S_VERSION := $(K8S_VERSION)

HTTP_PORT ?= 8888
GRPC_PORT ?= 50051

.PHONY: image image-test install run test test-fast test-matrix lint protos docs e2e e2e-deps browser-deps postgres-deps bench helm-lint openapi fuzz soak conformance clean

install: $(STAMP)

# berth depends on berth-client (clients/python: the gRPC client library and
# the generated stubs), installed from this repository in the same command:
# nothing beyond PyPI is needed.
$(STAMP): pyproject.toml clients/python/pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	@# PYTHONWARNINGS: setuptools' build backend warns "Editable installation.
	@# Please be careful with folders in your working directory..." for every
	@# -e install, which pip >= 24 passes through even with --quiet.
	PYTHONWARNINGS=ignore $(BIN)/python -m pip install --quiet -e clients/python -e '.[dev,bench]'
	@touch $(STAMP)

run: install
	$(BIN)/berth serve --cluster examples/cluster.yaml --config examples/berth.yaml \
		--http-port $(HTTP_PORT) --grpc-port $(GRPC_PORT)

# Berth's container image from the Dockerfile, with whichever of docker,
# podman or buildah can run here (docs/operations.md: push it and set the
# chart's image.repository). IMAGE=registry/berth:tag names it.
IMAGE ?= berth:$(shell sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml)

# scripts/image.sh picks the builder that can run (a docker whose daemon
# answers, podman, buildah; Debian's buildah installed when none) and, where
# no registry has the python base image, makes one from Debian's packages.
image:
	IMAGE=$(IMAGE) sh scripts/image.sh

# Builds the image as `make image` does and runs Berth inside it
# (tests/packaging/test_image.py; minutes on a machine's first build, so not
# part of `make test`).
image-test: install
	BERTH_IMAGE_TEST=1 $(BIN)/python -m pytest -q -p no:cacheprovider -m image tests/packaging

# Every test: unit, adapter, conformance, lint, the Helm chart, the
# dashboard in a real browser (browser-deps) and the real-control-plane suite
# (whose binaries e2e-deps builds once per machine).
test: install lint e2e-deps browser-deps postgres-deps
	$(BIN)/python -m pytest -q -p no:cacheprovider

# Debian's chromium for the dashboard's browser tests (tests/ui), which
# Playwright for Python (a dev dependency) drives by its executable path:
# Playwright's own browser download cannot run here. Installed once per
# machine through apt-get, as root or with sudo; otherwise it says what to
# run and the browser tests skip (under CI=true they fail instead).
browser-deps:
	@if [ -x /usr/bin/chromium ] || command -v chromium >/dev/null; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ]; then sudo=""; \
	elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then sudo="sudo"; \
	else echo "browser-deps: chromium is missing and installing it needs root: apt-get install chromium" >&2; exit 0; fi; \
	if ! command -v apt-get >/dev/null; then echo "browser-deps: no apt-get; install a chromium at /usr/bin/chromium" >&2; exit 0; fi; \
	echo "browser-deps: installing Debian's chromium"; \
	$$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq chromium >/dev/null

# Debian's PostgreSQL server for the postgres state store's tests and
# benchmark (tests/store/pgserver.py starts one per run, on loopback in a
# temporary directory, as the postgres user when run as root). Installed
# once per machine through apt-get, as root or with sudo, like chromium;
# the package's own cluster is not started (the tests run their own).
postgres-deps:
	@if ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ]; then sudo=""; \
	elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then sudo="sudo"; \
	else echo "postgres-deps: PostgreSQL is missing and installing it needs root: apt-get install postgresql" >&2; exit 0; fi; \
	if ! command -v apt-get >/dev/null; then echo "postgres-deps: no apt-get; install PostgreSQL under /usr/lib/postgresql" >&2; exit 0; fi; \
	echo "postgres-deps: installing Debian's postgresql"; \
	$$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq postgresql >/dev/null; \
	if command -v pg_ctlcluster >/dev/null; then $$sudo pg_ctlcluster --force $$(ls /usr/lib/postgresql | sort -n | tail -1) main stop 2>/dev/null || true; fi

# kube-apiserver, kube-scheduler, kube-controller-manager (of $(K8S_VERSION)),
# etcd and helm, built from their Go modules at pinned versions into a
# per-machine cache outside the repo (see the script); and the LeaderWorkerSet
# controller tests/e2e/test_lws.py runs (build-lws.sh) and the JobSet controller
# tests/e2e/test_jobset.py runs (build-jobset.sh; both skipped when cached).
e2e-deps:
	tests/e2e/controlplane/build.sh $(K8S_VERSION)
	tests/e2e/controlplane/build-lws.sh
	tests/e2e/controlplane/build-jobset.sh

# The e2e suite and the conformance sample against every supported release
# (1.35, 1.36, 1.37), each on its own control plane and kube-scheduler;
# builds what is missing first (about 9 minutes a release on 2 cores).
test-matrix: install
	tests/e2e/controlplane/build.sh $(K8S_VERSIONS)
	tests/e2e/controlplane/build-lws.sh
	tests/e2e/controlplane/build-jobset.sh
	@set -e; for v in $(K8S_VERSIONS); do \
		echo "== Kubernetes $$v"; \
		BERTH_K8S_VERSION=$$v $(BIN)/python -m pytest -q -p no:cacheprovider -m "e2e or conformance" tests/e2e tests/conformance; \
	done

# The real-control-plane suite and the chart's validation against it.
e2e: install e2e-deps
	$(BIN)/python -m pytest -q -p no:cacheprovider -m e2e tests/e2e tests/helm

# The differential conformance suite's large sample: Berth against the real
# kube-scheduler on 5 seeded random clusters of 20 nodes, 40 pods each, about
# 30 % of them with ResourceClaims (tests/conformance; `make test` runs one
# cluster of 20 pods, which must agree completely).
# BERTH_CONFORMANCE_SEED/_CLUSTERS/_PODS/_NODES change the sample, and
# BERTH_CONFORMANCE_CLAIMS the share of pods with claims (0.8: DRA-heavy).
conformance: install e2e-deps
	BERTH_CONFORMANCE_CLUSTERS=$${BERTH_CONFORMANCE_CLUSTERS:-5} BERTH_CONFORMANCE_PODS=$${BERTH_CONFORMANCE_PODS:-40} \
		BERTH_CONFORMANCE_NODES=$${BERTH_CONFORMANCE_NODES:-20} \
		$(BIN)/python -m pytest -q -p no:cacheprovider -s -m conformance tests/conformance

# helm lint / template for both roles, schema and server-side validation.
helm-lint: install e2e-deps
	$(BIN)/python -m pytest -q -p no:cacheprovider tests/helm

# The benchmark suite (never part of `make test`); figures go to bench/results/.
bench: install e2e-deps
	$(BIN)/python -m bench

# The long fuzz runs: 100 000 mutated extender requests, 20 000 mutated gRPC
# calls and the Hypothesis properties at the "fuzz" profile (tests/fuzz;
# `make test` runs a bounded sample of each). BERTH_FUZZ_SEED=N replays a run.
fuzz: install
	BERTH_FUZZ_HTTP=$${BERTH_FUZZ_HTTP:-100000} BERTH_FUZZ_GRPC=$${BERTH_FUZZ_GRPC:-20000} HYPOTHESIS_PROFILE=fuzz \
		$(BIN)/python -m pytest -q -p no:cacheprovider -s --timeout 1800 -m "(fuzz or hypothesis) and not e2e" tests

# The long soak: berth serve under 50 connections of mixed load for 240 s; RSS
# and p99 must plateau (tests/soak; `make test` runs 15 s of it). Beside the
# same load: the expensive reads (WhatIf, Why over 3000 pods, feeds of 2000
# pods, 1000 decision streams) 120 s a case, and SIGTERM 20 times in a row
# (`make test`: WhatIf and Why 8 s, SIGTERM 3 times).
soak: install
	BERTH_SOAK_SECONDS=$${BERTH_SOAK_SECONDS:-240} BERTH_SOAK_LONG=1 \
		BERTH_SOAK_READS_SECONDS=$${BERTH_SOAK_READS_SECONDS:-120} BERTH_SOAK_SIGTERM_ROUNDS=$${BERTH_SOAK_SIGTERM_ROUNDS:-20} \
		$(BIN)/python -m pytest -q -p no:cacheprovider -s tests/soak

# The fast suite only (no real control plane).
test-fast: install
	$(BIN)/python -m pytest -q -p no:cacheprovider -m "not e2e"

lint: install
	$(BIN)/ruff check berth clients/python tests bench scripts examples
	$(BIN)/mypy berth clients/python/berth_client examples/plugins/berth-gpu-affinity/src examples/clients
	$(BIN)/lint-imports

# Regenerate the committed protobuf stubs (with .pyi from mypy-protobuf) into
# the client library, clients/python/berth_client/api/v1 (berth.api.v1
# re-exports them); tests/core/test_protos.py fails when they are stale.
protos: install
	$(BIN)/python scripts/gen_protos.py

# docs/configuration.md and docs/cli.md, generated from berth/config.py's
# structs and field comments and from the CLI's argparse parser
# (tests/core/test_generated_docs.py fails when they are stale).
docs: install
	$(BIN)/python scripts/gen_config_doc.py
	$(BIN)/python scripts/gen_cli_doc.py

# Regenerate the committed Kubernetes field schema berth/cluster/openapi/v1.37.json
# (strict manifests) from the e2e bed's kube-apiserver; needs e2e-deps, not run by `make test`.
openapi: install e2e-deps
	$(BIN)/python scripts/gen_openapi.py

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
