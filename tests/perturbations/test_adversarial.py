"""Adversarial ops: encoders, UAP training/storage, FOA attack behaviour."""

from __future__ import annotations

import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from forenset.perturbations import REGISTRY  # noqa: E402
from forenset.perturbations import attacks as A  # noqa: E402
from forenset.perturbations.photos import photo, photos  # noqa: E402
from forenset.seeds import rng_for  # noqa: E402

ENC = ["tiny_conv:0", "tiny_vit:1"]


def test_package_import_does_not_load_torch() -> None:
    import subprocess

    code = "import sys, forenset.perturbations; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_tiny_encoders_deterministic_and_shaped() -> None:
    x = torch.rand(2, 3, 64, 64, generator=torch.Generator().manual_seed(0))
    for spec in ENC:
        enc = A.load_encoder(spec)
        A.load_encoder.cache_clear()
        enc2 = A.load_encoder(spec)
        assert enc is not enc2
        g, p = enc.encode(x)
        g2, p2 = enc2.encode(x)
        assert g.shape[0] == 2 and p.ndim == 3 and p.shape[0] == 2
        assert torch.equal(g, g2) and torch.equal(p, p2)
    ga, _ = A.load_encoder("tiny_conv:0").encode(x)
    gb, _ = A.load_encoder("tiny_conv:5").encode(x)
    assert not torch.allclose(ga, gb)


def _mean_cos(imgs: list[np.ndarray], advs: list[np.ndarray]) -> float:
    sims = []
    for spec in ENC:
        enc = A.load_encoder(spec)
        with torch.no_grad():
            x = A._resize(A._to_tensor(imgs, "cpu"), enc.input_size)
            y = A._resize(A._to_tensor(advs, "cpu"), enc.input_size)
            sims.append(torch.nn.functional.cosine_similarity(enc.encode(x)[0], enc.encode(y)[0]))
    return float(torch.cat(sims).mean())


def test_uap_lowers_similarity_more_than_random_noise(tmp_path) -> None:
    train = photos(96)
    eps = 12 / 255
    uap = A.train_uap(train, ENC, size=64, eps=eps, steps=25, seed=0, device="cpu")
    assert uap.shape == (64, 64, 3) and np.abs(uap).max() <= 1.0 + 1e-6
    # storage round trip (.npy and .pt) and the op reading the stored file
    for suffix in (".npy", ".pt"):
        path = A.save_uap(uap, tmp_path / f"u{suffix}")
        assert np.allclose(A.load_uap(path), uap)
    op = REGISTRY["uap"]
    test_imgs = [photo(n, 96) for n in ("chelsea", "rocket", "coffee")]
    params = {"eps": 12.0, "uap_path": str(tmp_path / "u.npy"), "encoders": ENC}
    advs = [op.apply(im, params, rng_for("u")) for im in test_imgs]
    for im, adv in zip(test_imgs, advs, strict=True):
        assert np.abs(adv.astype(int) - im.astype(int)).max() <= 12
    rng = rng_for("noise")
    noisy = [
        np.clip(im + 12.0 * rng.choice([-1.0, 1.0], size=im.shape), 0, 255).astype(np.uint8)
        for im in test_imgs
    ]
    assert _mean_cos(test_imgs, advs) < _mean_cos(test_imgs, noisy)


def test_foa_moves_toward_target_within_eps() -> None:
    img = photo("chelsea", 96)
    target = photo("rocket", 96)
    adv = A.foa_attack(
        img,
        target,
        ENC,
        eps=8 / 255,
        step_size=1 / 255,
        steps=12,
        clusters=4,
        rng=rng_for("f"),
        device="cpu",
    )
    assert adv.shape == img.shape and adv.dtype == np.uint8
    assert np.abs(adv.astype(int) - img.astype(int)).max() <= 8
    assert not np.array_equal(adv, img)

    def sim(x: np.ndarray) -> float:
        out = 0.0
        for spec in ENC:
            enc = A.load_encoder(spec)
            with torch.no_grad():
                a = enc.encode(A._resize(A._to_tensor([x], "cpu"), enc.input_size))[0]
                b = enc.encode(A._resize(A._to_tensor([target], "cpu"), enc.input_size))[0]
            out += float(torch.nn.functional.cosine_similarity(a, b))
        return out

    assert sim(adv) > sim(img)


def test_sinkhorn_and_kmeans() -> None:
    g = torch.Generator().manual_seed(0)
    a = torch.randn(40, 16, generator=g)
    c = A.kmeans_centres(a, 5)
    assert c.shape[1] == 16 and 1 <= c.shape[0] <= 5
    b = torch.randn(5, 16, generator=g)
    assert A.sinkhorn_similarity(c, c) > A.sinkhorn_similarity(c, b)


def test_foa_op_records_config_and_is_deterministic(small_img: np.ndarray) -> None:
    op = REGISTRY["foa"]
    p = op.sample_params("validation", rng_for("fp"), (0.3, 0.7), {"steps": 3, "clusters": 3})
    a = op.apply(small_img, p, rng_for("fa"))
    b = op.apply(small_img, p, rng_for("fa"))
    assert np.array_equal(a, b)
    assert p.model_dump()["encoders"] == ENC and p.steps == 3


def test_pgd_lowers_similarity_within_eps() -> None:
    """The test split's PGD embedding attack: inside its L-inf ball, and further from the clean
    embedding than uniform noise of the same radius."""
    imgs = photos(64)[:2]
    eps = 8 / 255
    advs = [
        A.pgd_attack(
            im, ENC, eps=eps, step_size=2 / 255, steps=6, rng=rng_for("pgd", i), device="cpu"
        )
        for i, im in enumerate(imgs)
    ]
    for im, adv in zip(imgs, advs, strict=True):
        assert np.abs(adv.astype(int) - im.astype(int)).max() <= 8 + 1
    rng = rng_for("pgd-noise")
    noisy = [
        np.clip(im + rng.choice([-8, 8], size=im.shape), 0, 255).astype(np.uint8) for im in imgs
    ]
    assert _mean_cos(imgs, advs) < _mean_cos(imgs, noisy)
    again = A.pgd_attack(
        imgs[0], ENC, eps=eps, step_size=2 / 255, steps=6, rng=rng_for("pgd", 0), device="cpu"
    )
    assert np.array_equal(again, advs[0])


@pytest.fixture(scope="module")
def hf_encoder_dir(tmp_path_factory):
    """A tiny random-init CLIP vision tower saved as a local transformers folder."""
    transformers = pytest.importorskip("transformers")
    cfg = transformers.CLIPVisionConfig(
        image_size=32,
        patch_size=8,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
    )
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("clipvision")
    transformers.CLIPVisionModel(cfg).save_pretrained(path)
    return path


def test_hf_surrogate_from_a_local_folder(hf_encoder_dir, small_img: np.ndarray) -> None:
    from forenset.perturbations import PerturbationConfig, perturb_image, surrogates

    spec = f"hf:{hf_encoder_dir}"
    enc = A.load_encoder(spec)
    g, p = enc.encode(torch.rand(2, 3, 48, 48))
    assert enc.input_size == 32 and g.shape == (2, 32) and p.shape[0] == 2 and p.ndim == 3
    cfg = PerturbationConfig(include=["pgd"], adversarial={"pgd_encoders": [spec], "pgd_steps": 2})
    out, rec = perturb_image(small_img, split="test", seed=5, config=cfg)
    assert [o["name"] for o in rec["ops"]] == ["pgd"] and surrogates(rec) == [spec]
    assert not np.array_equal(out, small_img)
    with pytest.raises(ValueError, match="not a local folder"):
        PerturbationConfig(adversarial={"encoders": ["hf:/no/such/folder"]})
    with pytest.raises(ValueError, match="unknown encoder spec"):
        PerturbationConfig(adversarial={"foa_encoders": ["clip-vit"]})


def test_a_text_model_as_an_hf_image_encoder_is_a_configuration_error(tmp_path) -> None:
    """A text model folder loads through AutoModel but takes input_ids: one sentence naming the
    folder and the fix, not transformers' ValueError at the first forward pass."""
    transformers = pytest.importorskip("transformers")
    from forenset.errors import ConfigurationError

    cfg = transformers.BertConfig(
        vocab_size=64, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=32,
    )  # fmt: skip
    transformers.BertModel(cfg).save_pretrained(tmp_path / "bert")
    with pytest.raises(ConfigurationError, match="bert model whose input is 'input_ids'"):
        A.load_encoder(f"hf:{tmp_path / 'bert'}")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigurationError, match="not a loadable transformers model"):
        A.load_encoder(f"hf:{tmp_path / 'empty'}")
