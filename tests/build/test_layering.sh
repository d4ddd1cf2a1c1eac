#!/usr/bin/env bash
# test_layering.sh -- the "smaller rooms" rules (docs/architecture.md) on the
# sources and the built objects: no call cycle between the files of a part,
# no lib/ or cli/ file over 600 lines, no function over 80.
cd "$(dirname "$0")/../.." || exit 1
exec python3 scripts/check-layering "${FENCE_BUILD:-build}"
