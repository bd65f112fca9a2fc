"""smax.softmax from Python against the C++ batched call and torch's softmax.

    PYTHONPATH=<build>/python /usr/bin/python3 bench/python_softmax.py [--rows 4096] [--cols 32768] [--reps 7]

One thread everywhere (torch.set_num_threads(1); smax threads=None), float32,
the contenders interleaved in every repetition, medians reported:

  smax.softmax(x, out=y)       the Python module: argument handling, then the
                               C API's batched call with the GIL released
  binding alone                smax._smax.softmax(x, y, 0, 1), no Python layer
  C batched call               smax_softmax_batched_f32 from libsmax_c.so via
                               ctypes (SMAX_C_LIB, or found in build/*/src):
                               the C++ batched call (smax::dynamic::softmax
                               over matrix_views) behind one C frame
  torch softmax, out=          aten._softmax.out into a preallocated tensor
                               (torch.softmax itself has no out=)
  ... (allocates)              smax.softmax(x) and torch.softmax(x, -1), each
                               allocating its 512 MiB output (page faults
                               included)

Needs about 2 GiB at the default size. ATEN_CPU_CAPABILITY=avx512 makes
torch use its AVX-512 kernels (it defaults to AVX2 on these CPUs).
"""
import argparse
import ctypes
import glob
import os
import statistics
import time

import numpy as np
import torch

import smax
from smax import _smax


def find_libsmax_c():
    env = os.environ.get("SMAX_C_LIB")
    if env:
        return env
    here = os.path.dirname(os.path.abspath(__file__))
    for pattern in ("../build/*/src/libsmax_c.so", "../build/*/libsmax_c.so"):
        hits = sorted(glob.glob(os.path.join(here, pattern)))
        if hits:
            return hits[0]
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=4096)
    ap.add_argument("--cols", type=int, default=32768)
    ap.add_argument("--reps", type=int, default=7)
    a = ap.parse_args()
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    x = (4 * rng.standard_normal((a.rows, a.cols), dtype=np.float32))
    y = np.empty_like(x)
    tx, ty = torch.from_numpy(x), torch.empty(a.rows, a.cols)

    aten_out = torch.ops.aten._softmax.out  # torch.softmax has no out=; this is its kernel's
    contenders = {
        "smax.softmax (Python)": lambda: smax.softmax(x, out=y),
        "binding alone": lambda: _smax.softmax(x, y, 0, 1),
        "torch softmax, out=": lambda: aten_out(tx, -1, False, out=ty),
        "smax.softmax(x) (allocates)": lambda: smax.softmax(x),
        "torch.softmax(x) (allocates)": lambda: torch.softmax(tx, -1),
    }
    lib_path = find_libsmax_c()
    if lib_path:
        lib = ctypes.CDLL(lib_path)
        f = lib.smax_softmax_batched_f32
        f.restype = ctypes.c_int
        f.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_size_t,
                      ctypes.c_size_t, ctypes.c_size_t, ctypes.c_int, ctypes.c_size_t]
        px, py = x.ctypes.data, y.ctypes.data
        contenders["C batched call (libsmax_c, ctypes)"] = lambda: f(px, a.cols, py, a.cols, a.rows, a.cols, 0, 1)

    # correctness first
    smax.softmax(x, out=y)
    np.testing.assert_allclose(y[:4], torch.softmax(tx[:4], -1).numpy(), rtol=2e-5, atol=1e-7)

    times = {k: [] for k in contenders}
    for _ in range(a.reps):
        for k, fn in contenders.items():  # interleaved
            t0 = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - t0)
    med = {k: statistics.median(v) * 1e3 for k, v in times.items()}
    n = a.rows * a.cols
    print(f"softmax float32 ({a.rows}, {a.cols}), 1 thread, ISA {smax.active_isa()}, {a.reps} interleaved reps")
    for k, v in med.items():
        print(f"  {k:38s} median {v:8.1f} ms  ({n / v / 1e6:.2f} el/ns)")
    py_ms = med["smax.softmax (Python)"]
    ref = med.get("C batched call (libsmax_c, ctypes)", med["binding alone"])
    print(f"  smax.softmax / C batched call: {py_ms / ref:.3f}   (target <= 1.1)")
    print(f"  torch / smax, out=:            {med['torch softmax, out='] / py_ms:.2f}   (target >= 1.5)")
    print(f"  torch / smax, allocating:      "
          f"{med['torch.softmax(x) (allocates)'] / med['smax.softmax(x) (allocates)']:.2f}")


if __name__ == "__main__":
    main()
