"""`python -m tapegpu demo` (an end-to-end run on the best device present) and
`python -m tapegpu info` (version, backends, GPUs, kernel status)."""
import sys

from .cli import demo, info

USAGE = """usage: python -m tapegpu [COMMAND] [OPTIONS]

commands:
  demo    an end-to-end run on the best device present: an MLP classifier, a
          Levenberg-Marquardt curve fit, a Jacobian and a checked Hessian-vector
          product (the default; options: --small, --epochs N)
  info    versions, backends, GPUs, whether the CPU kernels are built and the
          CUDA kernels compile (NVRTC) and run (the emulator)
  help    this message (also -h, --help)

`python -m tapegpu COMMAND --help` describes a command's options."""


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    cmd = argv.pop(0) if argv else "demo"
    if cmd in ("-h", "--help", "help"):
        print(USAGE)
        return 0
    if cmd == "demo":
        return demo.main(argv)
    if cmd == "info":
        return info.main(argv)
    print(USAGE, file=sys.stderr)
    print(f"\npython -m tapegpu: error: unknown command {cmd!r} (choose demo or info)",
          file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
