"""The E-MRL reward of Keyslice for Python training frameworks.

The reader and every reward term are Keyslice's own Rust code (``keyslice_reward._native``),
so a model is trained on exactly the reward ``keyslice score --per-case`` reports:

- ``score(answer, ground_truth, local_description=None, weights=None)`` returns a dict with
  ``rewards`` (``format``, ``existence``, ``attributes``, ``localization``, ``consistency``,
  ``total``), ``problems`` (evidence in the answer that could not be used), ``unread`` and
  ``faults`` (why the answer is not well-formed; with any fault the total is at most 0.1);
- ``read(text)`` returns the findings Keyslice reads from a report;
- ``keyslice_reward.verl_reward.compute_score`` is verl's custom reward function;
- ``keyslice_reward.swift_plugin`` registers the ms-swift reward plugin ``keyslice``.

The ground truth is read by the same definition as ``keyslice score``: findings JSON, or
``{"findings"|"report", "lesion_extents", "slice_size"}``; a null is an absent key; a truth with
neither findings nor a report, or that cannot be read, raises ``ValueError`` naming what is
wrong. An answer that cannot be read scores low, as it should.
"""

import json
from typing import Any, Optional, Union

from . import _native

__version__ = _native.__version__

Truth = Union[str, bytes, dict]


def _truth_text(ground_truth: Truth) -> str:
    if isinstance(ground_truth, bytes):
        return ground_truth.decode("utf-8")
    if isinstance(ground_truth, str):
        return ground_truth
    if isinstance(ground_truth, dict):
        return json.dumps(ground_truth)
    raise ValueError(
        "ground truth must be findings JSON (text or dict), not %s" % type(ground_truth).__name__
    )


def score(
    answer: str,
    ground_truth: Truth,
    local_description: Optional[str] = None,
    weights: Optional[dict] = None,
) -> dict:
    """The reward terms of ``answer`` against ``ground_truth`` (see the module text)."""
    if not isinstance(answer, str):
        raise ValueError("the answer must be text, not %s" % type(answer).__name__)
    if local_description is not None and not isinstance(local_description, str):
        raise ValueError(
            "local_description must be text, not %s" % type(local_description).__name__
        )
    result: Any = _native.score(
        answer,
        _truth_text(ground_truth),
        local_description,
        None if weights is None else json.dumps(weights),
    )
    return json.loads(result)


def read(text: str) -> dict:
    """The findings Keyslice reads from ``text``, the unread sentences and the problems."""
    return json.loads(_native.read(text))
