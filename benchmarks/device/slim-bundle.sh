#!/usr/bin/env bash
# Repack .devbundle/site.tar.xz (written by ../shared/device/make-bundle.sh) without what the GPU
# machine never loads, so that the bundle and the working tree stay under the device tool's 64 MiB
# per call: TVM-FFI's bundled third-party sources (tvm_ffi/3rdparty), greenlet (SQLAlchemy's asyncio
# only) and SQLAlchemy's compiled Cython speed-ups (it falls back to the same modules in Python).
# libtvm_ffi_testing.so stays: tvm_ffi's core extension links it (2026-11-23: a bundle without it
# failed to import tvm_ffi on the GPU machine). xz as make-bundle.sh plus the x86 BCJ filter (the
# bundle is mostly x86 shared libraries: 1.7 MB less; tar xJf undoes it by itself); about 6 minutes
# on 2 cores; 61.0 -> about 56.6 MB. From the project root: bash benchmarks/device/slim-bundle.sh
set -euo pipefail
bundle=.devbundle/site.tar.xz
[ -f "$bundle" ] || { echo "no $bundle: run ../shared/device/make-bundle.sh first" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
tar xJf "$bundle" -C "$tmp"
rm -rf "$tmp/tvm_ffi/3rdparty" "$tmp"/greenlet "$tmp"/greenlet-*
find "$tmp/sqlalchemy" -name "*_cy.cpython*.so" -delete
[ -f "$tmp/tvm_ffi/lib/libtvm_ffi_testing.so" ] || { echo "tvm_ffi/lib/libtvm_ffi_testing.so missing" >&2; exit 1; }
tar cf - -C "$tmp" . | xz -9e -T1 --x86 --lzma2=preset=9e,dict=256MiB > "$bundle.part"
xz -t "$bundle.part"
before=$(stat -c %s "$bundle")
chmod u+w "$bundle" 2>/dev/null || true
mv "$bundle.part" "$bundle"
echo "$bundle: $before -> $(stat -c %s "$bundle") bytes" >&2
