#!/bin/bash
# run.sh NAME PATH: pack PATH (relative to the workspace, the current
# folder) into out/NAME.tar.gz. The archive is written in $TMPDIR first, so
# that packing "." does not read the archive it is writing.
set -euo pipefail

name=$1
path=$2
case $name in
  "" | */* | .*)
    echo "archive: name \"$name\" must be a plain file name, such as \"backup\"" >&2
    exit 2
    ;;
esac

tmp="${TMPDIR:?TMPDIR is not set}/$name.tar.gz"
tar --create --numeric-owner --file=- -- "$path" | gzip -6 >"$tmp"
mkdir -p out
mv -f -- "$tmp" "out/$name.tar.gz"
echo "out/$name.tar.gz"
