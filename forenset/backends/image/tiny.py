"""Tiny random-weight diffusers pipelines built from configs, with no download.

Why: tests and the CPU demo must exercise the real diffusers call path (tokenizers, text
encoders, denoiser, VAE, schedulers, batching, generators) without fetching weights. Every
component here is a real diffusers / transformers class with a tiny config; tokenizers are
built in memory (transformers 5 accepts a vocab directly). Weights are random but seeded, so
two builds with the same seed are identical.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

# The image-only Qwen2-VL processor below is saved in model_index.json under this module's
# name. diffusers loads such a component by looking up base-class names (ProcessorMixin) in
# the named module, so ProcessorMixin is re-exported here.
from transformers import ProcessorMixin as ProcessorMixin
from transformers import Qwen2VLProcessor

# Printable characters the in-memory T5 (unigram) tokenizer knows; others map to <unk>.
_T5_CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.,;:!?'\"-()/ "


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2/CLIP byte-level alphabet: every byte maps to one printable unicode character."""
    bs = list(range(ord("!"), ord("~") + 1))
    bs += list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, [chr(c) for c in cs], strict=True))


def tiny_clip_tokenizer(model_max_length: int = 77) -> Any:
    """A character-level CLIP BPE tokenizer (no merges) covering the whole byte alphabet."""
    from transformers import CLIPTokenizer

    vocab: dict[str, int] = {"<|startoftext|>": 0, "<|endoftext|>": 1}
    for ch in _bytes_to_unicode().values():
        vocab.setdefault(ch, len(vocab))
        vocab.setdefault(ch + "</w>", len(vocab))
    return CLIPTokenizer(vocab=vocab, merges=[], model_max_length=model_max_length)


def tiny_t5_tokenizer(model_max_length: int = 512) -> Any:
    """A character-level T5 unigram tokenizer (ids 0,1,2 = pad, eos, unk as in T5)."""
    from transformers import T5Tokenizer

    pieces: list[tuple[str, float]] = [("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0), ("▁", -1.0)]
    pieces += [(c, -2.0) for c in _T5_CHARS if c != " "]
    return T5Tokenizer(vocab=pieces, extra_ids=0, model_max_length=model_max_length)


def _clip_config(projection: bool, hidden: int = 32) -> Any:
    from transformers import CLIPTextConfig

    return CLIPTextConfig(
        bos_token_id=0,
        eos_token_id=1,
        pad_token_id=1,
        hidden_size=hidden,
        intermediate_size=37,
        layer_norm_eps=1e-05,
        num_attention_heads=4,
        num_hidden_layers=2,
        vocab_size=1000,
        max_position_embeddings=77,
        projection_dim=32 if projection else 512,
        hidden_act="gelu",
    )


def _clip_text(hidden: int = 32) -> Any:
    from transformers import CLIPTextModel

    return CLIPTextModel(_clip_config(projection=False, hidden=hidden)).eval()


def _clip_text_proj() -> Any:
    from transformers import CLIPTextModelWithProjection

    return CLIPTextModelWithProjection(_clip_config(projection=True)).eval()


def _t5_encoder(d_model: int = 32) -> Any:
    from transformers import T5Config, T5EncoderModel

    cfg = T5Config(  # type: ignore[call-arg]  # T5Config takes these through **kwargs
        vocab_size=128,
        d_model=d_model,
        d_ff=37,
        d_kv=8,
        num_layers=2,
        num_heads=4,
        relative_attention_num_buckets=8,
        pad_token_id=0,
        eos_token_id=1,
        decoder_start_token_id=0,
    )
    return T5EncoderModel(cfg).eval()


def _sd_vae() -> Any:
    from diffusers import AutoencoderKL

    return AutoencoderKL(
        block_out_channels=[8, 16],
        in_channels=3,
        out_channels=3,
        down_block_types=["DownEncoderBlock2D"] * 2,
        up_block_types=["UpDecoderBlock2D"] * 2,
        latent_channels=4,
        layers_per_block=1,
        norm_num_groups=2,
        sample_size=32,
    )


def _sd_unet(in_channels: int = 4, cross_attention_dim: int = 32, **extra: Any) -> Any:
    from diffusers import UNet2DConditionModel

    return UNet2DConditionModel(
        block_out_channels=(8, 16),
        layers_per_block=1,
        sample_size=16,
        in_channels=in_channels,
        out_channels=4,
        down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"),
        up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"),
        cross_attention_dim=cross_attention_dim,
        attention_head_dim=4,
        norm_num_groups=4,
        **extra,
    )


def _flow_vae() -> Any:
    """A one-level VAE as used by the Flux / SD3 pipeline tests (16 channels, no quant convs)."""
    from diffusers import AutoencoderKL

    return AutoencoderKL(
        sample_size=32,
        in_channels=3,
        out_channels=3,
        block_out_channels=(8, 16),
        down_block_types=["DownEncoderBlock2D"] * 2,
        up_block_types=["UpDecoderBlock2D"] * 2,
        layers_per_block=1,
        latent_channels=4,
        norm_num_groups=2,
        use_quant_conv=False,
        use_post_quant_conv=False,
        shift_factor=0.0609,
        scaling_factor=1.5035,
    )


def _build_sd(pipeline_name: str) -> Any:
    import diffusers

    cls = getattr(diffusers, pipeline_name)
    in_channels = 8 if pipeline_name == "StableDiffusionInstructPix2PixPipeline" else 4
    return cls(
        vae=_sd_vae(),
        text_encoder=_clip_text(),
        tokenizer=tiny_clip_tokenizer(),
        unet=_sd_unet(in_channels=in_channels),
        scheduler=diffusers.DDIMScheduler(
            beta_start=0.00085,
            beta_end=0.012,
            beta_schedule="scaled_linear",
            clip_sample=False,
            set_alpha_to_one=False,
            steps_offset=1,
        ),
        safety_checker=None,
        feature_extractor=None,
        requires_safety_checker=False,
    )


def _build_sdxl(pipeline_name: str) -> Any:
    import diffusers

    unet = _sd_unet(
        cross_attention_dim=64,  # text_encoder (32) + text_encoder_2 (32) hidden states
        use_linear_projection=True,
        addition_embed_type="text_time",
        addition_time_embed_dim=8,
        projection_class_embeddings_input_dim=6 * 8 + 32,  # 6 time ids * 8 + pooled text (32)
    )
    return diffusers.StableDiffusionXLPipeline(
        vae=_sd_vae(),
        text_encoder=_clip_text(),
        text_encoder_2=_clip_text_proj(),
        tokenizer=tiny_clip_tokenizer(),
        tokenizer_2=tiny_clip_tokenizer(),
        unet=unet,
        scheduler=diffusers.EulerDiscreteScheduler(
            beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear"
        ),
        force_zeros_for_empty_prompt=True,
        add_watermarker=False,
    )


def _build_sd3(pipeline_name: str) -> Any:
    import diffusers

    transformer = diffusers.SD3Transformer2DModel(
        sample_size=16,
        patch_size=1,
        in_channels=4,
        num_layers=1,
        attention_head_dim=8,
        num_attention_heads=2,
        caption_projection_dim=16,
        joint_attention_dim=32,  # = T5 d_model; CLIP states are zero-padded to it
        pooled_projection_dim=64,  # two CLIP pooled projections of 32
        out_channels=4,
    )
    return diffusers.StableDiffusion3Pipeline(
        transformer=transformer,
        scheduler=diffusers.FlowMatchEulerDiscreteScheduler(),
        vae=_flow_vae(),
        text_encoder=_clip_text_proj(),
        tokenizer=tiny_clip_tokenizer(),
        text_encoder_2=_clip_text_proj(),
        tokenizer_2=tiny_clip_tokenizer(),
        text_encoder_3=_t5_encoder(),
        tokenizer_3=tiny_t5_tokenizer(),
    )


def _build_flux(pipeline_name: str) -> Any:
    import diffusers

    cls = getattr(diffusers, pipeline_name)
    transformer = diffusers.FluxTransformer2DModel(
        patch_size=1,
        in_channels=16,  # 4 latent channels packed 2x2
        num_layers=1,
        num_single_layers=1,
        attention_head_dim=16,
        num_attention_heads=2,
        joint_attention_dim=32,
        pooled_projection_dim=32,
        guidance_embeds=True,  # like FLUX.1-dev / Kontext-dev (guidance-distilled)
        axes_dims_rope=[4, 4, 8],
    )
    return cls(
        scheduler=diffusers.FlowMatchEulerDiscreteScheduler(),
        vae=_flow_vae(),
        text_encoder=_clip_text(),
        tokenizer=tiny_clip_tokenizer(),
        text_encoder_2=_t5_encoder(),
        tokenizer_2=tiny_t5_tokenizer(),
        transformer=transformer,
    )


_QWEN_SPECIALS = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|image_pad|>",
    "<|video_pad|>",
]


def tiny_qwen_tokenizer() -> Any:
    """A character-level Qwen2 byte-level BPE tokenizer with the chat/vision special tokens."""
    from transformers import Qwen2Tokenizer

    vocab: dict[str, int] = {}
    for ch in _bytes_to_unicode().values():
        vocab.setdefault(ch, len(vocab))
    for tok in _QWEN_SPECIALS:
        vocab[tok] = len(vocab)
    tokenizer = Qwen2Tokenizer(vocab=vocab, merges=[], model_max_length=4096)
    tokenizer.add_special_tokens({"additional_special_tokens": _QWEN_SPECIALS[1:]})
    return tokenizer


class ImageOnlyQwen2VLProcessor(Qwen2VLProcessor):
    """A Qwen2-VL processor without a video processor, which saves and loads like any other.

    transformers' video processors need torchvision (absent from CPU installs) and edits never
    use video. Dropping ``video_processor`` from ``__init__`` drops it from the processor's
    attributes, so ``save_pretrained`` writes only the tokenizer and image processor and
    ``from_pretrained`` loads only those (the stock class fails on a missing video processor).
    """

    def __init__(self, image_processor=None, tokenizer=None, chat_template=None, **kwargs):
        super().__init__(image_processor, tokenizer, None, chat_template=chat_template, **kwargs)


def _qwen_processor(tokenizer: Any) -> Any:
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import (
        Qwen2VLImageProcessorPil,
    )

    # Few vision tokens: the pipeline hands the VL encoder a ~1 MP image; this caps what it sees.
    pixels = 28 * 28 * 4
    image_processor = Qwen2VLImageProcessorPil(min_pixels=pixels, max_pixels=pixels)
    return ImageOnlyQwen2VLProcessor(image_processor=image_processor, tokenizer=tokenizer)


def _build_qwen_edit(pipeline_name: str) -> Any:
    import diffusers
    from transformers import Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration

    tokenizer = tiny_qwen_tokenizer()
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in _QWEN_SPECIALS}
    text_config = {
        "hidden_size": 16,
        "intermediate_size": 16,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "num_key_value_heads": 2,
        "rope_scaling": {"mrope_section": [1, 1, 2], "rope_type": "default", "type": "default"},
        "rope_theta": 1_000_000.0,
        "vocab_size": len(tokenizer),
        "bos_token_id": ids["<|endoftext|>"],
        "eos_token_id": ids["<|im_end|>"],
    }
    vision_config = {
        "depth": 2,
        "hidden_size": 16,
        "intermediate_size": 16,
        "num_heads": 2,
        "out_hidden_size": 16,
    }
    config = Qwen2_5_VLConfig(  # type: ignore[call-arg]  # the text fields go through **kwargs
        text_config=text_config,
        vision_config=vision_config,
        hidden_size=16,
        vocab_size=len(tokenizer),
        bos_token_id=ids["<|endoftext|>"],
        eos_token_id=ids["<|im_end|>"],
        image_token_id=ids["<|image_pad|>"],
        video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"],
    )
    z_dim = 4
    vae = diffusers.AutoencoderKLQwenImage(
        base_dim=4,  # encoding the ~1 MP source dominates a CPU edit: half the width, half the time
        z_dim=z_dim,
        dim_mult=[1, 2, 2, 2],  # three downsamples: the real 8x factor, so ~1 MP -> 64x64 tokens
        num_res_blocks=1,
        temperal_downsample=[False, True, True],
        latents_mean=[0.0] * z_dim,
        latents_std=[1.0] * z_dim,
    )
    transformer = diffusers.QwenImageTransformer2DModel(
        patch_size=2,
        in_channels=4 * z_dim,
        out_channels=z_dim,
        num_layers=1,
        attention_head_dim=16,
        num_attention_heads=2,
        joint_attention_dim=16,
        guidance_embeds=False,
        axes_dims_rope=(8, 4, 4),
    )
    return diffusers.QwenImageEditPipeline(
        scheduler=diffusers.FlowMatchEulerDiscreteScheduler(),
        vae=vae,
        text_encoder=Qwen2_5_VLForConditionalGeneration(config).eval(),
        tokenizer=tokenizer,
        processor=_qwen_processor(tokenizer),
        transformer=transformer,
    )


_BUILDERS: dict[str, Callable[[str], Any]] = {
    "StableDiffusionPipeline": _build_sd,
    "StableDiffusionInstructPix2PixPipeline": _build_sd,
    "StableDiffusionXLPipeline": _build_sdxl,
    "StableDiffusion3Pipeline": _build_sd3,
    "FluxPipeline": _build_flux,
    "FluxKontextPipeline": _build_flux,
    "QwenImageEditPipeline": _build_qwen_edit,
}


def tiny_pipeline_names() -> list[str]:
    """Pipeline class names that have a tiny builder."""
    return sorted(_BUILDERS)


def build_tiny_pipeline(pipeline_name: str, seed: int = 0) -> Any:
    """Build a tiny random-weight pipeline of class ``pipeline_name`` (float32, on CPU).

    The global torch RNG is forked, so building does not disturb the caller's random state.
    """
    try:
        builder = _BUILDERS[pipeline_name]
    except KeyError:
        raise ValueError(
            f"no tiny builder for {pipeline_name!r}; known: {', '.join(tiny_pipeline_names())}"
        ) from None
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        pipe = builder(pipeline_name)
    return pipe
