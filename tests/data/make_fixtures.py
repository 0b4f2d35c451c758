#!/usr/bin/env python3
"""Builds the generated test fixtures in this folder and records what the reference tools
(pydicom, nibabel, dcm2niix) say about them in expected.json.

Run from anywhere:  pip install pydicom nibabel numpy pillow dcm2niix pylibjpeg \
    pylibjpeg-libjpeg pylibjpeg-openjpeg pyjpegls && python3 tests/data/make_fixtures.py

The outputs are committed, so the Rust tests need no Python. Every file is tiny and
synthetic (no patient data).
"""

import io
import json
import random
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import nibabel as nib
import numpy as np
import pydicom
from PIL import Image
from pydicom.dataset import FileDataset, FileMetaDataset
from pydicom.encaps import encapsulate
from pydicom.fileset import FileSet
from pydicom.uid import (
    CTImageStorage,
    ExplicitVRLittleEndian,
    JPEGBaseline8Bit,
    generate_uid,
)

HERE = Path(__file__).resolve().parent
GEN = HERE / "generated"
PYDICOM = Path(pydicom.__file__).parent / "data" / "test_files"
ROOT_UID = "1.2.826.0.1.3680043.10.1427."  # fixed prefix so names are stable per run


def uid(name: str) -> str:
    return generate_uid(prefix=ROOT_UID, entropy_srcs=[name])


def ct_slice(study, series, position, orientation, pixels, number, spacing, sop_name,
             description="GENERATED AXIAL", slope=1.0, intercept=-1024.0):
    meta = FileMetaDataset()
    meta.MediaStorageSOPClassUID = CTImageStorage
    meta.MediaStorageSOPInstanceUID = uid(sop_name)
    meta.TransferSyntaxUID = ExplicitVRLittleEndian
    ds = FileDataset(None, {}, file_meta=meta, preamble=b"\0" * 128)
    ds.SOPClassUID = CTImageStorage
    ds.SOPInstanceUID = meta.MediaStorageSOPInstanceUID
    ds.StudyInstanceUID = study
    ds.SeriesInstanceUID = series
    ds.FrameOfReferenceUID = uid(study + "for")
    ds.Modality = "CT"
    ds.PatientName = "Phantom^Generated"
    ds.PatientID = "GEN0001"
    ds.StudyDate = "20260101"
    ds.SeriesDate = "20260101"
    ds.StudyTime = "120000"
    ds.StudyID = "1"
    ds.AcquisitionTime = "120000"
    ds.SeriesDescription = description
    ds.SeriesNumber = 2
    ds.InstanceNumber = number
    ds.ImageType = ["ORIGINAL", "PRIMARY", "AXIAL"]
    ds.ImagePositionPatient = [float(v) for v in position]
    ds.ImageOrientationPatient = [float(v) for v in orientation]
    ds.PixelSpacing = [float(spacing[0]), float(spacing[1])]
    ds.SliceThickness = 2.5
    ds.RescaleSlope = slope
    ds.RescaleIntercept = intercept
    ds.SamplesPerPixel = 1
    ds.PhotometricInterpretation = "MONOCHROME2"
    ds.Rows, ds.Columns = pixels.shape
    ds.BitsAllocated = 16
    ds.BitsStored = 16
    ds.HighBit = 15
    ds.PixelRepresentation = 1
    ds.PixelData = pixels.astype("<i2").tobytes()
    return ds


def oblique_series():
    """Six 20x16 oblique slices, shuffled names, reversed Instance Numbers, and dcm2niix's
    conversion of them."""
    out = GEN / "oblique_series"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    rows, columns, slices = 16, 20, 6
    a, b = np.radians(12.0), np.radians(-7.0)
    row_dir = np.array([np.cos(a), np.sin(a), 0.0])
    col_dir = np.array([-np.sin(a) * np.cos(b), np.cos(a) * np.cos(b), np.sin(b)])
    normal = np.cross(row_dir, col_dir)
    spacing = (0.7, 0.8)  # between rows, between columns
    origin = np.array([-30.0, -12.5, 40.0])
    study, series = uid("oblique-study"), uid("oblique-series")
    volume = np.zeros((slices, rows, columns), dtype=np.int16)
    names = [f"IMG{n:04d}" for n in random.Random(7).sample(range(1000, 9999), slices)]
    for k in range(slices):
        j, i = np.mgrid[0:rows, 0:columns]
        stored = (i * 7 + j * 31 + k * 211 + (i * j) % 5).astype(np.int16)
        volume[k] = stored
        position = origin + k * 2.5 * normal
        ds = ct_slice(study, series, position, [*row_dir, *col_dir], stored,
                      number=slices - k, spacing=spacing, sop_name=f"oblique{k}")
        ds.save_as(out / names[k], enforce_file_format=True)
    (out / "notes.txt").write_text("not a DICOM file: must be skipped\n")
    nifti_dir = Path(tempfile.mkdtemp())
    subprocess.run(["dcm2niix", "-b", "n", "-z", "n", "-f", "oblique", "-o", str(nifti_dir), str(out)],
                   check=True, capture_output=True)
    shutil.copy(nifti_dir / "oblique.nii", GEN / "oblique_dcm2niix.nii")
    img = nib.load(GEN / "oblique_dcm2niix.nii")
    return {
        "hu_sum": int(volume.astype(np.int64).sum() - 1024 * volume.size),
        "first_slice_position": origin.tolist(),
        "normal": normal.tolist(),
        "row_direction": row_dir.tolist(),
        "column_direction": col_dir.tolist(),
        "dcm2niix_affine": img.affine.tolist(),
        "dcm2niix_shape": list(img.shape),
        "dcm2niix_sum": int(np.asarray(img.dataobj).astype(np.int64).sum()),
        # value at nibabel voxel (2, 3, 4), i.e. NIfTI x=2, y=3, z=4
        "dcm2niix_value_2_3_4": int(np.asarray(img.dataobj)[2, 3, 4]),
    }


def dicomdir():
    """A DICOMDIR (written by pydicom's FileSet) over three 8x8 slices."""
    out = GEN / "dicomdir"
    shutil.rmtree(out, ignore_errors=True)
    staging = Path(tempfile.mkdtemp())
    study, series = uid("dir-study"), uid("dir-series")
    fs = FileSet()
    for k in range(3):
        pixels = np.full((8, 8), 1024 + 10 * k, dtype=np.int16)
        ds = ct_slice(study, series, [0, 0, 5.0 * k], [1, 0, 0, 0, 1, 0], pixels,
                      number=k + 1, spacing=(1, 1), sop_name=f"dir{k}")
        path = staging / f"s{k}.dcm"
        ds.save_as(path, enforce_file_format=True)
        fs.add(path)
    fs.write(out)
    return {"slices": 3, "hu_values": [0, 10, 20]}


def jpeg_baseline():
    """An 8-bit grey-scale JPEG baseline image (encoded by Pillow) in a DICOM file."""
    rows, columns = 32, 48
    j, i = np.mgrid[0:rows, 0:columns]
    pixels = ((i * 5 + j * 3) % 256).astype(np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels, mode="L").save(buffer, format="JPEG", quality=95)
    meta = FileMetaDataset()
    meta.MediaStorageSOPClassUID = CTImageStorage
    meta.MediaStorageSOPInstanceUID = uid("jpeg-baseline")
    meta.TransferSyntaxUID = JPEGBaseline8Bit
    ds = FileDataset(None, {}, file_meta=meta, preamble=b"\0" * 128)
    ds.SOPClassUID = CTImageStorage
    ds.SOPInstanceUID = meta.MediaStorageSOPInstanceUID
    ds.StudyInstanceUID = uid("jpeg-study")
    ds.SeriesInstanceUID = uid("jpeg-series")
    ds.Modality = "CT"
    ds.ImagePositionPatient = [0.0, 0.0, 0.0]
    ds.ImageOrientationPatient = [1.0, 0.0, 0.0, 0.0, 1.0, 0.0]
    ds.PixelSpacing = [1.0, 1.0]
    ds.SamplesPerPixel = 1
    ds.PhotometricInterpretation = "MONOCHROME2"
    ds.Rows, ds.Columns = rows, columns
    ds.BitsAllocated = 8
    ds.BitsStored = 8
    ds.HighBit = 7
    ds.PixelRepresentation = 0
    ds.PixelData = encapsulate([buffer.getvalue()])
    ds["PixelData"].VR = "OB"
    path = GEN / "jpeg_baseline.dcm"
    ds.save_as(path, enforce_file_format=True)
    decoded = pydicom.dcmread(path).pixel_array.astype(np.int64)
    return {"sum": int(decoded.sum()), "value_row5_col7": int(decoded[5, 7]), "shape": [rows, columns]}


def nifti_pairs():
    """One small CT-like volume saved four ways: RAS-ordered and LPS-ordered voxels (same
    patient), big-endian, and NIfTI-2; a 4D file; and a coarse mask on another grid."""
    rng = np.random.default_rng(3)
    data_lps = rng.integers(-1024, 2000, size=(6, 5, 4)).astype(np.int16)  # i→L, j→P, k→S
    spacing = np.array([0.9, 1.1, 2.0])
    origin_lps = np.array([10.0, -20.0, 30.0])
    # LPS-ordered voxels: i towards L means RAS x decreases.
    lps_affine = np.diag([-spacing[0], -spacing[1], spacing[2], 1.0])
    lps_affine[:3, 3] = [-origin_lps[0], -origin_lps[1], origin_lps[2]]
    nib.save(nib.Nifti1Image(data_lps, lps_affine), GEN / "lps_ordered.nii.gz")
    # RAS-ordered voxels of the same patient: flip i and j.
    data_ras = data_lps[::-1, ::-1, :]
    ras_affine = lps_affine.copy()
    ras_affine[:3, 0] = -lps_affine[:3, 0]
    ras_affine[:3, 1] = -lps_affine[:3, 1]
    ras_affine[:3, 3] = lps_affine[:3, 3] + lps_affine[:3, 0] * (data_lps.shape[0] - 1) \
        + lps_affine[:3, 1] * (data_lps.shape[1] - 1)
    ras_img = nib.Nifti1Image(data_ras, ras_affine)
    ras_img.header.set_qform(ras_affine, code=1)
    ras_img.header.set_sform(None, code=0)  # qform only: exercises the quaternion path
    nib.save(ras_img, GEN / "ras_ordered_qform.nii")
    big = nib.Nifti1Image(data_lps.astype(">i2"), lps_affine)
    big.set_data_dtype(np.dtype(">i2"))
    nib.save(big, GEN / "big_endian.nii")
    scaled = nib.Nifti1Image(data_lps.astype(np.float32) * 0.5, lps_affine)
    scaled.set_data_dtype(np.int16)
    scaled.header.set_slope_inter(0.5, -3.0)
    nib.save(scaled, GEN / "scaled_float.nii.gz")
    scaled_values = np.asarray(nib.load(GEN / "scaled_float.nii.gz").dataobj)
    nib.save(nib.Nifti2Image(data_lps, lps_affine), GEN / "nifti2.nii.gz")
    four_d = np.stack([data_lps, data_lps + 1], axis=-1)
    nib.save(nib.Nifti1Image(four_d, lps_affine), GEN / "four_d.nii.gz")
    # A mask on a grid twice as coarse in-plane, stored RAS: labels voxel (2, 2, 1) region.
    mask_affine = ras_affine.copy()
    mask_affine[:3, 0] *= 2
    mask_affine[:3, 1] *= 2
    # Shift by 0.3 mm so no CT voxel centre falls exactly half-way between mask voxels.
    mask_affine[:3, 3] += 0.3
    mask = np.zeros((3, 3, 4), dtype=np.uint8)
    mask[1, 1, 1] = 1
    nib.save(nib.Nifti1Image(mask, mask_affine), GEN / "mask_coarse.nii.gz")
    # Reference: which LPS-ordered CT voxels the mask covers (nearest neighbour).
    inverse = np.linalg.inv(mask_affine)
    covered = []
    for k in range(4):
        for j in range(5):
            for i in range(6):
                world = lps_affine @ np.array([i, j, k, 1.0])
                m = inverse @ world
                r = np.floor(m[:3] + 0.5).astype(int)
                if all(0 <= r[a] < mask.shape[a] for a in range(3)) and mask[tuple(r)]:
                    covered.append([i, j, k])
    return {
        "dims": list(data_lps.shape),
        "spacing": spacing.tolist(),
        "origin_lps": origin_lps.tolist(),
        "values_lps_order": data_lps.flatten(order="F").astype(int).tolist(),
        "mask_covered_voxels": covered,
        "scaled_values_lps_order": scaled_values.flatten(order="F").astype(float).tolist(),
    }


def main():
    GEN.mkdir(exist_ok=True)
    if shutil.which("dcm2niix") is None:
        sys.exit("dcm2niix is not on PATH: pip install dcm2niix")
    expected = {
        "oblique_series": oblique_series(),
        "dicomdir": dicomdir(),
        "jpeg_baseline": jpeg_baseline(),
        "nifti": nifti_pairs(),
        "pydicom_reference": reference_pixels(),
    }
    (HERE / "expected.json").write_text(json.dumps(expected, indent=1) + "\n")


def reference_pixels():
    """Sum, min, max and a sample of the stored pixels of each committed real file, as
    pydicom (with pylibjpeg/pyjpegls) decodes them."""
    out = {}
    for path in sorted((HERE / "dicom").glob("*.dcm")):
        try:
            ds = pydicom.dcmread(path)
            arr = ds.pixel_array.astype(np.int64)
        except Exception as error:  # noqa: BLE001 - recorded for the truncated sample
            out[path.name] = {"error": str(error)}
            continue
        first = arr[0] if arr.ndim == 3 else arr
        slope = float(getattr(ds, "RescaleSlope", 1) or 1)
        intercept = float(getattr(ds, "RescaleIntercept", 0) or 0)
        shared = getattr(ds, "SharedFunctionalGroupsSequence", None)
        if shared and "PixelValueTransformationSequence" in shared[0]:
            transform = shared[0].PixelValueTransformationSequence[0]
            slope, intercept = float(transform.RescaleSlope), float(transform.RescaleIntercept)
        out[path.name] = {
            "sum": int(arr.sum()),
            "min": int(arr.min()),
            "max": int(arr.max()),
            "frames": int(arr.shape[0]) if arr.ndim == 3 else 1,
            "value_row3_col5": int(first[3, 5]),
            "slope": slope,
            "intercept": intercept,
        }
    return out


if __name__ == "__main__":
    main()
