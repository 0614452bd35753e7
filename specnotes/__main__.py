"""Command line: `python -m specnotes fetch` pre-loads the offline model; `info` prints the environment.

A workshop runs `fetch` on every laptop before the day, while the network is good.
"""

from __future__ import annotations

import argparse
import sys

from specnotes import env, offline, store


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="specnotes", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    f = sub.add_parser("fetch", help="download and convert the offline model into the cache")
    f.add_argument("name", nargs="?", default=None, help="catalog name (default: smollm2-135m)")
    f.add_argument("--force", action="store_true", help="rebuild even when the cache is sound")
    f.add_argument("--verify", action="store_true", help="also recompute every file's sha256")
    sub.add_parser("info", help="print versions, device, threads, quick mode and the cache state")
    args = parser.parse_args(argv)
    if args.command == "fetch":
        name = store.DEFAULT if args.name is None else args.name
        try:
            path = offline.fetch(name, force=args.force, verify=args.verify)
        except (ValueError, OSError, store.CorruptCacheError) as exc:  # OSError: a disk that refuses
            print(f"specnotes fetch failed: {exc}", file=sys.stderr)
            return 1
        print(f"{name} is ready in {path}")
    else:
        env.setup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
