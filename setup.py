"""Build the Cython core `seglog._engine` (one extension assembled from the topic files in src/engine)."""
import os
import platform

from Cython.Build import cythonize
from setuptools import Extension, find_packages, setup

machine = platform.machine().lower()
extra_compile_args = ["-O3", "-fno-strict-aliasing", "-Wno-unused-function"]
if os.environ.get("SEGLOG_DEBUG"):
    extra_compile_args = ["-O0", "-g"]

engine = Extension(
    "seglog._engine",
    sources=["src/engine/_engine.pyx", "src/engine/crc32c_impl.c"],
    include_dirs=["src/engine"],
    depends=[os.path.join("src/engine", f) for f in os.listdir("src/engine")],
    extra_compile_args=extra_compile_args,
    define_macros=[("_GNU_SOURCE", "1")],
)

setup(
    packages=["seglog"] + ["seglog." + p for p in find_packages("src/pyapi")],
    package_dir={"seglog": "src/pyapi"},
    ext_modules=cythonize(
        [engine],
        language_level=3,
        compiler_directives={
            "boundscheck": False,
            "wraparound": False,
            "cdivision": True,
            "initializedcheck": False,
            "embedsignature": True,
        },
    ),
    zip_safe=False,
)
