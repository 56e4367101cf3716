"""README's set-up: its two commands, run from the clone's root, see the built CPU kernels; the
package says when a source tree shadows an installed copy that has them; CI runs README's test
command with the nvrtc extra, and the test extra brings no CUDA wheels."""
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

from tapegpu.cli import info

SINGLE_DEVICE = True
ROOT = Path(__file__).resolve().parents[2]


def readme_setup_lines():
    text = (ROOT / "README.md").read_text()
    setup = text[text.index("## Set-up"):]
    block = re.search(r"```bash\n(.*?)```", setup, flags=re.S).group(1)
    return [ln.split(" #", 1)[0].strip() for ln in block.splitlines() if ln.strip()]


def test_readme_setup_is_two_commands_install_and_demo_then_install_and_tests():
    demo_line, test_line = readme_setup_lines()
    assert demo_line.startswith("pip install") and demo_line.endswith("python -m tapegpu demo")
    assert test_line.startswith("pip install") and test_line.endswith("pytest -n auto")


def test_ci_runs_readme_test_command_with_the_nvrtc_and_distributed_extras():
    _, test_line = readme_setup_lines()
    install, _, tests = (part.strip() for part in test_line.partition("&&"))
    assert install == 'pip install -e ".[test]"'
    ci = [ln for ln in (ROOT / ".ci" / "run").read_text().splitlines()
          if "pytest" in ln and not ln.lstrip().startswith("#")]
    # then a second pass on the simulated GPU, as README.md documents it, without the slow
    # tests (the Docker images' build), which do not depend on the device and ran in the first
    assert ci == ['pip install -q -e ".[test,nvrtc,distributed]" && ' + tests,
                  tests + ' --device cuda_sim -m "not slow"']
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert f"`{tests} --device cuda_sim`" in readme
    assert 'pip install -e ".[test,nvrtc,distributed]"' in readme


def test_distributed_extra_brings_mpi4py_and_mpich():
    tomllib = pytest.importorskip("tomllib")
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    assert extras["distributed"] == ["mpi4py>=3", "mpich"]


def test_test_extra_brings_no_cuda_wheels_and_nvrtc_extra_does():
    tomllib = pytest.importorskip("tomllib")
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    assert not [d for d in extras["test"] if "cuda" in d or "nvidia" in d], extras["test"]
    names = {re.split(r"[<>=!~ ]", d)[0] for d in extras["nvrtc"]}
    assert names == {"cuda-bindings", "nvidia-cuda-nvrtc"}
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert "The `test` extra brings" in readme and "the `nvrtc` extra" in readme


def test_a_source_tree_shadowing_a_built_install_is_detected(tmp_path, monkeypatch):
    source, site, other = tmp_path / "clone", tmp_path / "site-packages", tmp_path / "other"
    for d in (source, site, other):
        (d / "tapegpu" / "backends").mkdir(parents=True)
    (site / "tapegpu" / "backends" / ("_cpu" + sysconfig.get_config_var("EXT_SUFFIX"))).touch()
    (other / "tapegpu" / "backends" / "_cpu.c").touch()  # sources, nothing built
    paths = [str(source), str(other), str(site), str(site)]
    assert info.built_copies_elsewhere(str(source / "tapegpu"), paths) == \
        [os.path.realpath(site / "tapegpu")]
    assert info.built_copies_elsewhere(str(site / "tapegpu"), paths) == []
    # what info and the demo then say
    monkeypatch.setattr(info, "cpu_kernels", None)
    monkeypatch.setattr(info, "PACKAGE_DIR", str(source / "tapegpu"))
    monkeypatch.setattr(sys, "path", [str(source), str(site)])
    monkeypatch.delenv("TAPEGPU_PURE_PYTHON", raising=False)
    for long in (True, False):
        said = info.cpu_kernels_status(long)
        assert f"not built in the copy imported ({source / 'tapegpu'})" in said
        assert os.path.realpath(site / "tapegpu") in said and "pip install -e ." in said
    monkeypatch.setattr(sys, "path", [str(source)])
    assert info.cpu_kernels_status(long=False) == "not built"


def _has_c_compiler():
    cc = (sysconfig.get_config_var("CC") or "cc").split()[0]
    return shutil.which(cc) is not None and \
        os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h"))


@pytest.mark.skipif(not _has_c_compiler(), reason="no C compiler or Python headers: the install "
                    "builds no CPU kernels to find")
def test_readme_demo_command_sees_the_built_kernels_from_the_clone_root(tmp_path):
    """README's first command in a fresh virtual environment, on a copy of the clone, run from
    its root: the demo (and info) report the CPU kernels that the install built."""
    clone = tmp_path / "clone"
    clone.mkdir()
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy(ROOT / name, clone / name)
    shutil.copytree(ROOT / "tapegpu", clone / "tapegpu",
                    ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.pyd", "*.egg-info"))
    shutil.copytree(ROOT / "cuda_kernels", clone / "cuda_kernels")
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    python = str(env_dir / ("Scripts" if os.name == "nt" else "bin") / "python")
    demo_line, _ = readme_setup_lines()
    install, _, run = (part.strip() for part in demo_line.partition("&&"))
    assert install.startswith("pip ") and run == "python -m tapegpu demo"
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "TAPEGPU_PURE_PYTHON")}
    proc = subprocess.run([python, "-m"] + install.split() + ["-q"], cwd=clone, env=env,
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    proc = subprocess.run([python] + run.split()[1:] + ["--small", "--epochs", "1"], cwd=clone,
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "(CPU kernels: built; recording: compiled)" in proc.stdout, proc.stdout
    for cwd in (clone, tmp_path):  # from the root and from elsewhere: the same answer
        proc = subprocess.run([python, "-m", "tapegpu", "info", "--no-kernel-checks"], cwd=cwd,
                              env=env, capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        assert re.search(r"cpu kernels: yes", proc.stdout), (cwd, proc.stdout)
