#!/usr/bin/env bash
# The GPU check rehearsed here, on the CPU, so that a missing wheel is found before an accelerator
# is lent rather than on it: a wheelhouse of the same list for this machine's Python, a fresh venv
# holding only a CPU torch and packages of the accelerator image (deploy/device/image.txt; it fails
# if pip brings in anything else), then deploy/device/gpu_check.sh --rehearsal with that venv's
# Python, which installs the wheelhouse with --no-index --no-deps --target as on the device.
#
#   deploy/device/rehearse.sh [--out DIR] [gpu_check.py options]     # default --out .rehearsal/out
#
# What differs from the device (docs/scaling.md): Python 3.11 here (the local CPU torch file is a
# cp311 build; the device's is 3.12), torch 2.13 CPU for 2.11 CUDA, numpy 2.4.6 for 2.5.2 (no
# cp311 build), and torch on the CPU standing in for CUDA in the first server of each model.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
PYTHON=${PYTHON:-python3.11}
work=$REPO/.rehearsal
# what the check imports from the image, at the versions its docs give where pip has them for this
# Python (onnx, onnxruntime, Lightning, torchmetrics), else requirements.lock's; pip adds their
# dependencies, which must be in the image too
image_packages=(torch pytorch-lightning torchmetrics numpy pandas pyarrow onnx onnxruntime matplotlib scipy
	pyyaml rich click requests h11 uvloop prometheus-client anyio annotated-doc cloudpickle protobuf
	packaging filelock pytest shellingham zipp)
image_versions=(onnx==1.23.1 onnxruntime==1.30.0 pytorch-lightning==2.6.6 torchmetrics==1.9.0)
# typer without its dependencies: the lock's 0.29 asks for pydantic, which the image lacks (so its
# typer is an older one); here it imports the wheelhouse's
no_deps=(typer)

version=$("$PYTHON" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
"$REPO/deploy/device/wheelhouse.sh" --python-version "$version" --dest "$work/wheelhouse"

echo "a fresh venv in $work/venv: CPU torch and the image's packages only ..."
rm -rf "$work/venv"
"$PYTHON" -m venv "$work/venv"
venv_python=$work/venv/bin/python
constraints=$work/constraints.txt
pinned=$(printf '%s\n' "${image_versions[@]}" | sed 's/==.*//' | paste -sd'|')
{
	grep -Ev "^($pinned)==" "$REPO/requirements.lock" | grep -E '^[a-z0-9]'
	printf '%s\n' "${image_versions[@]}"
} >"$constraints"
# torch==2.13.0 in the lock: pip takes the local CPU build (+cpu sorts above the index's CUDA one)
"$venv_python" -m pip install --quiet --constraint "$constraints" "${image_packages[@]}"
"$venv_python" -m pip install --quiet --constraint "$constraints" --no-deps "${no_deps[@]}"

image_names=$(grep -Ev '^\s*(#|$)' "$REPO/deploy/device/image.txt" | tr 'A-Z_.' 'a-z--' | sort -u)
extra=$("$venv_python" -m pip list --format=freeze | sed 's/==.*//' | tr 'A-Z_.' 'a-z--' | sort -u |
	comm -23 - <(echo "$image_names"))
if [ -n "$extra" ]; then
	echo "rehearse.sh: the venv holds packages the accelerator image does not:" $extra >&2
	exit 1
fi
echo "the venv holds $("$venv_python" -m pip list --format=freeze | wc -l) packages, all in the image's list"

# the arguments (--out DIR among them) go to gpu_check.sh
PYTHON=$venv_python WHEELHOUSE=$work/wheelhouse OUT=${OUT:-$work/out} "$REPO/deploy/device/gpu_check.sh" \
	--rehearsal "$@"
