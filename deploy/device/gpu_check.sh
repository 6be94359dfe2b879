#!/usr/bin/env bash
# The GPU check in one call on the accelerator machine (docs/scaling.md has the device command):
# installs the wheelhouse (deploy/device/wheelhouse.sh built it here; the run carries it) into a
# fresh folder on PYTHONPATH, then runs benchmarks/gpu_check.py from this copy of the repository
# (no pip install of the project: PYTHONPATH holds its root too). It writes gpu_check.json and
# gpu_check.md to --out, or to $OUT, the device tool's folder that comes back.
#
#   deploy/device/gpu_check.sh [--out DIR] [--rehearsal] [--commit SHA]
#
# PYTHON (default python3: the image's, with CUDA torch) and WHEELHOUSE (default .wheelhouse) can
# be set; deploy/device/rehearse.sh sets both to run the same on this machine's CPU. Any other
# argument goes to benchmarks/gpu_check.py.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
PYTHON=${PYTHON:-python3}
WHEELHOUSE=${WHEELHOUSE:-$REPO/.wheelhouse}
out=${OUT:-}
args=()
while [ $# -gt 0 ]; do
	case $1 in
	--out)
		[ $# -ge 2 ] || { echo "gpu_check.sh: --out needs a folder" >&2; exit 2; }
		out=$2
		shift 2
		;;
	*) args+=("$1"); shift ;;
	esac
done
if [ -z "$out" ]; then
	echo "gpu_check.sh: give --out DIR (or set OUT)" >&2
	exit 2
fi
shopt -s nullglob
wheels=("$WHEELHOUSE"/*.whl)
if [ ${#wheels[@]} -eq 0 ]; then
	echo "gpu_check.sh: no wheels in $WHEELHOUSE: build them here with deploy/device/wheelhouse.sh," \
		"and name the folder in the device run's carry" >&2
	exit 2
fi

site=$(mktemp -d "${TMPDIR:-/tmp}/forecast-site.XXXXXX")
trap 'rm -rf "$site"' EXIT
started=$(date +%s.%N)
echo "installing ${#wheels[@]} wheels from $WHEELHOUSE into $site ..."
"$PYTHON" -m pip install --quiet --no-index --no-deps --no-compile --no-cache-dir --upgrade \
	--target "$site" "${wheels[@]}"
install_s=$(awk -v a="$started" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
echo "installed in $install_s s"

export PYTHONPATH="$site:$REPO${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
status=0
"$PYTHON" "$REPO/benchmarks/gpu_check.py" --out "$out" --site "$site" --wheelhouse "$WHEELHOUSE" \
	--install-seconds "$install_s" "${args[@]}" || status=$?
exit $status
