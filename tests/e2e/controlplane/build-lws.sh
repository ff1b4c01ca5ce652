#!/usr/bin/env bash
# Builds the LeaderWorkerSet controller (lws-manager, sigs.k8s.io/lws/cmd) that
# tests/e2e/test_lws.py runs against the bed, from its published Go module at
# the version the wrapper module lws/ pins, into
# $BERTH_E2E_CACHE/shared/lws/<version>/ with the module's config/crd/bases
# and config/webhook beside it (build-controller.sh). Skipped when cached;
# prints that directory.
exec "$(dirname "${BASH_SOURCE[0]}")/build-controller.sh" lws sigs.k8s.io/lws sigs.k8s.io/lws/cmd \
  lws-manager config/crd/bases config/webhook
