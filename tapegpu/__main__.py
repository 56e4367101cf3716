"""`python -m tapegpu demo` (an end-to-end run on the best device present),
`python -m tapegpu info` (version, backends, GPUs, kernel status) and
`python -m tapegpu selftest` (the checks to run first on a GPU machine)."""
import sys

from .cli import demo, info, selftest

USAGE = """usage: python -m tapegpu [COMMAND] [OPTIONS]

commands:
  demo    an end-to-end run on the best device present: an MLP classifier, a
          Levenberg-Marquardt curve fit, a Jacobian and a checked Hessian-vector
          product (the default; options: --small, --epochs N)
  info    versions, backends, GPUs, whether the CPU kernels are built and the
          CUDA kernels compile (NVRTC) and run (the emulator)
  selftest
          on a GPU, in at most 8 minutes: every hand-written and generated
          CUDA kernel against the emulator, CUDA graph captures against
          uncaptured replays, an MLP and Keras fits of a CNN and an LSTM, the
          tests parametrized on the GPU and benchmarks/gpu.py, each step with
          a timeout, into one JSON written as results come and a table (the
          first thing to run on a GPU machine; without a GPU it says what it
          would do)
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
    if cmd == "selftest":
        return selftest.main(argv)
    print(USAGE, file=sys.stderr)
    print(f"\npython -m tapegpu: error: unknown command {cmd!r} (choose demo, info or selftest)",
          file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
