//! Content codings of message bodies (`Content-Encoding: gzip`, `deflate`),
//! decoded for inspection.
//!
//! Rules must read a body as its receiver will: an application (or its
//! framework's middleware) inflates a request sent with `Content-Encoding:
//! gzip`, and a browser a compressed page, so rules that read the
//! compressed bytes let an attack or a leak through inside them. Every
//! front end decodes the same way, with this module: `waf serve` (request
//! bodies and responses), the HAProxy agent and the C ABI (request bodies).
//!
//! The engine limits count decoded bytes, and a body is decoded a
//! [`PIECE`] at a time with the engine asked between pieces whether it
//! wants more, so a small body that inflates to gigabytes (a decompression
//! bomb) costs one piece's output beyond the limit, not its size.

use crate::{Cause, Transaction};
use flate2::write::{DeflateDecoder, GzDecoder, ZlibDecoder};
use std::io::Write;

/// Compressed bytes decoded at a time (request bodies for phase 2,
/// responses for phase 4), the engine asked between pieces whether it wants
/// more: at deflate's largest ratio (~1032:1) about 512 KiB of output, the
/// default response body limit, so a decompression bomb costs a piece's
/// output beyond the limit, not its size.
pub const PIECE: usize = 512;

/// A body's coding, from its `Content-Encoding` header(s).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Coding {
    /// Sent as it is (no header, or `identity`).
    Identity,
    /// `gzip` or `x-gzip`.
    Gzip,
    /// `deflate`: zlib as RFC 9110 says, or raw deflate as some senders do.
    Deflate,
    /// Anything else (`br`, `zstd`, several codings stacked, a value that
    /// is not text): not decoded.
    Other,
}

impl Coding {
    /// The coding named by the values of a message's `Content-Encoding`
    /// headers (each a comma-separated list; `identity` and empty items
    /// ignored).
    pub fn of<'a>(values: impl IntoIterator<Item = &'a [u8]>) -> Coding {
        let mut named = None;
        for value in values {
            let Ok(text) = std::str::from_utf8(value) else {
                return Coding::Other;
            };
            for c in text.split(',').map(str::trim) {
                if c.is_empty() || c.eq_ignore_ascii_case("identity") {
                    continue;
                }
                if named.is_some() {
                    return Coding::Other;
                }
                named = Some(c);
            }
        }
        match named {
            None => Coding::Identity,
            Some(c) if c.eq_ignore_ascii_case("gzip") || c.eq_ignore_ascii_case("x-gzip") => {
                Coding::Gzip
            }
            Some(c) if c.eq_ignore_ascii_case("deflate") => Coding::Deflate,
            Some(_) => Coding::Other,
        }
    }
}

/// Why a body could not be decoded.
#[derive(Debug)]
pub struct DecodeError(std::io::Error);

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Why feeding a compressed body to the engine stopped short.
#[derive(Debug)]
pub enum FeedError<E> {
    /// The body does not decode (damaged, cut short).
    Decode(DecodeError),
    /// The engine failed on what was fed.
    Feed(E),
}

enum Inner {
    Gzip(GzDecoder<Vec<u8>>),
    Zlib(ZlibDecoder<Vec<u8>>),
    Raw(DeflateDecoder<Vec<u8>>),
    /// `deflate` before its first two bytes: RFC 9110 means zlib, but some
    /// servers send raw deflate; the header tells them apart.
    Undecided(Vec<u8>),
}

/// Decodes a body chunk by chunk.
pub struct Decoder {
    inner: Inner,
    fed: bool,
}

impl Decoder {
    /// A decoder for `coding`; `None` for a body sent as it is (or one that
    /// cannot be decoded).
    pub fn new(coding: Coding) -> Option<Decoder> {
        let inner = match coding {
            Coding::Gzip => Inner::Gzip(GzDecoder::new(Vec::new())),
            Coding::Deflate => Inner::Undecided(Vec::new()),
            Coding::Identity | Coding::Other => return None,
        };
        Some(Decoder { inner, fed: false })
    }

    /// Decodes `input`, appending what it yields to `out`.
    pub fn push(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<(), DecodeError> {
        if input.is_empty() {
            return Ok(());
        }
        self.fed = true;
        if let Inner::Undecided(head) = &mut self.inner {
            head.extend_from_slice(input);
            if head.len() < 2 {
                return Ok(());
            }
            let head = std::mem::take(head);
            let zlib =
                head[0] & 0x0f == 8 && (u16::from(head[0]) << 8 | u16::from(head[1])) % 31 == 0;
            self.inner = if zlib {
                Inner::Zlib(ZlibDecoder::new(Vec::new()))
            } else {
                Inner::Raw(DeflateDecoder::new(Vec::new()))
            };
            return self.push(&head, out);
        }
        let result = match &mut self.inner {
            Inner::Gzip(d) => d.write_all(input),
            Inner::Zlib(d) => d.write_all(input),
            Inner::Raw(d) => d.write_all(input),
            Inner::Undecided(_) => Ok(()),
        };
        self.drain(out);
        result.map_err(DecodeError)
    }

    /// The end of the body: what the decoder still holds goes to `out`; a
    /// body cut short is an error.
    pub fn finish(&mut self, out: &mut Vec<u8>) -> Result<(), DecodeError> {
        if !self.fed {
            return Ok(());
        }
        let result = match &mut self.inner {
            Inner::Gzip(d) => d.try_finish(),
            Inner::Zlib(d) => d.try_finish(),
            Inner::Raw(d) => d.try_finish(),
            Inner::Undecided(_) => Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "a deflate body of one byte",
            )),
        };
        self.drain(out);
        result.map_err(DecodeError)
    }

    /// Decodes `input` a [`PIECE`] at a time, handing what each piece
    /// yields to `feed` (the engine, which answers whether it wants more)
    /// before the next piece is decoded, and stops at the first piece it
    /// does not want: a decompression bomb costs one piece's output beyond
    /// what the engine takes, not its size. Whether the engine still wants
    /// more. On a decoding error, what decoded before it has been fed.
    pub fn feed<E>(
        &mut self,
        input: &[u8],
        out: &mut Vec<u8>,
        mut feed: impl FnMut(&[u8]) -> Result<bool, E>,
    ) -> Result<bool, FeedError<E>> {
        for piece in input.chunks(PIECE) {
            out.clear();
            let decoded = self.push(piece, out);
            let wanted = feed(out).map_err(FeedError::Feed)?;
            decoded.map_err(FeedError::Decode)?;
            if !wanted {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// The end of the body: what the decoder still holds goes to `feed`,
    /// then a body cut short is an error.
    pub fn finish_feeding<E>(
        &mut self,
        out: &mut Vec<u8>,
        feed: impl FnOnce(&[u8]) -> Result<bool, E>,
    ) -> Result<bool, FeedError<E>> {
        out.clear();
        let finished = self.finish(out);
        let wanted = feed(out).map_err(FeedError::Feed)?;
        finished.map_err(FeedError::Decode)?;
        Ok(wanted)
    }

    fn drain(&mut self, out: &mut Vec<u8>) {
        let buf = match &mut self.inner {
            Inner::Gzip(d) => d.get_mut(),
            Inner::Zlib(d) => d.get_mut(),
            Inner::Raw(d) => d.get_mut(),
            Inner::Undecided(_) => return,
        };
        out.append(buf);
    }
}

/// A request body on its way to the engine, as the application will read
/// it: fed chunk by chunk, decoded when the transaction's `Content-Encoding`
/// request headers say so, refused (through
/// [`Transaction::reject_request_body`]) when it cannot be inspected. What
/// every front end does with a request body, in one place; the caller
/// forwards the bytes as the client sent them.
#[derive(Default)]
pub struct RequestBodyFeed {
    state: FeedState,
    /// A decoded piece, before the engine takes it.
    piece: Vec<u8>,
}

#[derive(Default)]
enum FeedState {
    /// No byte yet: what to do is decided at the first.
    #[default]
    Unstarted,
    /// Fed as it comes (not compressed, or not inspected).
    AsIs,
    /// Decoded before it is fed; `wanted`: whether the engine took the last
    /// piece (once it wants no more, the rest is not decoded and the end
    /// of the stream is not checked).
    Decoded { decoder: Box<Decoder>, wanted: bool },
    /// Refused, or finished: nothing more is fed.
    Closed,
}

impl RequestBodyFeed {
    /// Feeds a chunk of the body with `append` (the transaction's
    /// `append_request_body`, or the caller's wrapper of it, which answers
    /// whether the engine wants more); whether the engine wants more.
    ///
    /// The first bytes decide (the request headers are complete by then):
    /// a body the engine does not inspect, or one sent as it is, goes as it
    /// comes; a gzip or deflate one is decoded a
    /// [`PIECE`] at a time (the limits count decoded bytes); one in another
    /// coding is refused ([`Cause::RequestBodyCodingUnsupported`]), and one
    /// that does not decode too ([`Cause::RequestBodyNotDecoded`]): the
    /// transaction then has the intervention, and the body is not wanted.
    pub fn feed<'r, E>(
        &mut self,
        tx: &mut Transaction<'r>,
        chunk: &[u8],
        mut append: impl FnMut(&mut Transaction<'r>, &[u8]) -> Result<bool, E>,
    ) -> Result<bool, E> {
        if matches!(self.state, FeedState::Unstarted) && !chunk.is_empty() {
            self.state = match tx.request_coding() {
                _ if !tx.inspects_request_body() => FeedState::AsIs,
                Coding::Other => {
                    tx.reject_request_body(Cause::RequestBodyCodingUnsupported);
                    FeedState::Closed
                }
                c => Decoder::new(c).map_or(FeedState::AsIs, |d| FeedState::Decoded {
                    decoder: Box::new(d),
                    wanted: true,
                }),
            };
        }
        match &mut self.state {
            FeedState::Unstarted | FeedState::AsIs => append(tx, chunk),
            // Past what the engine wanted, nothing more is decoded (a caller
            // that goes on feeding does not inflate a bomb piece by piece).
            FeedState::Closed | FeedState::Decoded { wanted: false, .. } => Ok(false),
            FeedState::Decoded { decoder, wanted } => {
                match decoder.feed(chunk, &mut self.piece, |b| append(tx, b)) {
                    Ok(more) => {
                        *wanted = more;
                        Ok(more)
                    }
                    Err(FeedError::Feed(e)) => Err(e),
                    Err(FeedError::Decode(_)) => {
                        tx.reject_request_body(Cause::RequestBodyNotDecoded);
                        self.state = FeedState::Closed;
                        Ok(false)
                    }
                }
            }
        }
    }

    /// The end of the body: a decoded body's last bytes go to the engine.
    /// `complete`: the body ended as the client sent it, so one cut short
    /// is refused ([`Cause::RequestBodyNotDecoded`]); false for a body a
    /// front end received only the start of (HAProxy's buffer), whose
    /// decodable part is inspected and nothing refused.
    pub fn finish<'r, E>(
        &mut self,
        tx: &mut Transaction<'r>,
        complete: bool,
        mut append: impl FnMut(&mut Transaction<'r>, &[u8]) -> Result<bool, E>,
    ) -> Result<(), E> {
        if let FeedState::Decoded {
            decoder,
            wanted: true,
        } = &mut self.state
        {
            let finished = decoder.finish_feeding(&mut self.piece, |b| append(tx, b));
            self.state = FeedState::Closed;
            match finished {
                Ok(_) => {}
                Err(FeedError::Feed(e)) => return Err(e),
                Err(FeedError::Decode(_)) if complete => {
                    tx.reject_request_body(Cause::RequestBodyNotDecoded)
                }
                Err(FeedError::Decode(_)) => {}
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flate2::write::{DeflateEncoder, GzEncoder, ZlibEncoder};
    use flate2::Compression;
    use waf_test_support::XorShift;

    fn gzip(data: &[u8]) -> Vec<u8> {
        encode(GZIP, Compression::default().level(), data)
    }

    /// What [`encode`] writes: gzip, zlib or raw deflate.
    const GZIP: usize = 0;
    const ZLIB: usize = 1;
    const RAW: usize = 2;

    /// `body` in gzip, zlib or raw deflate (`kind`) at `level`.
    fn encode(kind: usize, level: u32, body: &[u8]) -> Vec<u8> {
        let level = Compression::new(level);
        match kind {
            GZIP => {
                let mut e = GzEncoder::new(Vec::new(), level);
                e.write_all(body).expect("compress");
                e.finish().expect("compress")
            }
            ZLIB => {
                let mut e = ZlibEncoder::new(Vec::new(), level);
                e.write_all(body).expect("compress");
                e.finish().expect("compress")
            }
            _ => {
                let mut e = DeflateEncoder::new(Vec::new(), level);
                e.write_all(body).expect("compress");
                e.finish().expect("compress")
            }
        }
    }

    /// Decodes `body` fed `chunk` bytes at a time.
    fn decode(c: Coding, body: &[u8], chunk: usize) -> Result<Vec<u8>, DecodeError> {
        let mut d = Decoder::new(c).expect("a decoder");
        let mut out = Vec::new();
        for piece in body.chunks(chunk.max(1)) {
            d.push(piece, &mut out)?;
        }
        d.finish(&mut out)?;
        Ok(out)
    }

    #[test]
    fn gzip_zlib_and_raw_deflate_decode_in_any_chunking() {
        let page = b"<html><p>SECRET-LEAK</p></html>".repeat(200);
        let level = Compression::default().level();
        let zlib = encode(ZLIB, level, &page);
        let raw = encode(RAW, level, &page);
        for chunk in [1, 2, 7, 100, 100_000] {
            assert_eq!(
                decode(Coding::Gzip, &gzip(&page), chunk).expect("gzip"),
                page
            );
            assert_eq!(decode(Coding::Deflate, &zlib, chunk).expect("zlib"), page);
            assert_eq!(decode(Coding::Deflate, &raw, chunk).expect("raw"), page);
        }
    }

    #[test]
    fn damaged_and_truncated_bodies_are_errors() {
        let body = gzip(&b"hello ".repeat(1000));
        assert!(decode(Coding::Gzip, &body[..body.len() / 2], 64).is_err());
        let mut bad = body.clone();
        bad[20] ^= 0xff;
        bad[30] ^= 0xff;
        assert!(decode(Coding::Gzip, &bad, 64).is_err());
        assert!(decode(Coding::Gzip, b"not gzip at all", 4).is_err());
        // No body at all (a HEAD, a 304): nothing to decode, no error.
        let mut d = Decoder::new(Coding::Gzip).expect("decoder");
        assert!(d.finish(&mut Vec::new()).is_ok());
    }

    /// Pushes `input` in pieces of random sizes (1 to 2,000 bytes), then
    /// finishes; what came out, and whether push and finish succeeded.
    fn push_randomly(
        rng: &mut XorShift,
        c: Coding,
        input: &[u8],
    ) -> (Vec<u8>, Result<(), DecodeError>) {
        let mut d = Decoder::new(c).expect("a decoder");
        let mut out = Vec::new();
        let mut rest = input;
        while !rest.is_empty() {
            let (piece, tail) = rest.split_at((1 + rng.below(2000)).min(rest.len()));
            rest = tail;
            if let Err(e) = d.push(piece, &mut out) {
                return (out, Err(e));
            }
        }
        let end = d.finish(&mut out);
        (out, end)
    }

    /// Generated bodies (text-like, repetitive, random bytes, empty) in
    /// every coding and level: decoded in random pieces they come back
    /// whole; cut short anywhere, what decodes is a prefix of the body and
    /// the end is an error; with bytes flipped or garbage appended, the
    /// decoder answers (an error, or bytes) and never panics. A gzip body
    /// whose CRC or length no longer holds is an error.
    #[test]
    fn generated_bodies_decode_in_random_pieces_and_damage_is_an_answer() {
        let mut rng = XorShift::new(0x5eed_c0d1);
        for case in 0..240 {
            let len = [0, 1, 2, 17, 600, 5000, 40_000][rng.below(7)];
            let body: Vec<u8> = match case % 3 {
                0 => (0..len)
                    .map(|_| b"a=1&b=<x> %20ok"[rng.below(15)])
                    .collect(),
                1 => b"SELECT * FROM t; "
                    .iter()
                    .copied()
                    .cycle()
                    .take(len)
                    .collect(),
                _ => (0..len).map(|_| rng.byte()).collect(),
            };
            let kind = rng.below(3);
            let coding = if kind == GZIP {
                Coding::Gzip
            } else {
                Coding::Deflate
            };
            let level = rng.below(10) as u32;
            let encoded = encode(kind, level, &body);
            let (out, end) = push_randomly(&mut rng, coding, &encoded);
            assert!(end.is_ok(), "case {case}: {end:?}");
            assert!(out == body, "case {case}: decoded differently");

            let cut = rng.below(encoded.len());
            let (out, end) = push_randomly(&mut rng, coding, &encoded[..cut]);
            assert!(body.starts_with(&out), "case {case}: cut at {cut}");
            // One byte of zlib or raw deflate is not a body; none at all is
            // no body (nothing to refuse).
            assert!(
                cut == 0 || end.is_err(),
                "case {case}: cut at {cut} accepted"
            );

            let mut damaged = encoded.clone();
            for _ in 0..1 + rng.below(4) {
                let at = rng.below(damaged.len());
                damaged[at] ^= 1 + rng.byte() % 255;
            }
            if rng.below(2) == 0 {
                damaged.extend((0..rng.below(64)).map(|_| rng.byte()));
            }
            let (_, end) = push_randomly(&mut rng, coding, &damaged);
            if kind == GZIP && end.is_ok() {
                // gzip checks its data (CRC-32 and length): a damaged body
                // that still decodes had only unchecked header bytes (its
                // time, its OS) changed, and yields the same bytes.
                let (out, _) = push_randomly(&mut rng, coding, &damaged);
                assert!(out == body, "case {case}: damaged gzip decoded otherwise");
            }
        }
    }

    #[test]
    fn content_encoding_names() {
        let with = |v: &[&str]| Coding::of(v.iter().map(|s| s.as_bytes()));
        assert_eq!(with(&[]), Coding::Identity);
        assert_eq!(with(&["identity"]), Coding::Identity);
        assert_eq!(with(&["identity, gzip"]), Coding::Gzip);
        assert_eq!(with(&["GZIP"]), Coding::Gzip);
        assert_eq!(with(&["x-gzip"]), Coding::Gzip);
        assert_eq!(with(&["deflate"]), Coding::Deflate);
        assert_eq!(with(&["br"]), Coding::Other);
        assert_eq!(with(&["gzip, br"]), Coding::Other);
        assert_eq!(with(&["gzip", "gzip"]), Coding::Other);
        assert_eq!(Coding::of([&b"gz\xffip"[..]]), Coding::Other);
        assert_eq!(Coding::of([&[0x67, 0xff][..]]), Coding::Other);
    }

    fn ruleset(rules: &str) -> crate::Ruleset {
        match crate::Ruleset::from_str("t.conf", rules) {
            Ok(rs) => rs,
            Err(e) => panic!("{e}"),
        }
    }

    /// A form POST with `Content-Encoding: coding`, its headers processed.
    fn posted<'r>(rs: &'r crate::Ruleset, coding: &str) -> Transaction<'r> {
        let mut tx = rs.transaction();
        tx.process_uri(b"/", b"POST", b"HTTP/1.1");
        tx.add_request_header(b"Content-Type", b"application/x-www-form-urlencoded");
        tx.add_request_header(b"Content-Encoding", coding.as_bytes());
        tx.process_request_headers();
        tx
    }

    /// A POST with `Content-Encoding: coding` whose body goes through a
    /// `RequestBodyFeed` in `chunk`-byte pieces (`complete`: the body is
    /// whole); the intervention's status and cause.
    fn fed(
        rules: &str,
        coding: &str,
        body: &[u8],
        chunk: usize,
        complete: bool,
    ) -> Option<(u16, crate::Cause)> {
        let rs = ruleset(rules);
        let mut tx = posted(&rs, coding);
        let mut feed = RequestBodyFeed::default();
        let append = |tx: &mut Transaction<'_>, b: &[u8]| {
            Ok::<_, std::convert::Infallible>(tx.append_request_body(b))
        };
        // Every chunk is offered, as the C ABI's callers do: past what the
        // engine wanted, they are neither decoded nor fed.
        let mut wanted = true;
        for piece in body.chunks(chunk.max(1)) {
            wanted &= feed.feed(&mut tx, piece, append).expect("infallible");
        }
        if wanted {
            feed.finish(&mut tx, complete, append).expect("infallible");
        }
        if tx.intervention().is_none() {
            tx.process_request_body();
        }
        tx.intervention().map(|i| (i.status, i.cause))
    }

    const RULES: &str = "SecRuleEngine On\nSecRequestBodyAccess On\n\
        SecRequestBodyLimit 100000\nSecRequestBodyLimitAction Reject\n\
        SecRule ARGS \"@contains attack\" \"id:1,phase:2,deny,status:403\"\n";

    #[test]
    fn a_request_body_feed_inspects_what_the_application_will_read() {
        use crate::Cause;
        let attack = gzip(b"a=1&b=attack");
        for chunk in [1, 5, 1000] {
            assert_eq!(
                fed(RULES, "gzip", &attack, chunk, true),
                Some((403, Cause::Rule))
            );
        }
        assert_eq!(fed(RULES, "gzip", &gzip(b"a=1&b=fine"), 3, true), None);
        assert_eq!(
            fed(RULES, "identity", b"b=attack", 3, true),
            Some((403, Cause::Rule))
        );
        // Cut short (its 8-byte trailer gone): refused at the end, not
        // before, and not at all when the caller knows the body is
        // incomplete (what decoded is inspected).
        let cut = &attack[..attack.len() - 8];
        assert_eq!(
            fed(RULES, "gzip", cut, 4, true),
            Some((400, Cause::RequestBodyNotDecoded))
        );
        assert_eq!(fed(RULES, "gzip", cut, 4, false), Some((403, Cause::Rule)));
        // Damaged: refused as it is fed.
        assert_eq!(
            fed(RULES, "gzip", b"this is not gzip", 4, false),
            Some((400, Cause::RequestBodyNotDecoded))
        );
        // A coding that cannot be decoded: refused at the first byte; with
        // no body, nothing to refuse.
        assert_eq!(
            fed(RULES, "br", b"b=attack", 4, true),
            Some((415, Cause::RequestBodyCodingUnsupported))
        );
        assert_eq!(fed(RULES, "br", b"", 4, true), None);
        // A bomb: the limit counts decoded bytes and answers first; the
        // undecoded rest is not called a cut-short body.
        let bomb = gzip(&vec![b'a'; 10 << 20]);
        assert_eq!(
            fed(RULES, "gzip", &bomb, 4096, true),
            Some((413, Cause::RequestBodyLimit { limit: 100000 }))
        );
        let rs = ruleset(RULES);
        let mut tx = posted(&rs, "gzip");
        let mut feed = RequestBodyFeed::default();
        let mut decoded = 0;
        for piece in bomb.chunks(PIECE) {
            let _ = feed.feed(&mut tx, piece, |tx, b| {
                decoded += b.len();
                Ok::<_, std::convert::Infallible>(tx.append_request_body(b))
            });
        }
        assert!(
            decoded < 2 << 20,
            "{decoded} bytes inflated for a 100,000-byte limit"
        );
        // Bodies the engine does not inspect are not decoded nor refused.
        let off = RULES.replace("SecRequestBodyAccess On", "SecRequestBodyAccess Off");
        assert_eq!(fed(&off, "br", b"b=attack", 4, true), None);
        assert_eq!(fed(&off, "gzip", b"not gzip", 4, true), None);
    }
}
