"""The shortest wall any client that honours Retry-After can reach on peer_llm's ``429`` mix,
and whether the order in which ready items go changes it (a discrete simulation, no server).

Why: the mix's goal is a ratio to Curator, which ignores Retry-After; this says how much of
forenset's wall is the mix's own arithmetic. Model: sends at most ``rate`` apart whenever an
item is ready; each send is a 429 with probability ``p`` (answered after ``latency``), whose
item is ready again ``retry_after`` x (1 + up to ``jitter``) later; the wall ends with the last
success's reply. Items ready at once go in one of three orders: ``fifo`` (a retry queues behind
every fresh item, forenset before issue 42's second round), ``retries_first`` (a due retry takes
the next free place, concurrency slots held while waiting for the pacer as forenset does), and
``jump`` (a due retry also goes before items already waiting for the pacer: forenset now).

    python bench/retry_after_floor.py [--n 600] [--seeds 400]
"""

from __future__ import annotations

import argparse
import heapq
import random
import statistics


def simulate(
    policy: str,
    seed: int,
    *,
    n: int,
    rate: float,
    latency: float,
    p: float,
    retry_after: float,
    jitter: float,
    waiting: int,
) -> tuple[float, int]:
    """(wall, sends) of one run; ``waiting``: items holding a slot while the pacer waits."""
    rng = random.Random(seed)
    fresh, done, sends, t, last = n, 0, 0, 0.0, 0.0
    sleeping: list[float] = []  # when 429'd items are due again
    due = 0  # retries due, not yet placed
    queue: list[str] = []  # items holding a slot, waiting for the pacer
    while done < n:
        while sleeping and sleeping[0] <= t:
            heapq.heappop(sleeping)
            due += 1
        if policy == "jump":
            queue[:0] = ["retry"] * due
            due = 0
        while len(queue) < waiting and (fresh or due):
            if due and (policy != "fifo" or not fresh):
                queue.append("retry")
                due -= 1
            else:
                queue.append("fresh")
                fresh -= 1
        if not queue:
            t = max(t, sleeping[0])
            continue
        queue.pop(0)
        sends += 1
        if rng.random() < p:
            heapq.heappush(sleeping, t + latency + retry_after * (1 + jitter * rng.random()))
        else:
            done += 1
            last = t + latency
        t += 1 / rate
    return last, sends


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=600)
    ap.add_argument("--seeds", type=int, default=400)
    ap.add_argument("--rpm", type=float, default=2280.0)
    ap.add_argument("--latency", type=float, default=0.25)
    ap.add_argument("--p", type=float, default=0.06)
    ap.add_argument("--retry-after", type=float, default=1.0)
    ap.add_argument("--jitter", type=float, default=0.1)
    args = ap.parse_args()
    rate = args.rpm / 60.0
    print(
        f"clean floor {(args.n - 1) / rate + args.latency:.2f} s ({args.n} sends at "
        f"{rate:g}/s + one latency)"
    )
    for policy in ("fifo", "retries_first", "jump"):
        runs = [
            simulate(
                policy,
                s,
                n=args.n,
                rate=rate,
                latency=args.latency,
                p=args.p,
                retry_after=args.retry_after,
                jitter=args.jitter,
                waiting=22,
            )
            for s in range(args.seeds)
        ]
        walls = sorted(w for w, _ in runs)
        print(
            f"{policy:14} wall median {statistics.median(walls):.2f} s (p10 "
            f"{walls[len(walls) // 10]:.2f}, p90 {walls[9 * len(walls) // 10]:.2f}), sends "
            f"{statistics.mean(s for _, s in runs):.1f}"
        )


if __name__ == "__main__":
    main()
