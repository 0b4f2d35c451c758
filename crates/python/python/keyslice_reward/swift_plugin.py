"""The ms-swift reward plugin ``keyslice``.

    swift rlhf --rlhf_type grpo --external_plugins <site-packages>/keyslice_reward/swift_plugin.py \
        --reward_funcs keyslice --dataset <export>/train.jsonl ...

Keyslice's ms-swift export has, per row, ``truth`` (JSON text of the ground truth as the reward reads it:
the corrected findings and the slice size), ``findings`` and optionally ``local_description``;
ms-swift passes dataset columns to the reward function as keyword lists, one entry per
completion. ms-swift 4 keeps reward functions in ``swift.rewards``, ms-swift 3 in
``swift.plugin``; the plugin registers into whichever is installed. Nulls that ms-swift fills
in for keys a row lacks are read as absent keys. Without ms-swift the class is still
importable (``KeysliceReward()(completions, truth=[...])``).
"""

from typing import List, Optional

from keyslice_reward import score

try:  # ms-swift 4
    from swift.rewards import ORM, orms
except ImportError:
    try:  # ms-swift 3
        from swift.plugin import ORM, orms
    except ImportError:  # not installed: the plugin is still usable directly
        ORM = object
        orms = {}


class KeysliceReward(ORM):
    """The E-MRL total reward of each completion against its row's ground truth."""

    def __call__(
        self,
        completions: List[str],
        truth: Optional[list] = None,
        findings: Optional[list] = None,
        local_description: Optional[list] = None,
        **kwargs,
    ) -> List[float]:
        truths = truth if truth is not None else findings
        if truths is None:
            raise ValueError(
                "the dataset has neither a 'truth' nor a 'findings' column: export it with "
                "keyslice export --format swift"
            )
        if len(truths) != len(completions):
            raise ValueError(
                "%d completions but %d ground truths" % (len(completions), len(truths))
            )
        locals_ = local_description or [None] * len(completions)
        return [
            score(completion, row_truth, local_description=local)["rewards"]["total"]
            for completion, row_truth, local in zip(completions, truths, locals_)
        ]


orms["keyslice"] = KeysliceReward
