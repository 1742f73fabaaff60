#!/usr/bin/env python3
"""Writes a small Fashion-MNIST-like data set of gzip IDX files:

    make_idx.py DIR N ROWS COLS [TEST_ROWS TEST_COLS]

DIR/{train,t10k}-{images-idx3,labels-idx1}-ubyte.gz with N images of
ROWS x COLS pixels (the test split TEST_ROWS x TEST_COLS if given) and labels
0..9, so that the trainer's checks of a data set against its model can be
tried with shapes the model does not take."""
import gzip
import os
import struct
import sys


def write(path, header, body):
    with gzip.open(path, "wb") as f:
        f.write(header)
        f.write(body)


def main():
    d, n, rows, cols = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    test_rows = int(sys.argv[5]) if len(sys.argv) > 5 else rows
    test_cols = int(sys.argv[6]) if len(sys.argv) > 6 else cols
    os.makedirs(d, exist_ok=True)
    for split, r, c in (("train", rows, cols), ("t10k", test_rows, test_cols)):
        write(f"{d}/{split}-images-idx3-ubyte.gz",
              struct.pack(">BBBBIII", 0, 0, 8, 3, n, r, c),
              bytes((i * 7) % 256 for i in range(n * r * c)))
        write(f"{d}/{split}-labels-idx1-ubyte.gz",
              struct.pack(">BBBBI", 0, 0, 8, 1, n),
              bytes(i % 10 for i in range(n)))


if __name__ == "__main__":
    main()
