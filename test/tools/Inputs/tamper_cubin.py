"""tamper_cubin.py IN.tplan OUT.tplan: damages the first cubin embedded in a
plan, as a corrupted download or a hand-edited plan would: it finds the
zlib stream whose contents start with an ELF header (plans store device
code compressed) and flips one byte in the middle of it, so the loader's
checks of device code can be tested without a GPU."""

import sys
import zlib

data = bytearray(open(sys.argv[1], "rb").read())
for at in range(len(data) - 2):
    if data[at] != 0x78 or data[at + 1] not in (0x01, 0x5E, 0x9C, 0xDA):
        continue
    try:
        stream = zlib.decompressobj()
        head = stream.decompress(bytes(data[at:at + 4096]), 4)
    except zlib.error:
        continue
    if head == b"\x7fELF":
        data[at + 2048] ^= 0xFF
        open(sys.argv[2], "wb").write(bytes(data))
        sys.exit(0)
sys.exit("no compressed cubin in the plan")
