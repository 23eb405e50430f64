#!/usr/bin/env bash
# The crate layers docs/architecture.md draws are the manifests' own: each
# line of its `crates` block ("NAME <- DEP, DEP") must list exactly the
# crate's path dependencies (every section of its Cargo.toml), and every
# crate of the kernel build must have its line. Cargo already refuses a
# dependency cycle; this keeps the picture a reader starts from true.
#
#   tests/layers.sh        (run by tests/lint.sh)
set -euo pipefail
cd "$(dirname "$0")/.."

doc=docs/architecture.md
block=$(sed -n '/^<!-- crates:/,/^```$/p' "$doc" | sed '1,2d;$d')
[ -n "$block" ] || { echo "layers: no crates block in $doc"; exit 1; }

manifest_deps() {
    { grep -oE '^[a-z_]+ *= *\{ *path *= *"\.\./[a-z_]+"' "$1/Cargo.toml" || true; } | cut -d' ' -f1 | sort -u | paste -sd, - | sed 's/,/, /g'
}

status=0
drawn=""
while IFS= read -r line; do
    name=$(awk '{print $1}' <<<"$line")
    deps=$(sed -n 's/^[a-z_]* *<- *//p' <<<"$line" | tr -d ' ' | tr ',' '\n' | sort | paste -sd, - | sed 's/,/, /g')
    drawn="$drawn $name"
    [ -f "$name/Cargo.toml" ] || { echo "layers: $doc draws $name, which is not a crate here"; status=1; continue; }
    actual=$(manifest_deps "$name")
    if [ "$deps" != "$actual" ]; then
        echo "layers: $doc says $name <- ${deps:-nothing}; $name/Cargo.toml says ${actual:-nothing}"
        status=1
    fi
done <<<"$block"

for manifest in */Cargo.toml; do
    name=${manifest%/Cargo.toml}
    grep -q "^name = \"$name\"" "$manifest" || continue
    case " $drawn " in *" $name "*) ;; *) echo "layers: $doc does not draw the crate $name"; status=1 ;; esac
done
[ $status -eq 0 ] && echo "layers: $doc draws the $(wc -w <<<"$drawn") crates as their manifests say"
exit $status
