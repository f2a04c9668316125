#!/usr/bin/env bash
# Fetch the XPlainVerse challenge's leaderboard scorer program (the organisers' xdd-scorer image's
# /app/program, as copied to GitHub by a participant) into a local folder, once, for
# tests/exports/test_xdd.py (XDD_SCORER=<folder>/program). It has no licence file: it is
# fetched to run beside forenset, never vendored or committed.
# usage: scripts/fetch_xdd_scorer.sh [DEST]   (default: tests/.fixtures/xdd-scorer)
set -euo pipefail
dest="${1:-tests/.fixtures/xdd-scorer}"
repo="https://github.com/TheLukaDragar/XPlainVerse-ACMChallenge.git"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
git clone --depth 1 --filter=blob:none --sparse "$repo" "$tmp/repo"
git -C "$tmp/repo" sparse-checkout set evaluator_codabench/program
mkdir -p "$dest"
rm -rf "$dest/program"
cp -r "$tmp/repo/evaluator_codabench/program" "$dest/program"
echo "XDD_SCORER=$dest/program"
