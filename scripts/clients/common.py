"""Shared by the client checks: the export's rows, answers built from a ground truth, and the
timestamps a decoded prompt carries."""

import json
import re

GARBAGE = "qz7 vlx!! 00 -- lorem ipsum dolor ####### 3.14159 %%%% asdf"
ORGAN_NAMES = {"liver": "Liver", "pancreas": "Pancreas", "kidney_left": "Left kidney",
               "kidney_right": "Right kidney"}


def right_answer(truth):
    """A well-formed answer that states each organ as the ground truth does."""
    if isinstance(truth, str):
        truth = json.loads(truth)
    findings = truth.get("findings") or truth
    lines = []
    for key, name in ORGAN_NAMES.items():
        organ = (findings.get("organs") or {}).get(key) or {}
        tumor = organ.get("tumor")
        lines.append("%s: %s." % (name, "tumor present" if tumor in ("yes", "uncertain") else "no tumor"))
    key = (findings.get("key_slice") or {}).get("index", 0)
    lines.append("Key slice: %d." % key)
    return "\n".join(lines)


def timestamps(text):
    return re.findall(r"<(\d+(?:\.\d+)?) seconds>", text)


def emit(result):
    print(json.dumps(result, sort_keys=True))
