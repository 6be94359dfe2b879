#!/usr/bin/env bash
# Downloads the wheels deploy/device/wheels.txt carries (requirements.lock's versions, --no-deps,
# binary only) for CPython on manylinux x86_64 into an ignored folder, which a device run names in
# its `carry`: the accelerator machine has torch, Lightning, pandas and ONNX Runtime but no MLflow,
# FastAPI, uvicorn, pydantic or SQLAlchemy, and cannot download. Fails when the folder is over
# 60 MiB (what travels to the machine is 64 MiB in all, the working tree included) or does not
# hold exactly one wheel of each package.
#
#   deploy/device/wheelhouse.sh                                   # Python 3.12 (the device's), into .wheelhouse/
#   deploy/device/wheelhouse.sh --python-version 3.11 --dest .rehearsal/wheelhouse   # the rehearsal's
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
PYTHON=${PYTHON:-python3} # the interpreter whose pip downloads; any Python 3.11+
python_version=3.12
dest=$REPO/.wheelhouse
limit_mib=60

fail() {
	echo "wheelhouse.sh: $*" >&2
	echo "usage: $0 [--python-version X.Y] [--dest DIR]" >&2
	exit 2
}
while [ $# -gt 0 ]; do
	case $1 in
	--python-version) [ $# -ge 2 ] || fail "--python-version needs a value like 3.12"; python_version=$2; shift 2 ;;
	--dest) [ $# -ge 2 ] || fail "--dest needs a folder"; dest=$2; shift 2 ;;
	*) fail "unknown argument '$1'" ;;
	esac
done
[[ $python_version =~ ^3\.[0-9]+$ ]] || fail "--python-version '$python_version' is not of the form 3.12"

mapfile -t specs < <("$PYTHON" "$REPO/deploy/device/preflight.py" --specs)
mkdir -p "$dest"
rm -f "$dest"/*.whl # one version of each: nothing left from an earlier list
echo "downloading ${#specs[@]} wheels for CPython $python_version, manylinux x86_64, into $dest ..."
platforms=()
for tag in manylinux_2_28 manylinux_2_27 manylinux_2_24 manylinux_2_17 manylinux2014 manylinux_2_5 manylinux1; do
	platforms+=(--platform "${tag}_x86_64")
done
"$PYTHON" -m pip download --quiet --no-deps --only-binary=:all: --implementation cp \
	--python-version "$python_version" "${platforms[@]}" --dest "$dest" "${specs[@]}"

# exactly the list, one wheel each, at the pinned versions
shopt -s nullglob
wheels=("$dest"/*.whl)
found=$(for wheel in "${wheels[@]}"; do
	base=$(basename "$wheel")
	name=${base%%-*}
	rest=${base#*-}
	echo "$(echo "$name" | tr 'A-Z_.' 'a-z--')==${rest%%-*}"
done | sort)
wanted=$(printf '%s\n' "${specs[@]}" | sort)
if [ "$found" != "$wanted" ]; then
	echo "wheelhouse.sh: $dest does not hold exactly one wheel of each carried package:" >&2
	diff <(echo "$wanted") <(echo "$found") >&2 || true
	exit 1
fi

bytes=$(cat "${wheels[@]}" | wc -c)
mib=$(awk -v b="$bytes" 'BEGIN { printf "%.1f", b / 1048576 }')
for wheel in "${wheels[@]}"; do
	printf '  %7.2f MiB  %s\n' "$(awk -v b="$(wc -c <"$wheel")" 'BEGIN { print b / 1048576 }')" "$(basename "$wheel")"
done | sort -rn
echo "wheelhouse: ${#wheels[@]} wheels, $mib MiB (limit $limit_mib MiB) in $dest"
if [ "$bytes" -gt $((limit_mib * 1048576)) ]; then
	echo "wheelhouse.sh: $mib MiB is over the $limit_mib MiB limit" >&2
	exit 1
fi
