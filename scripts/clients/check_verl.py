"""verl: the custom reward loaded by verl's own loader, and the export read by RLHFDataset with
a Qwen3-VL processor (length filter on), from a working folder other than the export's.

Usage: python check_verl.py WORK CHECKPOINT"""

import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import GARBAGE, emit, right_answer, timestamps  # noqa: E402

import pyarrow.parquet as pq  # noqa: E402
import verl  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402
from transformers import AutoProcessor  # noqa: E402
from verl.trainer.ppo.reward import get_custom_reward_fn  # noqa: E402
from verl.utils.dataset.rl_dataset import RLHFDataset  # noqa: E402
from verl.utils.dataset import rl_dataset  # noqa: E402

import keyslice_reward.verl_reward as verl_reward  # noqa: E402

work, checkpoint = sys.argv[1], sys.argv[2]
parquet = os.path.join(work, "export-verl", "train.parquet")
rows = pq.read_table(parquet).to_pylist()
processor = AutoProcessor.from_pretrained(checkpoint)

config = OmegaConf.create({
    "prompt_key": "prompt", "video_key": "videos", "max_prompt_length": 16384,
    "filter_overlong_prompts": True, "cache_dir": tempfile.mkdtemp(),
})
dataset = RLHFDataset(data_files=[parquet], tokenizer=processor.tokenizer, config=config,
                      processor=processor)
assert len(dataset) == len(rows), "verl kept %d of %d rows" % (len(dataset), len(rows))
# The validation split as TRAINING.md gives it (data.val_files), read the same way.
val_parquet = os.path.join(work, "export-verl", "val.parquet")
val_rows = len(RLHFDataset(data_files=[val_parquet], tokenizer=processor.tokenizer,
                           config=config, processor=processor)) if os.path.exists(val_parquet) else 0

# The model input of the first row, as verl's length filter and rollout build it.
row = dict(dataset.dataframe[0])
messages = dataset._build_messages(row, key="prompt")
raw_prompt = processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
images, videos, audios = dataset._process_multi_modal_info(messages, dataset.image_patch_size, config)
inputs = rl_dataset.build_multimodal_processor_inputs(
    processor, text=[raw_prompt], images=images, videos=videos, audio=audios, mm_processor_kwargs={})
decoded = processor.tokenizer.decode(inputs["input_ids"][0])
grid = inputs["video_grid_thw"][0].tolist()
prompt_tokens = [0] * len(rows)
for index in range(len(rows)):
    doc = dict(dataset.dataframe[index])
    m = dataset._build_messages(doc, key="prompt")
    i, v, a = dataset._process_multi_modal_info(m, dataset.image_patch_size, config)
    p = processor.apply_chat_template(m, add_generation_prompt=True, tokenize=False)
    prompt_tokens[index] = len(rl_dataset.build_multimodal_processor_inputs(
        processor, text=[p], images=i, videos=v, audio=a, mm_processor_kwargs={})["input_ids"][0])

# The reward, through verl's own loader.
reward_config = OmegaConf.create({"reward": {"custom_reward_function": {
    "path": verl_reward.__file__, "name": "compute_score", "reward_kwargs": {}}}})
compute_score = get_custom_reward_fn(reward_config)
rewards = []
for record in rows:
    truth = record["reward_model"]["ground_truth"]
    right = compute_score(data_source=record["data_source"], solution_str=right_answer(truth),
                          ground_truth=truth, extra_info=record["extra_info"])
    garbage = compute_score(data_source=record["data_source"], solution_str=GARBAGE,
                            ground_truth=truth, extra_info=record["extra_info"])
    empty = compute_score(data_source=record["data_source"], solution_str="",
                          ground_truth=truth, extra_info=record["extra_info"])
    rewards.append({"right": right["score"], "garbage": garbage["score"], "empty": empty["score"]})
    assert garbage["score"] <= 0.1 and empty["score"] <= 0.1 and right["score"] > 0.5, rewards[-1]

emit({
    "client": "verl", "version": verl.__version__, "working_folder": os.getcwd(),
    "rows": len(rows), "kept": len(dataset), "val_rows": val_rows, "video_grid_thw": grid,
    "frames_in_model_input": grid[0] * 2, "frames_exported": len(row["videos"][0]["video"]),
    "sample_fps": row["videos"][0].get("sample_fps"), "prompt_tokens": prompt_tokens,
    "timestamps": timestamps(decoded), "rewards": rewards,
})
