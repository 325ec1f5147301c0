"""FP4/FP8 decoding against an independent bit-level decoder, and the permuted scale layout."""
import random

import torch

from reference import decode_fp4, decode_fp8, from_permuted_scales, to_permuted_scales


def e2m1_from_bits(code: int) -> float:
    """e2m1: 1 sign bit, 2 exponent bits (bias 1), 1 mantissa bit; exponent 0 is subnormal."""
    sign = -1.0 if code & 0b1000 else 1.0
    exponent = (code >> 1) & 0b11
    mantissa = code & 1
    if exponent == 0:
        return sign * (mantissa / 2) * 2.0 ** (1 - 1)
    return sign * (1 + mantissa / 2) * 2.0 ** (exponent - 1)


def e4m3_from_bits(code: int) -> float:
    """e4m3fn: 1 sign, 4 exponent (bias 7), 3 mantissa; S.1111.111 is NaN, no infinities."""
    sign = -1.0 if code & 0x80 else 1.0
    exponent = (code >> 3) & 0xF
    mantissa = code & 0x7
    if exponent == 0xF and mantissa == 0x7:
        return float("nan")
    if exponent == 0:
        return sign * (mantissa / 8) * 2.0 ** (1 - 7)
    return sign * (1 + mantissa / 8) * 2.0 ** (exponent - 7)


def test_fp4_all_codes_both_nibbles():
    raw = torch.arange(256, dtype=torch.uint8).reshape(1, 256, 1)
    decoded = decode_fp4(raw.view(torch.float4_e2m1fn_x2))
    assert decoded.shape == (1, 512, 1)
    for byte in range(256):
        assert decoded[0, 2 * byte, 0].item() == e2m1_from_bits(byte & 0xF)
        assert decoded[0, 2 * byte + 1, 0].item() == e2m1_from_bits(byte >> 4)


def test_fp8_all_codes():
    codes = torch.arange(256, dtype=torch.uint8)
    decoded = decode_fp8(codes.view(torch.float8_e4m3fn))
    for code in range(256):
        expected = e4m3_from_bits(code)
        got = decoded[code].item()
        assert (got != got and expected != expected) or got == expected, code


def test_permuted_layout_matches_index_formula():
    rng = random.Random(0)
    for _ in range(5):
        mn, sf_k, l = 128 * rng.randint(1, 3), 4 * rng.randint(1, 4), rng.randint(1, 3)
        plain = torch.randint(0, 256, (mn, sf_k, l), dtype=torch.uint8)
        perm = to_permuted_scales(plain)
        assert perm.shape == (32, 4, mn // 128, 4, sf_k // 4, l)
        for _ in range(200):
            i, j, b = rng.randrange(mn), rng.randrange(sf_k), rng.randrange(l)
            assert perm[i % 32, (i % 128) // 32, i // 128, j % 4, j // 4, b] == plain[i, j, b]
        assert torch.equal(from_permuted_scales(perm), plain)


def test_permuted_strides_match_leaderboard_storage():
    perm = to_permuted_scales(torch.zeros(256, 8, 3, dtype=torch.uint8))
    # a permute of a contiguous [l, rest_m, rest_k, 32, 4, 4] buffer, as the leaderboard builds it
    assert perm.stride() == (16, 4, 2 * 512, 1, 512, 2 * 2 * 512)
