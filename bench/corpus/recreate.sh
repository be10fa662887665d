#!/bin/sh
# Re-create the public Gleam corpus (../shared/gleamcorpus) with plain git, for anyone with
# network access:
#
#     bench/corpus/recreate.sh DEST
#
# For each row of MANIFEST.tsv it fetches the repository at the pinned commit, unpacks that
# commit's tree, and keeps only the files FILES.sha256 lists for it (its .gleam files,
# gleam.toml files and licence/notice files, less the boilerplate and vendored files the
# held-out check removed), then verifies every file's SHA-256. A folder already complete is
# skipped, so an interrupted run can be started again. GIT_BASE (default
# https://github.com) is where OWNER/NAME is fetched from.
set -eu

HERE=$(cd "$(dirname "$0")" && pwd)
DEST=${1:?usage: recreate.sh DEST}
BASE=${GIT_BASE:-https://github.com}
mkdir -p "$DEST"
DEST=$(cd "$DEST" && pwd)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
TAB=$(printf '\t')

tail -n +2 "$HERE/MANIFEST.tsv" | while IFS="$TAB" read -r repo commit _rest; do
    folder=$(printf '%s' "$repo" | sed 's#/#__#')
    if [ -f "$DEST/$folder/.recreated" ]; then
        continue
    fi
    rm -rf "$WORK/git" "$WORK/tree" "$DEST/$folder"
    mkdir -p "$WORK/tree"
    git init -q "$WORK/git"
    # One commit, shallow; a server that refuses a fetch by id gets a full fetch instead.
    if ! git -C "$WORK/git" fetch -q --depth 1 "$BASE/$repo" "$commit" 2>/dev/null; then
        git -C "$WORK/git" fetch -q "$BASE/$repo" '+refs/*:refs/fetched/*'
    fi
    git -C "$WORK/git" archive "$commit" | tar -x -C "$WORK/tree"
    # "HASH  FOLDER/PATH": the path starts after the 64 hex digits and two spaces.
    awk -v f="$folder/" 'index($0, "  " f) == 65 { print substr($0, 67 + length(f)) }' \
        "$HERE/FILES.sha256" | while IFS= read -r path; do
        mkdir -p "$DEST/$folder/$(dirname "$path")"
        cp "$WORK/tree/$path" "$DEST/$folder/$path"
    done
    touch "$DEST/$folder/.recreated"
    echo "$folder" >&2
done

cd "$DEST"
sha256sum --check --quiet "$HERE/FILES.sha256"
echo "recreated $(tail -n +2 "$HERE/MANIFEST.tsv" | wc -l) repositories in $DEST; files verified"
