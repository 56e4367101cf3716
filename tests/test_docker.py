"""The Dockerfiles stay in step with the repository and README.md, and the images build and run.

Checks without a container engine: every COPY source exists in the build context (the
repository root) and is not excluded by .dockerignore; the GPU image installs the package with
README.md's CuPy extra on NVIDIA's smallest CUDA base and runs `python -m tapegpu info`; the CPU
image runs README.md's test command, exactly.

The slow test builds them: a Debian root file system made by mmdebstrap (the host's release, with
Python, its headers and g++) is the base (both Dockerfiles take it as the BASE build argument),
buildah builds without a daemon (`--isolation chroot`), and the wheels come from the host (a
build cannot reach the package index) through pip's variables. It runs `python -m tapegpu demo`
in the CPU image, and `python -m tapegpu selftest` (which finds the tests it runs) in the GPU
Dockerfile's first stage, the one that needs nothing of the NVIDIA base.
"""
import fnmatch
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
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


def base_default(ins):
    """The default of the BASE build argument that the first FROM names."""
    froms = [a for i, a in ins if i == "FROM"]
    assert froms and froms[0].split()[0] == "${BASE}", froms
    args = [a for i, a in ins if i == "ARG" and a.startswith("BASE=")]
    assert len(args) == 1, "one ARG BASE=<default image> before the first FROM"
    return args[0].partition("=")[2]


def test_gpu_image_installs_the_cuda_extra_readme_names():
    ins = instructions(GPU)
    base = base_default(ins)
    # NVIDIA's smallest CUDA image: CUDA's libraries come once, from the extra's wheels
    assert re.fullmatch(r"nvidia/cuda:\d+\.\d+(\.\d+)?-base-ubuntu\d+\.\d+", base), base
    cuda_major = re.match(r"nvidia/cuda:(\d+)\.", base).group(1)
    extra = f'pip install -e ".[cuda{cuda_major}]"'
    readme = " ".join((ROOT / "README.md").read_text().split())  # prose wraps lines
    assert extra in readme, f"README.md does not mention {extra}"
    runs = [command(a).split(" #")[0].strip() for i, a in ins if i == "RUN"]
    assert extra in runs, f"the GPU image should run {extra}"
    # README's install is `pip install -e .`; the image installs the same package, with the extra
    readme_install = [ln for ln in readme_bash_lines()
                      if re.match(r"pip install (-e )?\.", ln)]
    assert readme_install, "README.md has no `pip install [-e] .` line"
    cmds = [command(a) for i, a in ins if i == "CMD"]
    assert cmds == ["python -m tapegpu info"]
    # the first stage, which the tests build without the NVIDIA base, has the tests selftest runs
    stages = [a.split()[-1] for i, a in ins if i == "FROM"]
    assert stages == ["tapegpu", "cuda"], stages


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
    assert "python3-dev" in runs, dockerfile.name   # where the base has no headers


def test_cpu_image_runs_readme_test_command():
    install, test = readme_test_command()
    ins = instructions(CPU)
    assert base_default(ins) == "python:3.11-slim"
    runs = [command(a).split(" #")[0].strip() for i, a in ins if i == "RUN"]
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


# ------------------------------------------------------------ the images, built and run


def cache_root():
    """Where the base root file system and the host's wheels are kept between runs."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tapegpu-tests"


def host_release():
    fields = dict(line.rstrip().split("=", 1) for line in Path("/etc/os-release").read_text()
                  .splitlines() if "=" in line)
    return fields.get("ID", "").strip('"'), fields.get("VERSION_CODENAME", "").strip('"')


BASE_PACKAGES = ("python3", "python3-venv", "python3-dev", "g++")
BASE_DAYS = 7   # a kept base is made again after a week (security updates)


def run(cmd, timeout, what, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
    assert r.returncode == 0, (f"{what} failed (exit {r.returncode}): {' '.join(map(str, cmd))}"
                               f"\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    return r.stdout


def debian_base(release):
    """A tarball of a Debian root file system with the packages the images need (made by
    mmdebstrap; kept for BASE_DAYS)."""
    cache = cache_root() / "docker"
    cache.mkdir(parents=True, exist_ok=True)
    tar = cache / f"base-{release}-{'_'.join(BASE_PACKAGES).replace('+', 'p')}.tar"
    if tar.exists() and time.time() - tar.stat().st_mtime < BASE_DAYS * 86400:
        return tar
    tmp = tar.with_suffix(f".tmp{os.getpid()}")
    r = subprocess.run(["mmdebstrap", "--variant=apt", f"--include={','.join(BASE_PACKAGES)}",
                        "--format=tar", release, str(tmp)], capture_output=True, text=True,
                       timeout=480)
    if r.returncode != 0:
        tmp.unlink(missing_ok=True)
        if re.search(r"(?i)(could not resolve|failed to fetch|temporary failure|unable to "
                     r"connect|network is unreachable)", r.stderr):
            pytest.skip(f"mmdebstrap cannot reach Debian's packages: {r.stderr[-500:]}")
        raise AssertionError(f"mmdebstrap failed (exit {r.returncode}):\n{r.stderr[-3000:]}")
    os.replace(tmp, tar)
    return tar


def host_wheels(python_version):
    """The wheels of tapegpu's dependencies, its test extra and its build requirements, for
    the image's Python, downloaded on the host (an image build cannot reach the index)."""
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    wanted = (meta["build-system"]["requires"] + meta["project"]["dependencies"]
              + meta["project"]["optional-dependencies"]["test"])
    d = cache_root() / "docker" / f"wheels-cp{python_version.replace('.', '')}"
    d.mkdir(parents=True, exist_ok=True)
    r = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "-d", str(d),
                        "--only-binary=:all:", "--python-version", python_version, *wanted],
                       capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        if re.search(r"(?i)(connection|resolve|network|timed out)", r.stderr):
            pytest.skip(f"pip cannot download the images' wheels: {r.stderr[-500:]}")
        raise AssertionError(f"pip download failed:\n{r.stderr[-3000:]}")
    return d


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("buildah") is None or shutil.which("mmdebstrap") is None,
                    reason="needs buildah (builds the images without a daemon) and mmdebstrap "
                           "(makes their Debian base): apt-get install buildah mmdebstrap")
@pytest.mark.skipif(os.geteuid() != 0, reason="mmdebstrap and buildah run here as root")
def test_images_build_on_a_debian_base_and_run_the_demo():
    distro, release = host_release()
    if distro != "debian" or not release:
        pytest.skip(f"the base is made with the host's Debian release; this host is {distro!r}")
    host_python = run(["python3", "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                      30, "python3")
    tar = debian_base(release)
    wheels = host_wheels(host_python.strip())
    # the storage is kept with the base imported (a run on a warm cache builds only tapegpu's
    # layers); overlay where the kernel allows it, else vfs (a full copy per layer)
    store = cache_root() / "docker" / "storage"
    base = f"localhost/tapegpu-test-base:{tar.stem[5:].replace('_', '-')[:100]}-" \
           f"{int(tar.stat().st_mtime)}"
    buildah = None
    for driver in ("overlay", "vfs"):
        buildah = ["buildah", "--root", str(store / driver), "--runroot",
                   str(store / f"{driver}-run"), "--storage-driver", driver]
        if subprocess.run([*buildah, "inspect", "--type", "image", base],
                          capture_output=True, timeout=120).returncode == 0:
            break
        work = Path(tempfile.mkdtemp(prefix="tapegpu-base-", dir=tar.parent))
        try:
            os.link(tar, work / "base.tar")
            (work / "Containerfile").write_text('FROM scratch\nADD base.tar /\n'
                                                'CMD ["/bin/bash"]\n')
            r = subprocess.run([*buildah, "bud", "--isolation", "chroot", "-q", "-t", base,
                                str(work)], capture_output=True, text=True, timeout=600)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        if r.returncode == 0:
            break
        assert driver != "vfs", f"importing the base failed:\n{r.stderr[-3000:]}"
    offline = ["--isolation", "chroot", "--pull-never", "-v", f"{wheels}:/wheels:ro",
               "--build-arg", f"BASE={base}",
               "--build-arg", "PIP_NO_INDEX=1", "--build-arg", "PIP_FIND_LINKS=/wheels"]
    try:
        run([*buildah, "bud", *offline, "-f", str(CPU), "-t", "localhost/tapegpu-test-cpu",
             str(ROOT)], 420, "building docker/Dockerfile.cpu")
        cpu = run([*buildah, "from", "--pull-never", "localhost/tapegpu-test-cpu"], 120,
                  "a container of the CPU image").strip()
        demo = run([*buildah, "run", "--isolation", "chroot", cpu, "--", "python", "-m",
                    "tapegpu", "demo"], 300, "python -m tapegpu demo in the CPU image")
        print(demo)
        assert re.search(r"test accuracy 0\.9\d+ after \d+ epochs", demo), demo
        assert "converged=True" in demo and "check against central differences" in demo, demo

        run([*buildah, "bud", *offline, "--target", "tapegpu", "-f", str(GPU), "-t",
             "localhost/tapegpu-test-gpu-stage", str(ROOT)], 420,
            "building docker/Dockerfile up to its NVIDIA layers")
        gpu = run([*buildah, "from", "--pull-never", "localhost/tapegpu-test-gpu-stage"], 120,
                  "a container of the GPU image's first stage").strip()
        report = run([*buildah, "run", "--isolation", "chroot", gpu, "--", "sh", "-c",
                      "test -f tests/conftest.py && cd /tmp && python -m tapegpu selftest"],
                     300, "python -m tapegpu selftest in the GPU image's first stage")
        print(report)
        assert "no usable GPU here" in report and re.search(r"\d\. tests: ", report) and \
            "Nothing was run" in report, report
    finally:   # the base stays; what this run built goes
        subprocess.run([*buildah, "rm", "--all"], capture_output=True, timeout=300)
        subprocess.run([*buildah, "rmi", "--force", "localhost/tapegpu-test-cpu",
                        "localhost/tapegpu-test-gpu-stage"], capture_output=True, timeout=300)
        subprocess.run([*buildah, "rmi", "--prune"], capture_output=True, timeout=300)
