#!/usr/bin/env bash
# Real photographs for the benchmark examples, from Debian's wallpaper packages (no Python
# dependency, no root install): `apt-get download` the packages, `dpkg-deb -x` them into a
# scratch folder, keep the files listed in PHOTOS below (photographs, checked by eye; the
# packages' artwork and renders are left out), record each file's licence and author from the
# package's DEP-5 /usr/share/doc/<pkg>/copyright (the stanza whose Files: pattern matches it,
# else `Files: *`), scale each photo to a short side of $SHORT px and cut it into $TILE px tiles.
# Writes OUT/tiles/*.png and OUT/photos.csv (path,caption,license + package,version,photo,tile),
# the `sources.csv` format (docs/stages.md). Usage:
#   scripts/fetch_real_photos.sh [OUT]        # default OUT: data/real-photos (gitignored)
# The examples list OUT/photos.csv under `sources.csv_if_present`, so they use it when present.
# Needs apt-get and dpkg-deb (any Debian/Ubuntu), and a Python with Pillow (PYTHON, default: the
# forenset environment's python, which has it).
set -euo pipefail

OUT=${1:-data/real-photos}
SHORT=${SHORT:-1024}   # photos scaled down to this short side before tiling
TILE=${TILE:-384}      # tile side (the examples' sources.max_side is 384: no further resampling)
PYTHON=${PYTHON:-python3}
DIST=$(mktemp -d)
trap 'rm -rf "$DIST"' EXIT

# package|path inside the package (a glob)   -- photographs only
PHOTOS=(
  "mate-backgrounds|usr/share/backgrounds/mate/nature/*.jpg"
  "plasma-workspace-wallpapers|usr/share/wallpapers/BytheWater/contents/images/2560x1600.jpg"
  "plasma-workspace-wallpapers|usr/share/wallpapers/ColdRipple/contents/images/2560x1600.jpg"
  "plasma-workspace-wallpapers|usr/share/wallpapers/ColorfulCups/contents/images/2560x1600.jpg"
  "plasma-workspace-wallpapers|usr/share/wallpapers/EveningGlow/contents/images/2560x1600.jpg"
  "plasma-workspace-wallpapers|usr/share/wallpapers/FallenLeaf/contents/images/2560x1600.jpg"
  "plasma-workspace-wallpapers|usr/share/wallpapers/Grey/contents/images/2560x1600.jpg"
  "plasma-workspace-wallpapers|usr/share/wallpapers/OneStandsOut/contents/images/2560x1600.jpg"
  "plasma-workspace-wallpapers|usr/share/wallpapers/Path/contents/images/2560x1600.jpg"
  "plasma-workspace-wallpapers|usr/share/wallpapers/summer_1am/contents/images/2560x1600.jpg"
  "lomiri-wallpapers-16.04|usr/share/backgrounds/Bridge_by_Sander_Klootwijk.jpg"
  "lomiri-wallpapers-16.04|usr/share/backgrounds/Dragonfly_by_Bolly.jpg"
  "lomiri-wallpapers-16.04|usr/share/backgrounds/Picture_0B_by_freespace.jpg"
  "lomiri-wallpapers-16.04|usr/share/backgrounds/Picture_1A_by_freespace.jpg"
  "lomiri-wallpapers-16.04|usr/share/backgrounds/Wine_by_Jakkub_Mede.jpg"
  "lomiri-wallpapers-16.04|usr/share/backgrounds/aitzgorri_by_Aitzol_Berasategi.jpg"
  "lomiri-wallpapers-16.04|usr/share/backgrounds/friends_by_Aitzol_Berasategi.jpg"
  "lomiri-wallpapers-16.04|usr/share/backgrounds/greentock_by_Peter_Nerlich.jpg"
  "lomiri-wallpapers-16.04|usr/share/backgrounds/life_by_Aitzol_Berasategi.jpg"
  "lomiri-wallpapers-16.04|usr/share/backgrounds/picosdeeuropa_by_Aitzol_Berasategi.jpg"
  "lomiri-wallpapers-16.04|usr/share/backgrounds/seeding_by_Clements_Engelhardt.jpg"
  "lomiri-wallpapers-16.04|usr/share/backgrounds/sunset_by_Aitzol_Berasategi.jpg"
  "lomiri-wallpapers-20.04|usr/share/backgrounds/Kleiber_by_Lukas_Baubkus.jpg"
)

command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null || {
  echo "fetch_real_photos: needs apt-get and dpkg-deb (a Debian or Ubuntu system)" >&2; exit 1; }
"$PYTHON" -c "import PIL" 2>/dev/null || {
  echo "fetch_real_photos: $PYTHON has no Pillow; set PYTHON to one that has (e.g. the forenset venv)" >&2; exit 1; }

pkgs=$(printf '%s\n' "${PHOTOS[@]}" | cut -d'|' -f1 | sort -u)
(cd "$DIST" && apt-get download $pkgs >/dev/null 2>&1) || {
  echo "fetch_real_photos: apt-get download $pkgs failed (run apt-get update?)" >&2; exit 1; }
for deb in "$DIST"/*.deb; do
  pkg=$(dpkg-deb -f "$deb" Package)
  mkdir -p "$DIST/x/$pkg" && dpkg-deb -x "$deb" "$DIST/x/$pkg"
  dpkg-deb -f "$deb" Version > "$DIST/x/$pkg.version"
done
mkdir -p "$OUT/tiles"
printf '%s\n' "${PHOTOS[@]}" > "$DIST/photos.txt"
"$PYTHON" - "$DIST/x" "$OUT" "$SHORT" "$TILE" "$DIST/photos.txt" <<'PY'
import csv, fnmatch, glob, os, sys
from PIL import Image

root, out, short, tile = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
listing = open(sys.argv[5]).read().split()
Image.MAX_IMAGE_PIXELS = None


def stanzas(pkg):
    """(patterns, licence, copyright) of each Files stanza of the package's DEP-5 copyright."""
    text = open(f"{root}/{pkg}/usr/share/doc/{pkg}/copyright", encoding="utf-8").read()
    out = []
    for block in text.split("\n\n"):
        fields, key = {}, None
        for line in block.splitlines():
            if line[:1] in (" ", "\t") and key:
                fields[key] += " " + line.strip()
            elif ":" in line:
                key, _, val = line.partition(":")
                key = key.strip().lower()
                fields[key] = val.strip()
        if "files" in fields and "license" in fields:
            out.append((fields["files"].split(), fields["license"], fields.get("copyright", "")))
    return out


def licence(pkg, path):
    """The stanza matching ``path`` (DEP-5: the last matching stanza wins)."""
    hit = None
    for pats, lic, who in stanzas(pkg):
        for p in pats:
            if p == "*" or fnmatch.fnmatch(path, "*" + p.lstrip("*")) or (
                os.path.basename(p) == os.path.basename(path)
            ):
                hit = (lic, who)
    if hit is None:
        raise SystemExit(f"fetch_real_photos: no licence for {pkg}:{path} in its copyright file")
    return hit


rows = []
for line in listing:
    pkg, pattern = line.split("|", 1)
    version = open(f"{root}/{pkg}.version").read().strip()
    files = sorted(glob.glob(f"{root}/{pkg}/{pattern}"))
    if not files:
        raise SystemExit(f"fetch_real_photos: {pkg} has no {pattern} (package changed?)")
    for f in files:
        rel = os.path.relpath(f, f"{root}/{pkg}")
        lic, who = licence(pkg, rel)
        im = Image.open(f).convert("RGB")
        k = short / min(im.size)
        if k < 1:
            im = im.resize((round(im.width * k), round(im.height * k)), Image.LANCZOS)
        stem = os.path.splitext(os.path.basename(f))[0]
        if "/wallpapers/" in f:  # plasma: .../wallpapers/<Name>/contents/images/WxH.jpg
            stem = rel.split("/")[3]
        nx, ny = im.width // tile, im.height // tile
        for j in range(ny):
            for i in range(nx):
                x0 = (im.width - nx * tile) // 2 + i * tile
                y0 = (im.height - ny * tile) // 2 + j * tile
                name = f"{pkg}--{stem}--{j}-{i}.png"
                im.crop((x0, y0, x0 + tile, y0 + tile)).save(f"{out}/tiles/{name}")
                note = f"{lic}; {who}" if who else lic
                rows.append({
                    "path": f"tiles/{name}", "caption": "",
                    "license": f"{note} (Debian package {pkg} {version}: /{rel}, tile {j}-{i})",
                    "package": pkg, "version": version, "photo": f"/{rel}", "tile": f"{j}-{i}",
                })
with open(f"{out}/photos.csv", "w", newline="", encoding="utf-8") as fh:
    w = csv.DictWriter(fh, ["path", "caption", "license", "package", "version", "photo", "tile"])
    w.writeheader()
    w.writerows(rows)
photos = len({(r["package"], r["photo"]) for r in rows})
print(f"fetch_real_photos: {photos} photos -> {len(rows)} tiles of {tile} px in {out}/photos.csv")
PY
