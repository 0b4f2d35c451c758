"""LLaMA-Factory: the export read by its own get_dataset with the qwen3_vl template and
video_fps as the export's TRAINING.md gives it, from a working folder other than the export's.

Usage: python check_llamafactory.py WORK CHECKPOINT"""

import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import emit, timestamps  # noqa: E402

import llamafactory  # noqa: E402
from llamafactory.data import get_dataset, get_template_and_fix_tokenizer  # noqa: E402
from llamafactory.hparams import get_train_args  # noqa: E402
from llamafactory.model import load_tokenizer  # noqa: E402

work, checkpoint = sys.argv[1], sys.argv[2]
export = os.path.join(work, "export-llamafactory")
model_args, data_args, training_args, _, _ = get_train_args({
    "model_name_or_path": checkpoint, "stage": "sft", "do_train": True, "finetuning_type": "full",
    "dataset": "keyslice_train", "eval_dataset": "keyslice_val", "do_eval": True,
    "dataset_dir": export, "template": "qwen3_vl",
    "cutoff_len": 32768, "output_dir": tempfile.mkdtemp(), "overwrite_cache": True,
    "preprocessing_num_workers": 1, "video_fps": 2.0, "video_maxlen": 768,
    "report_to": "none",
})
tokenizer_module = load_tokenizer(model_args)
template = get_template_and_fix_tokenizer(tokenizer_module["tokenizer"], data_args)
dataset_module = get_dataset(template, model_args, data_args, training_args, stage="sft",
                             **tokenizer_module)
train = dataset_module["train_dataset"]
evaluation = dataset_module["eval_dataset"]
decoded = tokenizer_module["tokenizer"].decode(train[0]["input_ids"])
import json  # noqa: E402
rows = json.load(open(os.path.join(export, "train.json")))
emit({
    "client": "llamafactory", "version": llamafactory.__version__, "working_folder": os.getcwd(),
    "rows": len(rows), "kept": len(train), "eval_rows": len(evaluation),
    "frames_exported": len(rows[0]["videos"][0]),
    "video_tokens": decoded.count("<|video_pad|>"), "timestamps": timestamps(decoded),
})
