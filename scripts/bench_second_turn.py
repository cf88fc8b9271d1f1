#!/usr/bin/env python3
"""A conversation's second turn through weft serve: how long a prompt that departs from the first
turn's a few tokens before its end takes, with and without recurrent state checkpoints.

For each --ctx-checkpoints value, one `weft serve -np 1` on MODEL; each round: a short request that
starts the slot over, turn 1 (N token ids, 4 drawn), turn 2 (turn 1 less its last 2 ids, then 40
of its own, 4 drawn). Prints one line per round: both turns' wall time and cached tokens.

Usage: scripts/bench_second_turn.py WEFT MODEL [--tokens N] [--rounds R] [--checkpoints 4,0]
                                    [-- extra weft serve flags]
"""
import argparse
import json
import socket
import subprocess
import sys
import time
import urllib.request


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(port, prompt):
    body = json.dumps({"prompt": prompt, "max_tokens": 4, "temperature": 0}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", body,
                                 {"Content-Type": "application/json"})
    t0 = time.time()
    with urllib.request.urlopen(req, timeout=600) as r:
        usage = json.loads(r.read())["usage"]
    return time.time() - t0, usage["prompt_tokens_details"]["cached_tokens"]


def wait_ready(port, proc):
    for _ in range(600):
        if proc.poll() is not None:
            sys.exit(f"weft serve exited with {proc.returncode}")
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1)
            return
        except OSError:
            time.sleep(0.1)
    sys.exit("weft serve did not answer /health within 60 s")


def main():
    args = sys.argv[1:]
    extra = args[args.index("--") + 1:] if "--" in args else []
    args = args[: args.index("--")] if "--" in args else args
    p = argparse.ArgumentParser()
    p.add_argument("weft")
    p.add_argument("model")
    p.add_argument("--tokens", type=int, default=1500)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--checkpoints", default="4,0")
    a = p.parse_args(args)
    turn1 = [1] + [(i * 7919 + 13) % 30000 + 10 for i in range(1, a.tokens)]
    turn2 = turn1[:-2] + [(i * 104729 + 7) % 30000 + 10 for i in range(40)]
    other = [2] + turn1[1:8]  # shares nothing: the slot starts over
    print("| --ctx-checkpoints | round | turn 1 ms | turn 2 ms | turn 2 cached |")
    print("| ---: | ---: | ---: | ---: | ---: |")
    for cp in a.checkpoints.split(","):
        port = free_port()
        cmd = [a.weft, "serve", "-m", a.model, "-np", "1", "-c", str(a.tokens + 64), "--port", str(port),
               "--ctx-checkpoints", cp] + extra
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_ready(port, proc)
            for r in range(a.rounds):
                post(port, other)
                s1, _ = post(port, turn1)
                s2, cached = post(port, turn2)
                print(f"| {cp} | {r + 1} | {s1 * 1000:.0f} | {s2 * 1000:.0f} | {cached} |", flush=True)
        finally:
            proc.terminate()
            proc.wait()


if __name__ == "__main__":
    main()
