# Berth's container image: a wheel built in one stage, installed into a venv
# in the final one; no compilers, no wheel files and no pip in the venv.
# Any builder builds it: docker (BuildKit or the classic builder), podman,
# buildah (`make image` picks one; scripts/image.sh).
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
# PEM certificates pip trusts besides the base image's (a build machine
# behind a TLS-intercepting proxy; scripts/image.sh passes the machine's
# local CAs). This stage only: nothing of it reaches the final image.
ARG PIP_EXTRA_CA=""
WORKDIR /src
COPY pyproject.toml README.md ./
COPY berth ./berth
COPY clients/python ./clients/python
# Berth's wheel and its client library's (berth-client, built from this
# repository), plus a wheel of every other dependency, so the final stage
# installs offline and compiles nothing (binary wheels only for those).
RUN if [ -n "$PIP_EXTRA_CA" ]; then \
        cat /etc/ssl/certs/ca-certificates.crt > /tmp/pip-ca.pem && printf '%s\n' "$PIP_EXTRA_CA" >> /tmp/pip-ca.pem \
        && export PIP_CERT=/tmp/pip-ca.pem; fi \
 && python -m pip wheel --wheel-dir /wheels --no-deps . ./clients/python \
 && python -m pip wheel --wheel-dir /wheels --find-links /wheels --only-binary=:all: /wheels/berth-0*.whl
# The venv is made here, from the same base image as the final stage, and
# copied whole: its interpreter link points at the base's python, which
# the final stage has at the same path. It has no pip or setuptools of its
# own; pip byte-compiles what it installs, so nothing is written at run
# time. (A copy rather than BuildKit's RUN --mount: the classic builder,
# podman and buildah build this file too.)
RUN python -m venv --without-pip /opt/venv \
 && python -m pip --python /opt/venv/bin/python install --no-index --find-links /wheels berth

# ---------------------------------------------------------------- runtime
FROM ${PYTHON_IMAGE}
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
COPY --from=build /opt/venv /opt/venv
RUN berth --help > /dev/null
USER 65532:65532
WORKDIR /tmp
# HTTP: extender, /healthz, /readyz, /metrics. gRPC: berth.v1 and grpc.health.v1.
EXPOSE 8888 50051
ENTRYPOINT ["berth"]
CMD ["--help"]
