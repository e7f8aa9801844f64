"""Build the Cython core `seglog._engine` (one extension assembled from the topic files in src/engine).

Cython finds the declarations of module `seglog._engine` at `seglog/_engine.pxd` on its include path, but
package_dir maps `seglog` to src/pyapi while the Cython sources live in src/engine. A build-time include
directory whose `seglog` entry points at src/engine gives Cython the path it looks for.
"""
import os

from Cython.Build import cythonize
from setuptools import Extension, find_packages, setup

HERE = os.path.dirname(os.path.abspath(__file__))
PXD_ROOT = os.path.join("build", "pxd")


def pxd_include_dir():
    link = os.path.join(HERE, PXD_ROOT, "seglog")
    os.makedirs(os.path.dirname(link), exist_ok=True)
    if os.path.islink(link) and os.readlink(link) != os.path.join("..", "..", "src", "engine"):
        os.unlink(link)
    if not os.path.lexists(link):
        os.symlink(os.path.join("..", "..", "src", "engine"), link)
    return PXD_ROOT

extra_compile_args = ["-O3", "-fno-strict-aliasing", "-Wno-unused-function"]
if os.environ.get("SEGLOG_DEBUG"):
    extra_compile_args = ["-O0", "-g"]

engine = Extension(
    "seglog._engine",
    sources=["src/engine/_engine.pyx", "src/engine/crc32c_impl.c"],
    include_dirs=["src/engine"],
    depends=sorted(os.path.join("src/engine", f) for f in os.listdir(os.path.join(HERE, "src/engine"))
                   if f.endswith((".pyx", ".pxd", ".pxi", ".h", ".c")) and f != "_engine.c"),
    extra_compile_args=extra_compile_args,
    define_macros=[("_GNU_SOURCE", "1")],
)

setup(
    packages=["seglog"] + ["seglog." + p for p in find_packages("src/pyapi")],
    package_dir={"seglog": "src/pyapi"},
    ext_modules=cythonize(
        [engine],
        language_level=3,
        include_path=[pxd_include_dir()],
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
