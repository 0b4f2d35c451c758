//! `multipart/related` bodies (RFC 2046) as DICOMweb uses them: WADO-RS answers are read
//! part by part, each streamed into a writer, so a series never sits in memory; STOW-RS
//! requests are written in one buffer (SR and KOS documents are small).
//!
//! A body that ends before its closing delimiter is an error ([`MultipartError::Truncated`]):
//! the part being written is incomplete and must be thrown away.

use std::io::{Read, Write};

/// What is wrong with a multipart body.
#[derive(Debug, thiserror::Error)]
pub enum MultipartError {
    /// The `Content-Type` is not multipart or has no boundary.
    #[error("the answer is not multipart/related with a boundary (Content-Type: {0})")]
    NotMultipart(String),
    /// The body ended before the closing delimiter.
    #[error("the multipart body ends in the middle of part {part} (truncated answer)")]
    Truncated {
        /// 1-based number of the part that was cut.
        part: usize,
    },
    /// A part's headers are malformed.
    #[error("part {part} has malformed headers")]
    Headers {
        /// 1-based part number.
        part: usize,
    },
    /// Reading the body or writing a part failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// The `boundary` parameter of a `multipart/…` content type.
pub fn boundary(content_type: &str) -> Result<String, MultipartError> {
    let not = || MultipartError::NotMultipart(content_type.chars().take(200).collect());
    if !content_type
        .trim_start()
        .to_ascii_lowercase()
        .starts_with("multipart/")
    {
        return Err(not());
    }
    content_type
        .split(';')
        .skip(1)
        .filter_map(|parameter| parameter.split_once('='))
        .find(|(key, _)| key.trim().eq_ignore_ascii_case("boundary"))
        .map(|(_, value)| value.trim().trim_matches('"').to_string())
        .filter(|value| !value.is_empty())
        .ok_or_else(not)
}

/// Reads the parts of a multipart body one after another.
pub struct MultipartReader<R> {
    inner: R,
    /// `\r\n--boundary`.
    delimiter: Vec<u8>,
    /// Bytes read but not consumed.
    buffer: Vec<u8>,
    eof: bool,
    parts: usize,
    done: bool,
}

const CHUNK: usize = 256 * 1024;

impl<R: Read> MultipartReader<R> {
    /// A reader of `body`, whose parts are separated by `boundary`.
    pub fn new(body: R, boundary: &str) -> Self {
        let mut delimiter = b"\r\n--".to_vec();
        delimiter.extend_from_slice(boundary.as_bytes());
        Self {
            inner: body,
            delimiter,
            // The first delimiter has no CRLF before it: pretend it has.
            buffer: b"\r\n".to_vec(),
            eof: false,
            parts: 0,
            done: false,
        }
    }

    fn fill(&mut self) -> Result<bool, MultipartError> {
        if self.eof {
            return Ok(false);
        }
        let start = self.buffer.len();
        self.buffer.resize(start + CHUNK, 0);
        let read = loop {
            match self.inner.read(&mut self.buffer[start..]) {
                Ok(read) => break read,
                Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
                Err(error) => {
                    self.buffer.truncate(start);
                    return Err(error.into());
                }
            }
        };
        self.buffer.truncate(start + read);
        if read == 0 {
            self.eof = true;
        }
        Ok(read > 0)
    }

    /// Skips to the first delimiter (the preamble is ignored). Returns false at the end.
    fn skip_to_delimiter(&mut self) -> Result<bool, MultipartError> {
        loop {
            if let Some(at) = memchr::memmem::find(&self.buffer, &self.delimiter) {
                self.buffer.drain(..at + self.delimiter.len());
                return Ok(true);
            }
            let keep = self.delimiter.len().min(self.buffer.len());
            self.buffer.drain(..self.buffer.len() - keep);
            if !self.fill()? {
                return Ok(false);
            }
        }
    }

    /// Writes the next part's content into `sink` and returns its headers (lower-case names),
    /// or `None` after the last part.
    pub fn next_part(
        &mut self,
        sink: &mut dyn Write,
    ) -> Result<Option<Vec<(String, String)>>, MultipartError> {
        if self.done {
            return Ok(None);
        }
        if self.parts == 0 && !self.skip_to_delimiter()? {
            return Err(MultipartError::Truncated { part: 1 });
        }
        let part = self.parts + 1;
        // After a delimiter: `--` closes the body, else optional padding and CRLF.
        while self.buffer.len() < 2 {
            if !self.fill()? {
                return Err(MultipartError::Truncated { part });
            }
        }
        if self.buffer.starts_with(b"--") {
            self.done = true;
            return Ok(None);
        }
        // Headers end at the first empty line.
        let headers_end = loop {
            if let Some(at) = memchr::memmem::find(&self.buffer, b"\r\n\r\n") {
                break at;
            }
            if self.buffer.len() > 64 * 1024 {
                return Err(MultipartError::Headers { part });
            }
            if !self.fill()? {
                return Err(MultipartError::Truncated { part });
            }
        };
        let head = String::from_utf8_lossy(&self.buffer[..headers_end]).into_owned();
        let mut lines = head.split("\r\n");
        // The rest of the delimiter line (transport padding) must be blank.
        if !lines.next().unwrap_or("").trim().is_empty() {
            return Err(MultipartError::Headers { part });
        }
        let mut headers = Vec::new();
        for line in lines {
            let (name, value) = line
                .split_once(':')
                .ok_or(MultipartError::Headers { part })?;
            headers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
        }
        self.buffer.drain(..headers_end + 4);
        // The content runs to the next delimiter; everything that cannot be its start is
        // written out as it comes.
        loop {
            if let Some(at) = memchr::memmem::find(&self.buffer, &self.delimiter) {
                sink.write_all(&self.buffer[..at])?;
                self.buffer.drain(..at + self.delimiter.len());
                self.parts = part;
                return Ok(Some(headers));
            }
            let safe = self.buffer.len().saturating_sub(self.delimiter.len());
            sink.write_all(&self.buffer[..safe])?;
            self.buffer.drain(..safe);
            if !self.fill()? {
                return Err(MultipartError::Truncated { part });
            }
        }
    }
}

/// Builds a `multipart/related` body of DICOM parts; returns the content type and the body.
#[must_use]
pub fn related_dicom(parts: &[Vec<u8>], boundary: &str) -> (String, Vec<u8>) {
    let mut body = Vec::with_capacity(parts.iter().map(Vec::len).sum::<usize>() + 256);
    for part in parts {
        body.extend_from_slice(b"--");
        body.extend_from_slice(boundary.as_bytes());
        body.extend_from_slice(b"\r\nContent-Type: application/dicom\r\n\r\n");
        body.extend_from_slice(part);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(b"--");
    body.extend_from_slice(boundary.as_bytes());
    body.extend_from_slice(b"--\r\n");
    (
        format!("multipart/related; type=\"application/dicom\"; boundary={boundary}"),
        body,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader that hands out at most `step` bytes per read, to cut delimiters in two.
    struct Trickle<'a>(&'a [u8], usize);
    impl Read for Trickle<'_> {
        fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
            let n = self.1.min(self.0.len()).min(out.len());
            out[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }

    fn parts_of(body: &[u8], step: usize) -> Result<Vec<Vec<u8>>, MultipartError> {
        let mut reader = MultipartReader::new(Trickle(body, step), "b0undary");
        let mut parts = Vec::new();
        loop {
            let mut content = Vec::new();
            match reader.next_part(&mut content)? {
                Some(headers) => {
                    assert_eq!(headers[0].0, "content-type");
                    parts.push(content);
                }
                None => return Ok(parts),
            }
        }
    }

    #[test]
    fn parts_written_then_read_back_are_identical_whatever_the_read_size() {
        let one: Vec<u8> = (0..3000u32).map(|i| (i % 251) as u8).collect();
        let two = b"\r\n--b0undar almost a delimiter\r\n".to_vec();
        let (content_type, body) = related_dicom(&[one.clone(), two.clone()], "b0undary");
        assert_eq!(boundary(&content_type).unwrap(), "b0undary");
        for step in [1, 7, 64, 100_000] {
            assert_eq!(
                parts_of(&body, step).unwrap(),
                vec![one.clone(), two.clone()]
            );
        }
    }

    #[test]
    fn a_body_cut_before_its_closing_delimiter_is_truncated() {
        let (_, body) = related_dicom(&[vec![1; 500], vec![2; 500]], "b0undary");
        for cut in [10, 300, 700, body.len() - 10] {
            let error = parts_of(&body[..cut], 64).unwrap_err();
            assert!(
                matches!(error, MultipartError::Truncated { .. }),
                "{cut}: {error}"
            );
        }
        assert!(parts_of(b"", 64).is_err());
    }

    #[test]
    fn the_boundary_parameter_may_be_quoted_and_is_required() {
        assert_eq!(
            boundary("multipart/related; type=\"application/dicom\"; boundary=\"a b\"").unwrap(),
            "a b"
        );
        assert!(boundary("application/json").is_err());
        assert!(boundary("multipart/related; type=application/dicom").is_err());
    }
}
