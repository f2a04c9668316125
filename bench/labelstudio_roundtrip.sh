#!/usr/bin/env bash
# Real Label Studio round trip (opt-in; label-studio is NOT a project dependency).
# Installs label-studio==1.23.2 into its own venv, builds a tiny offline run, exports it,
# creates the projects + Local Files storages with `forenset labelstudio-setup`, annotates
# through the LS API (triage ann/hard, a region from an accepted prediction with rotation and a
# drawn one with its "why" text), deletes a task, pulls with `forenset labelstudio-pull`, and
# checks the annotations table. With them it creates the FakeClue golden-clue project
# (`--projects safeimg,fakeclue`, one document root over both export folders), edits one clue,
# pulls its export and rebuilds with `fakebench.clue_edits` naming it. Usage: bench/labelstudio_roundtrip.sh [WORKDIR]
# Env: FORENSET_PY (python with forenset; default python), LS_VENV (default WORKDIR/ls-venv),
# LS_PORT (default 8089).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=${1:-$(mktemp -d /tmp/ls-roundtrip.XXXX)}
PY=${FORENSET_PY:-python}
LS_VENV=${LS_VENV:-$WORK/ls-venv}
PORT=${LS_PORT:-8089}
export PYTHONPATH=$ROOT${PYTHONPATH:+:$PYTHONPATH}
mkdir -p "$WORK"
if [ ! -x "$LS_VENV/bin/label-studio" ]; then
  python3 -m venv "$LS_VENV"
  "$LS_VENV/bin/pip" install -q label-studio==1.23.2
fi
RUN=$WORK/run
cat > "$WORK/cfg.yaml" <<YAML
seed: 3
run_dir: $RUN
shard_size: 2
sources: {samples: [astronaut, coffee, chelsea, rocket], max_side: 96}
generators: [{name: cv-a, family: classical}]
splits: {fractions: {train: 0.5, validation: 0.25, test: 0.25}}
runners: {default: {kind: threads, max_workers: 2}}
YAML
cp "$WORK/cfg.yaml" "$WORK/cfg-base.yaml"
echo "fakebench: {enabled: true, split: train, fakes: 2, reals: 2}" >> "$WORK/cfg.yaml"
$PY -m forenset.cli build "$WORK/cfg.yaml" > "$WORK/build.log" 2>&1
$PY -m forenset.cli export "$RUN" --format labelstudio
$PY -m forenset.cli fakebench-export "$RUN" --labelstudio
EXPORT=$RUN/exports/labelstudio
# one document root over the SafeIMG and FakeClue export folders (setup rebases the URLs)
LABEL_STUDIO_LOCAL_FILES_SERVING_ENABLED=true LABEL_STUDIO_LOCAL_FILES_DOCUMENT_ROOT=$RUN/exports \
  LABEL_STUDIO_BASE_DATA_DIR=$WORK/lsdata \
  "$LS_VENV/bin/label-studio" start --no-browser --port "$PORT" --data-dir "$WORK/lsdata" \
  --username rt@example.org --password roundtrip-pass \
  > "$WORK/ls.log" 2>&1 &
LS_PID=$!
trap 'kill $LS_PID 2>/dev/null || true' EXIT
for _ in $(seq 1 180); do
  curl -sf "http://localhost:$PORT/health" > /dev/null && break
  sleep 2
done
# LS 1.23 disables legacy tokens for new organisations: mint a personal access token (a JWT
# refresh token; forenset exchanges it for an access token) for the user.
LSP=$("$LS_VENV/bin/python" -c "import label_studio, os; print(os.path.dirname(label_studio.__file__))")
TOKEN=$(cd "$LSP" && LABEL_STUDIO_BASE_DATA_DIR=$WORK/lsdata "$LS_VENV/bin/python" manage.py shell -c "
from users.models import User
from jwt_auth.models import LSAPIToken
print(LSAPIToken.for_user(User.objects.get(email='rt@example.org')).get_full_jwt())" 2>/dev/null | tail -1)
export LABEL_STUDIO_API_KEY=$TOKEN
$PY -m forenset.cli labelstudio-setup "$RUN" --url "http://localhost:$PORT" \
  --projects safeimg,fakeclue
$PY "$ROOT/bench/labelstudio_annotate.py" "http://localhost:$PORT" "$TOKEN" "$EXPORT" triage
$PY -m forenset.cli labelstudio-pull "$RUN"
$PY "$ROOT/bench/labelstudio_annotate.py" "http://localhost:$PORT" "$TOKEN" "$EXPORT" regions
$PY -m forenset.cli labelstudio-pull "$RUN" | tee "$WORK/pull.json"
$PY "$ROOT/bench/labelstudio_annotate.py" "http://localhost:$PORT" "$TOKEN" "$EXPORT" check "$RUN"
$PY "$ROOT/bench/labelstudio_annotate.py" "http://localhost:$PORT" "$TOKEN" "$EXPORT" clue
$PY -m forenset.cli labelstudio-pull "$RUN" > /dev/null
EDITS=$RUN/exports/fakebench-bench/labelstudio/pulled/fakeclue-export.json
cp "$WORK/cfg-base.yaml" "$WORK/cfg.yaml"
echo "fakebench: {enabled: true, split: train, fakes: 2, reals: 2, clue_edits: $EDITS}" \
  >> "$WORK/cfg.yaml"
$PY -m forenset.cli build "$WORK/cfg.yaml" >> "$WORK/build.log" 2>&1
$PY "$ROOT/bench/labelstudio_annotate.py" "http://localhost:$PORT" "$TOKEN" "$EXPORT" checkclue "$RUN"
echo "round trip OK ($WORK)"
