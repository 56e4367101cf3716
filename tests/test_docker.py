"""The Dockerfiles stay in step with the repository and README.md (no Docker engine needed).

Checks: every COPY source exists in the build context (the repository root) and is not
excluded by .dockerignore; the GPU image installs the package with README.md's CuPy extra and
runs `python -m tapegpu info`; the CPU image runs README.md's test command, exactly.
"""
import fnmatch
import json
import re
import shlex
from pathlib import Path

import pytest

SINGLE_DEVICE = True  # nothing here depends on the device (see conftest.py)
ROOT = Path(__file__).resolve().parent.parent
GPU = ROOT / "docker" / "Dockerfile"
CPU = ROOT / "docker" / "Dockerfile.cpu"


def instructions(path):
    """[(INSTRUCTION, arguments)] with line continuations joined and comments dropped."""
    out, pending = [], ""
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1].strip() + " "
            continue
        line = pending + line
        pending = ""
        word, _, rest = line.partition(" ")
        out.append((word.upper(), rest.strip()))
    return out


def command(args):
    """A RUN/CMD argument as one shell string (exec form joined with spaces)."""
    if args.startswith("["):
        return " ".join(json.loads(args))
    return args


def readme_bash_lines():
    text = (ROOT / "README.md").read_text()
    lines = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        for line in block.splitlines():
            line = line.split(" #", 1)[0].strip()
            if line:
                lines.append(line)
    return lines


def readme_test_command():
    """The set-up's test command: the one line that installs and runs pytest."""
    found = [ln for ln in readme_bash_lines() if "pytest" in ln and ln.startswith("pip install")]
    assert len(found) == 1, f"README.md should have one test command line, found {found}"
    install, _, test = found[0].partition("&&")
    return install.strip(), test.strip()


def dockerignore():
    path = ROOT / ".dockerignore"
    return [ln.strip() for ln in path.read_text().splitlines()
            if ln.strip() and not ln.startswith("#")]


def ignored(rel, patterns):
    rel = rel.strip("/")
    for p in patterns:
        p = p.strip("/")
        if p.startswith("**/"):
            if any(fnmatch.fnmatch(part, p[3:]) for part in rel.split("/")):
                return True
        elif fnmatch.fnmatch(rel, p) or rel.startswith(p + "/"):
            return True
    return False


@pytest.mark.parametrize("dockerfile", [GPU, CPU], ids=["Dockerfile", "Dockerfile.cpu"])
def test_copy_sources_exist_and_are_in_the_context(dockerfile):
    copies = [a for i, a in instructions(dockerfile) if i in ("COPY", "ADD")]
    assert copies, f"{dockerfile.name} copies nothing"
    patterns = dockerignore()
    for args in copies:
        parts = [p for p in shlex.split(args) if not p.startswith("--")]
        *sources, _dest = parts
        for src in sources:
            assert (ROOT / src).exists(), f"{dockerfile.name}: COPY source {src!r} does not exist"
            if src not in (".", "./"):
                assert not ignored(src, patterns), f"{src!r} is excluded by .dockerignore"


def test_dockerignore_keeps_what_the_images_need():
    patterns = dockerignore()
    for needed in ("tapegpu/__init__.py", "cuda_kernels", "pyproject.toml", "README.md",
                   "tests/test_docker.py", "docker/Dockerfile.cpu", "tapegpu/backends/emu/runtime.cpp"):
        assert (ROOT / needed).exists(), needed
        assert not ignored(needed, patterns), f"{needed} is excluded by .dockerignore"
    assert ignored(".git", patterns)


def test_gpu_image_installs_the_cuda_extra_readme_names():
    ins = instructions(GPU)
    base = [a for i, a in ins if i == "FROM"]
    assert len(base) == 1 and base[0].startswith("nvidia/cuda:") and "runtime" in base[0]
    cuda_major = re.match(r"nvidia/cuda:(\d+)\.", base[0]).group(1)
    extra = f'pip install -e ".[cuda{cuda_major}]"'
    readme = " ".join((ROOT / "README.md").read_text().split())  # prose wraps lines
    assert extra in readme, f"README.md does not mention {extra}"
    runs = [command(a) for i, a in ins if i == "RUN"]
    assert any(extra in r for r in runs), f"the GPU image should run {extra}"
    # README's install is `pip install -e .`; the image installs the same package, with the extra
    readme_install = [ln for ln in readme_bash_lines()
                      if re.match(r"pip install (-e )?\.", ln)]
    assert readme_install, "README.md has no `pip install [-e] .` line"
    cmds = [command(a) for i, a in ins if i == "CMD"]
    assert cmds == ["python -m tapegpu info"]


@pytest.mark.parametrize("dockerfile", [GPU, CPU], ids=["Dockerfile", "Dockerfile.cpu"])
def test_images_can_build_the_compiled_core(dockerfile):
    """Without a C compiler the install falls back to the pure-Python tape without a word; the
    images must have one, and the sources the build needs."""
    ins = instructions(dockerfile)
    runs = " ".join(command(a) for i, a in ins if i == "RUN")
    assert re.search(r"(?<![\w-])(gcc|g\+\+|build-essential)(?![\w-])", runs), dockerfile.name
    copied = " ".join(a for i, a in ins if i in ("COPY", "ADD"))
    for needed in ("setup.py", "tapegpu"):
        assert needed in copied.split() or "." in copied.split(), (dockerfile.name, needed)
    if "python:" not in [a for i, a in ins if i == "FROM"][0]:  # official images have headers
        assert "python3-dev" in runs, dockerfile.name


def test_cpu_image_runs_readme_test_command():
    install, test = readme_test_command()
    ins = instructions(CPU)
    base = [a for i, a in ins if i == "FROM"]
    assert base == ["python:3.11-slim"]
    runs = [command(a) for i, a in ins if i == "RUN"]
    assert install in runs, f"the CPU image should RUN {install!r} (README.md), has {runs}"
    cmds = [command(a) for i, a in ins if i == "CMD"]
    assert cmds == [test], f"the CPU image's command should be {test!r} (README.md)"
    assert f"{install} && {cmds[0]}" in readme_bash_lines()


def test_docker_readme_has_the_build_and_run_commands():
    text = (ROOT / "docker" / "README.md").read_text()
    for line in ("docker build -f docker/Dockerfile -t tapegpu:cuda12 .",
                 "docker build -f docker/Dockerfile.cpu -t tapegpu:cpu .",
                 "docker run --rm --gpus all tapegpu:cuda12", "docker run --rm tapegpu:cpu"):
        assert line in text
