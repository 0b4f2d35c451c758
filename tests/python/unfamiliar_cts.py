#!/usr/bin/env python3
"""Writes CT series that are not Keyslice phantoms, for measuring the embedded model's
out-of-domain check: abdominal CTs drawn by an independent generator (numpy anatomy, written
as DICOM by pydicom) with other body shapes, organ intensities, contrast phases, noise,
slice counts and fields of view, and a chest and a pelvis CT. None of them is a tumor case;
each is a CT the demo model was never trained on.

    pip install pydicom numpy
    python3 tests/python/unfamiliar_cts.py OUT            # every case, a folder each
    python3 tests/python/unfamiliar_cts.py OUT --list     # names and descriptions

OUT/manifest.json lists the cases written. No patient data: every value is drawn here.
"""

import json
import sys
from pathlib import Path

import numpy as np
from pydicom.dataset import FileDataset, FileMetaDataset
from pydicom.uid import CTImageStorage, ExplicitVRLittleEndian, generate_uid

# Tissue values (HU) of a portal-venous abdominal CT; each case changes some.
PORTAL = {
    "fat": -100.0, "muscle": 55.0, "liver": 105.0, "spleen": 115.0, "kidney_cortex": 170.0,
    "kidney_medulla": 150.0, "collecting": 15.0, "pancreas": 95.0, "aorta": 170.0,
    "cava": 160.0, "bone_cortex": 900.0, "marrow": 200.0, "bowel": 40.0, "bowel_content": 10.0,
    "gas": -950.0, "lung": -850.0, "heart": 140.0, "bladder": 5.0, "cyst": 2.0,
    "gallbladder": 5.0,
}


def case(name, description, **changes):
    """A case: the portal-venous abdomen of an average adult, with `changes`."""
    spec = {
        "name": name, "description": description,
        "matrix": 160, "fov_mm": 400.0, "slice_mm": 5.0, "range": (0.0, 240.0),
        "body": (165.0, 120.0), "fat_mm": 25.0, "taper": 0.0, "hu": dict(PORTAL),
        "noise": ("white", 12.0), "organ_scale": 1.0, "cysts": [], "arms": False,
        "table": False, "metal": False, "ascites": False, "left_liver": False,
        "oral_contrast": False, "texture": 0.0, "seed": 1,
    }
    for key, value in changes.items():
        if key == "hu":
            spec["hu"].update(value)
        else:
            spec[key] = value
    return spec


CASES = [
    case("tumor_free_abdomen", "tumor-free abdomen: liver, kidneys, spleen and a water cyst",
         cysts=[(-70.0, -10.0, 180.0, 12.0)]),
    case("non_contrast", "non-contrast abdomen", hu={
        "liver": 58.0, "spleen": 48.0, "kidney_cortex": 32.0, "kidney_medulla": 30.0,
        "pancreas": 45.0, "aorta": 42.0, "cava": 40.0, "heart": 45.0}),
    case("arterial_phase", "late arterial phase: bright aorta, corticomedullary kidneys",
         hu={"aorta": 330.0, "cava": 70.0, "kidney_cortex": 230.0, "kidney_medulla": 80.0,
             "liver": 70.0, "spleen": 120.0, "pancreas": 120.0}),
    case("excretory_phase", "excretory phase: contrast in the collecting systems",
         hu={"collecting": 900.0, "kidney_cortex": 120.0, "kidney_medulla": 125.0,
             "aorta": 110.0, "liver": 80.0}),
    case("fatty_liver", "fatty liver (liver darker than spleen)", hu={"liver": -5.0}),
    case("thin_patient", "thin adult: narrow body, little fat", body=(125.0, 95.0), fat_mm=6.0),
    case("obese_patient", "obese adult: wide body, thick fat", body=(235.0, 185.0), fat_mm=75.0,
         fov_mm=500.0),
    case("child", "child: small body, short scan", body=(95.0, 70.0), fat_mm=8.0,
         organ_scale=0.55, range=(0.0, 140.0), slice_mm=3.0, fov_mm=250.0),
    case("round_body", "round body outline", body=(150.0, 145.0)),
    case("flat_body", "flat body outline", body=(180.0, 90.0)),
    case("fine_grid", "thin slices on a fine grid (1 mm, 256 matrix)", matrix=256,
         slice_mm=1.0, fov_mm=360.0, range=(20.0, 220.0)),
    case("low_dose", "low-dose: strong correlated noise", noise=("smooth", 45.0)),
    case("no_noise", "noise-free rendering", noise=("none", 0.0)),
    case("chest", "chest CT: lungs, heart, mediastinum", range=(230.0, 520.0),
         body=(170.0, 115.0), taper=0.08),
    case("pelvis", "pelvis CT: bladder, iliac bones, femoral heads", range=(-220.0, 20.0),
         body=(180.0, 125.0), taper=0.08),
    case("short_thick", "short scan of thick slices (30 × 5 mm)", range=(60.0, 210.0)),
    case("chest_abdomen_pelvis", "chest, abdomen and pelvis in one scan",
         range=(-200.0, 480.0), slice_mm=4.0, taper=0.08),
    case("tapered_outline", "an outline that widens towards the pelvis and chest", taper=0.1),
    case("arms_down", "arms beside the body", arms=True, fov_mm=500.0),
    case("table", "patient table in the field", table=True),
    case("metal", "metal implant with streaks", metal=True),
    case("organomegaly", "large liver and spleen", organ_scale=1.3),
    case("oral_contrast", "positive oral contrast in the bowel", oral_contrast=True),
    case("ascites", "ascites around the organs", ascites=True),
    case("polycystic_kidneys", "polycystic kidneys",
         cysts=[(sx * 75.0 + dx, 40.0 + dy, z, 9.0) for sx in (-1, 1)
                for dx, dy, z in ((-8, 0, 80), (8, 5, 95), (0, -8, 110), (5, 8, 70))]),
    case("situs_inversus", "situs inversus: liver on the left, spleen on the right",
         left_liver=True),
    case("heterogeneous_liver", "heterogeneous (cirrhotic) liver texture", texture=30.0),
]


def smooth(field, passes):
    """A box blur of 3 × 3, `passes` times (numpy only)."""
    for _ in range(passes):
        padded = np.pad(field, 1, mode="edge")
        field = sum(padded[1 + dy:padded.shape[0] - 1 + dy, 1 + dx:padded.shape[1] - 1 + dx]
                    for dy in (-1, 0, 1) for dx in (-1, 0, 1)) / 9.0
    return field


def ellipsoid(x, y, a, centre, radii):
    """Inside test of an ellipsoid at anatomical height `a` (a scalar) on the plane (x, y)."""
    dz = (a - centre[2]) / radii[2]
    if abs(dz) >= 1.0:
        return np.zeros_like(x, dtype=bool)
    shrink = 1.0 - dz * dz
    return ((x - centre[0]) / radii[0]) ** 2 + ((y - centre[1]) / radii[1]) ** 2 < shrink


def draw_slice(spec, x, y, a, rng):
    """HU of one axial slice at anatomical height `a` (mm above the iliac crest)."""
    hu = spec["hu"]
    s = spec["organ_scale"]
    side = -1.0 if spec["left_liver"] else 1.0
    rx, ry = spec["body"]
    # Outline: wider in the pelvis and the chest than at the waist, by `taper` (0: a tube).
    swell = 1.0 + spec["taper"] * np.tanh((abs(a - 120.0) - 120.0) / 80.0 + 1.0)
    rx, ry = rx * swell, ry * swell
    body = (x / rx) ** 2 + (y / ry) ** 2 < 1.0
    fat = spec["fat_mm"]
    inner = (x / (rx - fat)) ** 2 + (y / (ry - fat)) ** 2 < 1.0
    cavity = (x / (rx - fat - 12.0)) ** 2 + (y / (ry - fat - 12.0)) ** 2 < 1.0
    out = np.full(x.shape, -1000.0)
    out[body] = hu["fat"]
    out[inner] = hu["muscle"]
    out[cavity] = hu["fat"] + 30.0  # mesenteric fat, a little denser
    cy = ry - fat - 12.0  # back of the cavity
    if spec["ascites"] and 0.0 < a < 250.0:
        out[cavity & ((x / (rx - fat - 14.0)) ** 2 + (y / (ry - fat - 14.0)) ** 2 > 0.55)] = 12.0
    # Bowel loops below the liver.
    if -150.0 < a < 160.0:
        for n in range(7):
            bx = (n - 3) * 32.0 * s + 8.0 * np.sin(a / 30.0 + n)
            by = -35.0 + 18.0 * np.cos(n * 1.7 + a / 45.0)
            loop = (x - bx) ** 2 + (y - by) ** 2 < (14.0 * s) ** 2
            lumen = (x - bx) ** 2 + (y - by) ** 2 < (10.0 * s) ** 2
            out[loop & cavity] = hu["bowel"]
            content = 280.0 if spec["oral_contrast"] else (
                hu["gas"] if n % 3 == 0 else hu["bowel_content"])
            out[lumen & cavity] = content
    # Lungs and heart above the diaphragm.
    if a > 250.0:
        for lx in (-1.0, 1.0):
            lung = ((x - lx * 70.0) / (60.0 * s)) ** 2 + ((y - 5.0) / (80.0 * s)) ** 2 < 1.0
            out[lung & cavity] = hu["lung"]
        if a < 400.0:
            out[ellipsoid(x, y, a, (15.0, -25.0, 330.0), (55.0, 45.0, 75.0))] = hu["heart"]
    # Organs of the upper abdomen.
    liver_c = (side * -65.0 * s, -5.0, 200.0)
    out[ellipsoid(x, y, a, liver_c, (80.0 * s, 85.0 * s, 75.0 * s)) & cavity] = hu["liver"]
    if spec["texture"] > 0.0:
        liver = ellipsoid(x, y, a, liver_c, (80.0 * s, 85.0 * s, 75.0 * s)) & cavity
        blobs = smooth(rng.normal(0.0, 1.0, x.shape), 3) * spec["texture"] * 3.0
        out[liver] += blobs[liver]
    out[ellipsoid(x, y, a, (side * -45.0 * s, -40.0, 150.0), (14.0, 22.0, 30.0))] = hu["gallbladder"]
    out[ellipsoid(x, y, a, (side * 85.0 * s, 45.0, 190.0), (40.0 * s, 55.0 * s, 50.0 * s))] = hu["spleen"]
    out[ellipsoid(x, y, a, (side * 10.0, 10.0, 140.0), (70.0 * s, 14.0, 14.0))] = hu["pancreas"]
    for kx in (-75.0, 75.0):
        centre = (kx * s, 40.0, 100.0 + (8.0 if kx * side < 0 else -8.0))
        out[ellipsoid(x, y, a, centre, (28.0 * s, 35.0 * s, 55.0 * s))] = hu["kidney_cortex"]
        out[ellipsoid(x, y, a, centre, (17.0 * s, 22.0 * s, 42.0 * s))] = hu["kidney_medulla"]
        out[ellipsoid(x, y, a, centre, (7.0 * s, 9.0 * s, 30.0 * s))] = hu["collecting"]
    # Pelvis: bladder, iliac wings, femoral heads.
    if a < 20.0:
        out[ellipsoid(x, y, a, (0.0, -20.0, -120.0), (45.0, 35.0, 40.0))] = hu["bladder"]
        for px in (-1.0, 1.0):
            wing = ((x - px * 95.0) / 14.0) ** 2 + ((y - 40.0) / 55.0) ** 2 < 1.0
            out[wing & inner] = hu["bone_cortex"] * 0.6
            head = ellipsoid(x, y, a, (px * 85.0, 10.0, -170.0), (24.0, 24.0, 24.0))
            out[head] = hu["marrow"] + 150.0
    # Cysts.
    for cx, cy_, cz, r in spec["cysts"]:
        out[ellipsoid(x, y, a, (side * cx if cx < 0 else cx, cy_, cz), (r, r, r))] = hu["cyst"]
    # Spine, aorta, cava.
    sy = cy - 35.0
    out[(x / 20.0) ** 2 + ((y - sy) / 17.0) ** 2 < 1.0] = hu["bone_cortex"]
    out[(x / 16.0) ** 2 + ((y - sy) / 13.0) ** 2 < 1.0] = hu["marrow"]
    out[(x / 7.0) ** 2 + ((y - sy - 26.0) / 7.0) ** 2 < 1.0] = 20.0
    out[((x - 8.0) / 11.0) ** 2 + ((y - sy + 32.0) / 11.0) ** 2 < 1.0] = hu["aorta"]
    if a > -60.0:
        out[((x + side * 22.0) / 12.0) ** 2 + ((y - sy + 30.0) / 10.0) ** 2 < 1.0] = hu["cava"]
    # Ribs around the upper abdomen and chest.
    if a > 150.0:
        for angle in np.linspace(-2.6, -0.55, 6).tolist() + np.linspace(0.55, 2.6, 6).tolist():
            bx, by = np.sin(angle) * (rx - fat - 6.0), -np.cos(angle) * (ry - fat - 6.0)
            out[(x - bx) ** 2 + (y - by) ** 2 < 36.0] = hu["bone_cortex"]
    if spec["arms"]:
        for ax in (-1.0, 1.0):
            arm = ((x - ax * (rx + 50.0)) / 42.0) ** 2 + (y / 40.0) ** 2 < 1.0
            out[arm] = hu["muscle"]
            out[((x - ax * (rx + 50.0)) / 12.0) ** 2 + (y / 12.0) ** 2 < 1.0] = hu["bone_cortex"]
    if spec["table"]:
        table = (np.abs(y - (ry + 25.0) - 0.0015 * x * x) < 4.0) & (np.abs(x) < 220.0)
        out[table] = 250.0
    if spec["metal"] and -40.0 < a < 60.0:
        angle = np.arctan2(y - 30.0, x - 60.0)
        streaks = 180.0 * np.cos(8.0 * angle) * np.exp(-np.hypot(x - 60.0, y - 30.0) / 120.0)
        out[body] += streaks[body]
        out[(x - 60.0) ** 2 + (y - 30.0) ** 2 < 100.0] = 3000.0
    # Partial volume, then noise.
    out = smooth(out, 1)
    kind, sigma = spec["noise"]
    if kind == "white":
        out = out + rng.normal(0.0, sigma, out.shape) * body
    elif kind == "smooth":
        field = smooth(rng.normal(0.0, 1.0, out.shape), 2)
        out = out + field / field.std() * sigma * body
    return np.round(out).clip(-1024, 3071).astype(np.int16)


def write(spec, folder):
    folder.mkdir(parents=True, exist_ok=True)
    n = spec["matrix"]
    pixel = spec["fov_mm"] / n
    centres = (np.arange(n) - (n - 1) / 2.0) * pixel
    x, y = np.meshgrid(centres, centres)  # x: columns (right to left), y: rows (anterior to posterior)
    a0, a1 = spec["range"]
    slices = max(int(round((a1 - a0) / spec["slice_mm"])), 8)
    rng = np.random.default_rng(spec["seed"])
    study, series = generate_uid(), generate_uid()
    frame = generate_uid()
    for k in range(slices):
        a = a0 + (k + 0.5) * spec["slice_mm"]
        hu = draw_slice(spec, x, y, a, rng)
        meta = FileMetaDataset()
        meta.MediaStorageSOPClassUID = CTImageStorage
        meta.MediaStorageSOPInstanceUID = generate_uid()
        meta.TransferSyntaxUID = ExplicitVRLittleEndian
        ds = FileDataset(None, {}, file_meta=meta, preamble=b"\0" * 128)
        ds.SOPClassUID = CTImageStorage
        ds.SOPInstanceUID = meta.MediaStorageSOPInstanceUID
        ds.StudyInstanceUID, ds.SeriesInstanceUID, ds.FrameOfReferenceUID = study, series, frame
        ds.Modality = "CT"
        ds.PatientName = "Unfamiliar^" + spec["name"]
        ds.PatientID = spec["name"]
        ds.StudyDate = ds.SeriesDate = "20260101"
        ds.StudyTime = "120000"
        ds.SeriesNumber, ds.InstanceNumber = 3, k + 1
        ds.SeriesDescription = spec["description"][:64]
        ds.ImageType = ["ORIGINAL", "PRIMARY", "AXIAL"]
        ds.ImagePositionPatient = [float(centres[0]), float(centres[0]), float(a)]
        ds.ImageOrientationPatient = [1.0, 0.0, 0.0, 0.0, 1.0, 0.0]
        ds.PixelSpacing = [pixel, pixel]
        ds.SliceThickness = spec["slice_mm"]
        ds.RescaleSlope, ds.RescaleIntercept = 1, -1024
        ds.SamplesPerPixel = 1
        ds.PhotometricInterpretation = "MONOCHROME2"
        ds.Rows = ds.Columns = n
        ds.BitsAllocated, ds.BitsStored, ds.HighBit, ds.PixelRepresentation = 16, 12, 11, 0
        ds.PixelData = (hu.astype(np.int32) + 1024).clip(0, 4095).astype("<u2").tobytes()
        ds.save_as(folder / f"{k:04d}.dcm", enforce_file_format=True)
    return slices


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    if "--list" in sys.argv:
        for spec in CASES:
            print(f"{spec['name']}: {spec['description']}")
        return
    out = Path(sys.argv[1])
    manifest = []
    for spec in CASES:
        slices = write(spec, out / spec["name"])
        manifest.append({"name": spec["name"], "description": spec["description"],
                         "slices": slices, "slice_mm": spec["slice_mm"],
                         "matrix": spec["matrix"]})
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    print(f"wrote {len(manifest)} CT series to {out}")


if __name__ == "__main__":
    main()
