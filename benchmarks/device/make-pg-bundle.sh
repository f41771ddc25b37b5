#!/usr/bin/env bash
# PostgreSQL for the GPU machine, which has none and reaches no registry: the server binaries of
# the `pgserver` wheel (PostgreSQL 16, linked against libc only) and psycopg's pure-Python
# package, trimmed to about 4.4 MB in .pgbundle/pg.tar.xz (git-ignored: listed in
# .gitignore). psycopg finds libpq through ctypes.util.find_library, which does not see the
# wheel's renamed library: the packed copy falls back to /usr/local/lib/libpq.so.5. On the GPU
# machine (root), in a call that carries .pgbundle:
#   mkdir -p /tmp/pg && tar xJf .pgbundle/pg.tar.xz -C /tmp/pg \
#     && cp /tmp/pg/pgserver/pginstall/lib/libpq.so.5 /usr/local/lib/ && ldconfig
# and in the calls after it (the machine stays warm ~30 s between calls):
#   export PYTHONPATH=$PYTHONPATH:/tmp/pg PSYCOPG_IMPL=python
#   python3 benchmarks/probes/multigpu_campaign.py --pg-bin /tmp/pg/pgserver/pginstall/bin ...
# (.pgbundle and .devbundle together exceed one call's 64 MiB: carry them in separate calls.)
set -euo pipefail
out=.pgbundle
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d "$tmp/whl" pgserver==0.1.4 psycopg==3.3.9
mkdir "$tmp/x"
for w in "$tmp"/whl/*.whl; do (cd "$tmp/x" && python3 -m zipfile -e "$w" .); done
pg="$tmp/x/pgserver/pginstall"
rm -rf "$pg/include" "$pg/lib/postgresql/pgxs" "$pg/lib/postgresql/vector.so" "$pg"/share/extension/vector* \
  "$pg/lib/pkgconfig" "$pg"/lib/*.a "$tmp"/x/pgserver/*.py
(cd "$pg/bin" && ls | grep -v -x -E "postgres|initdb|pg_ctl|createdb|psql|pg_isready" | xargs rm -f)
chmod +x "$pg"/bin/*
cp "$tmp"/x/pgserver.libs/libpq-*.so.* "$pg/lib/libpq.so.5"
sed -i 's|libname = ctypes.util.find_library("pq")$|libname = ctypes.util.find_library("pq") or "/usr/local/lib/libpq.so.5"|' \
  "$tmp/x/psycopg/pq/misc.py"
grep -q '/usr/local/lib/libpq.so.5' "$tmp/x/psycopg/pq/misc.py"
mkdir -p "$out"
tar cf - -C "$tmp/x" . | xz -9e > "$out/pg.tar.xz"
ls -l "$out/pg.tar.xz" >&2
