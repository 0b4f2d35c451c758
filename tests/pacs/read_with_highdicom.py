"""Reads a Keyslice TID 1500 SR with highdicom and prints what an independent parser finds,
as JSON: the measurement groups (tracking identifier, finding site, measurements with units
and the lines they were measured along, qualitative evaluations), the planar ROI groups
(tracking identifier, finding site, graphic type, points, referenced image, measurements,
qualitative evaluations) and the document's own qualitative evaluations (concept, value,
finding site).

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


def drawn(measurement):
    """The SCOORDs highdicom finds a measurement made on (its source of measurement):
    graphic type, points and image."""
    return [
        [
            coordinates.GraphicType,
            [float(v) for v in coordinates.GraphicData],
            coordinates.ContentSequence[0].ReferencedSOPSequence[0].ReferencedSOPInstanceUID,
        ]
        for coordinates in measurement.referenced_coordinates
    ]


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
                # Where each measurement was made: its lines on their images.
                "drawn": {
                    m.name.meaning: drawn(m)
                    for m in group.get_measurements()
                    if drawn(m)
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
                "finding_sites": site_of(group),
                "qualitative": sorted(
                    [q.name.meaning, q.value.meaning]
                    for q in group.get_qualitative_evaluations()
                ),
                "graphic_type": roi.GraphicType,
                "points": [float(v) for v in roi.GraphicData],
                "image": roi.ContentSequence[0].ReferencedSOPSequence[0].ReferencedSOPInstanceUID,
                "measurements": {
                    m.name.meaning: [m.value, m.unit.value] for m in group.get_measurements()
                },
            }
        )
    evaluations = []
    for item in report.ContentSequence:
        if item.ConceptNameCodeSequence[0].CodeMeaning != "Qualitative Evaluations":
            continue
        for child in getattr(item, "ContentSequence", []):
            if child.ValueType != "CODE":
                continue
            sites = [
                grand.ConceptCodeSequence[0].CodeMeaning
                for grand in getattr(child, "ContentSequence", [])
                if grand.ConceptNameCodeSequence[0].CodeMeaning == "Finding Site"
            ]
            evaluations.append(
                [
                    child.ConceptNameCodeSequence[0].CodeMeaning,
                    child.ConceptCodeSequence[0].CodeMeaning,
                    sites[0] if sites else None,
                ]
            )
    print(
        json.dumps(
            {
                "class": type(report).__name__,
                "groups": groups,
                "rois": rois,
                "evaluations": evaluations,
            }
        )
    )


if __name__ == "__main__":
    main(sys.argv[1])
