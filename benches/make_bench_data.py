#!/usr/bin/env python3
"""Writes the benchmark inputs: a 512x512x300 uncompressed CT series (written by pydicom,
file names shuffled, a 2-image localizer series in the same folder) and the same volume as
ct.nii.gz (written by nibabel).

    pip install pydicom nibabel numpy
    python3 benches/make_bench_data.py bench-data     # ~160 MB DICOM + ~60 MB .nii.gz

The volume is a synthetic abdomen-like phantom (air, fat, soft tissue, bone, noise) so that
gzip sees CT-like redundancy; no patient data.
"""

import random
import sys
from pathlib import Path

import nibabel as nib
import numpy as np
import pydicom
from pydicom.dataset import FileDataset, FileMetaDataset
from pydicom.uid import CTImageStorage, ExplicitVRLittleEndian, generate_uid

COLUMNS = ROWS = 512
SLICES = 300
PIXEL_MM = 0.75
SLICE_MM = 1.25


def phantom() -> np.ndarray:
    """HU volume shaped (slices, rows, columns)."""
    rng = np.random.default_rng(11)
    j, i = np.mgrid[0:ROWS, 0:COLUMNS].astype(np.float32)
    x = (i - COLUMNS / 2) * PIXEL_MM
    y = (j - ROWS / 2) * PIXEL_MM
    volume = np.empty((SLICES, ROWS, COLUMNS), dtype=np.int16)
    for k in range(SLICES):
        scale = 1.0 + 0.1 * np.sin(k / 40.0)
        body = (x / (170 * scale)) ** 2 + (y / (120 * scale)) ** 2 < 1.0
        inner = (x / (150 * scale)) ** 2 + (y / (100 * scale)) ** 2 < 1.0
        liver = ((x + 60) / 70) ** 2 + ((y + 10) / 55) ** 2 < 1.0
        spine = (x / 18) ** 2 + ((y - 70) / 18) ** 2 < 1.0
        hu = np.full((ROWS, COLUMNS), -1000.0, dtype=np.float32)
        hu[body] = -100.0
        hu[inner] = 40.0
        hu[liver] = 60.0
        hu[spine] = 700.0
        hu += rng.normal(0.0, 12.0, size=hu.shape).astype(np.float32) * body
        volume[k] = np.round(hu).astype(np.int16)
    return volume


def write_series(folder: Path, volume: np.ndarray) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    study, series = generate_uid(), generate_uid()
    names = [f"{n:08x}.dcm" for n in random.Random(5).sample(range(1 << 30), SLICES)]
    for k in range(SLICES):
        write_image(folder / names[k], study, series, k, volume[k],
                    position=[-COLUMNS / 2 * PIXEL_MM, -ROWS / 2 * PIXEL_MM, -400.0 + k * SLICE_MM],
                    orientation=[1, 0, 0, 0, 1, 0], image_type=["ORIGINAL", "PRIMARY", "AXIAL"])
    localizer = generate_uid()
    for n in range(2):
        write_image(folder / f"scout{n}.dcm", study, localizer, n, volume[SLICES // 2],
                    position=[-200.0 + 400.0 * n, 0.0, 0.0], orientation=[0, 1, 0, 0, 0, -1],
                    image_type=["ORIGINAL", "PRIMARY", "LOCALIZER"])


def write_image(path, study, series, index, hu, position, orientation, image_type):
    meta = FileMetaDataset()
    meta.MediaStorageSOPClassUID = CTImageStorage
    meta.MediaStorageSOPInstanceUID = generate_uid()
    meta.TransferSyntaxUID = ExplicitVRLittleEndian
    ds = FileDataset(None, {}, file_meta=meta, preamble=b"\0" * 128)
    ds.SOPClassUID = CTImageStorage
    ds.SOPInstanceUID = meta.MediaStorageSOPInstanceUID
    ds.StudyInstanceUID = study
    ds.SeriesInstanceUID = series
    ds.FrameOfReferenceUID = generate_uid(entropy_srcs=[study])
    ds.Modality = "CT"
    ds.PatientName = "Bench^Phantom"
    ds.PatientID = "BENCH"
    ds.StudyDate = ds.SeriesDate = "20260101"
    ds.StudyTime = ds.AcquisitionTime = "120000"
    ds.SeriesNumber = 2 if image_type[-1] == "AXIAL" else 1
    ds.InstanceNumber = index + 1
    ds.ImageType = image_type
    ds.ImagePositionPatient = [float(v) for v in position]
    ds.ImageOrientationPatient = [float(v) for v in orientation]
    ds.PixelSpacing = [PIXEL_MM, PIXEL_MM]
    ds.SliceThickness = SLICE_MM
    ds.RescaleSlope = 1
    ds.RescaleIntercept = -1024
    ds.SamplesPerPixel = 1
    ds.PhotometricInterpretation = "MONOCHROME2"
    ds.Rows, ds.Columns = hu.shape
    ds.BitsAllocated = 16
    ds.BitsStored = 12
    ds.HighBit = 11
    ds.PixelRepresentation = 0
    ds.PixelData = (hu.astype(np.int32) + 1024).clip(0, 4095).astype("<u2").tobytes()
    ds.save_as(path, enforce_file_format=True)


def main():
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "bench-data")
    volume = phantom()
    write_series(out / "series", volume)
    affine = np.diag([-PIXEL_MM, -PIXEL_MM, SLICE_MM, 1.0])
    affine[:3, 3] = [COLUMNS / 2 * PIXEL_MM, ROWS / 2 * PIXEL_MM, -400.0]
    nib.save(nib.Nifti1Image(np.ascontiguousarray(volume.transpose(2, 1, 0)), affine), out / "ct.nii.gz")
    print(f"wrote {out}/series ({SLICES} slices + 2 localizer images) and {out}/ct.nii.gz")


if __name__ == "__main__":
    main()
