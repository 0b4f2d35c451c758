#!/usr/bin/env python3
"""Tiny random-weight Qwen3-VL checkpoint and the reference's outputs for Keyslice's tests.

Run locally (not in CI):

    pip install torch torchvision transformers pillow safetensors
    python3 tests/data/qwen3vl/make_fixtures.py

Writes, next to this script:

- `tiny/`: a checkpoint in the layout the released Qwen3-VL checkpoints have (`config.json` with
  `text_config.rope_scaling.mrope_section` and `vision_config.deepstack_visual_indexes`,
  `model.safetensors`, `tokenizer.json`, `tokenizer_config.json`, `chat_template.jinja`,
  `preprocessor_config.json`, `video_preprocessor_config.json`), saved by `transformers` itself
  and read back through `AutoProcessor` / `Qwen3VLForConditionalGeneration.from_pretrained`.
  The tokenizer is a byte-level BPE with a 512-entry vocabulary trained here on a few sentences,
  plus Qwen's special tokens; the weights are random (seeded).
- `image.png` (96x64, no resize needed), `odd.png` (70x50, resized by the processor),
  `video/000.png ... 004.png` (5 frames, 64x64; padded to 6 as Qwen3-VL does).
- `reference.safetensors` + `reference.json`: for an image prompt and a video prompt, the prompt
  token ids, the processor's pixel values and grid, the logits of every prompt position, the
  greedy tokens (12 new tokens) and the logits at each decoding step; for `odd.png` the resized
  pixel values. All in f32 on CPU, eager attention.
- `tiny-bf16/`: the same checkpoint with its weights rounded to bfloat16 and `"dtype":
  "bfloat16"` in `config.json` (as the released checkpoints are), and `reference-bf16.safetensors`
  + `reference-bf16.json`: the reference run in bfloat16 on the image prompt (prefill logits of
  every prompt position and of the prompt followed by the f32 run's greedy tokens, as f32).
  `python3 make_fixtures.py --bf16` remakes only these from the existing `tiny/`.
"""

import json
import math
import os
import shutil
import sys

import numpy as np
import torch
from PIL import Image
from safetensors.torch import save_file
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
from transformers import (
    AutoProcessor,
    PreTrainedTokenizerFast,
    Qwen2VLImageProcessor,
    Qwen3VLConfig,
    Qwen3VLForConditionalGeneration,
    Qwen3VLProcessor,
    Qwen3VLVideoProcessor,
)
from transformers.video_utils import VideoMetadata

HERE = os.path.dirname(os.path.abspath(__file__))
CKPT = os.path.join(HERE, "tiny")
NEW_TOKENS = 12

# Qwen2/Qwen3's pre-tokenizer pattern (words, single digits, punctuation runs, newlines).
SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
SPECIALS = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|image_pad|>",
    "<|video_pad|>",
]
CORPUS = [
    "Describe the liver, pancreas and kidneys on this abdominal CT.",
    "A hypodense lesion in segment 7 of the liver measures 31 x 24 mm.",
    "No pancreatic mass. Both kidneys are normal. The key slice is 42.",
    "Liver tumor: present. Pancreas tumor: absent. Kidney tumor: absent.",
    "The slice shows a round hyperdense lesion in the right kidney, 18 mm.",
    "user assistant system picture video seconds frame slice report",
] * 8

# A chat template of the same shape as the released Qwen3-VL one (ChatML, vision placeholders
# per content item, generation prompt); written for these fixtures.
CHAT_TEMPLATE = """{%- set image_count = namespace(value=0) -%}
{%- set video_count = namespace(value=0) -%}
{%- macro render(content) -%}
{%- if content is string -%}{{ content }}{%- else -%}
{%- for item in content -%}
{%- if item.type == 'image' or 'image' in item -%}
{%- set image_count.value = image_count.value + 1 -%}
{%- if add_vision_id %}Picture {{ image_count.value }}: {% endif -%}
<|vision_start|><|image_pad|><|vision_end|>
{%- elif item.type == 'video' or 'video' in item -%}
{%- set video_count.value = video_count.value + 1 -%}
{%- if add_vision_id %}Video {{ video_count.value }}: {% endif -%}
<|vision_start|><|video_pad|><|vision_end|>
{%- elif 'text' in item -%}{{ item.text }}{%- endif -%}
{%- endfor -%}{%- endif -%}
{%- endmacro -%}
{%- for message in messages -%}
{{ '<|im_start|>' + message.role + '\\n' }}{{ render(message.content) }}{{ '<|im_end|>\\n' }}
{%- endfor -%}
{%- if add_generation_prompt -%}{{ '<|im_start|>assistant\\n' }}{%- endif -%}
"""


def build_tokenizer():
    tok = Tokenizer(models.BPE(unk_token=None, byte_fallback=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(SPLIT), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=512,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(CORPUS, trainer=trainer)
    tok.add_special_tokens(SPECIALS)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        model_max_length=4096,
    )


def build_config(tokenizer):
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in SPECIALS}
    vocab = len(tokenizer)
    vocab = (vocab + 15) // 16 * 16
    return Qwen3VLConfig(
        text_config=dict(
            vocab_size=vocab,
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=3,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=16,
            hidden_act="silu",
            max_position_embeddings=4096,
            rms_norm_eps=1e-6,
            rope_scaling={"rope_type": "default", "mrope_section": [2, 3, 3], "mrope_interleaved": True},
            rope_theta=5_000_000.0,
            attention_bias=False,
            tie_word_embeddings=False,
            dtype="float32",
        ),
        vision_config=dict(
            depth=3,
            hidden_size=32,
            intermediate_size=64,
            num_heads=2,
            in_channels=3,
            patch_size=16,
            spatial_merge_size=2,
            temporal_patch_size=2,
            out_hidden_size=64,
            num_position_embeddings=16,
            deepstack_visual_indexes=[0, 1],
            hidden_act="gelu_pytorch_tanh",
        ),
        image_token_id=ids["<|image_pad|>"],
        video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"],
        tie_word_embeddings=False,
        dtype="float32",
    )


def randomise(model):
    g = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name and name.endswith("weight"):
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g))
            elif name.endswith("bias"):
                p.copy_(0.05 * torch.randn(p.shape, generator=g))
            else:
                fan_in = p.shape[-1] if p.ndim > 1 else 1
                if p.ndim == 5:  # conv3d patch embedding
                    fan_in = p[0].numel()
                scale = 1.0 / math.sqrt(fan_in) if "embed_tokens" not in name and "pos_embed" not in name else 0.5
                p.copy_(scale * torch.randn(p.shape, generator=g))


def to_released_layout():
    """transformers 5 saves `rope_parameters` and one `processor_config.json`; the released
    Qwen3-VL checkpoints (saved by transformers 4.57) have `rope_scaling` + `rope_theta` and
    separate preprocessor files. Rewrite into the released layout, which transformers still reads."""
    path = os.path.join(CKPT, "config.json")
    with open(path) as f:
        config = json.load(f)
    text = config["text_config"]
    rope = text.pop("rope_parameters")
    text["rope_theta"] = rope.pop("rope_theta")
    text["rope_scaling"] = rope
    config["vision_config"].pop("rope_parameters", None)
    with open(path, "w") as f:
        json.dump(config, f, indent=2)
    path = os.path.join(CKPT, "processor_config.json")
    with open(path) as f:
        proc = json.load(f)
    os.remove(path)
    for key, name in [("image_processor", "preprocessor_config.json"), ("video_processor", "video_preprocessor_config.json")]:
        entry = dict(proc[key], processor_class="Qwen3VLProcessor")
        with open(os.path.join(CKPT, name), "w") as f:
            json.dump(entry, f, indent=2)
    path = os.path.join(CKPT, "chat_template.jinja")
    with open(path) as f:
        template = f.read()
    os.remove(path)
    with open(os.path.join(CKPT, "chat_template.json"), "w") as f:
        json.dump({"chat_template": template}, f, indent=2)


def images():
    rng = np.random.default_rng(3)
    y, x = np.mgrid[0:64, 0:96]
    base = (128 + 80 * np.sin(x / 9.0) * np.cos(y / 7.0)).astype(np.float64)
    img = np.stack([base, np.roll(base, 11, axis=1), 255 - base], axis=-1)
    img = np.clip(img + rng.normal(0, 12, img.shape), 0, 255).astype(np.uint8)
    Image.fromarray(img, "RGB").save(os.path.join(HERE, "image.png"))
    odd = np.clip(rng.normal(120, 50, (50, 70)), 0, 255).astype(np.uint8)
    Image.fromarray(odd, "L").save(os.path.join(HERE, "odd.png"))
    vdir = os.path.join(HERE, "video")
    shutil.rmtree(vdir, ignore_errors=True)
    os.makedirs(vdir)
    yy, xx = np.mgrid[0:64, 0:64]
    for i in range(5):
        r = np.hypot(yy - 20 - 5 * i, xx - 32)
        frame = np.where(r < 10 + i, 200, 60) + rng.normal(0, 10, (64, 64))
        Image.fromarray(np.clip(frame, 0, 255).astype(np.uint8), "L").save(os.path.join(vdir, f"{i:03}.png"))


def run_case(model, processor, name, inputs, tensors, record):
    ids = inputs["input_ids"]
    with torch.no_grad():
        out = model(**inputs, use_cache=False)
        prefill = out.logits[0].float()
        gen = model.generate(
            **inputs,
            max_new_tokens=NEW_TOKENS,
            do_sample=False,
            output_logits=True,
            return_dict_in_generate=True,
            eos_token_id=None,
            pad_token_id=0,
        )
    new = gen.sequences[0, ids.shape[1] :].tolist()
    steps = torch.stack([l[0].float() for l in gen.logits])
    tops = torch.topk(steps, 2, dim=-1).values
    margin = float((tops[:, 0] - tops[:, 1]).min())
    tensors[f"{name}.prefill_logits"] = prefill.contiguous()
    tensors[f"{name}.step_logits"] = steps.contiguous()
    key = "pixel_values" if "pixel_values" in inputs else "pixel_values_videos"
    grid = "image_grid_thw" if key == "pixel_values" else "video_grid_thw"
    tensors[f"{name}.pixel_values"] = inputs[key].float().contiguous()
    record[name] = {
        "prompt_ids": ids[0].tolist(),
        "grid_thw": inputs[grid][0].tolist(),
        "greedy_tokens": new,
        "greedy_text": processor.tokenizer.decode(new, skip_special_tokens=True),
        "min_top2_margin": margin,
    }
    print(name, "prompt", ids.shape[1], "tokens; greedy", new, "margin", round(margin, 4))


def bf16_fixture():
    """`tiny/` in bfloat16 and the reference's bfloat16 logits (see the module docstring)."""
    out = os.path.join(HERE, "tiny-bf16")
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    for name in os.listdir(CKPT):
        if name not in ("config.json", "model.safetensors"):
            shutil.copy(os.path.join(CKPT, name), out)
    with open(os.path.join(CKPT, "config.json")) as f:
        config = json.load(f)
    config["dtype"] = "bfloat16"
    config["text_config"]["dtype"] = "bfloat16"
    config["vision_config"]["dtype"] = "bfloat16"
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    model = Qwen3VLForConditionalGeneration.from_pretrained(CKPT, dtype=torch.float32)
    weights = {k: v.to(torch.bfloat16).contiguous() for k, v in model.state_dict().items()}
    save_file(weights, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})

    processor = AutoProcessor.from_pretrained(out)
    model = Qwen3VLForConditionalGeneration.from_pretrained(out, attn_implementation="eager")
    assert model.dtype == torch.bfloat16, model.dtype
    model.eval()
    with open(os.path.join(HERE, "reference.json")) as f:
        f32 = json.load(f)
    image = Image.open(os.path.join(HERE, "image.png")).convert("RGB")
    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": f32["image_prompt"]}]}]
    text = processor.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    inputs = processor(text=[text], images=[image], return_tensors="pt")
    assert inputs["input_ids"][0].tolist() == f32["image"]["prompt_ids"]
    with torch.no_grad():
        prompt = model(**inputs, use_cache=False).logits[0].float()
        # Teacher-forced: the prompt followed by the f32 run's greedy tokens, in one pass.
        forced = torch.tensor([f32["image"]["prompt_ids"] + f32["image"]["greedy_tokens"]])
        extra = len(f32["image"]["greedy_tokens"])
        full = dict(inputs, input_ids=forced, attention_mask=torch.ones_like(forced))
        if "mm_token_type_ids" in inputs:
            types = inputs["mm_token_type_ids"]
            full["mm_token_type_ids"] = torch.cat([types, torch.zeros((1, extra), dtype=types.dtype)], 1)
        continued = model(**full, use_cache=False).logits[0].float()
    save_file(
        {"image.prefill_logits": prompt.contiguous(), "image.forced_logits": continued.contiguous()},
        os.path.join(HERE, "reference-bf16.safetensors"),
    )
    with open(os.path.join(HERE, "reference-bf16.json"), "w") as f:
        json.dump({"dtype": "bfloat16", "forced_tokens": f32["image"]["greedy_tokens"]}, f, indent=1)
        f.write("\n")
    print("bf16: prompt logits", tuple(prompt.shape), "forced", tuple(continued.shape))


def main():
    if "--bf16" in sys.argv:
        bf16_fixture()
        return
    torch.manual_seed(0)
    shutil.rmtree(CKPT, ignore_errors=True)
    tokenizer = build_tokenizer()
    image_processor = Qwen2VLImageProcessor(
        patch_size=16,
        temporal_patch_size=2,
        merge_size=2,
        size={"shortest_edge": 32 * 32 * 2, "longest_edge": 32 * 32 * 16},
        image_mean=[0.5, 0.5, 0.5],
        image_std=[0.5, 0.5, 0.5],
    )
    video_processor = Qwen3VLVideoProcessor(
        patch_size=16,
        temporal_patch_size=2,
        merge_size=2,
        size={"shortest_edge": 32 * 32 * 2, "longest_edge": 32 * 32 * 64},
        image_mean=[0.5, 0.5, 0.5],
        image_std=[0.5, 0.5, 0.5],
        fps=2,
        cap_pixels_per_frame=False,
    )
    processor = Qwen3VLProcessor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        video_processor=video_processor,
        chat_template=CHAT_TEMPLATE,
    )
    config = build_config(tokenizer)
    model = Qwen3VLForConditionalGeneration(config)
    randomise(model)
    model.save_pretrained(CKPT, safe_serialization=True)
    processor.save_pretrained(CKPT)
    to_released_layout()

    # Everything below reads the checkpoint back as a user's script would.
    processor = AutoProcessor.from_pretrained(CKPT)
    model = Qwen3VLForConditionalGeneration.from_pretrained(CKPT, dtype=torch.float32, attn_implementation="eager")
    model.eval()
    images()

    tensors, record = {}, {"new_tokens": NEW_TOKENS}
    prompt = "Describe the liver on this slice."
    image = Image.open(os.path.join(HERE, "image.png")).convert("RGB")
    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": prompt}]}]
    text = processor.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    inputs = processor(text=[text], images=[image], return_tensors="pt")
    record["image_prompt"] = prompt
    record["image_chat"] = text
    run_case(model, processor, "image", inputs, tensors, record)

    prompt = "Which frame shows the largest lesion?"
    frames = [Image.open(os.path.join(HERE, "video", f"{i:03}.png")).convert("RGB") for i in range(5)]
    video = torch.from_numpy(np.stack([np.asarray(f) for f in frames])).permute(0, 3, 1, 2)
    meta = VideoMetadata(total_num_frames=5, fps=2.0, frames_indices=list(range(5)))
    messages = [{"role": "user", "content": [{"type": "video"}, {"type": "text", "text": prompt}]}]
    text = processor.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    inputs = processor(
        text=[text], videos=[video], video_metadata=[meta], do_sample_frames=False, return_tensors="pt"
    )
    inputs.pop("video_metadata", None)
    record["video_prompt"] = prompt
    record["video_fps"] = 2.0
    run_case(model, processor, "video", inputs, tensors, record)

    odd = Image.open(os.path.join(HERE, "odd.png")).convert("RGB")
    out = processor.image_processor(images=[odd], return_tensors="pt")
    tensors["odd.pixel_values"] = out["pixel_values"].float().contiguous()
    record["odd"] = {"grid_thw": out["image_grid_thw"][0].tolist()}

    save_file(tensors, os.path.join(HERE, "reference.safetensors"))
    with open(os.path.join(HERE, "reference.json"), "w") as f:
        json.dump(record, f, indent=1)
        f.write("\n")
    bf16_fixture()
    print("wrote", CKPT, "and reference.{json,safetensors}")


if __name__ == "__main__":
    main()
