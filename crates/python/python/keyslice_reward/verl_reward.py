"""verl's custom reward function.

In the trainer's configuration::

    custom_reward_function:
      path: <site-packages>/keyslice_reward/verl_reward.py   # python -c "import keyslice_reward.verl_reward as v; print(v.__file__)"
      name: compute_score

verl calls ``compute_score(data_source, solution_str, ground_truth, extra_info)`` per
sample; Keyslice's verl export writes ``reward_model.ground_truth`` (the ground truth: corrected
findings and slice size) and
``extra_info``. When the rollout also ran a verifier on the answer's key slice, put its
text in ``extra_info["local_description"]`` and the cross-view consistency term is scored.
Optional ``extra_info["reward_weights"]``: the five term weights.
"""

from typing import Optional

from keyslice_reward import score


def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth,
    extra_info: Optional[dict] = None,
    **kwargs,
) -> dict:
    """The E-MRL reward: ``score`` is the total, the other keys are its terms (verl logs
    every key of the returned dict). Other keyword arguments a verl version passes are
    ignored."""
    extra_info = extra_info or {}
    if not isinstance(extra_info, dict):
        raise ValueError("extra_info must be a dict, not %s" % type(extra_info).__name__)
    result = score(
        solution_str,
        ground_truth,
        local_description=extra_info.get("local_description"),
        weights=extra_info.get("reward_weights"),
    )
    rewards = result["rewards"]
    consistency = rewards.get("consistency")
    localization = rewards.get("localization")
    return {
        "score": rewards["total"],
        "format": rewards["format"],
        "existence": rewards["existence"],
        "attributes": rewards["attributes"],
        # verl averages every key over the batch: an unscored term is -1, never a made-up 0.
        "localization": -1.0 if localization is None else localization,
        "consistency": -1.0 if consistency is None else consistency["score"],
        "problems": len(result["problems"]),
        "well_formed": 0.0 if result["faults"] else 1.0,
    }
