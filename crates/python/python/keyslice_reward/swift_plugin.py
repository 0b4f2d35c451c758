"""The ms-swift reward plugin ``keyslice``.

    swift rlhf --rlhf_type grpo --external_plugins <site-packages>/keyslice_reward/swift_plugin.py \
        --reward_funcs keyslice --dataset <export>/train.jsonl ...

Keyslice's ms-swift export has, per row, ``findings`` (the ground truth) and optionally
``local_description``; ms-swift passes dataset columns to the reward function as keyword
lists, one entry per completion. Without ms-swift installed the class is still importable
(``KeysliceReward()(completions, findings=[...])``), which is how it is tested.
"""

from typing import List, Optional

from keyslice_reward import score

try:  # ms-swift ≥ 3
    from swift.plugin import ORM, orms
except ImportError:  # not installed: the plugin is still usable directly
    ORM = object
    orms = {}


class KeysliceReward(ORM):
    """The E-MRL total reward of each completion against its row's ``findings``."""

    def __call__(
        self,
        completions: List[str],
        findings: Optional[list] = None,
        local_description: Optional[list] = None,
        **kwargs,
    ) -> List[float]:
        if findings is None:
            raise ValueError(
                "the dataset has no 'findings' column: export it with keyslice export --format swift"
            )
        if len(findings) != len(completions):
            raise ValueError(
                "%d completions but %d ground truths" % (len(completions), len(findings))
            )
        locals_ = local_description or [None] * len(completions)
        return [
            score(completion, truth, local_description=local)["rewards"]["total"]
            for completion, truth, local in zip(completions, findings, locals_)
        ]


orms["keyslice"] = KeysliceReward
