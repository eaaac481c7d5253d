#!/bin/sh
# Rebuild the example pack's archive, its signature and the index from ops-basics/, with the
# project's own commands (`pack build`, `pack sign`, `pack index build`): run it after changing
# anything under ops-basics/ (tests/examples/test_example_pack.py fails until then). The build is
# reproducible and Ed25519 signatures are deterministic, so an unchanged folder gives the same
# three files again, byte for byte (the gzip bytes may differ with another zlib).
set -eu
cd "$(dirname "$0")"
cli=${ONGRID_SKILLS_CLI:-../../.venv/bin/ongrid-skills}
rm -f ops-basics-*.tar.gz ops-basics-*.tar.gz.sig
"$cli" pack build ops-basics
for archive in ops-basics-*.tar.gz; do
  "$cli" pack sign "$archive" --key TEST-KEY-DO-NOT-USE
done
"$cli" pack index build .
