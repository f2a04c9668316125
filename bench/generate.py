"""Benchmark the diffusers backend: does batching pay, and how fast are real-size denoisers?

CPU mode (default): tiny random-weight pipelines through ``DiffusersBackend``; batched vs
batch-1 throughput measured side by side in one run, ratio printed.

``--gpu`` mode: real-size denoiser architectures with random weights (no download) — the
SD-1.5 UNet (512², CFG doubles the batch), the SDXL UNet (1024², CFG) and the FLUX.1-dev
transformer (1024², 4096 image + 512 text tokens, guidance-distilled: no CFG) — in bf16 for
batch sizes 1/4/16; reports denoising steps/s and images/s at ``--steps`` steps (denoiser
only: text encoders and VAE excluded). It also runs the backend itself on CUDA in bf16 with a
tiny pipeline and reports whether an item's pixels depend on its batch neighbours.
Sized to finish in about 5 minutes on one H200 (default 4 timed steps per point).

Both modes end with the end-to-end edit comparison (``edit_e2e``), all in one run on the same
machine: an InstructPix2Pix pipeline (tiny on CPU; SD-1.5 size with random weights under
``--gpu``, saved with ``save_pretrained`` and loaded through the backend from that folder) edits
``--e2e-images`` photos at each batch size, and it prints images/s for the backend with
overlapped post-processing on and off, the raw diffusers pipeline called with the same
arguments (``output_type="pil"``, no resize back), and the denoiser-only bound (the UNet alone,
3x batch for InstructPix2Pix's two guidance scales, times the steps).

    PYTHONPATH=. python bench/generate.py                 # CPU, tiny pipelines
    PYTHONPATH=. python bench/generate.py --gpu           # one GPU
    PYTHONPATH=. python bench/generate.py --gpu --device cpu --smoke   # code-path check on CPU
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from forenset.backends.image.base import EditRequest, GenerateRequest
from forenset.backends.image.diffusers_backend import DiffusersBackend, DiffusersConfig

# ------------------------------------------------------------------------------- CPU mode


def _requests(n: int, size: int) -> list[GenerateRequest]:
    return [GenerateRequest(f"benchmark prompt {i}", seed=i, size=(size, size)) for i in range(n)]


def _throughput(backend: DiffusersBackend, reqs: list[GenerateRequest]) -> float:
    start = time.perf_counter()
    out = backend.generate(reqs)
    elapsed = time.perf_counter() - start
    bad = [r.error for r in out if r.status != "ok"]
    if bad:
        raise RuntimeError(f"benchmark rows failed: {bad[:2]}")
    return len(reqs) / elapsed


def cpu_bench(n: int, size: int, steps: int, batch: int, rounds: int) -> list[dict[str, Any]]:
    rows = []
    for pipeline in ["StableDiffusionPipeline", "FluxPipeline"]:
        cfg = {"pipeline": pipeline, "tiny": True, "steps": steps, "device": "cpu"}
        one = DiffusersBackend({**cfg, "batch_size": 1})
        many = DiffusersBackend({**cfg, "batch_size": batch})
        reqs = _requests(n, size)
        one.generate(reqs[:2])  # warm-up (and the one pipeline load, shared by both)
        many.generate(reqs[:2])
        best1, bestb = 0.0, 0.0
        for _ in range(rounds):  # alternate so both see the same machine load
            best1 = max(best1, _throughput(one, reqs))
            bestb = max(bestb, _throughput(many, reqs))
        row = {
            "pipeline": pipeline,
            "images": n,
            "size": size,
            "steps": steps,
            "batch1_img_s": round(best1, 2),
            f"batch{batch}_img_s": round(bestb, 2),
            "ratio": round(bestb / best1, 2),
        }
        print(json.dumps(row), flush=True)
        rows.append(row)
    return rows


# ------------------------------------------------------------------------------- GPU mode


def _sd15_unet(smoke: bool) -> Any:
    from diffusers import UNet2DConditionModel

    if smoke:
        return UNet2DConditionModel(
            sample_size=16, block_out_channels=(32, 64), layers_per_block=1,
            down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
            up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"),
            cross_attention_dim=768, attention_head_dim=8, norm_num_groups=8,
        )  # fmt: skip
    # SD-1.5 (runwayml/stable-diffusion-v1-5 unet/config.json); the rest are defaults.
    return UNet2DConditionModel(sample_size=64, cross_attention_dim=768, attention_head_dim=8)


def _sdxl_unet(smoke: bool) -> Any:
    from diffusers import UNet2DConditionModel

    # SDXL base 1.0 (unet/config.json)
    return UNet2DConditionModel(
        sample_size=16 if smoke else 128,
        block_out_channels=(32, 64) if smoke else (320, 640, 1280),
        layers_per_block=1 if smoke else 2,
        down_block_types=("DownBlock2D", "CrossAttnDownBlock2D")
        if smoke
        else ("DownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D"),
        up_block_types=("CrossAttnUpBlock2D", "UpBlock2D")
        if smoke
        else ("CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "UpBlock2D"),
        transformer_layers_per_block=(1, 1) if smoke else (1, 2, 10),
        attention_head_dim=(4, 8) if smoke else (5, 10, 20),
        norm_num_groups=8 if smoke else 32,
        cross_attention_dim=2048,
        use_linear_projection=True,
        addition_embed_type="text_time",
        addition_time_embed_dim=256,
        projection_class_embeddings_input_dim=2816,  # 6 * 256 + 1280 pooled text
    )


def _flux_transformer(smoke: bool) -> Any:
    from diffusers import FluxTransformer2DModel

    # FLUX.1-dev (transformer/config.json): 19 double + 38 single blocks, 24 heads x 128.
    return FluxTransformer2DModel(
        num_layers=1 if smoke else 19,
        num_single_layers=1 if smoke else 38,
        guidance_embeds=True,
    )


def _unet_step(
    unet: Any, batch: int, latent: int, text_dim: int, sdxl: bool, dev: str,
    channels: int = 4, branches: int = 2,
) -> Callable:  # fmt: skip
    dt = unet.dtype
    n = branches * batch  # classifier-free guidance: conditional and unconditional halves
    sample = torch.randn(n, channels, latent, latent, device=dev, dtype=dt)
    text = torch.randn(n, 77, text_dim, device=dev, dtype=dt)
    t = torch.full((n,), 500, device=dev)
    added = None
    if sdxl:
        added = {
            "text_embeds": torch.randn(n, 1280, device=dev, dtype=dt),
            "time_ids": torch.tensor([[1024, 1024, 0, 0, 1024, 1024]] * n, device=dev, dtype=dt),
        }

    def step() -> None:
        unet(sample, t, encoder_hidden_states=text, added_cond_kwargs=added)

    return step


def _flux_step(model: Any, batch: int, tokens_side: int, dev: str) -> Callable:
    dt = model.dtype
    n_img, n_txt = tokens_side * tokens_side, 512
    hidden = torch.randn(batch, n_img, 64, device=dev, dtype=dt)
    text = torch.randn(batch, n_txt, 4096, device=dev, dtype=dt)
    pooled = torch.randn(batch, 768, device=dev, dtype=dt)
    t = torch.full((batch,), 0.5, device=dev, dtype=dt)
    guidance = torch.full((batch,), 3.5, device=dev, dtype=dt)
    img_ids = torch.zeros(tokens_side, tokens_side, 3, device=dev)
    img_ids[..., 1] = torch.arange(tokens_side, device=dev)[:, None]
    img_ids[..., 2] = torch.arange(tokens_side, device=dev)[None, :]
    img_ids = img_ids.reshape(n_img, 3).to(dt)
    txt_ids = torch.zeros(n_txt, 3, device=dev, dtype=dt)

    def step() -> None:
        model(
            hidden_states=hidden, encoder_hidden_states=text, pooled_projections=pooled,
            timestep=t, img_ids=img_ids, txt_ids=txt_ids, guidance=guidance,
        )  # fmt: skip

    return step


def _sync(dev: str) -> None:
    if dev.startswith("cuda"):
        torch.cuda.synchronize()


def _time_steps(make_step: Callable[[], Callable], steps: int, dev: str) -> dict[str, Any]:
    try:
        step = make_step()
        with torch.inference_mode():
            step()  # warm-up (kernel selection, allocator)
            _sync(dev)
            start = time.perf_counter()
            for _ in range(steps):
                step()
            _sync(dev)
        return {"step_s": (time.perf_counter() - start) / steps}
    except torch.cuda.OutOfMemoryError:
        return {"error": "OOM"}
    finally:
        if dev.startswith("cuda"):
            torch.cuda.empty_cache()


def gpu_bench(dev: str, steps: int, batches: list[int], smoke: bool) -> list[dict[str, Any]]:
    dtype = torch.float32 if (smoke or dev == "cpu") else torch.bfloat16
    rows = []
    archs: list[tuple[str, Callable[[], Any], Callable[[Any, int], Callable]]] = [
        ("sd15-unet@512", lambda: _sd15_unet(smoke),
         lambda m, b: _unet_step(m, b, 16 if smoke else 64, 768, False, dev)),
        ("sdxl-unet@1024", lambda: _sdxl_unet(smoke),
         lambda m, b: _unet_step(m, b, 16 if smoke else 128, 2048, True, dev)),
        ("flux-dev-transformer@1024", lambda: _flux_transformer(smoke),
         lambda m, b: _flux_step(m, b, 8 if smoke else 64, dev)),
    ]  # fmt: skip
    for name, build, stepper in archs:
        t0 = time.perf_counter()
        with torch.device(dev):  # random init directly on the device (fast for 12B params)
            model = build()
        model = model.to(dtype=dtype).eval()
        params = sum(p.numel() for p in model.parameters())
        build_s = time.perf_counter() - t0
        for b in batches:
            if dev.startswith("cuda"):
                torch.cuda.reset_peak_memory_stats()
            res = _time_steps(lambda m=model, b=b, st=stepper: st(m, b), steps, dev)
            row: dict[str, Any] = {
                "arch": name, "params_m": round(params / 1e6), "dtype": str(dtype),
                "batch": b, "timed_steps": steps, "build_s": round(build_s, 1),
            }  # fmt: skip
            if "step_s" in res:
                row["steps_per_s"] = round(1 / res["step_s"], 3)
                row["img_per_s_at_steps"] = round(b / (res["step_s"] * steps), 3)
            else:
                row["error"] = res["error"]
            if dev.startswith("cuda"):
                row["peak_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 1)
            print(json.dumps(row), flush=True)
            rows.append(row)
        del model
        if dev.startswith("cuda"):
            torch.cuda.empty_cache()
    rows.append(backend_on_device(dev))
    return rows


def backend_on_device(dev: str) -> dict[str, Any]:
    """Run DiffusersBackend itself (tiny pipeline) on ``dev``: dtype, batch independence."""
    out: dict[str, Any] = {"check": "backend-tiny-flux", "device": dev}
    cfg = DiffusersConfig(pipeline="FluxPipeline", tiny=True, steps=4, device=dev, batch_size=4)
    reqs = _requests(8, 64)
    batched = DiffusersBackend(cfg).generate(reqs)
    single = DiffusersBackend(cfg.model_copy(update={"batch_size": 1})).generate(reqs)
    ok = [r.status == "ok" for r in batched + single]
    out["all_ok"] = all(ok)
    if all(ok):
        diffs = [
            int(np.abs(np.asarray(a.image, np.int16) - np.asarray(b.image, np.int16)).max())
            for a, b in zip(batched, single, strict=True)
        ]
        out["dtype"] = batched[0].params["dtype"]
        out["max_pixel_diff_batch4_vs_batch1"] = max(diffs)
    else:
        out["errors"] = [r.error for r in batched + single if r.status != "ok"][:2]
    print(json.dumps(out), flush=True)
    return out


# ------------------------------------------------------------------- end-to-end edit mode


def _ip2p_pipeline(real_size: bool, init_device: str = "cpu") -> Any:
    """InstructPix2Pix with random weights: SD-1.5 size (UNet, VAE, CLIP ViT-L text) or tiny."""
    from forenset.backends.image.tiny import build_tiny_pipeline, tiny_clip_tokenizer

    if not real_size:
        return build_tiny_pipeline("StableDiffusionInstructPix2PixPipeline")
    import diffusers

    tok = tiny_clip_tokenizer()
    scheduler = diffusers.EulerAncestralDiscreteScheduler(
        beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear"
    )
    with torch.device(init_device):  # random init directly on the device (fast on a GPU)
        text, vae, unet = _ip2p_models(len(tok))
    return diffusers.StableDiffusionInstructPix2PixPipeline(
        vae=vae, text_encoder=text, tokenizer=tok, unet=unet, scheduler=scheduler,
        safety_checker=None, feature_extractor=None, requires_safety_checker=False,
    )  # fmt: skip


def _ip2p_models(vocab: int) -> tuple[Any, Any, Any]:
    """SD-1.5 sizes: CLIP ViT-L/14 text encoder, the SD VAE, the 8-channel InstructPix2Pix UNet."""
    from diffusers import AutoencoderKL, UNet2DConditionModel
    from transformers import CLIPTextConfig, CLIPTextModel

    text = CLIPTextModel(CLIPTextConfig(vocab_size=max(vocab, 1000), hidden_size=768,
                                        intermediate_size=3072, num_hidden_layers=12,
                                        num_attention_heads=12, max_position_embeddings=77))  # fmt: skip
    down = ["DownEncoderBlock2D"] * 4
    vae = AutoencoderKL(block_out_channels=(128, 256, 512, 512), down_block_types=down,
                        up_block_types=["UpDecoderBlock2D"] * 4, layers_per_block=2,
                        latent_channels=4, sample_size=512)  # fmt: skip
    unet = UNet2DConditionModel(sample_size=64, in_channels=8, cross_attention_dim=768,
                                attention_head_dim=8)  # fmt: skip
    return text, vae, unet


def _edit_photos(n: int, size: int) -> list[Any]:
    from PIL import Image

    rng = np.random.default_rng(0)
    return [
        Image.fromarray(rng.integers(0, 256, (size, size, 3), dtype=np.uint8)) for _ in range(n)
    ]


def edit_e2e(
    dev: str, real_size: bool, n: int, size: int, steps: int, batches: list[int], folder: str
) -> list[dict[str, Any]]:
    """Backend (overlap on / off) vs raw diffusers vs the denoiser alone, same run, same args."""
    dtype = "bfloat16" if dev.startswith("cuda") else "float32"
    _ip2p_pipeline(real_size, dev if real_size else "cpu").save_pretrained(folder)
    base = {"pipeline": "StableDiffusionInstructPix2PixPipeline", "model": folder,
            "steps": steps, "device": dev, "dtype": dtype, "edit_max_side": size}  # fmt: skip
    photos = _edit_photos(n, size)
    reqs = [EditRequest(p, {"text": f"make it look like winter {i}"}, seed=i)
            for i, p in enumerate(photos)]  # fmt: skip
    rows = []
    for b in batches:
        on = DiffusersBackend({**base, "batch_size": b, "overlap": True})
        off = DiffusersBackend({**base, "batch_size": b, "overlap": False})
        pipe = on.pipeline  # the one cached pipeline, shared by both backends and the raw calls
        unet = pipe.unet

        def raw(m: int, pipe: Any = pipe, b: int = b) -> None:
            for k in range(0, m, b):
                chunk = list(range(k, min(m, k + b)))
                pipe(prompt=[f"make it look like winter {i}" for i in chunk],
                     image=[photos[i] for i in chunk], num_inference_steps=steps,
                     guidance_scale=7.5, image_guidance_scale=1.5, output_type="pil",
                     generator=[torch.Generator("cpu").manual_seed(i) for i in chunk])  # fmt: skip

        lat = size // 8
        text_dim = unet.config.cross_attention_dim
        step = _unet_step(unet, b, lat, text_dim, False, dev, channels=8, branches=3)

        def denoiser(m: int, step: Callable = step, b: int = b) -> None:
            for _ in range(-(-m // b) * steps):
                step()

        def backend(bk: DiffusersBackend) -> Callable[[int], None]:
            def go(m: int) -> None:
                bad = [r.error for r in bk.edit(reqs[:m]) if r.status != "ok"]
                if bad:
                    raise RuntimeError(f"benchmark rows failed: {bad[:2]}")

            return go

        fns = {"backend_overlap": backend(on), "backend_no_overlap": backend(off),
               "raw_diffusers": raw, "denoiser_only": denoiser}  # fmt: skip
        with torch.inference_mode():
            for fn in fns.values():  # warm-up: one batch of this size
                fn(min(b, n))
            _sync(dev)
            best = dict.fromkeys(fns, 0.0)
            for _ in range(2):  # alternate so each sees the same machine state
                for name, fn in fns.items():
                    start = time.perf_counter()
                    fn(n)
                    _sync(dev)
                    best[name] = max(best[name], n / (time.perf_counter() - start))
        row: dict[str, Any] = {"e2e": "InstructPix2Pix", "real_size": real_size, "device": dev,
                               "dtype": dtype, "images": n, "size": size, "steps": steps,
                               "batch": b}  # fmt: skip
        row.update({f"{k}_img_s": round(v, 3) for k, v in best.items()})
        row["overlap_vs_raw"] = round(best["backend_overlap"] / best["raw_diffusers"], 3)
        row["overlap_vs_bound"] = round(best["backend_overlap"] / best["denoiser_only"], 3)
        row["no_overlap_vs_raw"] = round(best["backend_no_overlap"] / best["raw_diffusers"], 3)
        print(json.dumps(row), flush=True)
        rows.append(row)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gpu", action="store_true", help="real-size denoisers on a GPU")
    ap.add_argument("--device", default="cuda", help="device for --gpu (cpu with --smoke)")
    ap.add_argument("--smoke", action="store_true", help="shrunken architectures (code check)")
    ap.add_argument("--steps", type=int, default=None, help="CPU: 4; GPU: 4 timed steps")
    ap.add_argument("--batches", default="1,4,16", help="GPU batch sizes")
    ap.add_argument("--images", type=int, default=16, help="CPU: images per measurement")
    ap.add_argument("--size", type=int, default=64, help="CPU: image side")
    ap.add_argument("--batch", type=int, default=8, help="CPU: batched batch size")
    ap.add_argument("--rounds", type=int, default=5, help="CPU: alternating rounds (best kept)")
    ap.add_argument("--threads", type=int, default=1, help="CPU: torch threads (one per worker)")
    ap.add_argument("--e2e-images", type=int, default=None, help="edit e2e: GPU 32, CPU 8")
    ap.add_argument("--e2e-size", type=int, default=None, help="edit e2e side: GPU 512, CPU 64")
    ap.add_argument("--e2e-steps", type=int, default=None, help="edit e2e steps: GPU 20, CPU 4")
    ap.add_argument("--e2e-batches", default=None, help="edit e2e batches: GPU 1,8; CPU 1,4")
    ap.add_argument("--no-e2e", action="store_true", help="skip the end-to-end edit comparison")
    ap.add_argument("--e2e-only", action="store_true", help="only the end-to-end edit comparison")
    args = ap.parse_args()
    torch.set_grad_enabled(False)
    if args.gpu and args.device.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit("--gpu needs CUDA (or --device cpu --smoke)")
    if not args.gpu:
        torch.set_num_threads(args.threads)
    if args.e2e_only:
        pass
    elif args.gpu:
        batches = [int(b) for b in args.batches.split(",")]
        gpu_bench(args.device, args.steps or 4, batches, args.smoke)
    else:
        cpu_bench(args.images, args.size, args.steps or 4, args.batch, args.rounds)
    if not args.no_e2e:
        import tempfile

        real = args.gpu and not args.smoke
        dev = args.device if args.gpu else "cpu"
        with tempfile.TemporaryDirectory() as folder:
            edit_e2e(
                dev, real, args.e2e_images or (32 if real else 8), args.e2e_size or (512 if real else 64),
                args.e2e_steps or (20 if real else 4),
                [int(b) for b in (args.e2e_batches or ("1,8" if real else "1,4")).split(",")],
                folder,
            )  # fmt: skip


if __name__ == "__main__":
    main()
