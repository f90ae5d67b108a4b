//! `length`, `md5` and `sha1`.
//!
//! The digests are the **raw** 16 / 20 bytes, as in v3 (rules hex-encode
//! them themselves: CRS writes `t:sha1,t:hexEncode`). MD5 (RFC 1321) and
//! SHA-1 (FIPS 180-4) are implemented here rather than pulled in as a
//! dependency: they are short, fixed algorithms, rarely used by rules, and
//! the tests check them against the published test vectors.

/// `length`: the byte length of the value in decimal ASCII (`abc` -> `3`).
pub(super) fn length(input: &[u8], out: &mut Vec<u8>) {
    let mut n = input.len();
    let mut digits = [0u8; 20];
    let mut k = digits.len();
    loop {
        k -= 1;
        digits[k] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[k..]);
}

/// Feeds `input` to a 64-byte-block compression function with the
/// Merkle–Damgård padding both MD5 and SHA-1 use (`0x80`, zeros, then the
/// bit length as 8 bytes, little-endian for MD5, big-endian for SHA-1).
fn md_blocks(input: &[u8], big_endian_length: bool, mut compress: impl FnMut(&[u8; 64])) {
    let mut chunks = input.chunks_exact(64);
    for block in &mut chunks {
        let mut b = [0u8; 64];
        b.copy_from_slice(block);
        compress(&b);
    }
    let rest = chunks.remainder();
    let bit_len = (input.len() as u64).wrapping_mul(8);
    let len_bytes = if big_endian_length {
        bit_len.to_be_bytes()
    } else {
        bit_len.to_le_bytes()
    };
    let mut tail = [0u8; 128];
    tail[..rest.len()].copy_from_slice(rest);
    tail[rest.len()] = 0x80;
    let total = if rest.len() < 56 { 64 } else { 128 };
    tail[total - 8..total].copy_from_slice(&len_bytes);
    for block in tail[..total].chunks_exact(64) {
        let mut b = [0u8; 64];
        b.copy_from_slice(block);
        compress(&b);
    }
}

/// `md5`: the raw 16-byte MD5 digest.
pub(super) fn md5(input: &[u8], out: &mut Vec<u8>) {
    const S: [u32; 64] = [
        7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 5, 9, 14, 20, 5, 9, 14, 20, 5,
        9, 14, 20, 5, 9, 14, 20, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 6, 10,
        15, 21, 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21,
    ];
    // K[i] = floor(abs(sin(i + 1)) * 2^32), RFC 1321.
    const K: [u32; 64] = [
        0xd76aa478, 0xe8c7b756, 0x242070db, 0xc1bdceee, 0xf57c0faf, 0x4787c62a, 0xa8304613,
        0xfd469501, 0x698098d8, 0x8b44f7af, 0xffff5bb1, 0x895cd7be, 0x6b901122, 0xfd987193,
        0xa679438e, 0x49b40821, 0xf61e2562, 0xc040b340, 0x265e5a51, 0xe9b6c7aa, 0xd62f105d,
        0x02441453, 0xd8a1e681, 0xe7d3fbc8, 0x21e1cde6, 0xc33707d6, 0xf4d50d87, 0x455a14ed,
        0xa9e3e905, 0xfcefa3f8, 0x676f02d9, 0x8d2a4c8a, 0xfffa3942, 0x8771f681, 0x6d9d6122,
        0xfde5380c, 0xa4beea44, 0x4bdecfa9, 0xf6bb4b60, 0xbebfbc70, 0x289b7ec6, 0xeaa127fa,
        0xd4ef3085, 0x04881d05, 0xd9d4d039, 0xe6db99e5, 0x1fa27cf8, 0xc4ac5665, 0xf4292244,
        0x432aff97, 0xab9423a7, 0xfc93a039, 0x655b59c3, 0x8f0ccc92, 0xffeff47d, 0x85845dd1,
        0x6fa87e4f, 0xfe2ce6e0, 0xa3014314, 0x4e0811a1, 0xf7537e82, 0xbd3af235, 0x2ad7d2bb,
        0xeb86d391,
    ];
    let mut h: [u32; 4] = [0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476];
    md_blocks(input, false, |block| {
        let mut m = [0u32; 16];
        for (w, c) in m.iter_mut().zip(block.chunks_exact(4)) {
            *w = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        }
        let [mut a, mut b, mut c, mut d] = h;
        for i in 0..64 {
            let (f, g) = match i / 16 {
                0 => ((b & c) | (!b & d), i),
                1 => ((d & b) | (!d & c), (5 * i + 1) % 16),
                2 => (b ^ c ^ d, (3 * i + 5) % 16),
                _ => (c ^ (b | !d), (7 * i) % 16),
            };
            let f = f.wrapping_add(a).wrapping_add(K[i]).wrapping_add(m[g]);
            a = d;
            d = c;
            c = b;
            b = b.wrapping_add(f.rotate_left(S[i]));
        }
        h[0] = h[0].wrapping_add(a);
        h[1] = h[1].wrapping_add(b);
        h[2] = h[2].wrapping_add(c);
        h[3] = h[3].wrapping_add(d);
    });
    for w in h {
        out.extend_from_slice(&w.to_le_bytes());
    }
}

/// `sha1`: the raw 20-byte SHA-1 digest.
pub(super) fn sha1(input: &[u8], out: &mut Vec<u8>) {
    let mut h: [u32; 5] = [0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476, 0xc3d2e1f0];
    md_blocks(input, true, |block| {
        let mut w = [0u32; 80];
        for (x, c) in w.iter_mut().zip(block.chunks_exact(4)) {
            *x = u32::from_be_bytes([c[0], c[1], c[2], c[3]]);
        }
        for t in 16..80 {
            w[t] = (w[t - 3] ^ w[t - 8] ^ w[t - 14] ^ w[t - 16]).rotate_left(1);
        }
        let [mut a, mut b, mut c, mut d, mut e] = h;
        for (t, &wt) in w.iter().enumerate() {
            let (f, k) = match t / 20 {
                0 => ((b & c) | (!b & d), 0x5a827999),
                1 => (b ^ c ^ d, 0x6ed9eba1),
                2 => ((b & c) | (b & d) | (c & d), 0x8f1bbcdc),
                _ => (b ^ c ^ d, 0xca62c1d6),
            };
            let temp = a
                .rotate_left(5)
                .wrapping_add(f)
                .wrapping_add(e)
                .wrapping_add(k)
                .wrapping_add(wt);
            e = d;
            d = c;
            c = b.rotate_left(30);
            b = a;
            a = temp;
        }
        for (x, v) in h.iter_mut().zip([a, b, c, d, e]) {
            *x = x.wrapping_add(v);
        }
    });
    for w in h {
        out.extend_from_slice(&w.to_be_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{check, hex};
    use super::super::{apply, Transform as T};

    #[test]
    fn length() {
        check(
            T::Length,
            &[
                (b"", b"0"),
                (b"a", b"1"),
                (b"abc", b"3"),
                (b"\0\0\0\0\0\0\0\0\0\0", b"10"),
                (b"\xff\xfe", b"2"),
            ],
        );
        let mut out = Vec::new();
        // A value whose length is itself: unchanged.
        assert!(!apply(T::Length, b"1", &mut out));
        assert!(out.is_empty());
        assert!(apply(T::Length, &[b'x'; 12345], &mut out));
        assert_eq!(out, b"12345");
    }

    fn digest(t: T, input: &[u8]) -> String {
        let mut out = Vec::new();
        assert!(apply(t, input, &mut out));
        hex(&out)
    }

    /// RFC 1321, appendix A.5.
    #[test]
    fn md5_rfc1321_suite() {
        let cases: &[(&[u8], &str)] = &[
            (b"", "d41d8cd98f00b204e9800998ecf8427e"),
            (b"a", "0cc175b9c0f1b6a831c399e269772661"),
            (b"abc", "900150983cd24fb0d6963f7d28e17f72"),
            (b"message digest", "f96b697d7cb7938d525a2f31aaf161d0"),
            (
                b"abcdefghijklmnopqrstuvwxyz",
                "c3fcd3d76192e4007dfb496cca67e13b",
            ),
            (
                b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789",
                "d174ab98d277d9f5a5611c2c9f419d9f",
            ),
            (
                b"12345678901234567890123456789012345678901234567890123456789012345678901234567890",
                "57edf4a22be3c955ac49da2e2107b67a",
            ),
        ];
        for (input, want) in cases {
            assert_eq!(
                digest(T::Md5, input),
                *want,
                "md5({:?})",
                String::from_utf8_lossy(input)
            );
        }
    }

    /// FIPS 180 / RFC 3174 test vectors, plus the padding boundaries.
    #[test]
    fn sha1_vectors() {
        let cases: &[(&[u8], &str)] = &[
            (b"", "da39a3ee5e6b4b0d3255bfef95601890afd80709"),
            (b"abc", "a9993e364706816aba3e25717850c26c9cd0d89d"),
            (
                b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
                "84983e441c3bd26ebaae4aa1f95129e5e54670f1",
            ),
            (
                b"The quick brown fox jumps over the lazy dog",
                "2fd4e1c67a2d28fced849ee1bb76e7391b93eb12",
            ),
        ];
        for (input, want) in cases {
            assert_eq!(
                digest(T::Sha1, input),
                *want,
                "sha1({:?})",
                String::from_utf8_lossy(input)
            );
        }
        assert_eq!(
            digest(T::Sha1, &vec![b'a'; 1_000_000]),
            "34aa973cd4c4daa4f61eeb2bdbad27316534016f"
        );
        assert_eq!(
            digest(T::Md5, &vec![b'a'; 1_000_000]),
            "7707d6ae4e027c70eea2a935c2296f21"
        );
    }

    /// Inputs around the 55/56/64-byte padding boundaries; the expected
    /// digests were computed with libmodsecurity 3.0.9 (mbedtls).
    #[test]
    fn digest_padding_boundaries() {
        let cases: &[(usize, &str, &str)] = &[
            (
                55,
                "ef1772b6dff9a122358552954ad0df65",
                "c1c8bbdc22796e28c0e15163d20899b65621d65a",
            ),
            (
                56,
                "3b0c8ac703f828b04c6c197006d17218",
                "c2db330f6083854c99d4b5bfb6e8f29f201be699",
            ),
            (
                57,
                "652b906d60af96844ebd21b674f35e93",
                "f08f24908d682555111be7ff6f004e78283d989a",
            ),
            (
                63,
                "b06521f39153d618550606be297466d5",
                "03f09f5b158a7a8cdad920bddc29b81c18a551f5",
            ),
            (
                64,
                "014842d480b571495a4a0363793f7367",
                "0098ba824b5c16427bd7a1122a5a442a25ec644d",
            ),
            (
                65,
                "c743a45e0d2e6a95cb859adae0248435",
                "11655326c708d70319be2610e8a57d9a5b959d3b",
            ),
        ];
        for &(n, md5, sha1) in cases {
            let input = vec![b'a'; n];
            assert_eq!(digest(T::Md5, &input), md5, "md5 of {n} 'a'");
            assert_eq!(digest(T::Sha1, &input), sha1, "sha1 of {n} 'a'");
        }
    }
}
