"""Reads a Keyslice segmentation export as nnU-Net v2 and MONAI would: dataset.json's
labels and count, datalist.json's pairs, and each image and label map with nibabel (shape
and affine must match, label values must be those dataset.json names). Prints a JSON
summary: per case the voxel count of each label value.

    python3 tests/python/segmentation_export.py EXPORT_DIR
"""

import json
import pathlib
import sys

import nibabel
import numpy as np

root = pathlib.Path(sys.argv[1])
dataset = json.loads((root / "dataset.json").read_text())
datalist = json.loads((root / "datalist.json").read_text())
assert dataset["channel_names"] == {"0": "CT"}, dataset
assert dataset["file_ending"] == ".nii.gz"
values = set(dataset["labels"].values())
pairs = datalist["training"] + datalist["validation"]
assert dataset["numTraining"] == len(pairs), (dataset["numTraining"], len(pairs))
cases = {}
for pair in pairs:
    image = nibabel.load(root / pair["image"])
    label = nibabel.load(root / pair["label"])
    assert image.shape == label.shape, (image.shape, label.shape)
    assert np.allclose(image.affine, label.affine, atol=1e-4), (image.affine, label.affine)
    data = np.asarray(label.dataobj)
    assert data.dtype == np.uint8, data.dtype
    found = {int(v): int((data == v).sum()) for v in np.unique(data)}
    assert set(found) <= values, (found, values)
    name = pathlib.Path(pair["label"]).name.removesuffix(".nii.gz")
    assert pair["image"] == f"imagesTr/{name}_0000.nii.gz", pair
    cases[name] = found
print(json.dumps({"labels": dataset["labels"], "cases": cases}))
