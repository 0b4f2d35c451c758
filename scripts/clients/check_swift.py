"""ms-swift 3.x and 4.x: the reward plugin registered by swift's own --external_plugins
loader, the export's train and validation splits read by swift's load_dataset as TRAINING.md
gives them and joined (splits of different cases: tumor-free ones on one side only), the
reward called as the GRPO trainer calls it (every column a keyword list), and the first row
encoded by swift's Qwen3-VL template, from a working folder other than the export's.

Usage: python check_swift.py WORK CHECKPOINT"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import GARBAGE, emit, right_answer, timestamps  # noqa: E402

import swift  # noqa: E402
from swift.utils import import_external_file  # noqa: E402

import keyslice_reward.swift_plugin as plugin_module  # noqa: E402

work, checkpoint = sys.argv[1], sys.argv[2]
major = int(swift.__version__.split(".")[0])
if major >= 4:
    from swift.rewards import orms
    from swift.dataset import load_dataset
    from swift.model import get_processor
    from swift.template import get_template
else:
    from swift.plugin import orms
    from swift.llm import load_dataset, get_template
    from swift.llm import get_model_tokenizer

import_external_file(plugin_module.__file__)
assert "keyslice" in orms, "the plugin did not register in swift's reward functions"
reward = orms["keyslice"]()

export = os.path.join(work, "export-swift")
train_file, val_file = os.path.join(export, "train.jsonl"), os.path.join(export, "val.jsonl")
# GRPO keeps the columns reward functions read (swift rlhf sets remove_unused_columns=False).
# As TRAINING.md runs it (--dataset train --val_dataset val), and both files joined into one
# dataset, which is where splits with different nested fields used to fail to align.
loaded = {}
for name, files in (("train", [train_file]), ("val", [val_file]), ("joined", [train_file, val_file])):
    loaded[name] = load_dataset(files, split_dataset_ratio=0.0, num_proc=1,
                                remove_unused_columns=False)[0]
rows = list(loaded["joined"])
def tumor_free(row):
    return "lesions" not in row["findings"]
def count_nulls(value):
    if value is None:
        return 1
    if isinstance(value, dict):
        return sum(count_nulls(v) for v in value.values())
    if isinstance(value, list):
        return sum(count_nulls(v) for v in value)
    return 0


nulls = sum(count_nulls(row.get("truth")) + count_nulls(row.get("findings")) for row in rows)

rewards = []
for row in rows:
    columns = {key: [value] for key, value in row.items() if key != "messages"}
    right = reward([right_answer(row["truth"])], **columns)[0]
    garbage = reward([GARBAGE], **columns)[0]
    empty = reward([""], **columns)[0]
    rewards.append({"right": right, "garbage": garbage, "empty": empty})
    assert garbage <= 0.1 and empty <= 0.1 and right > 0.5, rewards[-1]

# The first row through swift's Qwen3-VL template.
if major >= 4:
    processor = get_processor(checkpoint, model_type="qwen3_vl", download_model=False)
    template = get_template(processor, template_type="qwen3_vl")
else:
    _, processor = get_model_tokenizer(checkpoint, load_model=False, model_type="qwen3_vl")
    template = get_template("qwen3_vl", processor)
if hasattr(template, "set_mode"):
    template.set_mode("train")
# What swift's Qwen3-VL template asks the processor for (its frames and video metadata):
# the processor's expanded video text carries the timestamps.
calls = []
processor_class = type(processor)
original_call = processor_class.__call__


def recording_call(self, *args, **kwargs):
    out = original_call(self, *args, **kwargs)
    if kwargs.get("videos") is not None:
        calls.append(out["input_ids"][0].tolist())
    return out


processor_class.__call__ = recording_call
row = rows[0]
encoded = template.encode({"messages": row["messages"], "videos": row["videos"]})
processor_class.__call__ = original_call
decoded = processor.tokenizer.decode(calls[-1]) if calls else ""
grid = encoded["video_grid_thw"][0].tolist()
video_pad = processor.tokenizer.convert_tokens_to_ids("<|video_pad|>")
pads_as_is = list(encoded["input_ids"]).count(video_pad)
# swift's Qwen3-VL template has the released tokenizer's ids built in (video_token_id 151656);
# the tiny test checkpoint numbers its tokens otherwise. With the template told the
# checkpoint's own id, as a released checkpoint has it, the row carries every video token.
builtin_video_id = template.video_token_id
template.video_token_id = video_pad
template.max_length = 32768  # TRAINING.md's --max_length leaves room; swift's default is 4096
encoded = template.encode({"messages": row["messages"], "videos": row["videos"]})
template.video_token_id = builtin_video_id

emit({
    "client": "ms-swift", "version": swift.__version__, "working_folder": os.getcwd(),
    "rows": len(rows), "nulls_filled_by_swift": nulls,
    "tumor_free_rows": {name: "%d of %d" % (sum(map(tumor_free, data)), len(data))
                        for name, data in loaded.items()}, "video_grid_thw": grid,
    "video_pads_from_processor": calls[-1].count(video_pad) if calls else 0,
    "video_pads_in_encoded_row": list(encoded["input_ids"]).count(video_pad),
    "template_video_token_id": builtin_video_id, "checkpoint_video_token_id": video_pad,
    "video_pads_with_template_id_as_is": pads_as_is,
    "frames_in_model_input": grid[0] * 2, "frames_exported": len(row["videos"][0]),
    "timestamps": timestamps(decoded), "rewards": rewards,
})
