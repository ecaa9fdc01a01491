"""List and prune the cache of submission environments."""

HELP = "List or prune the cached submission environments (`cache list`, `cache prune`)."


def add_arguments(parser):
    parser.add_argument("action", choices=("list", "prune"),
                        help="list: one line per environment; prune: remove environments")
    parser.add_argument("--env-cache", metavar="DIR", default=None,
                        help="the cache (default ~/.cache/challenge-welding/envs)")
    parser.add_argument("--older-than", type=float, default=None, metavar="DAYS",
                        help="prune: only environments last used more than DAYS days ago "
                             "(default: every environment)")


def run(args):
    # the engine is imported when the command runs: --help stays instant (commands/cli.py)
    from challenge_welding.ingestion.install.environment import cached_environments, prune_environments

    if args.action == "list":
        envs = cached_environments(args.env_cache)
        for e in envs:
            line = (f"{e['key']}  {e['size'] / 1e6:>9,.0f} MB  Python {e['python']:<6} "
                    f"last used {e['age_days']:.1f} days ago  {'' if e['complete'] else '(incomplete)'}")
            print(line.rstrip())
        total = sum(e["size"] for e in envs)
        print(f"{len(envs)} environment(s), {total / 1e6:,.0f} MB in {envs[0]['cache'] if envs else args.env_cache or 'the default cache'}")
        return 0
    removed, freed = prune_environments(args.env_cache, args.older_than)
    print(f"removed {removed} environment(s), {freed / 1e6:,.0f} MB freed")
    return 0
