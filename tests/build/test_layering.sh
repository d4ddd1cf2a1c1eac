#!/usr/bin/env bash
# test_layering.sh -- the rooms rules (docs/architecture.md) on the sources
# and the built objects: no call cycle between the files of a part
# (lib/lease, its issuer lib/lease/redis and its asynchronous API
# lib/lease/async are parts of their own), libfence's rooms call only
# downwards (the issuer nothing of the core or the asynchronous API, the
# core nothing of the asynchronous API), the issuer includes no core
# header, the Redis engine no lease header, the checkers no libfence
# header, no lib/ or cli/ file over 1,500 lines.
cd "$(dirname "$0")/../.." || exit 1
exec python3 scripts/check-layering "${FENCE_BUILD:-build}"
