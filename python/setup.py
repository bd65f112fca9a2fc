"""pip install for smax's Python module, with no network:

    /usr/bin/python3 -m pip install --no-build-isolation --break-system-packages ./python

(from the repository root; or `.` from python/). The compiled part is built
by CMake (the repository's CMakeLists.txt with SMAX_BUILD_PYTHON=ON: the
per-ISA kernels, the C API, the pybind11 module) with this Python; needs
cmake, a C++17 compiler, libxsimd-dev, pybind11-dev, python3-dev, numpy.
SMAX_CMAKE_ARGS adds CMake arguments; SMAX_BUILD_JOBS sets the parallelism.
"""
import os
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def version():
    for line in (ROOT / "CMakeLists.txt").read_text().splitlines():
        if line.startswith("project(smax VERSION"):
            return line.split()[2]
    return "0.0.0"


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        build = Path(self.build_temp).resolve() / "cmake"
        args = [
            "-DCMAKE_BUILD_TYPE=Release", "-DBUILD_TESTING=OFF", "-DSMAX_BUILD_PYTHON=ON",
            "-DSMAX_BUILD_C_API=OFF", "-DSMAX_INSTALL=OFF", f"-DPython_EXECUTABLE={sys.executable}",
        ] + os.environ.get("SMAX_CMAKE_ARGS", "").split()
        subprocess.check_call(["cmake", "-S", str(ROOT), "-B", str(build)] + args)
        jobs = os.environ.get("SMAX_BUILD_JOBS", str(os.cpu_count() or 2))
        subprocess.check_call(["cmake", "--build", str(build), "--target", "smax_python", "-j", jobs])
        built = next((build / "python" / "smax").glob("_smax*.so"))
        dest = Path(self.get_ext_fullpath(ext.name))
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(built, dest)


setup(
    name="smax",
    version=version(),
    description="Softmax-family kernels for CPUs (numpy, PyTorch)",
    packages=["smax"],
    ext_modules=[Extension("smax._smax", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    install_requires=["numpy"],
    python_requires=">=3.7",
    zip_safe=False,
)
