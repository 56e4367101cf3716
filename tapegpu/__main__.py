"""`python -m tapegpu demo` (an end-to-end run on the best device present) and
`python -m tapegpu info` (version, backends, GPUs, kernel status)."""
import sys


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    cmd = argv.pop(0) if argv else "demo"
    if cmd == "demo":
        from .cli import demo
        return demo.main(argv)
    if cmd == "info":
        from .cli import info
        return info.main(argv)
    print(f"usage: python -m tapegpu [demo|info] (unknown command {cmd!r})", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
