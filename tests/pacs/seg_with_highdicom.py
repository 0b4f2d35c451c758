"""Reads and writes DICOM Segmentations with highdicom, the independent implementation
Keyslice's segmentations are held to.

    python3 tests/pacs/seg_with_highdicom.py read SEG.dcm
        prints, as JSON, each segment (number, label, category, property type, algorithm
        type, anatomic region) and its voxels as [source SOP Instance UID, row, column]

    python3 tests/pacs/seg_with_highdicom.py write CT_FOLDER SEG.dcm
        writes a two-segment binary SEG of the CT series in CT_FOLDER: a liver neoplasm (a
        ball of radius 4 voxels at the series' centre) and the spleen (a box beside it), and
        prints the voxels of each by label, as above
"""

import json
import pathlib
import sys

import highdicom as hd
import numpy as np
import pydicom
from pydicom.sr.codedict import codes


def code(item):
    return [item.value, item.scheme_designator, item.meaning]


def read(path):
    seg = hd.seg.segread(path)
    sources = [uid for (_, _, uid) in seg.get_source_image_uids()]
    pixels = seg.get_pixels_by_source_instance(
        source_sop_instance_uids=sources,
        segment_numbers=list(seg.segment_numbers),
        combine_segments=False,
        skip_overlap_checks=True,
    )
    segments = []
    for n, number in enumerate(seg.segment_numbers):
        description = seg.get_segment_description(number)
        voxels = [
            [sources[f], int(r), int(c)]
            for f, r, c in zip(*np.nonzero(pixels[:, :, :, n]))
        ]
        segments.append(
            {
                "number": int(number),
                "label": description.segment_label,
                "category": code(description.segmented_property_category),
                "type": code(description.segmented_property_type),
                "algorithm": description.algorithm_type.value,
                "regions": [code(region) for region in description.anatomic_regions],
                "voxels": voxels,
            }
        )
    print(json.dumps({"segments": segments}))


def write(folder, out):
    images = [pydicom.dcmread(path) for path in sorted(pathlib.Path(folder).glob("*.dcm"))]
    images.sort(key=lambda image: int(image.InstanceNumber))
    frames, rows, columns = len(images), images[0].Rows, images[0].Columns
    grid = np.mgrid[0:frames, 0:rows, 0:columns]
    centre = np.array([frames // 2, rows // 2, columns // 2]).reshape(3, 1, 1, 1)
    ball = ((grid - centre) ** 2).sum(axis=0) <= 16
    spleen = np.zeros_like(ball)
    spleen[frames // 2 - 2 : frames // 2 + 2, 10:16, 20:30] = True
    pixels = np.stack([ball, spleen], axis=-1).astype(np.uint8)
    descriptions = [
        hd.seg.SegmentDescription(
            segment_number=1,
            segment_label="Liver tumor",
            segmented_property_category=codes.SCT.MorphologicallyAbnormalStructure,
            segmented_property_type=codes.SCT.Neoplasm,
            algorithm_type=hd.seg.SegmentAlgorithmTypeValues.MANUAL,
            anatomic_regions=[codes.SCT.Liver],
        ),
        hd.seg.SegmentDescription(
            segment_number=2,
            segment_label="Spleen",
            segmented_property_category=codes.SCT.Organ,
            segmented_property_type=codes.SCT.Spleen,
            algorithm_type=hd.seg.SegmentAlgorithmTypeValues.MANUAL,
        ),
    ]
    seg = hd.seg.Segmentation(
        source_images=images,
        pixel_array=pixels,
        segmentation_type=hd.seg.SegmentationTypeValues.BINARY,
        segment_descriptions=descriptions,
        series_instance_uid=hd.UID(),
        series_number=90,
        sop_instance_uid=hd.UID(),
        instance_number=1,
        manufacturer="highdicom",
        manufacturer_model_name="seg_with_highdicom.py",
        software_versions=hd.__version__,
        device_serial_number="1",
    )
    seg.save_as(out)
    voxels = {}
    for n, label in enumerate(["Liver tumor", "Spleen"]):
        voxels[label] = [
            [str(images[f].SOPInstanceUID), int(r), int(c)]
            for f, r, c in zip(*np.nonzero(pixels[:, :, :, n]))
        ]
    print(json.dumps(voxels))


if __name__ == "__main__":
    if sys.argv[1] == "read":
        read(sys.argv[2])
    elif sys.argv[1] == "write":
        write(sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)
