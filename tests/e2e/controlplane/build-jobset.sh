#!/usr/bin/env bash
# Builds the JobSet controller manager (sigs.k8s.io/jobset, its main.go) that
# tests/e2e/test_jobset.py runs against the bed, from its published Go module
# at the version the wrapper module jobset/ pins, into
# $BERTH_E2E_CACHE/shared/jobset/<version>/ with the module's
# config/components/crd/bases and config/components/webhook beside it
# (build-controller.sh). Skipped when cached; prints that directory.
exec "$(dirname "${BASH_SOURCE[0]}")/build-controller.sh" jobset sigs.k8s.io/jobset sigs.k8s.io/jobset \
  jobset-manager config/components/crd/bases config/components/webhook
