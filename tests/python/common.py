"""Helpers shared by the binding's tests (tests/python)."""
import sys
import traceback

import torch


def check(cond, msg):
    if not cond:
        raise AssertionError(msg)


def raises(exc_type, fn, *args, contains=None, **kw):
    """fn(*args) must raise exc_type (with `contains` in its message)."""
    try:
        fn(*args, **kw)
    except exc_type as e:
        if contains is not None and contains not in str(e):
            raise AssertionError(f"{exc_type.__name__} raised without '{contains}': {e}")
        return e
    except Exception as e:  # noqa: BLE001 - report the wrong exception
        traceback.print_exc()
        raise AssertionError(f"expected {exc_type.__name__}, got {type(e).__name__}: {e}")
    raise AssertionError(f"expected {exc_type.__name__}, nothing was raised")


def max_rel_diff(a_params, b_params):
    """max over tensors of max|a - b| / max|b|."""
    worst = 0.0
    for a, b in zip(a_params, b_params):
        scale = float(b.abs().max()) or 1.0
        worst = max(worst, float((a - b).abs().max()) / scale)
    return worst


def ok(rank, name):
    print(f"rank {rank}: PASS {name}", flush=True)
    sys.stdout.flush()
