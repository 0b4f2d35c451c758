"""Reads a Keyslice TID 1500 SR with highdicom and prints what an independent parser finds,
as JSON: the measurement groups (tracking identifier, finding site, measurements with units,
qualitative evaluations) and the planar ROI (graphic type, points, referenced image).

    python3 tests/pacs/read_with_highdicom.py SR.dcm
"""

import json
import sys

import highdicom as hd


def site_of(group):
    sites = []
    for site in group.finding_sites:
        laterality = [
            item.ConceptCodeSequence[0].CodeMeaning
            for item in getattr(site, "ContentSequence", [])
        ]
        sites.append(" ".join(laterality + [site.value.meaning]))
    return sites


def main(path):
    report = hd.sr.srread(path)
    content = report.content
    groups = []
    for group in content.get_image_measurement_groups():
        groups.append(
            {
                "tracking_identifier": group.tracking_identifier,
                "finding_sites": site_of(group),
                "measurements": {
                    m.name.meaning: [m.value, m.unit.value] for m in group.get_measurements()
                },
                "qualitative": sorted(
                    [q.name.meaning, q.value.meaning]
                    for q in group.get_qualitative_evaluations()
                ),
            }
        )
    rois = []
    for group in content.get_planar_roi_measurement_groups():
        roi = group.roi
        rois.append(
            {
                "tracking_identifier": group.tracking_identifier,
                "graphic_type": roi.GraphicType,
                "points": [float(v) for v in roi.GraphicData],
                "image": roi.ContentSequence[0].ReferencedSOPSequence[0].ReferencedSOPInstanceUID,
                "measurements": {
                    m.name.meaning: [m.value, m.unit.value] for m in group.get_measurements()
                },
            }
        )
    print(json.dumps({"class": type(report).__name__, "groups": groups, "rois": rois}))


if __name__ == "__main__":
    main(sys.argv[1])
