//! Streaming compression of json, bytes and csv objects: bytes go in as
//! records are encoded, compressed bytes come out as they are ready, so an
//! object can be uploaded in parts while it is still being written.

use flate2::Compression as Level;
use flate2::write::GzEncoder;
use std::io::Write;

/// `compression.type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    None,
    Gzip,
    /// Snappy's framing format (what `snzip` and Hadoop's framed codec read).
    Snappy,
    /// Zstandard, in frames of [`ZSTD_FRAME`] input bytes (a zstd stream may
    /// hold several frames; every decoder reads them in turn).
    Zstd,
}

/// Input bytes per zstd frame: the pure-Rust encoder compresses whole
/// frames, so this is what one frame buffers before it goes out.
pub const ZSTD_FRAME: usize = 1 << 20;

impl Compression {
    /// What follows the format's extension: `.gz`, `.snappy`, `.zst` or nothing.
    pub fn extension(self) -> &'static str {
        match self {
            Compression::None => "",
            Compression::Gzip => ".gz",
            Compression::Snappy => ".snappy",
            Compression::Zstd => ".zst",
        }
    }

    pub fn encoder(self) -> Encoder {
        Encoder(match self {
            Compression::None => Inner::Plain(Vec::new()),
            Compression::Gzip => Inner::Gzip(GzEncoder::new(Vec::new(), Level::default())),
            Compression::Snappy => Inner::Snappy(Box::new(snap::write::FrameEncoder::new(Vec::new()))),
            Compression::Zstd => Inner::Zstd { input: Vec::new(), output: Vec::new() },
        })
    }
}

/// A compressor writing into memory.
pub struct Encoder(Inner);

enum Inner {
    Plain(Vec<u8>),
    Gzip(GzEncoder<Vec<u8>>),
    Snappy(Box<snap::write::FrameEncoder<Vec<u8>>>),
    Zstd { input: Vec<u8>, output: Vec<u8> },
}

// Writing into a Vec cannot fail; an error here would be a bug in a codec.
fn infallible(result: std::io::Result<()>) {
    result.expect("compressing into memory cannot fail")
}

impl Encoder {
    pub fn write(&mut self, data: &[u8]) {
        match &mut self.0 {
            Inner::Plain(out) => out.extend_from_slice(data),
            Inner::Gzip(gz) => infallible(gz.write_all(data)),
            Inner::Snappy(sn) => infallible(sn.write_all(data)),
            Inner::Zstd { input, output } => {
                input.extend_from_slice(data);
                if input.len() >= ZSTD_FRAME {
                    zstd_frame(input, output);
                }
            }
        }
    }

    /// Bytes held: compressed output not yet taken, plus input a codec
    /// still buffers (up to a zstd frame; snappy's and gzip's own buffers
    /// are a few KiB and not counted).
    pub fn buffered(&self) -> usize {
        match &self.0 {
            Inner::Plain(out) => out.len(),
            Inner::Gzip(gz) => gz.get_ref().len(),
            Inner::Snappy(sn) => sn.get_ref().len(),
            Inner::Zstd { input, output } => input.len() + output.len(),
        }
    }

    /// Compressed bytes ready to go out.
    pub fn ready(&self) -> usize {
        match &self.0 {
            Inner::Plain(out) => out.len(),
            Inner::Gzip(gz) => gz.get_ref().len(),
            Inner::Snappy(sn) => sn.get_ref().len(),
            Inner::Zstd { output, .. } => output.len(),
        }
    }

    /// Takes the compressed bytes ready so far (a prefix of the stream).
    pub fn take(&mut self) -> Vec<u8> {
        match &mut self.0 {
            Inner::Plain(out) => std::mem::take(out),
            Inner::Gzip(gz) => std::mem::take(gz.get_mut()),
            Inner::Snappy(sn) => std::mem::take(sn.get_mut()),
            Inner::Zstd { output, .. } => std::mem::take(output),
        }
    }

    /// Ends the stream and returns the rest of it.
    pub fn finish(self) -> Vec<u8> {
        match self.0 {
            Inner::Plain(out) => out,
            Inner::Gzip(gz) => gz.finish().expect("compressing into memory cannot fail"),
            Inner::Snappy(sn) => {
                sn.into_inner().map_err(|e| e.to_string()).expect("compressing into memory cannot fail")
            }
            Inner::Zstd { mut input, mut output } => {
                if !input.is_empty() {
                    zstd_frame(&mut input, &mut output);
                }
                output
            }
        }
    }
}

fn zstd_frame(input: &mut Vec<u8>, output: &mut Vec<u8>) {
    ruzstd::encoding::compress(input.as_slice(), &mut *output, ruzstd::encoding::CompressionLevel::Fastest);
    input.clear();
}

#[cfg(test)]
pub(crate) fn decompress(compression: Compression, bytes: &[u8]) -> Vec<u8> {
    use std::io::Read;
    let mut out = Vec::new();
    match compression {
        Compression::None => out.extend_from_slice(bytes),
        Compression::Gzip => {
            flate2::read::MultiGzDecoder::new(bytes).read_to_end(&mut out).unwrap();
        }
        Compression::Snappy => {
            snap::read::FrameDecoder::new(bytes).read_to_end(&mut out).unwrap();
        }
        Compression::Zstd => {
            let mut rest = bytes;
            while !rest.is_empty() {
                let mut decoder = ruzstd::decoding::StreamingDecoder::new(&mut rest).unwrap();
                decoder.read_to_end(&mut out).unwrap();
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_codec_streams_and_round_trips() {
        let line = b"{\"id\": 12345, \"name\": \"a fairly repetitive line of JSON\"}\n";
        for compression in [Compression::None, Compression::Gzip, Compression::Snappy, Compression::Zstd] {
            let mut encoder = compression.encoder();
            let mut stream = Vec::new();
            let mut taken_early = 0;
            for i in 0..40_000 {
                encoder.write(line);
                // Take output while writing, as parts are cut from it.
                if i % 10_000 == 9_999 {
                    let part = encoder.take();
                    taken_early += part.len();
                    stream.extend(part);
                }
            }
            assert!(taken_early > 0, "{compression:?} gave nothing before the end");
            stream.extend(encoder.finish());
            let plain = decompress(compression, &stream);
            assert_eq!(plain.len(), line.len() * 40_000, "{compression:?}");
            assert!(plain.chunks(line.len()).all(|c| c == line), "{compression:?}");
            if compression != Compression::None {
                assert!(stream.len() < plain.len() / 4, "{compression:?}: {} bytes", stream.len());
            }
        }
    }
}
