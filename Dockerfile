# syntax=docker/dockerfile:1
# Berth's container image: a wheel built in one stage, installed into a venv
# in the final one; no compilers, no wheel files and no pip in the result.
#
#   docker build -t berth:0.1.0 .
#   docker run --rm berth:0.1.0 serve --cluster /path/to/cluster.yaml
#
# The Helm chart (helm/berth) runs it as
#   berth serve --config /etc/berth/config.yaml --in-cluster
# as user 65532 with a read-only root filesystem.

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

# ---------------------------------------------------------------- build
FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY berth ./berth
COPY clients/python ./clients/python
# Berth's wheel and its client library's (berth-client, built from this
# repository), plus a wheel of every other dependency, so the final stage
# installs offline and compiles nothing (binary wheels only for those).
RUN python -m pip wheel --wheel-dir /wheels --no-deps . ./clients/python \
 && python -m pip wheel --wheel-dir /wheels --find-links /wheels --only-binary=:all: /wheels/berth-0*.whl

# ---------------------------------------------------------------- runtime
FROM ${PYTHON_IMAGE}
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
# The wheels are bind-mounted, not copied: they leave no layer behind. The
# venv has no pip or setuptools of its own; pip byte-compiles what it
# installs, so nothing needs writing at run time.
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    python -m venv --without-pip /opt/venv \
 && python -m pip --python /opt/venv/bin/python install --no-index --find-links /wheels berth \
 && berth --help > /dev/null
USER 65532:65532
WORKDIR /tmp
# HTTP: extender, /healthz, /readyz, /metrics. gRPC: berth.v1 and grpc.health.v1.
EXPOSE 8888 50051
ENTRYPOINT ["berth"]
CMD ["--help"]
