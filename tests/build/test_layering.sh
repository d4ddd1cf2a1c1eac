#!/usr/bin/env bash
# test_layering.sh -- the rooms rules (docs/architecture.md) on the sources
# and the built objects: no call cycle between the files of a part
# (lib/lease/redis is one of its own), the Redis engine calls nothing of
# lib/lease and includes no lease_internal.h, no lib/ or cli/ file over
# 1,500 lines.
cd "$(dirname "$0")/../.." || exit 1
exec python3 scripts/check-layering "${FENCE_BUILD:-build}"
