#!/usr/bin/env python3
"""How visible each phantom tumor is, and how often a model's report finds it, by visibility.

    pip install numpy nibabel
    python3 eval/tumor_visibility.py --cases eval-data/heldout-seed999-matrix128 \
        --pred eval-data/pred.jsonl

For every organ with a tumor (its largest one), on the tumor's largest axial slice averaged
over the 5 mm slab the model reads (the slices whose centres lie within 2.5 mm of it):

- contrast: mean HU of the voxels wholly inside the tumor on every slice of the slab, less
  the median of the organ's voxels wholly outside it;
- clutter: the standard deviation of those organ voxels (noise, and the organ's own structure:
  a kidney's cortex and medulla, a pancreas's partial volume);
- visibility = |contrast| / clutter, a contrast-to-clutter ratio.

Prints, per organ and visibility band, how many of those organs the predictions call
positive. A tumor below 1 is fainter than the organ's own variation on the slab the model
sees. Needs the cases' `truth.json` and `segmentations/` (a `keyslice phantom` folder).
"""

import argparse
import json
import pathlib

import nibabel as nib
import numpy as np

from common import fail

ORGANS = ["liver", "pancreas", "kidney_left", "kidney_right"]
LESION_MASK = {"liver": "liver_lesion", "pancreas": "pancreatic_lesion",
               "kidney_left": "kidney_lesion", "kidney_right": "kidney_lesion"}
BANDS = [0.0, 1.0, 2.0, 3.0, float("inf")]


def read_predictions(path):
    """`keyslice analyze --json` lines by case id; a clear error for a missing or bad file."""
    try:
        lines = path.read_text().splitlines()
    except OSError as error:
        fail(f"{path}: {error.strerror}; pass the pred.jsonl that eval/eval_tiny.py wrote")
    predictions = {}
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            prediction = json.loads(line)
        except json.JSONDecodeError as error:
            fail(f"{path} line {number}: not JSON ({error.msg}); expected `keyslice analyze "
                 "--json` output")
        if not isinstance(prediction, dict) or "case_id" not in prediction:
            fail(f"{path} line {number}: not a prediction (no case_id)")
        predictions[prediction["case_id"]] = prediction
    return predictions


def load(path, what):
    """A case file: `truth.json` parsed, or a NIfTI image as (image, voxel array); a clear
    error naming the file otherwise (missing, truncated, not NIfTI)."""
    try:
        if what == "truth":
            return json.loads(path.read_text())
        image = nib.load(str(path))
        return image, np.asarray(image.dataobj)
    except FileNotFoundError:
        fail(f"{path}: not found; --cases must be the phantom folder the predictions were "
             "made on (a `keyslice phantom` output with truth.json and segmentations/)")
    except (OSError, EOFError, ValueError, nib.filebasedimages.ImageFileError) as error:
        fail(f"{path}: cannot be read ({error}); regenerate the case with `keyslice phantom`")


def slab(volume, centre, spacing_z, slab_mm=5.0):
    """Slices whose centres lie within half a slab of slice `centre`, averaged."""
    reach = int(np.floor((slab_mm / 2) / spacing_z + 1e-9))
    first, last = max(centre - reach, 0), min(centre + reach, volume.shape[2] - 1)
    return volume[:, :, first:last + 1].astype(np.float32).mean(axis=2)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cases", required=True, type=pathlib.Path)
    parser.add_argument("--pred", required=True, type=pathlib.Path)
    args = parser.parse_args()
    predictions = read_predictions(args.pred)
    counts = {}
    for case_id, prediction in sorted(predictions.items()):
        folder = args.cases / case_id
        truth = load(folder / "truth.json", "truth")
        if not truth["lesions"]:
            continue
        ct, hu = load(folder / "ct.nii.gz", "image")
        spacing_z = float(ct.header.get_zooms()[2])
        for organ in ORGANS:
            lesions = [lesion for lesion in truth["lesions"] if lesion["organ"] == organ]
            if not lesions:
                continue
            largest = max(lesions, key=lambda lesion: lesion["size"]["long_cm"])
            k = largest["largest_slice"]
            seg = folder / "segmentations"
            tumor = slab(load(seg / f"{LESION_MASK[organ]}.nii.gz", "image")[1] > 0,
                         k, spacing_z)
            organ_mask = slab(load(seg / f"{organ}.nii.gz", "image")[1] > 0,
                              k, spacing_z)
            image = slab(hu, k, spacing_z)
            core = tumor >= 0.999
            if not core.any():
                core = tumor >= tumor.max() * 0.999
            background = (organ_mask >= 0.999) & (tumor == 0)
            if background.sum() < 5 or not core.any():
                continue
            contrast = float(image[core].mean() - np.median(image[background]))
            clutter = float(image[background].std())
            visibility = abs(contrast) / max(clutter, 1e-6)
            band = next(i for i in range(len(BANDS) - 1) if BANDS[i] <= visibility < BANDS[i + 1])
            called = prediction["findings"]["organs"][organ]["tumor"] == "yes"
            for key in (("all", band), (organ, band)):
                found, total = counts.get(key, (0, 0))
                counts[key] = (found + called, total + 1)
    print("| organ | " + " | ".join(
        f"visibility {BANDS[b]:g}–{BANDS[b + 1]:g}" for b in range(len(BANDS) - 1)) + " |")
    print("|---|" + "---|" * (len(BANDS) - 1))
    for organ in ["all"] + ORGANS:
        cells = []
        for b in range(len(BANDS) - 1):
            found, total = counts.get((organ, b), (0, 0))
            cells.append(f"{found}/{total}" if total else "–")
        print(f"| {organ} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
